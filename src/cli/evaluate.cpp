// `isolation-gate evaluate`: the webhook's decision for one Component and one
// Pod (or workload template), offline. Same rules, same messages.
#include <cstdio>
#include <iostream>

#include "admission/catalog.h"
#include "admission/pod_rules.h"
#include "base/quote.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/gate_options.h"
#include "config/environment.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"

namespace ig::cli {
namespace {

using nlohmann::json;

enum class Output { Text, Json };

struct EvaluateOptions {
  std::string component_path;
  std::string pod_path;
  Output output = Output::Text;
  GateOptions gate;
};

int bad_input(const std::string& message) {
  std::cerr << "isolation-gate evaluate: " << message << "\n";
  return kExitBadInput;
}

std::string decision_label(const admission::PodVerdict& v) {
  if (v.decided) return std::string(policy::to_string(v.decision));
  return v.answer.allowed() ? "NotEnforced" : "Deny";
}

// The gate's inputs turned into words here, at the edge, and nowhere before.
std::string trust_name(const admission::GateInputsReport& in) {
  return std::string(policy::effective_trust_name(in.trust.trust));
}

void print_text(const admission::PodVerdict& v, const std::string& ns) {
  const auto& in = v.inputs;
  const admission::Answer& a = v.answer;
  std::string out;
  out += "decision:  " + decision_label(v) + (a.allowed() ? " (admitted)" : " (denied)") + "\n";
  if (!in.component.empty()) out += "component: " + in.component + " (namespace " + ns + ")\n";
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
  if (!v.patch.empty()) out += "patch (RFC 6902):\n" + model::dump_json(json::parse(v.patch), 2) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void print_json(const admission::PodVerdict& v, const std::string& ns) {
  const auto& in = v.inputs;
  const admission::Answer& a = v.answer;
  json out = {{"decision", decision_label(v)},
              {"allowed", a.allowed()},
              {"reason", admission::to_string(a.reason)},
              {"component", in.component},
              {"namespace", ns},
              {"message", a.message},
              {"warnings", a.warnings},
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
  const std::string text = model::dump_json(out, 2) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace

int run_evaluate(const std::vector<std::string>& args) {
  EvaluateOptions o;
  auto app = make_app("evaluate", "Decides offline for a Component and a Pod or workload manifest.");
  app->add_option("--component", o.component_path, "the Component (YAML or JSON)")
      ->required()
      ->type_name("FILE");
  app->add_option("--pod", o.pod_path,
                  "a Pod or a workload (YAML or JSON): Deployment, StatefulSet,\n"
                  "DaemonSet, ReplicaSet, Job or CronJob (its pod template)")
      ->required()
      ->type_name("FILE");
  add_enum_option(*app, "--output", o.output, EnumWords<Output>{{"text", Output::Text}, {"json", Output::Json}},
                  "what to print");
  add_gate_options(*app, o.gate);
  app->footer(
      "The deployment shape comes from GIBSON_UNTRUSTED_EXEC (default setec-only).\n"
      "Exit: 0 admitted, 1 denied, 2 bad input.");
  if (auto exit_code = parse(*app, args)) return *exit_code;

  auto component_doc = model::load_single_document_file(o.component_path);
  if (!component_doc) return bad_input(component_doc.error());
  auto component = model::decode_component(*component_doc, o.component_path);
  if (!component) return bad_input(component.error());
  if (auto problems = model::component_problems(*component, o.component_path); !problems.empty()) {
    return bad_input(problems.front());
  }

  auto pod_doc = model::load_single_document_file(o.pod_path);
  if (!pod_doc) return bad_input(pod_doc.error());
  auto where = model::locate_pod(*pod_doc, o.pod_path);
  if (!where) return bad_input(where.error());
  auto facts = model::read_pod_facts(*pod_doc, *where, o.pod_path);
  if (!facts) return bad_input(facts.error());

  // A manifest without a namespace lands in the other's (kubectl apply -n),
  // or in "default" when neither names one.
  std::string ns = !facts->namespace_.empty()     ? facts->namespace_
                   : !component->namespace_.empty() ? component->namespace_
                                                    : "default";
  admission::StaticCatalog catalog;
  catalog.add(std::move(component).value(), ns);

  const admission::GateSettings settings = gate_settings(o.gate);
  const admission::FixedSandbox sandbox = fixed_sandbox(o.gate);

  auto verdict = admission::admit_pod(*facts, *where, ns,
                                      admission::AdmissionContext{settings, catalog, sandbox},
                                      admission::Stage::Evaluate);
  if (o.output == Output::Json) {
    print_json(verdict, ns);
  } else {
    print_text(verdict, ns);
  }
  return verdict.answer.allowed() ? kExitAllowed : kExitDenied;
}

}  // namespace ig::cli
