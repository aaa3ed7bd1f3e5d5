// The webhook configurations' applier, on the leader: creates or replaces
// each configuration from the template ConfigMap (mutating.yaml,
// validating.yaml), only while `replica_ready()`: no fail-closed webhook
// nobody answers. reconcile(target) is settled when the live configuration
// carries the template's fingerprint annotation (the caBundle is the
// injector's); a write is not repeated until the watch shows something newer,
// a conflict waits for the watch, nothing is ever deleted. A bad template is
// the error and leaves the live configuration as it is.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "base/log_once.h"
#include "base/result.h"
#include "controller/ca_injector.h"
#include "controller/object_watch.h"

namespace ig::controller {

struct Applied {
  bool settled = false;  // the live configuration is as the template says
  bool written = false;  // created or replaced by this call
};

class ConfigurationApplier {
 public:
  ConfigurationApplier(kube::Client& client, std::string ns, std::string configmap, const WatchSettings& settings,
                       std::function<void()> on_change, std::function<bool()> replica_ready,
                       std::chrono::milliseconds request_timeout);
  void start() { template_.start(); }  // stops when destroyed

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
