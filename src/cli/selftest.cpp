// `isolation-gate selftest`: the post-install check behind `helm test`. It
// asks the API server - through every admission webhook, as a user would -
// for a server-side dry-run create of a pod the gate must deny and of one it
// must admit, in a scratch enforced namespace, and checks both answers.
//
// Steps: create the Namespace <NS>-selftest-<6 hex> labelled
// gibson.zeroroot.ai/isolation=enforced and a trusted Component "selftest" in
// it; dry-run create (dryRun=All) a pod with no component label (must be
// refused by an admission webhook: 403 "... denied the request ...") and a pod
// labelled gibson.zeroroot.ai/component=selftest (must be created and carry
// the gate's decision annotation); delete the Namespace whatever happened.
// With --scratch-namespace NS (the chart's: it makes NS, labelled enforced,
// and a Role there, so `helm test` needs no cluster-wide namespace verbs) NS
// is used as it is: nothing is created or deleted but the Component, which is
// created once and then reused (read back and checked).
// Every answer is printed. Exit 0 when both are as expected, kExitDenied when
// the gate answered wrong, kExitFailure when the check could not be made (RBAC,
// API errors), kExitBadInput on bad flags.
#include <chrono>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/api_access.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "controller/cluster.h"
#include "kube/api.h"
#include "kube/object_meta.h"
#include "kube/resources.h"

namespace ig::cli {
namespace {

using json = nlohmann::json;

using controller::kComponents;
constexpr std::string_view kComponentLabel = "gibson.zeroroot.ai/component";
constexpr std::string_view kDecisionAnnotation = "gibson.zeroroot.ai/isolation";

struct SelftestOptions {
  std::string kubeconfig, context, ns;
  std::string scratch_ns;  // --scratch-namespace: use it, make and delete none
  std::chrono::milliseconds timeout{60'000};  // the whole check, clean-up included
};

std::string scratch_name(const std::string& prefix) {
  std::random_device rd;
  std::mt19937 rng(rd());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string suffix;
  for (int i = 0; i < 6; ++i) suffix.push_back(kHex[rng() % 16]);
  std::string base = prefix.substr(0, 63 - std::string("-selftest-").size() - suffix.size());
  return base + "-selftest-" + suffix;
}

// A pod that meets the "restricted" Pod Security Standard, so only the gate
// has a reason to refuse it.
json test_pod(const std::string& ns, const std::string& name, bool labelled) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec",
               {{"securityContext", {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
                {"containers",
                 json::array({{{"name", "selftest"},
                               {"image", "registry.invalid/isolation-gate-selftest:1"},
                               {"securityContext",
                                {{"allowPrivilegeEscalation", false},
                                 {"runAsUser", 65532},
                                 {"capabilities", {{"drop", json::array({"ALL"})}}}}}}})}}}};
  if (labelled) pod["metadata"]["labels"] = {{std::string(kComponentLabel), "selftest"}};
  return pod;
}

}  // namespace

int run_selftest(const std::vector<std::string>& args) {
  SelftestOptions o;
  auto app = make_app("selftest",
                      "Checks the installed gate through the API server: a dry-run pod it must deny and one it must "
                      "admit.");
  app->add_option("--kubeconfig", o.kubeconfig, "a kubeconfig file (else $KUBECONFIG, else the in-cluster service account)")
      ->type_name("FILE");
  app->add_option("--context", o.context, "the kubeconfig context (else its current one)")->type_name("NAME");
  app->add_option("--namespace", o.ns, "the gate's namespace: the scratch namespace's name starts with it")
      ->type_name("NS");
  app->add_option("--scratch-namespace", o.scratch_ns,
                  "an existing namespace labelled gibson.zeroroot.ai/isolation=enforced\n"
                  "to check in (the Component selftest is created there once and\n"
                  "reused); without it a namespace is made and deleted")
      ->type_name("NS");
  add_duration_option(*app, "--timeout", o.timeout, "the whole check, clean-up included");
  if (auto exit_code = parse(*app, args)) return *exit_code;
  if (o.timeout < std::chrono::seconds(1)) {
    std::cerr << "isolation-gate selftest: --timeout must be at least 1s (see isolation-gate selftest --help)\n";
    return kExitBadInput;
  }
  // Five requests at most (four creates, the delete), a fifth of the whole
  // each: the check ends within --timeout, clean-up included.
  auto access = connect(o.kubeconfig, o.context, o.ns, o.timeout / 5);
  if (!access) {
    std::cerr << "isolation-gate selftest: " << access.error() << "\n";
    return kExitBadInput;
  }
  kube::Client& api = *access->client;
  const bool own_scratch = o.scratch_ns.empty();
  const std::string scratch = own_scratch ? scratch_name(access->ns) : o.scratch_ns;
  auto could_not = [](const std::string& what, const kube::ApiError& e) {
    std::cerr << "isolation-gate selftest: " << what << ": " << e.message << "\n";
    return kExitFailure;
  };

  json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata",
              {{"name", scratch},
               {"labels", {{"gibson.zeroroot.ai/isolation", "enforced"}, {"app.kubernetes.io/created-by", "isolation-gate-selftest"}}}}}};
  if (own_scratch) {
    if (auto made = api.create(kube::collection_path(kube::kNamespaces), ns); !made) {
      return could_not("creating the scratch namespace " + scratch, made.failure());
    }
    std::cout << "created namespace " << scratch << " (enforced)\n";
  } else {
    std::cout << "using namespace " << scratch << "\n";
  }

  int result = kExitAllowed;
  [&] {
    json component = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
                      {"kind", "Component"},
                      {"metadata", {{"name", "selftest"}, {"namespace", scratch}}},
                      // The image test_pod() runs: its pods are bound to it (the CRD requires spec.image).
                      {"spec",
                       {{"kind", "tool"},
                        {"image", "registry.invalid/isolation-gate-selftest:1"},
                        {"policy", {{"content_trust", "trusted"}}}}}};
    if (auto made = api.create(kube::collection_path(kComponents, scratch), component); made) {
      std::cout << "created Component " << scratch << "/selftest (trusted)\n";
    } else if (!own_scratch && made.failure().conflict()) {
      // An earlier run's: reused only if it is still the one this check makes.
      auto found = api.get(kube::object_path(kComponents, scratch, "selftest"), o.timeout / 5);
      if (!found) {
        result = could_not("reading the Component selftest", found.failure());
        return;
      }
      const json spec = (*found).value("spec", json::object());
      const json want = component["spec"];
      const auto at = [](const json& j, const char* pointer) {
        return j.is_object() ? j.value(json::json_pointer(pointer), json()) : json();
      };
      if (at(spec, "/image") != at(want, "/image") ||
          at(spec, "/policy/content_trust") != at(want, "/policy/content_trust")) {
        std::cerr << "isolation-gate selftest: the Component " << scratch
                  << "/selftest is not the one selftest makes (spec " << spec.dump()
                  << "); delete it and run again\n";
        result = kExitFailure;
        return;
      }
      std::cout << "found Component " << scratch << "/selftest (trusted)\n";
    } else {
      result = could_not("creating the Component selftest", made.failure());
      return;
    }
    const std::string pods = kube::collection_path(kube::kPods, scratch) + "?dryRun=All";

    auto denied = api.create(pods, test_pod(scratch, "selftest-unlabelled", false));
    if (denied) {
      std::cout << "FAIL: a pod without a component label was admitted in an enforced namespace: the webhook is "
                   "not enforcing (are the webhook configurations installed"
                << (own_scratch ? std::string() : ", is " + scratch + " labelled gibson.zeroroot.ai/isolation=enforced")
                << "?)\n";
      result = kExitDenied;
    } else if (denied.failure().code == 403 &&
               denied.failure().message.find("denied the request") != std::string::npos) {
      std::cout << "ok: a pod without a component label is denied: " << denied.failure().message << "\n";
    } else {
      result = could_not("dry-run create of the unlabelled pod", denied.failure());
      return;
    }

    auto admitted = api.create(pods, test_pod(scratch, "selftest-labelled", true));
    if (!admitted) {
      std::cout << "FAIL: the pod of the trusted Component selftest was refused: " << admitted.failure().message
                << "\n";
      result = admitted.failure().code == 403 ? kExitDenied : kExitFailure;
      return;
    }
    const kube::ObjectMeta md = kube::object_meta(*admitted);
    if (!md.annotations || !md.annotations->contains(std::string(kDecisionAnnotation))) {
      std::cout << "FAIL: the pod was admitted without the gate's decision annotation: the mutating webhook did "
                   "not see it\n";
      result = kExitDenied;
      return;
    }
    const auto& spec = (*admitted)["spec"];
    std::cout << "ok: the pod of a trusted Component is admitted: "
              << (*md.annotations)[std::string(kDecisionAnnotation)].get<std::string>()
              << (spec.contains("runtimeClassName") ? " (runtimeClassName " + spec["runtimeClassName"].dump() + ")"
                                                    : std::string())
              << "\n";
  }();

  if (!own_scratch) {
    // The namespace is not ours; its Component stays for the next run.
  } else if (auto gone = api.remove(kube::object_path(kube::kNamespaces, "", scratch), o.timeout / 5);
             !gone && !gone.failure().not_found()) {
    std::cerr << "isolation-gate selftest: deleting the scratch namespace " << scratch << ": " << gone.error() << "\n";
    if (result == kExitAllowed) result = kExitFailure;
  } else {
    std::cout << "deleted namespace " << scratch << "\n";
  }
  std::cout << (result == kExitAllowed ? "selftest passed\n" : "selftest FAILED\n");
  return result;
}

}  // namespace ig::cli
