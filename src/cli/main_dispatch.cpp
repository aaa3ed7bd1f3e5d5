#include <iostream>

#include "cli/commands.h"

#ifndef IG_VERSION
#define IG_VERSION "0.1.0"
#endif

namespace ig::cli {
namespace {

constexpr const char* kUsage =
    "isolation-gate: decides where a platform component's pods may run.\n"
    "\n"
    "usage: isolation-gate COMMAND [flags]\n"
    "  evaluate   decide offline for a Component and a Pod or workload manifest\n"
    "  serve      run the admission webhook (--local for no cluster)\n"
    "  certs      write a CA and a serving certificate (PEM) for the webhook\n"
    "  version    print the version\n"
    "Run 'isolation-gate COMMAND --help' for a command's flags.\n";

}  // namespace

int run_main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitBadInput;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "evaluate") return run_evaluate(args);
  if (command == "serve") return run_serve(args);
  if (command == "certs") return run_certs(args);
  if (command == "version" || command == "--version") {
    std::cout << "isolation-gate " << IG_VERSION << "\n";
    return kExitAllowed;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return kExitAllowed;
  }
  std::cerr << "isolation-gate: unknown command \"" << command << "\"\n" << kUsage;
  return kExitBadInput;
}

}  // namespace ig::cli
