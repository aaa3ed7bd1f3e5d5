#include "cli/command_line.h"

#include <iostream>

#include "cli/commands.h"
#include "config/duration.h"

namespace ig::cli {

std::unique_ptr<CLI::App> make_app(std::string_view command, std::string_view summary) {
  auto app = std::make_unique<CLI::App>(std::string(summary), "isolation-gate " + std::string(command));
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  app->allow_extras(false);
  app->get_formatter()->column_width(34);
  return app;
}

namespace {
// The visitor of describe_command(), while it runs.
thread_local const std::function<void(const CLI::App&)>* describing = nullptr;
}  // namespace

int describe_command(int (*run)(const std::vector<std::string>&), const std::function<void(const CLI::App&)>& visit) {
  describing = &visit;
  const int code = run({});
  describing = nullptr;
  return code;
}

std::optional<int> parse(CLI::App& app, const std::vector<std::string>& args) {
  if (describing != nullptr) {
    (*describing)(app);
    return kExitAllowed;
  }
  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitAllowed;
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::cerr << app.get_name() << ": " << message << " (see " << app.get_name() << " --help)\n";
    return kExitBadInput;
  }
  return std::nullopt;
}

CLI::Option* add_duration_option(CLI::App& app, const std::string& name, std::chrono::milliseconds& target,
                                 const std::string& help) {
  const std::string shown = config::format_duration(target);
  return app
      .add_option_function<std::string>(
          name, [&target](const std::string& text) { target = *config::parse_duration(text); }, help)
      ->check(CLI::Validator(
          [](std::string& text) {
            auto d = config::parse_duration(text);
            return d ? std::string() : d.error();
          },
          ""))
      ->type_name("DURATION")
      ->default_str(shown);
}

}  // namespace ig::cli
