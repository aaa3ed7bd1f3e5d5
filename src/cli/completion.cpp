// `isolation-gate completion bash|zsh` and `isolation-gate man`: made from
// the command table (cli/commands.h) and each command's CLI11 declarations
// (describe_command, cli/command_line.h), so a new flag is completed and
// documented as soon as it is declared.
//
// A flag's value is completed from its type name: lower-case words
// ("text|json") are the values it takes, FILE/DIR/PATH a file name, any other
// placeholder (NAME, DURATION) nothing.
#include <iostream>
#include <sstream>

#include "cli/command_line.h"
#include "cli/commands.h"

#ifndef IG_VERSION
#error "IG_VERSION must be defined by the build (CMake's project version)"
#endif

namespace ig::cli {
namespace {

enum class Shell { Bash, Zsh };

struct Flag {
  std::vector<std::string> names;  // "-f", "--filename"
  std::string type_name;           // "" for a flag without a value
  std::string help;                // first line
  std::string full_help;
  bool repeatable = false;
  std::vector<std::string> words;  // the values it takes, when a fixed list
  bool file = false;               // the value is a path
};

struct Described {
  std::string name, summary, description, footer;
  std::vector<Flag> flags;
  std::vector<std::string> positionals;  // their type names ("KIND/NAME")
};

bool is_word(const std::string& s) {
  if (s.empty() || s.front() < 'a' || s.front() > 'z') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

Flag flag_of(const CLI::Option& opt) {
  Flag f;
  for (const auto& s : opt.get_snames()) f.names.push_back("-" + s);
  for (const auto& l : opt.get_lnames()) f.names.push_back("--" + l);
  f.full_help = opt.get_description();
  f.help = split(f.full_help + "\n", '\n').front();
  if (opt.get_type_size() != 0) {
    f.type_name = opt.get_type_name();
    auto parts = split(f.type_name, '|');
    bool words = parts.size() > 1;
    for (const auto& p : parts) {
      words = words && is_word(p);
      if (p == "FILE" || p == "DIR" || p == "PATH") f.file = true;
    }
    if (words) f.words = parts;
  }
  f.repeatable = opt.get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll;
  return f;
}

std::vector<Described> describe_all() {
  std::vector<Described> out;
  for (const auto& c : command_table()) {
    Described d{std::string(c.name), std::string(c.summary), {}, {}, {}, {}};
    if (c.run != nullptr) {
      describe_command(c.run, [&d](const CLI::App& app) {
        d.description = app.get_description();
        d.footer = app.get_footer();
        for (const CLI::Option* opt : app.get_options()) {
          if (opt->get_positional()) {
            d.positionals.push_back(opt->get_type_name());
          } else {
            d.flags.push_back(flag_of(*opt));
          }
        }
      });
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string bash_script(const std::vector<Described>& commands) {
  std::vector<std::string> names;
  for (const auto& c : commands) names.push_back(c.name);
  std::string out =
      "# bash completion for isolation-gate (isolation-gate completion bash)\n"
      "_isolation_gate() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  COMPREPLY=()\n"
      "  if [[ $COMP_CWORD -eq 1 ]]; then\n"
      "    COMPREPLY=($(compgen -W \"" + join(names, " ") + "\" -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  case \"${COMP_WORDS[1]}\" in\n";
  for (const auto& c : commands) {
    std::vector<std::string> all;
    std::string values;
    for (const auto& f : c.flags) {
      for (const auto& n : f.names) all.push_back(n);
      if (f.type_name.empty()) continue;
      values += "        " + join(f.names, "|") + ")\n";
      if (!f.words.empty()) {
        values += "          COMPREPLY=($(compgen -W \"" + join(f.words, " ") + "\" -- \"$cur\"))\n";
      } else if (f.file) {
        values += "          COMPREPLY=($(compgen -f -- \"$cur\"))\n";
      }
      values += "          return 0 ;;\n";
    }
    if (c.name == "completion") values += "        *) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")) ;;\n";
    out += "    " + c.name + ")\n      case \"$prev\" in\n" + values + "      esac\n";
    out += "      COMPREPLY+=($(compgen -W \"" + join(all, " ") + "\" -- \"$cur\"))\n      ;;\n";
  }
  out +=
      "  esac\n"
      "  return 0\n"
      "}\n"
      "complete -o default -F _isolation_gate isolation-gate kubectl-isolation_gate\n";
  return out;
}

// Text inside a zsh _arguments spec's [...] and single quotes.
std::string zsh_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else if (c == '[' || c == ']' || c == ':' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

std::string zsh_script(const std::vector<Described>& commands) {
  std::string out =
      "#compdef isolation-gate kubectl-isolation_gate\n"
      "# zsh completion for isolation-gate (isolation-gate completion zsh)\n"
      "_isolation_gate() {\n"
      "  local -a commands\n"
      "  commands=(\n";
  for (const auto& c : commands) out += "    '" + zsh_text(c.name) + ":" + zsh_text(std::string(c.summary)) + "'\n";
  out +=
      "  )\n"
      "  if (( CURRENT == 2 )); then\n"
      "    _describe 'command' commands\n"
      "    return\n"
      "  fi\n"
      "  local command=$words[2]\n"
      "  shift words\n"
      "  (( CURRENT-- ))\n"
      "  case $command in\n";
  for (const auto& c : commands) {
    out += "    " + c.name + ")\n      _arguments";
    for (const auto& f : c.flags) {
      for (const auto& n : f.names) {
        std::string spec = (f.repeatable ? "*" : "") + n + "[" + zsh_text(f.help) + "]";
        if (!f.type_name.empty()) {
          spec += ":" + zsh_text(f.type_name) + ":";
          if (!f.words.empty()) {
            spec += "(" + join(f.words, " ") + ")";
          } else if (f.file) {
            spec += "_files";
          } else {
            spec += " ";
          }
        }
        out += " \\\n        '" + spec + "'";
      }
    }
    if (c.name == "completion") out += " \\\n        '1:shell:(bash zsh)'";
    out += "\n      ;;\n";
  }
  out += "  esac\n}\n_isolation_gate \"$@\"\n";
  return out;
}

// roff: a backslash, a leading dot or quote, and '-' (a hyphen, not a dash).
std::string roff(const std::string& s) {
  std::string out;
  bool line_start = true;
  for (char c : s) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string man_page(const std::vector<Described>& commands) {
  std::string out = ".TH ISOLATION\\-GATE 1 \"\" \"isolation-gate " IG_VERSION "\" \"User Commands\"\n";
  out += ".SH NAME\nisolation\\-gate \\- decides where a platform component's pods may run\n";
  out += ".SH SYNOPSIS\n.B isolation\\-gate\n.I COMMAND\n[flags]\n.br\n.B kubectl isolation\\-gate\n.I COMMAND\n[flags]\n";
  out += ".SH DESCRIPTION\nisolation\\-gate is a Kubernetes admission webhook that decides whether a component's pods\n"
         "run in the setec microVM sandbox (RequireSetec), on the ordinary runtime (AllowInProcess) or nowhere\n"
         "(Deny). Installed as kubectl\\-isolation_gate it is also a kubectl plugin.\n";
  out += ".SH COMMANDS\n";
  for (const auto& c : commands) {
    out += ".SS " + roff(c.name) + "\n\\fBisolation\\-gate " + roff(c.name) + "\\fR";
    for (const auto& p : c.positionals) out += " \\fI" + roff(p) + "\\fR";
    if (!c.flags.empty()) out += " [flags]";
    out += "\n.br\n" + roff(c.description.empty() ? std::string(c.summary) : c.description) + "\n";
    for (const auto& f : c.flags) {
      out += ".TP\n\\fB" + roff(join(f.names, ", ")) + "\\fR";
      if (!f.type_name.empty()) out += " \\fI" + roff(f.type_name) + "\\fR";
      out += "\n" + roff(f.full_help) + "\n";
    }
    if (!c.footer.empty()) out += ".PP\n" + roff(c.footer) + "\n";
  }
  out += ".SH EXIT STATUS\n0 admitted (or success), 1 denied, 2 bad input or flags, 3 serve failed.\n";
  out += ".SH SEE ALSO\n.BR kubectl (1)\n";
  return out;
}

}  // namespace

int run_completion(const std::vector<std::string>& args) {
  Shell shell = Shell::Bash;
  auto app = make_app("completion", "Prints shell completion for every command and flag.");
  add_enum_option(*app, "shell", shell, EnumWords<Shell>{{"bash", Shell::Bash}, {"zsh", Shell::Zsh}},
                  "the shell")
      ->required();
  app->footer(
      "bash: source <(isolation-gate completion bash)\n"
      "zsh:  isolation-gate completion zsh > \"${fpath[1]}/_isolation-gate\"");
  if (auto exit_code = parse(*app, args)) return *exit_code;
  const auto commands = describe_all();
  std::cout << (shell == Shell::Bash ? bash_script(commands) : zsh_script(commands));
  return kExitAllowed;
}

int run_man(const std::vector<std::string>& args) {
  auto app = make_app("man", "Prints the man page, isolation-gate(1), in roff.");
  app->footer("man -l <(isolation-gate man)");
  if (auto exit_code = parse(*app, args)) return *exit_code;
  std::cout << man_page(describe_all());
  return kExitAllowed;
}

}  // namespace ig::cli
