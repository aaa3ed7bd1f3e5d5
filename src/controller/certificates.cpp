#include "controller/certificates.h"

#include <algorithm>

#include "admission/review.h"
#include "kube/resources.h"
#include "runtime/service.h"
#include "tls/certificates.h"

namespace ig::controller {
namespace {

using json = nlohmann::json;
using Seconds = std::chrono::seconds;

constexpr std::chrono::milliseconds kRetryInitial{200};  // a failed pass's first backoff

json secret_data(const SecretMaterial& m) {
  return {{"tls.crt", admission::base64_encode(m.tls_crt)},
          {"tls.key", admission::base64_encode(m.tls_key)},
          {"ca.crt", admission::base64_encode(m.ca_crt)},
          {"ca.key", admission::base64_encode(m.ca_key)}};
}

}  // namespace

class SelfManagedCertificates::Term final : public runtime::Runnable {
 public:
  explicit Term(SelfManagedCertificates& owner) : owner_(owner) {}
  std::string_view name() const override { return owner_.controller_->name(); }
  const runtime::ControllerMetrics* metrics() const override { return owner_.controller_->metrics(); }
  void run(runtime::CancelToken stop) override {
    owner_.begin_term();
    owner_.controller_->run(stop);
    owner_.end_term();
  }

 private:
  SelfManagedCertificates& owner_;
};

SelfManagedCertificates::SelfManagedCertificates(kube::Client& client, tls::ReloadingTlsContext& serving,
                                                 CertificateOptions options)
    : client_(client),
      options_(std::move(options)) {
  plan_settings_.cert_validity = options_.cert_validity;
  plan_settings_.ca_validity = options_.ca_validity;
  plan_settings_.grace = std::min(options_.rotation_grace, options_.cert_validity / 10);
  plan_settings_.names = config::service_dns_names(options_.service_name, options_.ns);
  runtime::Controller<std::string>::Options c;
  c.name = "certificates";
  c.rate_limit.backoff = BackoffOptions{std::min(kRetryInitial, options_.recheck_interval), options_.recheck_interval};
  c.reconcile = [this](const std::string& key, const runtime::CancelToken& cancel) { return reconcile(key, cancel); };
  c.initial_keys = [] { return std::vector<std::string>{std::string(kKey)}; };
  controller_ = std::make_shared<runtime::Controller<std::string>>(std::move(c));  // errors: logged by note_error
  source_ = std::make_unique<SecretSource>(
      client_, serving, options_.ns, options_.secret_name, WatchSettings{options_.log, options_.backoff},
      [this] { enqueue(); },
      [this](const std::string& message) { note_error(message); });
}

void SelfManagedCertificates::log(std::string_view level, const std::string& message) const {
  if (options_.log) options_.log(level, message);
}

void SelfManagedCertificates::note_error(const std::string& message) {
  count(&CertificateStats::errors);
  log("error", message);
}

void SelfManagedCertificates::report(const std::string& source, const std::string& message) {
  if (reported_[source].first(message)) return note_error(message);
  count(&CertificateStats::errors);
}

void SelfManagedCertificates::count(std::uint64_t CertificateStats::*field, std::uint64_t n) {
  std::lock_guard lock(state_mu_);
  stats_.*field += n;
}

void SelfManagedCertificates::add_to(runtime::Manager& manager) {
  manager.add(std::make_shared<runtime::Service>("certificate-secret", [this] { source_->start(); },
                                                 [this] { source_->stop(); }),
              /*needs_leader=*/false);
  manager.add(std::make_shared<Term>(*this), /*needs_leader=*/true);
}

CertificateStats SelfManagedCertificates::stats() const {
  std::lock_guard lock(state_mu_);
  return stats_;
}

void SelfManagedCertificates::begin_term() {
  const WatchSettings ws{options_.log, options_.backoff};
  injectors_.clear();
  for (const kube::Resource* r : {&kube::kMutatingWebhookConfigurations, &kube::kValidatingWebhookConfigurations})
    injectors_.push_back(
        std::make_unique<CaInjector>(client_, *r, options_.webhook_config_name, ws, [this] { enqueue(); }));
  if (!options_.webhook_template_configmap.empty()) {
    applier_ = std::make_unique<ConfigurationApplier>(client_, options_.ns, options_.webhook_template_configmap, ws,
                                                      [this] { enqueue(); }, options_.replica_ready,
                                                      options_.request_timeout);
  }
  observer_ = std::make_unique<ServedObserver>(client_, options_.ns, options_.service_name, ws, [this] { enqueue(); });
  reported_.clear();
  served_logged_.cleared();
  seen_secret_.reset();
  working_secret_.reset();
  confirmed_bundle_.clear();
  confirmed_since_.reset();
  for (auto& i : injectors_) i->start();
  if (applier_) applier_->start();
  observer_->start();
  log("info", "certificates: leading (Secret " + options_.ns + "/" + options_.secret_name + ")");
}

void SelfManagedCertificates::end_term() noexcept {
  injectors_.clear();  // each watch stops (and joins) as it goes
  applier_.reset();
  observer_.reset();
  log("info", "certificates: no longer leading");
}

Result<runtime::Requeue> SelfManagedCertificates::reconcile(const std::string&, const runtime::CancelToken& cancel) {
  Result<CertTime> next = fail("certificates: no pass");
  try {
    next = leader_pass(cancel);
  } catch (const std::exception& e) {  // allocation failure, a malformed object
    next = fail(std::string("certificates: leader pass failed: ") + e.what());
    note_error(next.error());
  }
  count(&CertificateStats::leader_passes);
  if (!next) return fail(next.error());
  const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(*next - options_.clock->wall());
  // At least 1 ms: "at once" is a requeue, not a backoff.
  return runtime::Requeue{false, std::clamp(delay, std::chrono::milliseconds(1), options_.recheck_interval)};
}

void SelfManagedCertificates::reconcile_configurations(const std::string& b64, const runtime::CancelToken& cancel) {
  bool all = true;
  for (auto& injector : injectors_) {
    if (cancel.stop_requested()) return;
    const std::string kind(injector->target().resource().plural);
    if (applier_) {
      auto applied = applier_->reconcile(*injector, b64);
      if (!applied) {
        report("template " + kind, applied.error());
        all = false;
        continue;
      }
      reported_.erase("template " + kind);
      if (applied->written) count(&CertificateStats::config_applies);
      if (!applied->settled) {
        all = false;
        continue;
      }
    }
    auto injected = injector->reconcile(b64, cancel);
    if (!injected) {
      if (!cancel.stop_requested()) note_error(injected.error());
      all = false;
      continue;
    }
    count(&CertificateStats::bundle_repairs, injected->patched);
    if (!injected->settled) all = false;
  }
  if (!all) {
    confirmed_since_.reset();
    confirmed_bundle_.clear();
  } else if (confirmed_bundle_ != b64 || !confirmed_since_) {
    confirmed_bundle_ = b64;
    confirmed_since_ = options_.clock->wall();
  }
}

Result<CertTime> SelfManagedCertificates::leader_pass(const runtime::CancelToken& cancel) {
  const auto failed = [this](const std::string& message) -> Result<CertTime> {
    note_error(message);
    return fail(message);
  };
  const CertTime recheck = options_.clock->wall() + options_.recheck_interval;
  if (!source_->synced()) return recheck;
  if (auto seen = source_->secret(); seen != seen_secret_) {
    seen_secret_ = seen;
    working_secret_ = seen ? std::optional<json>(*seen) : std::nullopt;
  }
  const std::string secret_path = kube::object_path(kube::kSecrets, options_.ns, options_.secret_name);
  std::optional<CertTime> wake;
  for (int attempt = 0; attempt < 4 && !cancel.stop_requested(); ++attempt) {
    const SecretMaterial material = working_secret_ ? secret_material(*working_secret_) : SecretMaterial{};
    const std::string bundle = admission::base64_encode(material.ca_crt);
    // An unconfirmed caBundle holds a CA switch back (the plan sees no
    // confirmation); an empty ca.crt is never published.
    if (material.exists && !material.ca_crt.empty()) reconcile_configurations(bundle, cancel);
    PlanFacts facts;
    if (material.exists && confirmed_bundle_ == bundle) facts.bundle_confirmed_since = confirmed_since_;
    auto plan = plan_secret(material, options_.clock->wall(), facts, plan_settings_);
    if (plan && plan->wants_served && !plan->write && !cancel.stop_requested()) {
      // The old CA could leave: only if every ready replica serves the new one.
      const std::optional<ServedObservation> seen = observer_->observe();
      if (seen) facts.served = seen->leaves;
      plan = plan_secret(material, options_.clock->wall(), facts, plan_settings_);
      if (plan && !plan->write) log_kept_ca(seen);
    }
    if (!plan) return failed("certificates: " + plan.error());
    if (!plan->write) {
      wake = plan->wake;
      break;
    }
    if (cancel.stop_requested()) break;  // the fence: no write once leadership is lost
    json body = working_secret_ ? *working_secret_
                                : json{{"apiVersion", "v1"},
                                       {"kind", "Secret"},
                                       {"metadata",
                                        {{"name", options_.secret_name},
                                         {"namespace", options_.ns},
                                         {"labels", {{"app.kubernetes.io/managed-by", "isolation-gate"}}}}},
                                       {"type", "kubernetes.io/tls"}};
    if (!body["data"].is_object()) body["data"] = json::object();
    body["data"].update(secret_data(plan->next));
    kube::ApiResult<json> written =
        working_secret_ ? client_.update(secret_path, body, options_.request_timeout)
                        : client_.create(kube::collection_path(kube::kSecrets, options_.ns), body);
    if (!written) {
      const kube::ApiError& e = written.failure();
      if (!e.conflict() && !e.not_found())
        return failed("certificates: writing the Secret " + options_.ns + "/" + options_.secret_name + ": " + e.message);
      std::optional<json> fresh_secret;  // gone: none (created next)
      if (e.conflict()) {  // moved on (or created meanwhile): read it again and plan again
        log("info", "certificates: the Secret changed under us; reading it again");
        auto fresh = client_.get(secret_path, options_.request_timeout);
        if (!fresh && !fresh.failure().not_found()) return failed("certificates: reading the Secret: " + fresh.error());
        if (fresh) fresh_secret = std::move(*fresh);
      }
      working_secret_ = std::move(fresh_secret);
      continue;
    }
    working_secret_ = std::move(*written);
    count(&CertificateStats::leaf_rotations, plan->leaf_rotated);
    count(&CertificateStats::ca_rotations, plan->ca_rotated);
    log("info", "certificates: " + plan->why);
    reconcile_configurations(admission::base64_encode(plan->next.ca_crt), cancel);
    return options_.clock->wall();  // the next step at once (usually: nothing to do)
  }
  CertTime next = recheck;
  if (wake) next = std::min(next, *wake);
  return next;
}

void SelfManagedCertificates::log_kept_ca(const std::optional<ServedObservation>& seen) {
  std::string message = "certificates: the old CA stays in ca.crt until every ready replica serves a leaf of the new one";
  if (!seen) {
    message += " (the EndpointSlices of Service " + options_.service_name + " are not listed yet)";
  } else if (seen->endpoints.empty()) {
    message += " (no ready endpoint of Service " + options_.service_name + ")";
  } else {
    message += "; observed:";
    for (std::size_t i = 0; i < seen->endpoints.size(); ++i) {
      std::string what = seen->problems[i];
      if (what.empty()) {
        auto serial = tls::certificate_serial_hex(seen->leaves[i]);
        what = "serves serial " + (serial ? *serial : std::string("?"));
      }
      message += (i ? ", " : " ") + seen->endpoints[i] + " " + what;
    }
  }
  if (served_logged_.first(message)) log("info", message);
}

void SelfManagedCertificates::write_metrics(prometheus::TextWriter& out) const {
  using prometheus::Type;
  const CertificateStats s = stats();
  const std::optional<CertTime> ca_not_after = source_->ca_not_after();
  auto unix_seconds = [](CertTime t) {
    return static_cast<double>(std::chrono::duration_cast<Seconds>(t.time_since_epoch()).count());
  };
  out.family("isolation_gate_certificate_expiry_seconds", Type::Gauge,
             "notAfter (Unix time) of the served certificate and of the earliest CA of the bundle.");
  if (loaded()) {
    out.sample("isolation_gate_certificate_expiry_seconds", {{"certificate", "serving"}},
               unix_seconds(source_->served_not_after()));
  }
  if (ca_not_after) {
    out.sample("isolation_gate_certificate_expiry_seconds", {{"certificate", "ca"}}, unix_seconds(*ca_not_after));
  }
  out.family("isolation_gate_certificate_rotations_total", Type::Counter,
             "Serving certificates and CAs this replica issued as leader after the first.");
  out.sample("isolation_gate_certificate_rotations_total", {{"certificate", "serving"}}, s.leaf_rotations);
  out.sample("isolation_gate_certificate_rotations_total", {{"certificate", "ca"}}, s.ca_rotations);
  runtime::write_single(out, "isolation_gate_ca_bundle_repairs_total", Type::Counter,
                        "Webhooks whose clientConfig.caBundle was patched back to the Secret's ca.crt.",
                        s.bundle_repairs);
  runtime::write_single(out, "isolation_gate_webhook_configuration_applies_total", Type::Counter,
                        "Webhook configurations created or replaced from the template ConfigMap (leader).",
                        s.config_applies);
  runtime::write_single(out, "isolation_gate_certificate_loaded", Type::Gauge,
                        "1 once the certificate of the Secret is the one served.", std::uint64_t{loaded() ? 1u : 0u});
  runtime::write_single(out, "isolation_gate_certificate_errors_total", Type::Counter,
                        "Failed certificate operations (Secret writes, caBundle patches, unusable Secret contents).",
                        s.errors);
}

}  // namespace ig::controller
