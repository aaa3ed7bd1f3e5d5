// Self-managed webhook certificates: a CA and a serving certificate kept in
// one Secret, the CA published in the caBundle of both webhook configurations
// named --webhook-config-name, the served certificate hot-reloaded from the
// Secret.
//  - add_to(manager): the SecretSource on every replica; on the leader one
//    key (kKey), enqueued by any change of what the term watches.
//  - reconcile(): the applier and injectors towards base64(ca.crt), then
//    plan_secret(); a write is an update of the resourceVersion read (a
//    create without Secret), a conflict re-reads and plans again. Timed steps
//    requeue (at most recheck_interval); failures retry with backoff and are
//    logged once per distinct message.
//  - Nothing is written once the CancelToken is stopped.
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

#include "base/clock.h"
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

struct CertificateOptions {
  std::string ns{config::kDefaultNamespace};           // the Secret's and Service's namespace
  std::string secret_name;                              // --tls-secret
  std::string webhook_config_name;                      // --webhook-config-name (both kinds)
  std::string service_name{config::kDefaultServiceName};  // SANs: config::service_dns_names
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365)};       // --cert-validity
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 365 * 10)};    // --ca-validity
  // Every caBundle holds a new CA this long before the leaf switches to it
  // (capped at a tenth of cert_validity).
  std::chrono::seconds rotation_grace{std::chrono::minutes(2)};
  std::chrono::milliseconds recheck_interval{std::chrono::seconds(5)};  // also the backoff's cap
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  std::string webhook_template_configmap;  // empty: only the caBundles are kept
  std::function<bool()> replica_ready;      // this replica can answer now; empty: always
  kube::BackoffPolicy backoff;
  tls::LogFn log;          // may be empty
  // wall(): every lifetime decision's and issued certificate's time.
  std::shared_ptr<Clock> clock = Clock::steady();
};

struct CertificateStats {
  std::uint64_t leaf_rotations = 0;  // serving certificates issued as leader (not the first)
  std::uint64_t ca_rotations = 0;    // CAs added to the bundle as leader (not the first)
  std::uint64_t bundle_repairs = 0;  // webhooks whose caBundle was patched
  std::uint64_t config_applies = 0;  // configurations created or replaced from the template
  std::uint64_t errors = 0;
  std::uint64_t leader_passes = 0;   // reconciles completed (tests wait on it)
};

class SelfManagedCertificates {
 public:
  // `serving`: the listener's context; both outlive this object.
  SelfManagedCertificates(kube::Client& client, tls::ReloadingTlsContext& serving,
                          CertificateOptions options);

  // The Secret watch and hot reload (every replica) and the leader's term.
  void add_to(runtime::Manager& manager);

  // The engine calls reconcile() within a term; tests call it between
  // begin_term() and end_term() without leading (never both at once).
  static constexpr std::string_view kKey = "certificates";
  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);
  void begin_term();
  void end_term() noexcept;

  bool loaded() const noexcept { return source_->loaded(); }
  CertificateStats stats() const;
  void write_metrics(prometheus::TextWriter& out) const;

 private:
  class Term;  // the needs_leader runnable: begin_term(), the controller, end_term()

  void log(std::string_view level, const std::string& message) const;
  void note_error(const std::string& message);
  // note_error, but a message equal to the last one from `source` is only counted.
  void report(const std::string& source, const std::string& message);
  void count(std::uint64_t CertificateStats::*field, std::uint64_t n = 1);
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

  mutable std::mutex state_mu_;  // guards stats_
  CertificateStats stats_;

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
