// Self-managed webhook certificates (our own cert-manager "cainjector +
// webhook bootstrap"): a CA and a serving certificate kept in one Secret, the
// CA published in the caBundle of every webhook of the Mutating and the
// Validating WebhookConfiguration named --webhook-config-name, the served
// certificate hot-reloaded from the Secret. This class wires five pieces,
// each a file of its own:
//   certificate_plan.h  what to write into the Secret and when (pure)
//   secret_source.h     every replica: the Secret watch and hot reload
//   ca_injector.h       leader: one configuration's caBundles, per kind
//   webhook_applier.h   leader: the configurations from the template ConfigMap
//   served_observer.h   leader: the leaf each ready replica serves (dialled)
//
// Contract:
//  - Every replica (start()/stop()): the SecretSource. loaded() is its.
//  - The leader (start_leading()/stop_leading(), from the leader-election
//    callbacks) runs passes on a thread of its own, scheduled with the
//    injected clock (the plan's wake) and re-checking at least every
//    `recheck_interval`, and at once on every watch event of the Secret, a
//    webhook configuration, the template or the Service's EndpointSlices. A pass: the applier and the
//    injector of each kind towards base64(ca.crt), then the plan; a plan that
//    writes is an update() with the resourceVersion read (a create when there
//    is no Secret; the chart pre-creates it); a conflict re-reads (GET) and
//    plans again. A plan that wants_served gets the ServedObserver's
//    observation and is made again with it: the old CA leaves the bundle
//    only once every ready replica serves a leaf of the new one, re-checked
//    every pass (at least every `recheck_interval`) until then; what keeps
//    it is logged once per distinct observation. `bundle_confirmed_since`
//    is the moment every configuration was first seen settled on this
//    ca.crt; `grace` is rotation_grace capped at a tenth of the serving
//    certificate's validity. A valid existing
//    Secret is kept: leaders change, material does not.
//    stop_leading() ends the loop and joins it: no write starts after it
//    returns (one in flight is bounded by `request_timeout`, a dial of a
//    replica by `probe_timeout`).
//  - Nothing throws out of the threads; failures are logged, kept as
//    last_error() and retried at the next pass (a template error is logged
//    once per distinct message, counted each pass).
//  - write_metrics(): isolation_gate_certificate_expiry_seconds
//    {certificate="serving"|"ca"} (notAfter as Unix time: the served leaf;
//    the earliest CA of ca.crt), isolation_gate_certificate_rotations_total
//    {certificate=...} (this replica's writes as leader),
//    isolation_gate_ca_bundle_repairs_total, isolation_gate_certificate_loaded,
//    isolation_gate_webhook_configuration_applies_total,
//    isolation_gate_certificate_errors_total.
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
#include "controller/ca_injector.h"
#include "controller/certificate_plan.h"
#include "controller/secret_source.h"
#include "controller/served_observer.h"
#include "controller/webhook_applier.h"
#include "kube/api.h"
#include "kube/reflector.h"
#include "tls/server_context.h"

namespace ig::controller {

// The clock every lifetime decision and every issued certificate uses.
using CertificateClock = std::function<std::chrono::system_clock::time_point()>;

struct CertificateOptions {
  std::string ns{config::kDefaultNamespace};           // the Secret's and Service's namespace
  std::string secret_name;                              // --tls-secret
  std::string webhook_config_name;                      // --webhook-config-name (both kinds)
  std::string service_name{config::kDefaultServiceName};  // SANs: config::service_dns_names
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365)};       // --cert-validity
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 365 * 10)};    // --ca-validity
  // How long every caBundle must have held a new CA before the leaf switches
  // to it (the API servers' caches); capped at a tenth of the serving
  // certificate's validity so short lifetimes work. The old CA's leaving is
  // observed, not timed.
  std::chrono::seconds rotation_grace{std::chrono::minutes(2)};
  std::chrono::milliseconds recheck_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  // The ready replicas: the Service's (service_name) EndpointSlices, this
  // port of them (or their only one); each dial bounded by probe_timeout.
  std::string service_port_name{"https"};
  std::chrono::milliseconds probe_timeout{std::chrono::seconds(3)};
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

  bool loaded() const noexcept { return source_->loaded(); }
  bool leading() const noexcept;
  CertificateStats stats() const;
  std::string last_error() const;
  void write_metrics(prometheus::TextWriter& out) const;

  // The Secret as this replica last saw it (its watch), for tests and status.
  std::optional<nlohmann::json> observed_secret() const;

 private:
  CertTime now() const;
  WatchSettings watch_settings() const;
  void log(std::string_view level, const std::string& message) const;
  void note_error(const std::string& message);
  // note_error, but a message equal to the last one from `source` is only counted.
  void report(const std::string& source, const std::string& message);
  void wake_leader();
  void leader_loop();
  // One pass; returns when the next one is due.
  CertTime leader_pass();
  // The applier and the injector of each kind towards `bundle_b64`; tracks
  // since when every configuration has been settled on it.
  void reconcile_configurations(const std::string& bundle_b64);
  bool leader_stopping() const;
  void log_kept_ca(const std::optional<ServedObservation>& seen);

  kube::Client& client_;
  const CertificateOptions options_;
  PlanSettings plan_settings_;
  std::unique_ptr<SecretSource> source_;
  bool started_ = false;  // guarded by lifecycle_mu_

  mutable std::mutex state_mu_;  // guards stats_, last_error_
  CertificateStats stats_;
  std::string last_error_;

  std::mutex lifecycle_mu_;  // serialises start/stop/start_leading/stop_leading
  mutable std::mutex leader_mu_;  // guards leader_stop_, leader_wake_, leading_
  std::condition_variable leader_cv_;
  bool leader_stop_ = true;
  bool leader_wake_ = false;
  bool leading_ = false;
  std::thread leader_thread_;
  // Leader thread + lifecycle only.
  std::vector<std::unique_ptr<CaInjector>> injectors_;  // mutating, validating
  std::unique_ptr<ConfigurationApplier> applier_;        // with a template ConfigMap
  std::unique_ptr<ServedObserver> observer_;
  std::string served_logged_;                            // the last observation that kept the old CA
  std::map<std::string, std::string> reported_;          // source -> last message
  std::shared_ptr<const nlohmann::json> seen_secret_;   // the source's object the working copy came from
  std::optional<nlohmann::json> working_secret_;
  std::string confirmed_bundle_;
  std::optional<CertTime> confirmed_since_;
};

}  // namespace ig::controller
