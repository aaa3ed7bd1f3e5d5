// The isolation-gate commands and their exit codes. Each command takes the
// arguments after its name, declares its flags with CLI11
// (cli/command_line.h) and returns the process exit code.
//
// Contract: a command never throws; bad flags and unreadable or invalid input
// exit kExitBadInput with one line on stderr naming the flag or the file.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ig::cli {

// Exit codes shared by the commands.
inline constexpr int kExitAllowed = 0;   // evaluate: the pod would be admitted; serve: clean stop
inline constexpr int kExitDenied = 1;    // evaluate: the pod would be denied; selftest: a wrong answer
inline constexpr int kExitBadInput = 2;  // unreadable or invalid input, bad flags
inline constexpr int kExitFailure = 3;   // serve: could not start or failed while running

int run_evaluate(const std::vector<std::string>& args);
int run_serve(const std::vector<std::string>& args);
int run_certs(const std::vector<std::string>& args);
int run_cleanup(const std::vector<std::string>& args);
int run_selftest(const std::vector<std::string>& args);
int run_explain(const std::vector<std::string>& args);

// `completion bash|zsh` and `man`: shell completion and the man page, made
// from the command table and each command's CLI11 declarations.
int run_completion(const std::vector<std::string>& args);
int run_man(const std::vector<std::string>& args);

// The command table: name, one-line summary, and the function that runs it
// (null: version and help, handled by run_main).
struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const std::vector<std::string>& args);
};
std::span<const Command> command_table() noexcept;

// Dispatches argv to a command; prints usage on errors. Invoked as
// kubectl-isolation_gate (a kubectl plugin) it is the same program.
int run_main(int argc, char** argv);

}  // namespace ig::cli
