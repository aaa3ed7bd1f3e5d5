// The isolation-gate commands and their exit codes. Each command takes the
// arguments after its name, declares its flags with CLI11
// (cli/command_line.h) and returns the process exit code.
//
// Contract: a command never throws; bad flags and unreadable or invalid input
// exit kExitBadInput with one line on stderr naming the flag or the file.
#pragma once

#include <string>
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

// Dispatches argv to a command; prints usage on errors.
int run_main(int argc, char** argv);

}  // namespace ig::cli
