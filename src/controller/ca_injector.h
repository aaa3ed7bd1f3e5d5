// CA injection, on the leader: keeps clientConfig.caBundle of every webhook
// of one webhook configuration (kind + name) equal to the bundle. reconcile()
// patches the webhooks that differ and is settled when the configuration
// holds the bundle, our patch was accepted (not patched again before the
// watch shows it), or it does not exist (logged once); not before the watch
// has synced. A failed patch other than 404 is the error.
#pragma once

#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>

#include "base/log_once.h"
#include "base/result.h"
#include "controller/object_watch.h"

namespace ig::controller {

struct Injected {
  bool settled = false;
  std::uint64_t patched = 0;  // webhooks whose caBundle was set by this call
};

class CaInjector {
 public:
  CaInjector(kube::Client& client, const kube::Resource& kind, std::string name, const WatchSettings& settings,
             std::function<void()> on_change);
  void start() { watch_.start(); }  // stops when destroyed
  // The configuration as watched (the template applier writes it too).
  const ObjectWatch& target() const noexcept { return watch_; }
  // "MutatingWebhookConfiguration NAME"
  std::string what() const;

  // `cancel` abandons the patch (Client::patch).
  Result<Injected> reconcile(const std::string& bundle_b64, std::stop_token cancel = {});

 private:
  kube::Client& client_;
  const std::function<void(std::string_view, std::string_view)> log_;
  ObjectWatch watch_;
  std::string patched_rv_, patched_bundle_;  // our last patch (the cache may still show the old bundle)
  LogOnce missing_logged_;
};

}  // namespace ig::controller
