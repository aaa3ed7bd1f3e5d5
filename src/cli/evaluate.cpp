// `isolation-gate evaluate`: the webhook's decision for every Pod and workload
// template of some manifests, offline. Same rules, same messages.
//
// Inputs: -f FILE|DIR|- (repeatable; directories recursively, multi-document
// YAML, JSON, `kind: List`), --pod FILE (exactly one Pod or workload, as
// before), Components from --component FILE, --components FILE|DIR and the
// -f input itself. One result per workload, then a summary; exit code of the
// worst result (0 admitted, 1 denied, 2 bad input). Bad input is found before
// anything is decided: then no result is given, only the errors (on stderr for
// text, as an error object on stdout for the structured outputs).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "admission/catalog.h"
#include "admission/pod_rules.h"
#include "base/quote.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/gate_options.h"
#include "cli/verdict_words.h"
#include "config/environment.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"

#ifndef IG_VERSION
#error "IG_VERSION must be defined by the build (CMake's project version)"
#endif

namespace ig::cli {
namespace {

using nlohmann::json;

enum class Output { Text, Json, Yaml, Junit, Sarif };

struct EvaluateOptions {
  std::vector<std::string> files;       // -f, in order
  std::string pod_path;                 // --pod
  std::string component_path;           // --component
  std::vector<std::string> components;  // --components
  Output output = Output::Text;
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;  // --shape (when given)
  std::string shape_word;                                               // "" unless --shape was given
  GateOptions gate;
};

constexpr std::string_view kStdin = "-";

// Where a document came from: the path as given ("-" for stdin) and its line.
struct Origin {
  std::string path;
  std::size_t line = 0;  // 0: unknown
  std::string where() const {
    std::string out = path == kStdin ? std::string("stdin") : path;
    if (line > 0) out += ":" + std::to_string(line);
    return out;
  }
};

struct InputError {
  Origin origin;
  std::string message;  // names the file (and line) already
};

struct KnownComponent {
  model::Component component;
  Origin origin;
  bool from_flag = false;  // --component
};

struct Workload {
  json object;
  Origin origin;
};

struct WorkloadResult {
  Origin origin;
  std::string kind, name, ns;
  admission::PodVerdict verdict;
  std::vector<std::string> notes;
};

struct Inputs {
  std::vector<KnownComponent> components;
  std::vector<Workload> workloads;
  std::map<std::string, std::size_t> skipped;  // kind -> documents neither Component nor workload
  std::vector<InputError> errors;
  bool stdin_used = false;
};

// ---- reading ---------------------------------------------------------------

// The text of a path as given: "-" is stdin (once), anything else a file.
Result<std::string> read_input(const std::string& path, Inputs& in) {
  if (path == kStdin) {
    if (in.stdin_used) return fail("stdin (-) is given more than once");
    in.stdin_used = true;
    return model::read_text(std::cin, "stdin");
  }
  return model::read_text_file(path);
}

// FILE, or every *.yaml, *.yml and *.json file under DIR (sorted, recursively).
Result<std::vector<std::string>> expand(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path == kStdin || !fs::is_directory(path, ec)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::follow_directory_symlink, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto ext = it->path().extension().string();
    if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(it->path().string());
  }
  if (ec) return fail(path + ": cannot list: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

bool is_workload_kind(const json& doc) {
  if (!doc.is_object()) return false;
  auto kind = doc.find("kind");
  if (kind == doc.end() || !kind->is_string()) return false;
  for (auto k : {model::ObjectKind::Pod, model::ObjectKind::Deployment, model::ObjectKind::StatefulSet,
                 model::ObjectKind::DaemonSet, model::ObjectKind::ReplicaSet, model::ObjectKind::Job,
                 model::ObjectKind::CronJob}) {
    if (kind->get_ref<const std::string&>() == model::to_string(k)) return true;
  }
  return false;
}

std::string kind_of(const json& doc) {
  if (doc.is_object()) {
    auto kind = doc.find("kind");
    if (kind != doc.end() && kind->is_string()) return kind->get<std::string>();
  }
  return "(no kind)";
}

void add_component(const json& doc, const Origin& origin, const std::string& source, bool from_flag,
                   Inputs& in) {
  auto component = model::decode_component(doc, source);
  if (!component) return in.errors.push_back({origin, component.error()});
  if (auto problems = model::component_problems(*component, source); !problems.empty()) {
    return in.errors.push_back({origin, problems.front()});
  }
  for (const auto& known : in.components) {
    if (known.component.name == component->name && known.component.namespace_ == component->namespace_) {
      return in.errors.push_back({origin, source + ": Component " + quote(component->name) +
                                              " is defined twice (also at " + known.origin.where() + ")"});
    }
  }
  in.components.push_back({std::move(component).value(), origin, from_flag});
}

// -f and --components: every object of every file; `workloads` false keeps
// only the Components (--components).
void read_manifests(const std::string& arg, bool workloads, Inputs& in) {
  auto files = expand(arg);
  if (!files) return in.errors.push_back({Origin{arg}, files.error()});
  for (const auto& path : *files) {
    auto text = read_input(path, in);
    if (!text) {
      in.errors.push_back({Origin{path}, text.error()});
      continue;
    }
    const std::string source = path == kStdin ? "stdin" : path;
    auto manifests = model::parse_manifests(*text, source);
    if (!manifests) {
      in.errors.push_back({Origin{path}, manifests.error()});
      continue;
    }
    for (auto& m : *manifests) {
      Origin origin{path, m.line};
      const std::string where = origin.where();
      if (model::looks_like_component(m.object)) {
        add_component(m.object, origin, where, false, in);
      } else if (workloads && is_workload_kind(m.object)) {
        in.workloads.push_back({std::move(m.object), origin});
      } else {
        ++in.skipped[kind_of(m.object)];
      }
    }
  }
}

// --pod and --component: exactly one document, as before -f existed.
Result<json> read_single(const std::string& path, Inputs& in) {
  auto text = read_input(path, in);
  if (!text) return fail(text.error());
  return model::parse_single_document(*text, path == kStdin ? "stdin" : path);
}

// ---- deciding --------------------------------------------------------------

struct Decided {
  std::vector<WorkloadResult> results;
  std::vector<InputError> errors;  // workloads whose facts cannot be read
};

Decided decide_all(Inputs& in, const EvaluateOptions& o) {
  Decided out;
  config::ShapeFromEnv shape = config::read_shape_from_env();
  const bool shape_flag = !o.shape_word.empty();
  if (shape_flag) shape = config::ShapeFromEnv{policy::ShapeSetting{o.shape, false}, true, o.shape_word};
  const admission::GateSettings settings = gate_settings(o.gate, shape);
  const admission::FixedSandbox sandbox = fixed_sandbox(o.gate);

  for (auto& w : in.workloads) {
    const std::string source = w.origin.where();
    auto where = model::locate_pod(w.object, source);
    if (!where) {
      out.errors.push_back({w.origin, where.error()});
      continue;
    }
    auto facts = model::read_pod_facts(w.object, *where, source);
    if (!facts) {
      out.errors.push_back({w.origin, facts.error()});
      continue;
    }
    // A manifest without a namespace lands where `kubectl apply -n` puts it:
    // the namespace of the Component its label names, else of the only
    // Component given, else "default".
    std::string ns = facts->namespace_;
    std::vector<std::string> notes;
    if (ns.empty() && facts->component) {
      for (const auto& c : in.components) {
        if (c.component.name == *facts->component && !c.component.namespace_.empty()) {
          ns = c.component.namespace_;
          break;
        }
      }
    }
    if (ns.empty() && in.components.size() == 1) ns = in.components.front().component.namespace_;
    if (ns.empty()) ns = "default";

    admission::StaticCatalog catalog;
    for (const auto& c : in.components) {
      if (c.component.namespace_ == ns) catalog.add(c.component, ns);
    }
    for (const auto& c : in.components) {
      if (c.component.namespace_.empty()) catalog.add(c.component, ns);  // a namespaced one wins
    }
    for (const auto& c : in.components) {
      if (c.from_flag && facts->component && *facts->component != c.component.name) {
        notes.push_back("--component " + c.origin.where() + " is Component " + quote(c.component.name) +
                        " but the pod's label " + std::string(model::kComponentLabel) + " names " +
                        quote(*facts->component));
      }
    }
    if (shape_flag) {
      notes.push_back("shape " + o.shape_word + " from --shape (GIBSON_UNTRUSTED_EXEC ignored)");
    }
    WorkloadResult r{w.origin, std::string(model::to_string(where->kind)), facts->object_name, ns,
                     admission::admit_pod(*facts, *where, ns,
                                          admission::AdmissionContext{settings, catalog, sandbox},
                                          admission::Stage::Evaluate),
                     std::move(notes)};
    out.results.push_back(std::move(r));
  }
  return out;
}

// ---- printing --------------------------------------------------------------

// The gate's inputs turned into words here, at the edge, and nowhere before.
std::string trust_name(const admission::GateInputsReport& in) {
  return std::string(policy::effective_trust_name(in.trust.trust));
}

std::string text_of(const WorkloadResult& r) {
  const admission::PodVerdict& v = r.verdict;
  const auto& in = v.inputs;
  const admission::Answer& a = v.answer;
  std::string out;
  out += "decision:  " + decision_label(v) + (a.allowed() ? " (admitted)" : " (denied)") + "\n";
  if (!in.component.empty()) out += "component: " + in.component + " (namespace " + r.ns + ")\n";
  if (v.decided) {
    out += "trust:     " + trust_name(in);
    if (!in.trust.declared) {
      out += " (content_trust omitted: treated as trusted)";
    } else if (!in.trust.valid) {
      out += " (content_trust " + quote(in.trust_raw) + " is not valid: treated as untrusted)";
    } else {
      out += " (declared)";
    }
    out += "\nshape:     " + std::string(policy::to_string(in.shape.shape));
    if (in.shape.fell_back) {
      out += " (GIBSON_UNTRUSTED_EXEC=" + quote(in.shape_raw) + " not recognised: fell back)";
    } else if (in.shape_raw.empty()) {
      out += " (GIBSON_UNTRUSTED_EXEC unset: default)";
    }
    out += "\nsandbox:   " + in.sandbox_detail + " (RuntimeClass " + in.runtime_class + ")\n";
  }
  out += (a.allowed() ? "summary:   " : "reason:    ") + a.message + "\n";
  for (const auto& w : a.warnings) out += "warning:   " + w + "\n";
  for (const auto& n : r.notes) out += "note:      " + n + "\n";
  if (!v.patch.empty()) out += "patch (RFC 6902):\n" + model::dump_json(json::parse(v.patch), 2) + "\n";
  return out;
}

json json_of(const WorkloadResult& r) {
  const admission::PodVerdict& v = r.verdict;
  const auto& in = v.inputs;
  const admission::Answer& a = v.answer;
  json out = {{"decision", decision_label(v)},
              {"allowed", a.allowed()},
              {"reason", admission::to_string(a.reason)},
              {"component", in.component},
              {"namespace", r.ns},
              {"message", a.message},
              {"warnings", a.warnings},
              {"notes", r.notes},
              {"kind", r.kind},
              {"name", r.name},
              {"source", {{"path", r.origin.path}, {"line", r.origin.line}}},
              {"patch", v.patch.empty() ? json::array() : json::parse(v.patch)}};
  if (v.decided) {
    out["contentTrust"] = {{"effective", trust_name(in)},
                           {"declared", in.trust.declared},
                           {"valid", in.trust.valid},
                           {"value", in.trust_raw}};
    out["shape"] = {{"value", policy::to_string(in.shape.shape)},
                    {"fellBack", in.shape.fell_back},
                    {"env", in.shape_raw}};
    out["sandbox"] = {{"state", policy::to_string(in.sandbox)},
                      {"detail", in.sandbox_detail},
                      {"runtimeClass", in.runtime_class}};
  }
  return out;
}

struct Run {
  std::vector<WorkloadResult> results;
  std::vector<InputError> errors;
  std::size_t components = 0;
  std::size_t skipped = 0;
  bool single = false;  // --pod without -f: the output of before -f existed
  int exit_code = kExitAllowed;
};

json summary_of(const Run& run) {
  std::size_t admitted = 0;
  for (const auto& r : run.results) admitted += r.verdict.answer.allowed() ? 1 : 0;
  return {{"workloads", run.results.size()},
          {"admitted", admitted},
          {"denied", run.results.size() - admitted},
          {"errors", run.errors.size()},
          {"components", run.components},
          {"skipped", run.skipped},
          {"exitCode", run.exit_code}};
}

json errors_json(const Run& run) {
  json list = json::array();
  for (const auto& e : run.errors) {
    json item = {{"message", e.message}, {"path", e.origin.path}};
    if (e.origin.line > 0) item["line"] = e.origin.line;
    list.push_back(std::move(item));
  }
  return list;
}

// The structured document of -o json and -o yaml.
json document_of(const Run& run) {
  if (!run.errors.empty()) {
    return {{"error", {{"message", run.errors.front().message}, {"errors", errors_json(run)}}},
            {"summary", summary_of(run)}};
  }
  if (run.single) return json_of(run.results.front());
  json results = json::array();
  for (const auto& r : run.results) results.push_back(json_of(r));
  return {{"results", std::move(results)}, {"summary", summary_of(run)}};
}

// XML character data; `attribute`: quotes and newlines escaped too. XML 1.0
// has no other control characters: they become '?'.
std::string xml_escape(std::string_view s, bool attribute = true) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\'': out += attribute ? "&apos;" : "'"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      default: out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\r') ? '?' : c;
    }
  }
  return out;
}

std::string testcase_name(const WorkloadResult& r) {
  return r.kind + " " + r.ns + "/" + (r.name.empty() ? "(unnamed)" : r.name);
}

// JUnit XML: one testcase per workload, a failure for a denial, an error per
// bad input.
std::string junit_of(const Run& run) {
  const json s = summary_of(run);
  const std::string counts = "tests=\"" + std::to_string(run.results.size() + run.errors.size()) +
                             "\" failures=\"" + std::to_string(s["denied"].get<std::size_t>()) +
                             "\" errors=\"" + std::to_string(run.errors.size()) + "\"";
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"isolation-gate evaluate\" " + counts + ">\n";
  out += "  <testsuite name=\"isolation-gate evaluate\" " + counts + " skipped=\"0\">\n";
  for (const auto& r : run.results) {
    out += "    <testcase classname=\"" + xml_escape(r.origin.where()) + "\" name=\"" +
           xml_escape(testcase_name(r)) + "\" file=\"" + xml_escape(r.origin.path) + "\"";
    if (r.origin.line > 0) out += " line=\"" + std::to_string(r.origin.line) + "\"";
    out += ">\n";
    if (!r.verdict.answer.allowed()) {
      out += "      <failure type=\"" + xml_escape(admission::to_string(r.verdict.answer.reason)) +
             "\" message=\"" + xml_escape(r.verdict.answer.message) + "\">" + xml_escape(text_of(r), false) +
             "</failure>\n";
    } else {
      out += "      <system-out>" + xml_escape(text_of(r), false) + "</system-out>\n";
    }
    out += "    </testcase>\n";
  }
  for (const auto& e : run.errors) {
    out += "    <testcase classname=\"" + xml_escape(e.origin.where()) + "\" name=\"bad input\" file=\"" +
           xml_escape(e.origin.path) + "\">\n";
    out += "      <error type=\"BadInput\" message=\"" + xml_escape(e.message) + "\"/>\n";
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

// A path as a SARIF artifactLocation.uri (a URI reference): absolute paths as
// file:// URIs, relative ones as relative references; reserved bytes escaped.
std::string uri_of(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = path.rfind('/', 0) == 0 ? "file://" : "";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

json sarif_location(const Origin& origin) {
  json physical = {{"artifactLocation", {{"uri", uri_of(origin.path)}}}};
  if (origin.line > 0) physical["region"] = {{"startLine", origin.line}};
  return physical;
}

// SARIF 2.1.0: a rule per denial reason (and BadInput), a result per denial
// and per bad input, at the document's path and line (none for stdin).
json sarif_of(const Run& run) {
  json rules = json::array();
  std::map<std::string, std::size_t> rule_index;
  auto rule = [&](const std::string& id, const std::string& text) {
    auto it = rule_index.find(id);
    if (it != rule_index.end()) return it->second;
    rules.push_back({{"id", id}, {"name", id}, {"shortDescription", {{"text", text}}}});
    return rule_index[id] = rules.size() - 1;
  };
  json results = json::array();
  for (const auto& r : run.results) {
    if (r.verdict.answer.allowed()) continue;
    const std::string id(admission::to_string(r.verdict.answer.reason));
    json result = {{"ruleId", id},
                   {"ruleIndex", rule(id, "isolation-gate denies the pod: " + id)},
                   {"level", "error"},
                   {"message", {{"text", testcase_name(r) + ": " + r.verdict.answer.message}}}};
    json location = {{"logicalLocations",
                      json::array({{{"name", r.name}, {"fullyQualifiedName", r.ns + "/" + r.kind + "/" + r.name},
                                    {"kind", "object"}}})}};
    if (r.origin.path != kStdin) location["physicalLocation"] = sarif_location(r.origin);
    result["locations"] = json::array({location});
    results.push_back(std::move(result));
  }
  for (const auto& e : run.errors) {
    json result = {{"ruleId", "BadInput"},
                   {"ruleIndex", rule("BadInput", "the input cannot be read or is not valid")},
                   {"level", "error"},
                   {"message", {{"text", e.message}}}};
    if (e.origin.path != kStdin && !e.origin.path.empty()) {
      result["locations"] = json::array({{{"physicalLocation", sarif_location(e.origin)}}});
    }
    results.push_back(std::move(result));
  }
  json driver = {{"name", "isolation-gate"}, {"version", IG_VERSION}, {"rules", std::move(rules)}};
  json invocation = {{"executionSuccessful", run.errors.empty()}, {"exitCode", run.exit_code}};
  return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
          {"version", "2.1.0"},
          {"runs", json::array({{{"tool", {{"driver", std::move(driver)}}},
                                 {"invocations", json::array({std::move(invocation)})},
                                 {"results", std::move(results)}}})}};
}

void write_stdout(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

void print(const Run& run, Output output) {
  switch (output) {
    case Output::Text: {
      for (const auto& e : run.errors) std::cerr << "isolation-gate evaluate: " << e.message << "\n";
      if (!run.errors.empty()) return;
      if (run.single) return write_stdout(text_of(run.results.front()));
      std::string out;
      for (const auto& r : run.results) {
        out += "== " + r.origin.where() + " " + testcase_name(r) + "\n" + text_of(r) + "\n";
      }
      const json s = summary_of(run);
      out += "summary:   " + std::to_string(run.results.size()) + " workload(s): " +
             std::to_string(s["admitted"].get<std::size_t>()) + " admitted, " +
             std::to_string(s["denied"].get<std::size_t>()) + " denied (" + std::to_string(run.components) +
             " Component(s); " + std::to_string(run.skipped) + " other document(s) skipped)\n";
      return write_stdout(out);
    }
    case Output::Json: return write_stdout(model::dump_json(document_of(run), 2) + "\n");
    case Output::Yaml: return write_stdout(model::dump_yaml(document_of(run)));
    case Output::Junit: return write_stdout(junit_of(run));
    case Output::Sarif: return write_stdout(model::dump_json(sarif_of(run), 2) + "\n");
  }
}

}  // namespace

int run_evaluate(const std::vector<std::string>& args) {
  EvaluateOptions o;
  auto app = make_app("evaluate", "Decides offline for every Pod and workload template of some manifests.");
  app->add_option("-f,--filename", o.files,
                  "manifests to evaluate (repeatable): a file, a directory (recursively:\n"
                  "*.yaml, *.yml, *.json) or - for stdin; multi-document YAML and kind: List;\n"
                  "Components among them are used, other kinds skipped")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->default_str("")
      ->type_name("FILE|DIR|-");
  app->add_option("--pod", o.pod_path,
                  "one Pod or workload (YAML or JSON): Deployment, StatefulSet,\n"
                  "DaemonSet, ReplicaSet, Job or CronJob (its pod template)")
      ->type_name("FILE");
  app->add_option("--component", o.component_path, "one Component (YAML or JSON)")->type_name("FILE");
  app->add_option("--components", o.components,
                  "Components (repeatable): a file or a directory (recursively);\n"
                  "other kinds of document are skipped")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->default_str("")
      ->type_name("FILE|DIR");
  add_enum_option(*app, "-o,--output", o.output,
                  EnumWords<Output>{{"text", Output::Text},
                                    {"json", Output::Json},
                                    {"yaml", Output::Yaml},
                                    {"junit", Output::Junit},
                                    {"sarif", Output::Sarif}},
                  "what to print (junit: a testcase per workload; sarif: SARIF 2.1.0)");
  using policy::DeploymentShape;
  const config::ShapeFromEnv env_shape = config::read_shape_from_env();
  o.shape = env_shape.setting.shape;
  add_enum_option(*app, "--shape", o.shape,
                  EnumWords<DeploymentShape>{
                      {std::string(policy::to_string(DeploymentShape::SetecOnly)), DeploymentShape::SetecOnly},
                      {std::string(policy::to_string(DeploymentShape::CustomerIsolation)),
                       DeploymentShape::CustomerIsolation}},
                  "the deployment shape (default: from GIBSON_UNTRUSTED_EXEC)")
      ->each([&o](const std::string& word) { o.shape_word = word; });
  add_gate_options(*app, o.gate);
  app->footer(
      "The deployment shape comes from --shape, else GIBSON_UNTRUSTED_EXEC (default setec-only).\n"
      "Exit: the worst result's: 0 admitted, 1 denied, 2 bad input.");
  if (auto exit_code = parse(*app, args)) return *exit_code;

  if (!o.pod_path.empty() && o.files.empty() && o.component_path.empty() && o.components.empty()) {
    // As before -f: a lone pod is evaluated against a Component given to it.
    std::cerr << "isolation-gate evaluate: --pod needs --component FILE or --components FILE|DIR "
                 "(see isolation-gate evaluate --help)\n";
    return kExitBadInput;
  }
  Run run;
  Inputs in;
  if (o.files.empty() && o.pod_path.empty()) {
    in.errors.push_back({Origin{}, "nothing to evaluate: give -f FILE|DIR|- or --pod FILE"});
  }
  if (!o.component_path.empty()) {
    auto doc = read_single(o.component_path, in);
    const std::string source = o.component_path == kStdin ? "stdin" : o.component_path;
    if (doc) {
      add_component(*doc, Origin{o.component_path}, source, true, in);
    } else {
      in.errors.push_back({Origin{o.component_path}, doc.error()});
    }
  }
  for (const auto& c : o.components) read_manifests(c, false, in);
  for (const auto& f : o.files) read_manifests(f, true, in);
  if (!o.pod_path.empty()) {
    auto doc = read_single(o.pod_path, in);
    if (doc) {
      in.workloads.push_back({std::move(doc).value(), Origin{o.pod_path}});
    } else {
      in.errors.push_back({Origin{o.pod_path}, doc.error()});
    }
  }

  run.single = o.files.empty();
  run.components = in.components.size();
  for (const auto& [kind, n] : in.skipped) run.skipped += n;
  run.errors = std::move(in.errors);
  if (run.errors.empty()) {
    Decided decided = decide_all(in, o);
    run.results = std::move(decided.results);
    run.errors = std::move(decided.errors);
  }
  if (!run.errors.empty()) {
    run.results.clear();
    run.exit_code = kExitBadInput;
  } else {
    for (const auto& r : run.results) {
      if (!r.verdict.answer.allowed()) run.exit_code = kExitDenied;
    }
  }
  print(run, o.output);
  return run.exit_code;
}

}  // namespace ig::cli
