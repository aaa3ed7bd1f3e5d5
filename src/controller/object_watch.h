// One named object kept current by a reflector (field selector
// metadata.name=NAME, which RBAC resourceNames authorize). get() never blocks;
// each change is a new shared object. on_change runs on the reflector's
// thread after every change.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/api.h"
#include "kube/reflector.h"
#include "kube/store.h"

namespace ig::controller {

struct WatchSettings {
  std::function<void(std::string_view, std::string_view)> log;  // may be empty
  kube::BackoffPolicy backoff;
  std::size_t page_size = 100;
  std::chrono::milliseconds watch_silence{150'000};
};

// The one way controller/ configures a reflector: `name`d, of `r` in `ns`
// (empty: every namespace, or cluster-scoped), narrowed by the selectors.
kube::ReflectorOptions reflector_options(std::string name, const kube::Resource& r, const std::string& ns,
                                         const WatchSettings& settings, std::string field_selector = {},
                                         std::string label_selector = {});

class ObjectWatch {
 public:
  // `ns` empty for a cluster-scoped resource.
  ObjectWatch(kube::Client& client, const kube::Resource& resource, std::string ns, std::string name,
              const WatchSettings& settings, std::function<void()> on_change);

  void start() { reflector_.start(); }
  void stop() noexcept { reflector_.stop(); }
  bool synced() const noexcept { return store_.synced(); }
  // The object as last seen; nullptr: there is none (or not synced yet).
  std::shared_ptr<const nlohmann::json> get() const { return store_.find(key_); }
  const std::string& name() const noexcept { return name_; }
  const kube::Resource& resource() const noexcept { return resource_; }
  // Changes applied so far (lists included): read it before get() to tell
  // later whether the watch has shown anything newer.
  std::uint64_t changes() const noexcept { return changes_.load(std::memory_order_acquire); }

 private:
  const kube::Resource& resource_;
  const std::string name_;
  const std::string key_;
  std::atomic<std::uint64_t> changes_{0};
  kube::Store<nlohmann::json> store_;
  kube::Reflector reflector_;
};

}  // namespace ig::controller
