// `isolation-gate COMMAND ...`: the command table, the top-level usage (made
// from that table) and `version`/`help`. Each command declares and parses its
// own flags (cli/command_line.h).
#include <iostream>
#include <string_view>

#include "cli/commands.h"
#include "cli/revision.h"

#ifndef IG_VERSION
#error "IG_VERSION must be defined by the build (CMake's project version)"
#endif

namespace ig::cli {
namespace {

constexpr Command kCommands[] = {
    {"evaluate", "decide offline for every pod and workload of some manifests (CI)", run_evaluate},
    {"explain", "explain the decision for a live pod or workload (kubectl isolation-gate explain pod/NAME)",
     run_explain},
    {"serve", "run the admission webhook (--local for no cluster)", run_serve},
    {"certs", "write a CA and a serving certificate (PEM) for the webhook", run_certs},
    {"selftest", "check the installed gate through the API server (helm test)", run_selftest},
    {"cleanup", "delete the webhook configurations serve applies (helm pre-delete)", run_cleanup},
    {"completion", "print shell completion (bash or zsh)", run_completion},
    {"man", "print the man page (roff)", run_man},
    {"version", "print the version", nullptr},
    {"help", "print this help", nullptr},
};

std::string usage() {
  std::string out =
      "isolation-gate: decides where a platform component's pods may run.\n"
      "\n"
      "usage: isolation-gate COMMAND [flags]\n";
  for (const auto& c : kCommands) {
    out += "  ";
    out += c.name;
    out.append(c.name.size() < 11 ? 11 - c.name.size() : 1, ' ');
    out += c.summary;
    out += "\n";
  }
  out += "Run 'isolation-gate COMMAND --help' for a command's flags.\n";
  return out;
}

}  // namespace

std::span<const Command> command_table() noexcept { return kCommands; }

int run_main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << usage();
    return kExitBadInput;
  }
  const std::string_view command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kCommands)
    if (c.run != nullptr && c.name == command) return c.run(args);
  if (command == "version" || command == "--version") {
    // One line, "isolation-gate VERSION (revision REV)": VERSION is CMake's
    // project version (= Chart.yaml's appVersion), REV the git revision or
    // "unknown".
    std::cout << "isolation-gate " << IG_VERSION << " (revision " << source_revision() << ")\n";
    return kExitAllowed;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << usage();
    return kExitAllowed;
  }
  std::cerr << "isolation-gate: unknown command \"" << command << "\"\n" << usage();
  return kExitBadInput;
}

}  // namespace ig::cli
