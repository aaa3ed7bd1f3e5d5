// The serving certificate's source, on every replica: watches the TLS Secret
// and swaps a new valid tls.crt/tls.key pair into the listener's context
// (open connections keep theirs). loaded() turns true once the Secret's
// certificate is served, and stays true. A broken pair keeps the current one
// and is reported once per content through on_error; on_change runs after
// every change of the Secret.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "controller/certificate_plan.h"
#include "controller/object_watch.h"
#include "tls/server_context.h"

namespace ig::controller {

// The four fields of a Secret's data, decoded (absent or undecodable: empty).
SecretMaterial secret_material(const nlohmann::json& secret);

class SecretSource {
 public:
  SecretSource(kube::Client& client, tls::ReloadingTlsContext& serving, std::string ns, std::string name,
               const WatchSettings& settings, std::function<void()> on_change,
               std::function<void(const std::string&)> on_error);
  void start() { watch_.start(); }
  void stop() noexcept { watch_.stop(); }

  bool synced() const noexcept { return watch_.synced(); }
  bool loaded() const noexcept { return loaded_.load(std::memory_order_acquire); }
  // The Secret as last seen (nullptr: none).
  std::shared_ptr<const nlohmann::json> secret() const { return watch_.get(); }
  // notAfter of the earliest CA of ca.crt.
  std::optional<CertTime> ca_not_after() const;
  CertTime served_not_after() const { return serving_.not_after(); }

 private:
  void on_secret_changed();

  tls::ReloadingTlsContext& serving_;
  const std::string what_;  // "the Secret NS/NAME"
  const std::function<void()> on_change_;
  const std::function<void(const std::string&)> on_error_;
  const std::function<void(std::string_view, std::string_view)> log_;
  std::atomic<bool> loaded_{false};
  mutable std::mutex mu_;
  std::string last_tried_pair_;  // tls.crt + tls.key last handed to replace_pem
  std::optional<CertTime> ca_not_after_;
  ObjectWatch watch_;  // last: its thread calls into the fields above
};

}  // namespace ig::controller
