// `isolation-gate explain KIND/NAME` (as a kubectl plugin: `kubectl
// isolation-gate explain pod/NAME`): the decision for a live Pod or workload,
// made from the live Component, RuntimeClass and Nodes with the same rules as
// the webhook (admission::admit_pod) and the same sandbox rule as cluster mode
// (controller/sandbox_rule.h); it prints each input and where it came from,
// node by node why the sandbox can or cannot run there, and what to do.
//
// Contract: read-only (GET and LIST only). Exit 0 admitted, 1 denied, 2 bad
// flags or an object that cannot be read (not found, not a workload), 3 the
// API server could not answer.
#include <iostream>

#include "admission/catalog.h"
#include "admission/pod_rules.h"
#include "base/quote.h"
#include "cli/api_access.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/gate_options.h"
#include "cli/verdict_words.h"
#include "config/environment.h"
#include "controller/sandbox_rule.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"

namespace ig::cli {
namespace {

using nlohmann::json;

enum class ExplainOutput { Text, Json };

struct ExplainOptions {
  std::string target;  // KIND/NAME
  std::string ns;      // -n
  std::string kubeconfig, context;
  std::string runtime_class = std::string(config::kDefaultRuntimeClass);
  std::string gate_namespace = std::string(config::kDefaultNamespace);
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;
  std::string shape_word;
  ExplainOutput output = ExplainOutput::Text;
  std::chrono::milliseconds timeout{10000};
};

struct KindPath {
  std::vector<std::string_view> names;  // as kubectl accepts them
  std::string_view api;                 // "/api/v1", "/apis/apps/v1"
  std::string_view plural;
};

const KindPath kKinds[] = {
    {{"pod", "pods", "po"}, "/api/v1", "pods"},
    {{"deployment", "deployments", "deploy"}, "/apis/apps/v1", "deployments"},
    {{"statefulset", "statefulsets", "sts"}, "/apis/apps/v1", "statefulsets"},
    {{"daemonset", "daemonsets", "ds"}, "/apis/apps/v1", "daemonsets"},
    {{"replicaset", "replicasets", "rs"}, "/apis/apps/v1", "replicasets"},
    {{"job", "jobs"}, "/apis/batch/v1", "jobs"},
    {{"cronjob", "cronjobs", "cj"}, "/apis/batch/v1", "cronjobs"},
};

// The sandbox as explain observed it, for the admission rules' messages.
class ObservedSandbox final : public admission::SandboxView {
 public:
  explicit ObservedSandbox(const controller::SandboxAssessment& a) : a_(a) {}
  policy::SandboxAvailability availability() const noexcept override { return a_.availability; }
  std::string describe() const override { return a_.reason; }

 private:
  const controller::SandboxAssessment& a_;
};

// One Node against the RuntimeClass's scheduling: what keeps it from running
// the sandbox, and the fix for each ("" problems: it can).
struct NodeReport {
  std::string name;
  std::vector<std::string> problems, fixes;
};

NodeReport report_node(const controller::NodeFacts& node, const controller::RuntimeClassFacts& rc) {
  NodeReport r{node.name, {}, {}};
  controller::NodeProjection projection;
  projection.node_selector = rc.node_selector;
  projection.tolerations = rc.tolerations;
  const controller::NodeFit fit = controller::fit_node(node, projection);
  if (!fit.ready) {
    r.problems.push_back("not Ready");
    r.fixes.push_back("bring node " + quote(node.name) + " back to Ready (kubectl describe node " + node.name + ")");
  }
  if (fit.unschedulable) {
    r.problems.push_back("cordoned (spec.unschedulable)");
    r.fixes.push_back("kubectl uncordon " + node.name);
  }
  if (!fit.selected) {
    for (const auto& [key, value] : rc.node_selector) {
      auto it = node.labels.find(key);
      if (it == node.labels.end() || it->second != value) {
        r.problems.push_back("lacks label " + key + "=" + value + " (the RuntimeClass's nodeSelector)");
        r.fixes.push_back("kubectl label node " + node.name + " " + key + "=" + value +
                          " (only on a node that runs setec)");
      }
    }
  }
  if (!fit.tolerated) {
    for (const auto& taint : node.taints) {
      if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
      bool tolerated = false;
      for (const auto& t : rc.tolerations) tolerated = tolerated || controller::tolerates(t, taint);
      if (tolerated) continue;
      const std::string text = taint.key + (taint.value.empty() ? "" : "=" + taint.value) + ":" + taint.effect;
      r.problems.push_back("taint " + text + " is not tolerated by the RuntimeClass");
      r.fixes.push_back("kubectl taint node " + node.name + " " + text + "- (or add a toleration to the RuntimeClass)");
    }
  }
  return r;
}

struct Explained {
  std::string kind, name, ns, object_path;
  std::string component_name;  // the label; "" when absent
  std::string component_path;  // where it was read ("" when not read)
  bool component_found = false;
  std::string shape_source;
  std::string rc_name, rc_path;
  std::optional<controller::RuntimeClassFacts> rc;
  std::vector<NodeReport> nodes;
  std::vector<std::string> skipped_nodes;  // nodes that could not be decoded
  controller::SandboxAssessment sandbox;
  admission::PodVerdict verdict;
  std::vector<std::string> todo;
};

json to_json(const Explained& e) {
  const auto& v = e.verdict;
  json nodes = json::array();
  for (const auto& n : e.nodes) {
    nodes.push_back({{"name", n.name}, {"canRun", n.problems.empty()}, {"problems", n.problems}, {"fixes", n.fixes}});
  }
  json rc = {{"name", e.rc_name}, {"found", e.rc.has_value()}, {"source", e.rc_path}};
  if (e.rc) {
    rc["platformOperated"] = e.rc->platform_operated;
    rc["nodeSelector"] = e.rc->node_selector;
  }
  json out = {{"decision", decision_label(v)},
              {"allowed", v.answer.allowed()},
              {"reason", admission::to_string(v.answer.reason)},
              {"message", v.answer.message},
              {"warnings", v.answer.warnings},
              {"object", {{"kind", e.kind}, {"name", e.name}, {"namespace", e.ns}, {"source", e.object_path}}},
              {"component", {{"name", e.component_name}, {"found", e.component_found}, {"source", e.component_path}}},
              {"shape", {{"value", policy::to_string(v.inputs.shape.shape)}, {"source", e.shape_source}}},
              {"sandbox",
               {{"state", policy::to_string(e.sandbox.availability)},
                {"reason", e.sandbox.reason},
                {"capableNodes", e.sandbox.capable_nodes},
                {"runtimeClass", rc},
                {"nodes", nodes},
                {"skippedNodes", e.skipped_nodes}}},
              {"todo", e.todo}};
  if (v.decided) {
    out["component"]["contentTrust"] = {{"effective", policy::effective_trust_name(v.inputs.trust.trust)},
                                        {"declared", v.inputs.trust.declared},
                                        {"value", v.inputs.trust_raw}};
  }
  return out;
}

std::string to_text(const Explained& e) {
  const auto& v = e.verdict;
  const auto& in = v.inputs;
  std::string out;
  out += "decision:  " + decision_label(v) + (v.answer.allowed() ? " (admitted)" : " (denied)") + "\n";
  out += "object:    " + e.kind + " " + e.ns + "/" + e.name + " (GET " + e.object_path + ")\n";
  if (e.component_name.empty()) {
    out += "component: none (no label " + std::string(model::kComponentLabel) + ")\n";
  } else if (!e.component_found) {
    out += "component: " + e.component_name + " not found (GET " + e.component_path + ": 404)\n";
  } else {
    out += "component: " + e.component_name + " (GET " + e.component_path + ")\n";
    out += "trust:     " + std::string(policy::effective_trust_name(in.trust.trust)) +
           (in.trust.declared ? " (spec.policy.content_trust " + quote(in.trust_raw) + ")"
                              : " (content_trust omitted: treated as trusted)") +
           "\n";
  }
  out += "shape:     " + std::string(policy::to_string(in.shape.shape)) + " (" + e.shape_source + ")\n";
  out += "sandbox:   " + e.sandbox.reason + "\n";
  out += "           RuntimeClass: " + (e.rc ? "GET " + e.rc_path : "GET " + e.rc_path + ": 404 (not found)") + "\n";
  if (e.rc) {
    out += "           nodes (LIST /api/v1/nodes): " + std::to_string(e.nodes.size()) + "\n";
    for (const auto& n : e.nodes) {
      out += "             " + n.name + ": ";
      if (n.problems.empty()) {
        out += "can run it\n";
        continue;
      }
      std::string problems;
      for (const auto& p : n.problems) problems += (problems.empty() ? "" : "; ") + p;
      out += "cannot: " + problems + "\n";
    }
    for (const auto& s : e.skipped_nodes) out += "             (left out: " + s + ")\n";
  }
  out += (v.answer.allowed() ? "summary:   " : "reason:    ") + v.answer.message + "\n";
  for (const auto& w : v.answer.warnings) out += "warning:   " + w + "\n";
  for (const auto& t : e.todo) out += "to do:     " + t + "\n";
  return out;
}

int failure(const std::string& message, int code) {
  std::cerr << "isolation-gate explain: " << message << "\n";
  return code;
}

int api_failure(const kube::ApiError& e) {
  return failure(e.message, e.code == 0 || e.code >= 500 || e.code == 401 || e.code == 403 ? kExitFailure
                                                                                           : kExitBadInput);
}

}  // namespace

int run_explain(const std::vector<std::string>& args) {
  ExplainOptions o;
  auto app = make_app("explain", "Explains the decision for a live Pod or workload (reads the cluster).");
  app->add_option("target", o.target,
                  "KIND/NAME: pod, deployment, statefulset, daemonset, replicaset,\njob or cronjob (kubectl's short names too)")
      ->required()
      ->type_name("KIND/NAME");
  app->add_option("-n,--namespace", o.ns, "its namespace (else the kubeconfig context's, else default)")
      ->type_name("NS");
  app->add_option("--kubeconfig", o.kubeconfig, "a kubeconfig file (else $KUBECONFIG, else the in-cluster service account)")
      ->type_name("FILE");
  app->add_option("--context", o.context, "the kubeconfig context (else its current one)")->type_name("NAME");
  app->add_option("--runtime-class", o.runtime_class, "the setec sandbox's RuntimeClass")->type_name("NAME");
  app->add_option("--gate-namespace", o.gate_namespace, "the namespace isolation-gate runs in (never enforced)")
      ->type_name("NS");
  using policy::DeploymentShape;
  o.shape = config::read_shape_from_env().setting.shape;
  add_enum_option(*app, "--shape", o.shape,
                  EnumWords<DeploymentShape>{
                      {std::string(policy::to_string(DeploymentShape::SetecOnly)), DeploymentShape::SetecOnly},
                      {std::string(policy::to_string(DeploymentShape::CustomerIsolation)),
                       DeploymentShape::CustomerIsolation}},
                  "the deployment shape the gate runs with (default: from GIBSON_UNTRUSTED_EXEC)")
      ->each([&o](const std::string& word) { o.shape_word = word; });
  add_enum_option(*app, "-o,--output", o.output, EnumWords<ExplainOutput>{{"text", ExplainOutput::Text}, {"json", ExplainOutput::Json}},
                  "what to print");
  add_duration_option(*app, "--request-timeout", o.timeout, "each request to the API server");
  app->footer(
      "kubectl isolation-gate explain pod/NAME -n NS (installed as kubectl-isolation_gate)\n"
      "Exit: 0 admitted, 1 denied, 2 bad flags or object, 3 the API server did not answer.");
  if (auto exit_code = parse(*app, args)) return *exit_code;

  Explained e;
  const auto slash = o.target.find('/');
  const KindPath* kind = nullptr;
  if (slash != std::string::npos) {
    const std::string_view word = std::string_view(o.target).substr(0, slash);
    for (const auto& k : kKinds)
      for (auto n : k.names)
        if (n == word) kind = &k;
  }
  e.name = slash == std::string::npos ? "" : o.target.substr(slash + 1);
  if (kind == nullptr || e.name.empty() || e.name.find('/') != std::string::npos) {
    return failure("target " + quote(o.target) + " is not KIND/NAME with KIND one of pod, deployment, statefulset, "
                   "daemonset, replicaset, job, cronjob (see isolation-gate explain --help)",
                   kExitBadInput);
  }
  auto access = connect(o.kubeconfig, o.context, o.ns, o.timeout);
  if (!access) return failure(access.error(), kExitBadInput);
  e.ns = !o.ns.empty() ? o.ns : !access->context_namespace.empty() ? access->context_namespace : "default";
  kube::HttpClient& api = *access->client;

  e.object_path = std::string(kind->api) + "/namespaces/" + e.ns + "/" + std::string(kind->plural) + "/" + e.name;
  auto object = api.get(e.object_path, o.timeout);
  if (!object) return api_failure(object.failure());
  const std::string source = o.target + " (namespace " + e.ns + ")";
  auto where = model::locate_pod(*object, source);
  if (!where) return failure(where.error(), kExitBadInput);
  auto facts = model::read_pod_facts(*object, *where, source);
  if (!facts) return failure(facts.error(), kExitBadInput);
  e.kind = std::string(model::to_string(where->kind));

  // The Component its label names, live.
  admission::StaticCatalog catalog;
  if (facts->component) {
    e.component_name = *facts->component;
    e.component_path = "/apis/gibson.zeroroot.ai/v1alpha1/namespaces/" + e.ns + "/components/" + e.component_name;
    auto doc = api.get(e.component_path, o.timeout);
    if (doc) {
      auto component = model::decode_component(*doc, "Component " + e.ns + "/" + e.component_name);
      if (!component) return failure(component.error(), kExitBadInput);
      e.component_found = true;
      catalog.add(std::move(component).value(), e.ns);
    } else if (doc.failure().code != 404) {
      return api_failure(doc.failure());
    }
  }

  // The RuntimeClass and the Nodes, judged by cluster mode's rule.
  e.rc_name = o.runtime_class;
  e.rc_path = "/apis/node.k8s.io/v1/runtimeclasses/" + o.runtime_class;
  auto rc_doc = api.get(e.rc_path, o.timeout);
  if (rc_doc) {
    auto rc = controller::decode_runtime_class(*rc_doc);
    if (!rc) return failure("RuntimeClass " + quote(o.runtime_class) + ": " + rc.error(), kExitBadInput);
    e.rc = std::move(rc).value();
  } else if (rc_doc.failure().code != 404) {
    return api_failure(rc_doc.failure());
  }
  std::vector<controller::NodeFacts> nodes;
  kube::ListOptions list;
  do {
    auto page = api.list("/api/v1/nodes", list);
    if (!page) return api_failure(page.failure());
    for (const auto& item : page->items) {
      auto node = controller::decode_node(item);
      if (node) {
        nodes.push_back(std::move(node).value());
      } else {
        e.skipped_nodes.push_back(node.error());
      }
    }
    list.continue_token = page->continue_token;
  } while (!list.continue_token.empty());

  const config::ShapeFromEnv env_shape = config::read_shape_from_env();
  config::ShapeFromEnv shape = env_shape;
  if (!o.shape_word.empty()) {
    shape = config::ShapeFromEnv{policy::ShapeSetting{o.shape, false}, true, o.shape_word};
    e.shape_source = "--shape";
  } else {
    e.shape_source = env_shape.set ? "GIBSON_UNTRUSTED_EXEC here; the gate's Deployment may differ: --shape"
                                   : "GIBSON_UNTRUSTED_EXEC unset here: default; the gate's may differ: --shape";
  }
  e.sandbox = controller::assess_sandbox(o.runtime_class, e.rc, nodes, shape.setting.shape);
  if (e.rc) {
    for (const auto& n : nodes) e.nodes.push_back(report_node(n, *e.rc));
  }

  GateOptions gate;
  gate.runtime_class = o.runtime_class;
  gate.own_namespace = o.gate_namespace;
  const ObservedSandbox sandbox(e.sandbox);
  e.verdict = admission::admit_pod(*facts, *where, e.ns,
                                   admission::AdmissionContext{gate_settings(gate, shape), catalog, sandbox},
                                   admission::Stage::Evaluate);

  // What to do: the sandbox's fixes when it is what denies, the rules' own otherwise.
  if (!policy::is_available(e.sandbox.availability)) {
    if (!e.rc) {
      e.todo.push_back("install setec's RuntimeClass " + quote(o.runtime_class) + " (or pass --runtime-class)");
    } else if (policy::requires_platform_sandbox(shape.setting.shape) && !e.rc->platform_operated) {
      // the label below is the fix; the nodes were not looked at
    } else {
      for (const auto& n : e.nodes)
        for (const auto& f : n.fixes) e.todo.push_back(f);
      if (e.nodes.empty()) e.todo.push_back("add a Node that runs setec");
    }
    if (e.rc && policy::requires_platform_sandbox(shape.setting.shape) && !e.rc->platform_operated) {
      e.todo.insert(e.todo.begin(), "label RuntimeClass " + quote(o.runtime_class) + " " +
                                        std::string(controller::kSetecRuntimeLabel) +
                                        " (only setec's own RuntimeClass carries it)");
    }
  }
  if (!e.verdict.answer.allowed() && e.todo.empty()) e.todo.push_back(e.verdict.answer.message);

  if (e.verdict.answer.allowed() && !policy::is_available(e.sandbox.availability) && !e.todo.empty()) {
    e.todo.insert(e.todo.begin(), "nothing for this pod; for the sandbox:");
  }
  const std::string text = o.output == ExplainOutput::Json ? model::dump_json(to_json(e), 2) + "\n" : to_text(e);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return e.verdict.answer.allowed() ? kExitAllowed : kExitDenied;
}

}  // namespace ig::cli
