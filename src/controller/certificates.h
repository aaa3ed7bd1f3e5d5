// Self-managed webhook certificates (our own cert-manager "cainjector +
// webhook bootstrap"): a CA and a serving certificate kept in one Secret, the
// CA published in the caBundle of every webhook of the Mutating and the
// Validating WebhookConfiguration named --webhook-config-name, the served
// certificate hot-reloaded from the Secret.
//
// Contract:
//  - Every replica (start()/stop()): one reflector watches the Secret alone
//    (fieldSelector metadata.name=<secret>). When its tls.crt/tls.key differ
//    from what is served and form a valid pair, they are swapped into the
//    tls::ReloadingTlsContext (replace_pem: open connections keep their old
//    context, none is dropped). loaded() turns true once the Secret's
//    certificate is the one served, and stays true. A broken pair keeps the
//    current certificate and is logged once per distinct content.
//  - The leader (start_leading()/stop_leading(), from the leader-election
//    callbacks) keeps the Secret and the caBundles right, on a thread of its
//    own, scheduled with the injected clock (the next renewal, grace end or
//    expiry) and re-checking at least every `recheck_interval`, and at once
//    on every watch event of the Secret or a webhook configuration:
//     * no Secret: create it (type kubernetes.io/tls; tls.crt, tls.key,
//       ca.crt, and ca.key: the key of the newest CA, so a later leader can
//       sign). A valid existing Secret is kept: leaders change, material
//       does not.
//     * the serving certificate is renewed (signed by the newest CA) at two
//       thirds of its lifetime, or at once when it does not verify for every
//       Service name against ca.crt or its key does not match.
//     * the CA is rotated at two thirds of its lifetime: the new CA joins
//       ca.crt (old + new) and every caBundle while the old leaf is still
//       served; the leaf switches to the new CA only after both
//       configurations have been seen holding the new bundle for
//       `rotation_grace`; the old CA leaves the bundle once the new leaf
//       has been in place for `rotation_grace` (an expired CA leaves at
//       once). At no step is a leaf served that the published caBundle
//       cannot verify (bootstrap aside: there is no bundle yet).
//     * Secret writes are update() with the resourceVersion read; a
//       conflict re-reads (GET) and plans again.
//     * every webhook whose clientConfig.caBundle is not base64(ca.crt) is
//       JSON-patched back (a "test" on its name guards the index) and
//       counted as a repair. A configuration that does not exist is waited
//       for (logged once); it does not hold up a rotation.
//     * with `webhook_template_configmap` (the chart's default): that
//       ConfigMap's keys mutating.yaml / validating.yaml hold the two whole
//       configurations without caBundle. The leader creates a missing
//       configuration from it, and replaces one whose fingerprint annotation
//       (isolation-gate.zeroroot.ai/template-fingerprint, of the template's
//       object) differs, with caBundle filled in, but only while
//       `replica_ready()` holds: no configuration is ever created that no
//       replica could answer (a dead fail-closed webhook). Its labels say
//       app.kubernetes.io/managed-by: isolation-gate, without the template's
//       app.kubernetes.io/instance (GitOps tools would claim and prune it). It never deletes
//       one (`isolation-gate cleanup` does, at uninstall). A template that
//       does not parse, or names another kind or name, is an error (logged,
//       last_error) and leaves the live configuration as it is.
//    stop_leading() ends the loop and joins it: no write starts after it
//    returns (one in flight is bounded by `request_timeout`).
//  - Nothing throws out of the threads; failures are logged, kept as
//    last_error() and retried at the next pass.
//  - write_metrics(): isolation_gate_certificate_expiry_seconds
//    {certificate="serving"|"ca"} (notAfter as Unix time: the served leaf;
//    the earliest CA of ca.crt), isolation_gate_certificate_rotations_total
//    {certificate=...} (this replica's writes as leader),
//    isolation_gate_ca_bundle_repairs_total, isolation_gate_certificate_loaded,
//    isolation_gate_webhook_configuration_applies_total.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/prometheus.h"
#include "config/defaults.h"
#include "kube/api.h"
#include "kube/reflector.h"
#include "kube/store.h"
#include "tls/server_context.h"

namespace ig::controller {

inline constexpr kube::Resource kSecrets{"", "v1", "secrets", "Secret", true};
inline constexpr kube::Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
inline constexpr kube::Resource kMutatingWebhookConfigurations{
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration", false};
inline constexpr kube::Resource kValidatingWebhookConfigurations{
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", false};

// The clock every lifetime decision and every issued certificate uses.
using CertificateClock = std::function<std::chrono::system_clock::time_point()>;

struct CertificateOptions {
  std::string ns{config::kDefaultNamespace};           // the Secret's and Service's namespace
  std::string secret_name;                              // --tls-secret
  std::string webhook_config_name;                      // --webhook-config-name (both kinds)
  std::string service_name{config::kDefaultServiceName};  // SANs: config::service_dns_names
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365)};       // --cert-validity
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 365 * 10)};    // --ca-validity
  // Overlap of a CA rotation (see the contract); capped at a tenth of the
  // serving certificate's validity so short lifetimes work.
  std::chrono::seconds rotation_grace{std::chrono::minutes(2)};
  std::chrono::milliseconds recheck_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  std::chrono::seconds watch_timeout{300};
  // The ConfigMap (in `ns`) holding the configurations to apply; empty: the
  // configurations are someone else's and only their caBundle is kept.
  std::string webhook_template_configmap;
  // Whether this replica can answer admission requests now (caches synced,
  // serving certificate loaded); empty: always.
  std::function<bool()> replica_ready;
  kube::BackoffPolicy backoff;
  tls::LogFn log;          // may be empty
  CertificateClock clock;  // empty: std::chrono::system_clock::now
};

struct CertificateStats {
  std::uint64_t leaf_rotations = 0;  // serving certificates issued as leader (not the first)
  std::uint64_t ca_rotations = 0;    // CAs added to the bundle as leader (not the first)
  std::uint64_t bundle_repairs = 0;  // webhooks whose caBundle was patched
  std::uint64_t config_applies = 0;  // configurations created or replaced from the template
  std::uint64_t secret_writes = 0;   // Secret creates and updates that succeeded
  std::uint64_t reloads = 0;         // serving certificates taken from the Secret
  std::uint64_t errors = 0;
  std::uint64_t leader_passes = 0;   // leader passes completed (tests wait on it)
};

class SelfManagedCertificates {
 public:
  // `serving` is the listener's context (made with a throwaway certificate
  // until the Secret's is loaded); both must outlive this object.
  SelfManagedCertificates(kube::Client& client, tls::ReloadingTlsContext& serving,
                          CertificateOptions options);
  ~SelfManagedCertificates();
  SelfManagedCertificates(const SelfManagedCertificates&) = delete;
  SelfManagedCertificates& operator=(const SelfManagedCertificates&) = delete;

  // Every replica: the Secret watch and hot reload. Idempotent.
  void start();
  // Stops leading too; joins every thread.
  void stop() noexcept;

  // Leader-election callbacks. Idempotent; stop_leading() joins.
  void start_leading();
  void stop_leading() noexcept;

  bool loaded() const noexcept { return loaded_.load(std::memory_order_acquire); }
  bool leading() const noexcept;
  CertificateStats stats() const;
  std::string last_error() const;
  void write_metrics(prometheus::TextWriter& out) const;

  // The Secret as this replica last saw it (its watch), for tests and status.
  std::optional<nlohmann::json> observed_secret() const;

  // One object of one name: what the reflectors write into.
  class ObjectSink;

 private:
  struct ConfigWatch;
  struct Material {
    std::string tls_crt, tls_key, ca_crt, ca_key;
  };

  std::chrono::system_clock::time_point now() const;
  // The options of a reflector that watches one object (its client adds the
  // field selector): `name` for logs, `path` its collection.
  kube::ReflectorOptions one_object_reflector(std::string name, std::string path) const;
  void log(std::string_view level, const std::string& message) const;
  void note_error(const std::string& message);
  void on_secret_changed();
  void wake_leader();
  void leader_loop();
  // One pass; returns when the next one is due.
  std::chrono::system_clock::time_point leader_pass();
  // Patches caBundles to base64(ca_crt); true when every existing
  // configuration holds it.
  bool sync_bundles(const std::string& ca_bundle_b64);
  // With a template: creates or replaces `w`'s configuration when it is
  // missing or stale. True when the configuration is now as the template
  // says (or there is no template to follow), false when it is not (yet).
  bool apply_template(ConfigWatch& w, const std::string& ca_bundle_b64);
  bool leader_stopping() const;

  kube::Client& client_;
  tls::ReloadingTlsContext& serving_;
  const CertificateOptions options_;
  const std::vector<std::string> dns_names_;
  std::unique_ptr<kube::Client> selected_secret_client_;
  std::unique_ptr<ObjectSink> secret_sink_;
  std::unique_ptr<kube::Reflector> secret_reflector_;
  std::atomic<bool> loaded_{false};
  bool started_ = false;  // guarded by lifecycle_mu_

  mutable std::mutex state_mu_;  // guards the fields below up to leader_*
  CertificateStats stats_;
  std::string last_error_;
  std::string last_tried_pair_;  // tls.crt + tls.key last handed to replace_pem (served if it loaded)
  std::optional<std::chrono::system_clock::time_point> ca_not_after_;

  std::mutex lifecycle_mu_;  // serialises start/stop/start_leading/stop_leading
  mutable std::mutex leader_mu_;  // guards leader_stop_, leader_wake_, leading_
  std::condition_variable leader_cv_;
  bool leader_stop_ = true;
  bool leader_wake_ = false;
  bool leading_ = false;
  std::thread leader_thread_;
  std::vector<std::unique_ptr<ConfigWatch>> configs_;  // leader thread + lifecycle only
  std::unique_ptr<ConfigWatch> template_watch_;         // the template ConfigMap; leader thread + lifecycle

  // Leader thread only.
  std::optional<nlohmann::json> working_secret_;
  std::uint64_t working_version_ = 0;
  std::string confirmed_bundle_;
  std::optional<std::chrono::system_clock::time_point> confirmed_since_;
};

}  // namespace ig::controller
