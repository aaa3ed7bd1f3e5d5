// `isolation-gate cleanup`: removes the webhook configurations that serve's
// leader applies from its template ConfigMap (self-managed mode), for a Helm
// pre-delete hook: Helm does not track them, and a fail-closed webhook left
// behind with no replica to answer would refuse every pod in enforced
// namespaces.
//
// Order: the template ConfigMap first (so a leader still running has nothing
// to re-apply), then both configurations; then it checks for --settle that
// they stay gone (a leader that had not yet seen the ConfigMap go may have
// re-created one), deleting again if one came back. A 404 is success.
// Exit 0 when both configurations are gone, kExitFailure when not,
// kExitBadInput on bad flags or an unusable API configuration.
#include <chrono>
#include <iostream>
#include <thread>

#include "cli/api_access.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/defaults.h"
#include "kube/api.h"
#include "kube/resources.h"

namespace ig::cli {
namespace {

constexpr kube::Resource kWebhookKinds[] = {kube::kMutatingWebhookConfigurations,
                                            kube::kValidatingWebhookConfigurations};

struct CleanupOptions {
  std::string kubeconfig, context, ns;
  std::string webhook_config_name = std::string(config::kDefaultServiceName);
  std::string template_configmap;
  std::chrono::milliseconds settle{3'000};
  std::chrono::milliseconds timeout{10'000};
};

// Deletes `path`; true when it is gone (deleted now, or was not there).
bool delete_gone(kube::Client& api, const std::string& what, const std::string& path,
                 std::chrono::milliseconds timeout) {
  auto deleted = api.remove(path, timeout);
  if (deleted) {
    std::cout << "deleted " << what << "\n";
    return true;
  }
  if (deleted.failure().not_found()) {
    std::cout << what << ": already gone\n";
    return true;
  }
  std::cerr << "isolation-gate cleanup: deleting " << what << ": " << deleted.error() << "\n";
  return false;
}

}  // namespace

int run_cleanup(const std::vector<std::string>& args) {
  CleanupOptions o;
  auto app = make_app("cleanup",
                      "Deletes the webhook configurations serve's leader applies (for a Helm pre-delete hook).");
  app->add_option("--kubeconfig", o.kubeconfig, "a kubeconfig file (else $KUBECONFIG, else the in-cluster service account)")
      ->type_name("FILE");
  app->add_option("--context", o.context, "the kubeconfig context (else its current one)")->type_name("NAME");
  app->add_option("--namespace", o.ns, "the gate's namespace (else the service account's)")->type_name("NS");
  app->add_option("--webhook-config-name", o.webhook_config_name,
                  "the Mutating/ValidatingWebhookConfigurations to delete")
      ->type_name("NAME");
  app->add_option("--webhook-template-configmap", o.template_configmap,
                  "the template ConfigMap (in --namespace) to delete first")
      ->type_name("NAME");
  add_duration_option(*app, "--settle", o.settle, "how long to check that the configurations stay gone");
  add_duration_option(*app, "--request-timeout", o.timeout, "each API request's timeout");
  if (auto exit_code = parse(*app, args)) return *exit_code;

  auto access = connect(o.kubeconfig, o.context, o.ns, o.timeout);
  if (!access) {
    std::cerr << "isolation-gate cleanup: " << access.error() << "\n";
    return kExitBadInput;
  }
  kube::Client& api = *access->client;
  bool ok = true;
  if (!o.template_configmap.empty()) {
    ok &= delete_gone(api, "ConfigMap " + access->ns + "/" + o.template_configmap,
                      kube::object_path(kube::kConfigMaps, access->ns, o.template_configmap), o.timeout);
  }
  auto delete_configurations = [&] {
    bool all = true;
    for (const auto& kind : kWebhookKinds) {
      all &= delete_gone(api, std::string(kind.kind) + " " + o.webhook_config_name,
                         kube::object_path(kind, "", o.webhook_config_name), o.timeout);
    }
    return all;
  };
  ok &= delete_configurations();
  // Bounded re-check: a leader that applied a configuration just before the
  // ConfigMap went is answered by one more delete.
  const auto until = std::chrono::steady_clock::now() + o.settle;
  while (ok && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(o.settle, std::chrono::milliseconds(500)));
    for (const auto& kind : kWebhookKinds) {
      auto back = api.get(kube::object_path(kind, "", o.webhook_config_name), o.timeout);
      if (back) {
        std::cout << kind.kind << " " << o.webhook_config_name << " came back; deleting it again\n";
        ok &= delete_gone(api, std::string(kind.kind) + " " + o.webhook_config_name,
                          kube::object_path(kind, "", o.webhook_config_name), o.timeout);
      } else if (!back.failure().not_found()) {
        std::cerr << "isolation-gate cleanup: reading " << kind.kind << ": " << back.error() << "\n";
        ok = false;
      }
    }
  }
  return ok ? kExitAllowed : kExitFailure;
}

}  // namespace ig::cli
