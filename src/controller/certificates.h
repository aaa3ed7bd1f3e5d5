// Self-managed webhook certificates (our own cert-manager "cainjector +
// webhook bootstrap"): a CA and a serving certificate kept in one Secret, the
// CA published in the caBundle of every webhook of the Mutating and the
// Validating WebhookConfiguration named --webhook-config-name, the served
// certificate hot-reloaded from the Secret. This class wires five pieces:
//   certificate_plan.h  what to write into the Secret and when (pure)
//   secret_source.h     every replica: the Secret watch and hot reload
//   ca_injector.h       leader: one configuration's caBundles, per kind
//   webhook_applier.h   leader: the configurations from the template ConfigMap
//   served_observer.h   leader: the leaf each ready replica serves (dialled)
//
// Contract:
//  - add_to(manager): the SecretSource on every replica (loaded() is its),
//    and on the leader a controller of one key (kKey) whose term starts the
//    leader's watches (begin_term()) and stops them (end_term()). Any change
//    of the Secret, a configuration, the template or the EndpointSlices
//    enqueues kKey. This object outlives the manager's run of them.
//  - reconcile() is one pass: the applier and the injectors towards
//    base64(ca.crt), then the plan; a plan that writes is an update with the
//    resourceVersion read (a create when there is no Secret); a conflict
//    re-reads and plans again. A plan that wants_served is made again with
//    the ServedObserver's observation. A valid existing Secret is kept.
//  - Timed steps are Requeue{after} (at most `recheck_interval`); a failed
//    Secret read or write is retried with the engine's backoff
//    (retry_initial doubling to recheck_interval).
//  - Nothing is written once the CancelToken is stopped (a caBundle patch in
//    flight is abandoned; a Secret write is bounded by `request_timeout`, a
//    dial of a replica by `probe_timeout`).
//  - Failures are logged (once per distinct message) and kept as
//    last_error(); write_metrics() gives the expiry, rotation, repair, load,
//    apply and error families (docs/operations.md, "Self-managed certificates").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/log_once.h"
#include "base/prometheus.h"
#include "config/defaults.h"
#include "controller/ca_injector.h"
#include "controller/certificate_plan.h"
#include "controller/secret_source.h"
#include "controller/served_observer.h"
#include "controller/webhook_applier.h"
#include "kube/api.h"
#include "kube/reflector.h"
#include "runtime/controller.h"
#include "runtime/manager.h"
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
  std::chrono::milliseconds retry_initial{std::chrono::milliseconds(200)};  // capped at recheck_interval
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
  std::shared_ptr<Clock> engine_clock;  // the engine's queue (requeues, backoff); empty: steady
};

struct CertificateStats {
  std::uint64_t leaf_rotations = 0;  // serving certificates issued as leader (not the first)
  std::uint64_t ca_rotations = 0;    // CAs added to the bundle as leader (not the first)
  std::uint64_t bundle_repairs = 0;  // webhooks whose caBundle was patched
  std::uint64_t config_applies = 0;  // configurations created or replaced from the template
  std::uint64_t secret_writes = 0;   // Secret creates and updates that succeeded
  std::uint64_t reloads = 0;         // serving certificates taken from the Secret
  std::uint64_t errors = 0;
  std::uint64_t leader_passes = 0;   // reconciles completed (tests wait on it)
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

  // The Secret watch and hot reload (every replica) and the leader's term.
  void add_to(runtime::Manager& manager);

  // The controller's one key, and its pass. The engine calls reconcile()
  // within a term; tests call it between begin_term() and end_term()
  // without leading (never both at once).
  static constexpr std::string_view kKey = "certificates";
  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);
  void begin_term();
  void end_term() noexcept;

  bool loaded() const noexcept { return source_->loaded(); }
  CertificateStats stats() const;
  std::string last_error() const;
  void write_metrics(prometheus::TextWriter& out) const;

  // The Secret as this replica last saw it (its watch), for tests and status.
  std::optional<nlohmann::json> observed_secret() const;

 private:
  class Term;  // the needs_leader runnable: begin_term(), the controller, end_term()

  CertTime now() const;
  WatchSettings watch_settings() const;
  void log(std::string_view level, const std::string& message) const;
  void note_error(const std::string& message);
  // note_error, but a message equal to the last one from `source` is only counted.
  void report(const std::string& source, const std::string& message);
  void enqueue() { controller_->enqueue(std::string(kKey)); }
  // One pass; when the next one is due (an error: the Secret was not read or written).
  Result<CertTime> leader_pass(const runtime::CancelToken& cancel);
  // The applier and the injector of each kind towards `bundle_b64`; tracks
  // since when every configuration has been settled on it.
  void reconcile_configurations(const std::string& bundle_b64, const runtime::CancelToken& cancel);
  void log_kept_ca(const std::optional<ServedObservation>& seen);

  kube::Client& client_;
  const CertificateOptions options_;
  PlanSettings plan_settings_;
  std::shared_ptr<runtime::Controller<std::string>> controller_;
  std::unique_ptr<SecretSource> source_;

  mutable std::mutex state_mu_;  // guards stats_, last_error_
  CertificateStats stats_;
  std::string last_error_;

  // A term's: made by begin_term(), used by reconcile(), dropped by end_term().
  std::vector<std::unique_ptr<CaInjector>> injectors_;  // mutating, validating
  std::unique_ptr<ConfigurationApplier> applier_;        // with a template ConfigMap
  std::unique_ptr<ServedObserver> observer_;
  LogOnce served_logged_;                                // the last observation that kept the old CA
  std::map<std::string, LogOnce> reported_;              // source -> last message
  std::shared_ptr<const nlohmann::json> seen_secret_;   // the source's object the working copy came from
  std::optional<nlohmann::json> working_secret_;
  std::string confirmed_bundle_;
  std::optional<CertTime> confirmed_since_;
};

}  // namespace ig::controller
