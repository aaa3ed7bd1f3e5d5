// The commands' flags: one CLI11 declaration per command gives parsing, types,
// defaults, validation and --help, so the help text and the accepted flags
// cannot drift apart. Flags keep Kubernetes-style --kebab-case names.
//
// Contract:
// - make_app() gives a command's CLI::App with the house rules: no positional
//   arguments, a repeated flag takes its last value, every default is shown
//   in --help.
// - parse() parses a command's arguments (those after its name). It returns
//   nullopt when the command should run, otherwise the exit code to return:
//   0 after printing --help to stdout, kExitBadInput after printing one line,
//   "isolation-gate COMMAND: MESSAGE (see isolation-gate COMMAND --help)", to
//   stderr (the message names the flag).
// - add_duration_option() takes a Kubernetes-style duration ("15s", "1h30m":
//   config/duration.h); anything else is a bad flag quoting it.
// - describe_command() runs a command without running it: parse() hands the
//   command's declared CLI::App to `visit` and returns kExitAllowed before
//   parsing, so completion and the man page are made from the same
//   declarations as parsing and --help (cli/completion.cpp).
// - add_enum_option() maps a flag's words to an enum through one table, so a
//   gate input is an enum from the moment it is parsed and no code compares
//   its words; any other word is a bad flag naming the valid ones.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace ig::cli {

// `command` is the name after "isolation-gate" ("serve"); `summary` one line.
std::unique_ptr<CLI::App> make_app(std::string_view command, std::string_view summary);

std::optional<int> parse(CLI::App& app, const std::vector<std::string>& args);

// Calls `run` so that its parse() gives its CLI::App to `visit` instead of
// parsing (on this thread only); returns run's exit code.
int describe_command(int (*run)(const std::vector<std::string>&), const std::function<void(const CLI::App&)>& visit);

CLI::Option* add_duration_option(CLI::App& app, const std::string& name, std::chrono::milliseconds& target,
                                 const std::string& help);

// One word a flag accepts and the enum value it means.
template <typename E>
using EnumWords = std::vector<std::pair<std::string, E>>;

template <typename E>
CLI::Option* add_enum_option(CLI::App& app, const std::string& name, E& target,
                             EnumWords<E> words, const std::string& help) {
  std::vector<std::string> names;
  std::string default_word;
  for (const auto& [word, value] : words) {
    names.push_back(word);
    if (value == target) default_word = word;
  }
  std::string type_name;
  for (const auto& n : names) type_name += (type_name.empty() ? "" : "|") + n;
  return app
      .add_option_function<std::string>(
          name,
          [&target, words](const std::string& word) {
            for (const auto& [w, value] : words)
              if (w == word) target = value;
          },
          help)
      ->check(CLI::IsMember(names).description(""))
      ->type_name(type_name)
      ->default_str(default_word);
}

}  // namespace ig::cli
