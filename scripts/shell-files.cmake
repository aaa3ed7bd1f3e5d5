# Writes the shell completion and the man page the binary makes from its CLI11
# declarations (src/cli/completion.cpp). Run by the build:
#   cmake -DBINARY=path/to/isolation-gate -DOUT_DIR=dir -P scripts/shell-files.cmake
foreach(item "completion;bash;isolation-gate.bash" "completion;zsh;_isolation-gate" "man;;isolation-gate.1")
  list(GET item 0 command)
  list(GET item 1 arg)
  list(GET item 2 file)
  execute_process(COMMAND ${BINARY} ${command} ${arg} OUTPUT_FILE ${OUT_DIR}/${file} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${BINARY} ${command} ${arg} failed: ${rc}")
  endif()
endforeach()
