// The isolation-gate commands. Each takes the arguments after its name and
// returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace ig::cli {

// Exit codes shared by the commands.
inline constexpr int kExitAllowed = 0;   // evaluate: the pod would be admitted; serve: clean stop
inline constexpr int kExitDenied = 1;    // evaluate: the pod would be denied
inline constexpr int kExitBadInput = 2;  // unreadable or invalid input, bad flags
inline constexpr int kExitFailure = 3;   // serve: could not start or failed while running

int run_evaluate(const std::vector<std::string>& args);
int run_serve(const std::vector<std::string>& args);
int run_certs(const std::vector<std::string>& args);

// Dispatches argv to a command; prints usage on errors.
int run_main(int argc, char** argv);

}  // namespace ig::cli
