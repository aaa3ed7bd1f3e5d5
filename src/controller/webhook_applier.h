// The webhook configurations' applier, on the leader: creates or replaces
// the Mutating and the Validating WebhookConfiguration from the chart's
// template ConfigMap (keys mutating.yaml / validating.yaml: each a whole
// configuration without caBundle), only while a replica can answer: no
// configuration is ever created that no replica could answer (a dead
// fail-closed webhook).
//
// Contract of reconcile(target, bundle_b64), for the target's kind:
//  - settled when the live configuration carries the fingerprint annotation
//    (isolation-gate.zeroroot.ai/template-fingerprint) of the template's
//    object; its caBundle is the injector's business;
//  - otherwise, while `replica_ready()` holds, the configuration is created
//    (missing) or replaced (stale fingerprint) with caBundle filled in, labels
//    app.kubernetes.io/managed-by: isolation-gate and without the template's
//    app.kubernetes.io/instance (GitOps tools would claim and prune it); a
//    write is not repeated until the watch has shown something newer; a
//    conflict waits for the watch; it never deletes one (`isolation-gate
//    cleanup` does, at uninstall);
//  - a template that does not parse, or names another kind or name, is the
//    error, and the live configuration stays as it is.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/log_once.h"
#include "base/result.h"
#include "controller/ca_injector.h"
#include "controller/object_watch.h"

namespace ig::controller {

// The configuration `kind` named `name` that the template ConfigMap holds
// under `key`, as it should be stored (pure).
Result<nlohmann::json> configuration_from_template(const nlohmann::json& configmap, std::string_view key,
                                                   std::string_view kind, std::string_view name,
                                                   const std::string& bundle_b64);

struct Applied {
  bool settled = false;  // the live configuration is as the template says
  bool written = false;  // created or replaced by this call
};

class ConfigurationApplier {
 public:
  ConfigurationApplier(kube::Client& client, std::string ns, std::string configmap, const WatchSettings& settings,
                       std::function<void()> on_change, std::function<bool()> replica_ready,
                       std::chrono::milliseconds request_timeout);
  void start() { template_.start(); }
  void stop() noexcept { template_.stop(); }

  Result<Applied> reconcile(const CaInjector& target, const std::string& bundle_b64);

 private:
  struct PerKind {
    std::optional<std::uint64_t> written_at;  // the target's changes() when we last wrote
    LogOnce waiting_logged;
  };
  Applied waiting(PerKind& k, const std::string& what, const std::string& why);

  kube::Client& client_;
  const std::string ns_;
  const std::function<void(std::string_view, std::string_view)> log_;
  const std::function<bool()> replica_ready_;
  const std::chrono::milliseconds request_timeout_;
  std::map<std::string, PerKind, std::less<>> kinds_;  // by plural
  ObjectWatch template_;
};

}  // namespace ig::controller
