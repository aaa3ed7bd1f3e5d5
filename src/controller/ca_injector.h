// CA injection, on the leader (the shape of cert-manager's cainjector: one
// small reconciler per target kind): keeps clientConfig.caBundle of every
// webhook of one webhook configuration (kind + name) equal to the bundle.
//
// Contract of reconcile(bundle_b64):
//  - every webhook whose caBundle differs is JSON-patched (a "test" on its
//    name guards the index) and counted in `patched`; no request when all
//    hold it, nor while the watch has not yet shown the object after our own
//    patch;
//  - settled: the configuration holds the bundle, or our patch of it was
//    accepted, or it does not exist (waited for, logged once: a missing
//    configuration calls no one and does not hold up a rotation); not
//    settled before the watch has synced or when a patch failed;
//  - a failed patch other than 404 is the error.
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
  void start() { watch_.start(); }
  void stop() noexcept { watch_.stop(); }
  // The configuration as watched (the template applier writes it too).
  const ObjectWatch& target() const noexcept { return watch_; }
  // "MutatingWebhookConfiguration NAME"
  std::string what() const;

  // `cancel` abandons the patch (patch_cancellable).
  Result<Injected> reconcile(const std::string& bundle_b64, std::stop_token cancel = {});

 private:
  kube::Client& client_;
  const std::function<void(std::string_view, std::string_view)> log_;
  ObjectWatch watch_;
  // The resourceVersion last patched and the bundle it was patched to: the
  // cache may still show that version with the old bundle.
  std::string patched_rv_, patched_bundle_;
  LogOnce missing_logged_;
};

}  // namespace ig::controller
