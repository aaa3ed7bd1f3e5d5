#include "controller/certificates.h"

#include <algorithm>

#include "admission/review.h"
#include "kube/tls_material.h"
#include "model/document.h"
#include "tls/certificates.h"

namespace ig::controller {
namespace {

using json = nlohmann::json;
using TimePoint = std::chrono::system_clock::time_point;
using Seconds = std::chrono::seconds;

constexpr std::string_view kTlsCrt = "tls.crt";
constexpr std::string_view kTlsKey = "tls.key";
constexpr std::string_view kCaCrt = "ca.crt";
constexpr std::string_view kCaKey = "ca.key";
constexpr std::string_view kFingerprintAnnotation = "isolation-gate.zeroroot.ai/template-fingerprint";

// FNV-1a (64 bits) in hex: a change detector for the template, not a MAC.
std::string fingerprint(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = kHex[h & 0xf];
  return out;
}

std::string annotation(const json& object, std::string_view key) {
  const auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return {};
  const auto a = md->find("annotations");
  if (a == md->end() || !a->is_object()) return {};
  const auto v = a->find(std::string(key));
  return v != a->end() && v->is_string() ? v->get<std::string>() : std::string{};
}

// The configuration `kind` named `name` that the template ConfigMap holds
// under `key`, as it should be stored: caBundle `b64` in every webhook, the
// fingerprint annotation set, no server-owned metadata.
Result<json> configuration_from_template(const json& configmap, std::string_view key, std::string_view kind,
                                         std::string_view name, const std::string& b64) {
  const auto data = configmap.find("data");
  if (data == configmap.end() || !data->is_object() || !data->contains(std::string(key)) ||
      !(*data)[std::string(key)].is_string()) {
    return fail("the template ConfigMap has no data key " + std::string(key));
  }
  const std::string text = (*data)[std::string(key)].get<std::string>();
  auto docs = model::parse_yaml_documents(text, key);
  if (!docs) return fail(docs.error());
  if (docs->size() != 1 || !(*docs)[0].is_object()) return fail(std::string(key) + ": expected one object");
  json object = std::move((*docs)[0]);
  if (object.value("kind", json()) != kind || object.value("apiVersion", json()) != "admissionregistration.k8s.io/v1") {
    return fail(std::string(key) + ": expected an admissionregistration.k8s.io/v1 " + std::string(kind));
  }
  if (!object.contains("metadata") || !object["metadata"].is_object() ||
      object["metadata"].value("name", json()) != name) {
    return fail(std::string(key) + ": metadata.name must be " + std::string(name) + " (--webhook-config-name)");
  }
  if (!object.contains("webhooks") || !object["webhooks"].is_array()) {
    return fail(std::string(key) + ": webhooks must be a list");
  }
  json& md = object["metadata"];
  for (const char* owned : {"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"})
    md.erase(owned);
  // Made by the leader, not by Helm: say so, and carry no instance label, which
  // GitOps tools (Argo CD's default tracking) would take for theirs and prune.
  if (!md.contains("labels") || !md["labels"].is_object()) md["labels"] = json::object();
  md["labels"].erase("app.kubernetes.io/instance");
  md["labels"]["app.kubernetes.io/managed-by"] = "isolation-gate";
  const std::string print = fingerprint(object.dump());
  for (json& hook : object["webhooks"]) {
    if (!hook.is_object()) return fail(std::string(key) + ": every webhook must be an object");
    if (!hook.contains("clientConfig") || !hook["clientConfig"].is_object()) hook["clientConfig"] = json::object();
    hook["clientConfig"]["caBundle"] = b64;
  }
  if (!md.contains("annotations") || !md["annotations"].is_object()) md["annotations"] = json::object();
  md["annotations"][std::string(kFingerprintAnnotation)] = print;
  return object;
}

// Adds a field selector to every list and watch (the Reflector lists a whole
// collection; we want one object of it).
class FieldSelectedClient final : public kube::Client {
 public:
  FieldSelectedClient(kube::Client& inner, std::string selector)
      : inner_(inner), selector_(std::move(selector)) {}
  kube::ApiResult<json> get(std::string_view path, std::chrono::milliseconds timeout) override {
    return inner_.get(path, timeout);
  }
  kube::ApiResult<kube::ListPage> list(std::string_view path, const kube::ListOptions& options) override {
    kube::ListOptions o = options;
    o.field_selector = selector_;
    return inner_.list(path, o);
  }
  kube::ApiResult<kube::ListPage> list_each(std::string_view path, const kube::ListOptions& options,
                                            const std::function<void(json&&)>& each) override {
    kube::ListOptions o = options;
    o.field_selector = selector_;
    return inner_.list_each(path, o, each);
  }
  kube::ApiResult<std::unique_ptr<kube::WatchStream>> watch(std::string_view path,
                                                            const kube::WatchOptions& options) override {
    kube::WatchOptions o = options;
    o.field_selector = selector_;
    return inner_.watch(path, o);
  }
  kube::ApiResult<json> create(std::string_view path, const json& body) override {
    return inner_.create(path, body);
  }
  kube::ApiResult<json> patch(std::string_view path, kube::PatchType type, const json& body) override {
    return inner_.patch(path, type, body);
  }
  kube::ApiResult<json> update(std::string_view path, const json& body,
                               std::chrono::milliseconds timeout) override {
    return inner_.update(path, body, timeout);
  }
  kube::ApiResult<json> remove(std::string_view path, std::chrono::milliseconds timeout) override {
    return inner_.remove(path, timeout);
  }

 private:
  kube::Client& inner_;
  const std::string selector_;
};

std::string data_field(const json& secret, std::string_view key) {
  const auto data = secret.find("data");
  if (data == secret.end() || !data->is_object()) return {};
  const auto it = data->find(std::string(key));
  if (it == data->end() || !it->is_string()) return {};
  auto decoded = kube::decode_base64(it->get<std::string>(), key);
  return decoded ? std::move(*decoded) : std::string{};
}

std::string resource_version(const json& object) {
  const auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return {};
  const auto rv = md->find("resourceVersion");
  return rv != md->end() && rv->is_string() ? rv->get<std::string>() : std::string{};
}

Seconds seconds_between(TimePoint a, TimePoint b) {
  return std::chrono::duration_cast<Seconds>(b - a);
}

// Two thirds of the way from issue to notAfter.
TimePoint renewal_due(const tls::CertificateInfo& c) {
  return c.issued_at() + (c.not_after - c.issued_at()) * 2 / 3;
}

std::string concat(const std::vector<tls::CertificateInfo>& certs) {
  std::string out;
  for (const auto& c : certs) out += c.pem;
  return out;
}

struct Plan {
  bool write = false;
  std::string tls_crt, tls_key, ca_crt, ca_key;
  bool leaf_rotated = false;
  bool ca_rotated = false;
  std::string why;                            // for the log, when write
  std::optional<TimePoint> wake;              // the next moment something is due
  void wake_at(TimePoint t) { wake = wake ? std::min(*wake, t) : t; }
};

struct PlanInput {
  std::optional<std::string> tls_crt, tls_key, ca_crt, ca_key;  // absent: no Secret
  bool exists = false;
};

}  // namespace

class SelfManagedCertificates::ObjectSink final : public kube::ReflectorSink {
 public:
  ObjectSink(std::string name, std::function<void()> on_change)
      : name_(std::move(name)), on_change_(std::move(on_change)) {}

  void begin_replace() override { pending_.reset(); }
  void add_listed(const json& object) override {
    if (name_of(object) == name_) pending_ = object;
  }
  void end_replace(const std::string&) override {
    {
      std::lock_guard lock(mu_);
      object_ = std::move(pending_);
      synced_ = true;
      ++version_;
    }
    pending_.reset();
    if (on_change_) on_change_();
  }
  void apply(kube::WatchEvent::Type type, const json& object) override {
    if (name_of(object) != name_) return;
    {
      std::lock_guard lock(mu_);
      if (type == kube::WatchEvent::Type::Deleted) {
        object_.reset();
      } else {
        object_ = object;
      }
      ++version_;
    }
    if (on_change_) on_change_();
  }

  bool synced() const {
    std::lock_guard lock(mu_);
    return synced_;
  }
  // The object (nullopt: none) and the change count.
  std::pair<std::optional<json>, std::uint64_t> read() const {
    std::lock_guard lock(mu_);
    return {object_, version_};
  }

 private:
  static std::string name_of(const json& object) {
    const auto md = object.find("metadata");
    if (md == object.end() || !md->is_object()) return {};
    const auto n = md->find("name");
    return n != md->end() && n->is_string() ? n->get<std::string>() : std::string{};
  }

  const std::string name_;
  const std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::optional<json> object_;
  bool synced_ = false;
  std::uint64_t version_ = 0;
  std::optional<json> pending_;  // reflector thread only
};

struct SelfManagedCertificates::ConfigWatch {
  const kube::Resource* resource = nullptr;
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<ObjectSink> sink;
  std::unique_ptr<kube::Reflector> reflector;
  // The resourceVersion last patched and the bundle it was patched to: the
  // cache may still show that version with the old bundle.
  std::string patched_rv, patched_bundle;
  bool missing_logged = false;
  // Template mode: the sink's change count when we last wrote (a write is
  // not repeated until the watch has shown something newer), and what was
  // last logged while waiting.
  std::optional<std::uint64_t> written_at_version;
  std::string waiting_logged;
};

namespace {

// What the leader should write next, from the Secret as it is now. Pure but
// for the key generation.
Result<Plan> plan_secret(const PlanInput& in, TimePoint now,
                         std::optional<TimePoint> bundle_confirmed_since, Seconds grace,
                         const CertificateOptions& options, const std::vector<std::string>& names) {
  Plan plan;
  auto new_ca = [&]() -> Result<tls::CaMaterial> {
    const auto stamp = std::chrono::duration_cast<Seconds>(now.time_since_epoch()).count();
    return tls::make_ca("isolation-gate-ca-" + std::to_string(stamp), options.ca_validity, now);
  };
  auto sign_leaf = [&](const std::string& ca_pem, const std::string& ca_key,
                       TimePoint ca_not_after) -> Result<void> {
    Seconds validity = std::min(options.cert_validity, seconds_between(now, ca_not_after));
    if (validity < Seconds(1)) validity = Seconds(1);
    auto leaf = tls::make_serving_certificate(ca_pem, ca_key, names, {}, validity, now);
    if (!leaf) return fail("signing the serving certificate: " + leaf.error());
    plan.tls_crt = std::move(leaf->cert_pem);
    plan.tls_key = std::move(leaf->key_pem);
    return {};
  };

  if (!in.exists) {
    auto ca = new_ca();
    if (!ca) return fail("making the CA: " + ca.error());
    plan.ca_crt = ca->ca_cert_pem;
    plan.ca_key = ca->ca_key_pem;
    if (auto signed_leaf = sign_leaf(plan.ca_crt, plan.ca_key, now + options.ca_validity); !signed_leaf)
      return fail(signed_leaf.error());
    plan.write = true;
    plan.why = "created the CA and the serving certificate";
    return plan;
  }

  plan.tls_crt = in.tls_crt.value_or("");
  plan.tls_key = in.tls_key.value_or("");
  plan.ca_key = in.ca_key.value_or("");
  std::vector<tls::CertificateInfo> all_cas, cas;
  if (auto read = tls::read_certificate_bundle(in.ca_crt.value_or("")); read) all_cas = std::move(*read);
  for (const auto& c : all_cas)
    if (c.is_ca && c.not_before <= now && now < c.not_after) cas.push_back(c);
  const tls::CertificateInfo* signer = nullptr;
  for (const auto& c : cas)
    if (tls::key_matches_certificate(c.pem, plan.ca_key)) signer = &c;  // the last one matching

  auto leaf_problem = [&](const std::string& bundle) -> std::optional<std::string> {
    if (plan.tls_crt.empty()) return "no serving certificate";
    if (auto m = tls::key_matches_certificate(plan.tls_crt, plan.tls_key); !m) return m.error();
    if (bundle.empty()) return "no valid CA";
    for (const auto& n : names)
      if (auto v = tls::verifies(plan.tls_crt, bundle, n, now); !v) return v.error();
    return std::nullopt;
  };
  const std::string valid_bundle = concat(cas);
  const std::optional<std::string> leaf_bad = leaf_problem(valid_bundle);

  // A new CA: none can sign, or the signing one is two thirds through.
  if (signer == nullptr || now >= renewal_due(*signer)) {
    auto ca = new_ca();
    if (!ca) return fail("making the CA: " + ca.error());
    plan.ca_crt = valid_bundle + ca->ca_cert_pem;
    plan.ca_key = ca->ca_key_pem;
    plan.write = true;
    plan.ca_rotated = true;
    plan.why = signer == nullptr ? "no CA of ca.crt matches ca.key (or none is valid): added a new CA"
                                 : "the CA is two thirds through its lifetime: added a new CA next to it";
    if (leaf_bad) {
      // Nothing valid is served: nothing to keep verifiable.
      if (auto s = sign_leaf(ca->ca_cert_pem, ca->ca_key_pem, now + options.ca_validity); !s)
        return fail(s.error());
      plan.leaf_rotated = true;
      plan.why += "; issued a serving certificate (" + *leaf_bad + ")";
    }
    return plan;
  }

  plan.ca_crt = in.ca_crt.value_or("");
  if (cas.size() != all_cas.size()) {
    plan.ca_crt = valid_bundle;
    plan.write = true;
    plan.why = "dropped expired or invalid certificates from ca.crt";
  }
  auto also = [&](std::string what) {
    plan.why = plan.why.empty() ? std::move(what) : plan.why + "; " + what;
    plan.write = true;
  };

  auto leaf = tls::read_certificate_bundle(plan.tls_crt);
  const bool by_signer = !leaf_bad && tls::verifies(plan.tls_crt, signer->pem, names.front(), now).ok();
  if (leaf_bad) {
    if (auto s = sign_leaf(signer->pem, plan.ca_key, signer->not_after); !s) return fail(s.error());
    plan.leaf_rotated = true;
    also("issued a serving certificate (" + *leaf_bad + ")");
  } else if (!by_signer) {
    // CA rotation, the switch: only once every caBundle has held the new CA
    // for the grace.
    if (bundle_confirmed_since && now >= *bundle_confirmed_since + grace) {
      if (auto s = sign_leaf(signer->pem, plan.ca_key, signer->not_after); !s) return fail(s.error());
      plan.leaf_rotated = true;
      also("switched the serving certificate to the new CA");
    } else if (bundle_confirmed_since) {
      plan.wake_at(*bundle_confirmed_since + grace);
    }
  } else if (leaf && now >= renewal_due(leaf->front())) {
    if (auto s = sign_leaf(signer->pem, plan.ca_key, signer->not_after); !s) return fail(s.error());
    plan.leaf_rotated = true;
    also("renewed the serving certificate at two thirds of its lifetime");
  } else if (leaf) {
    plan.wake_at(renewal_due(leaf->front()));
    if (cas.size() > 1) {
      const TimePoint drop_at = leaf->front().issued_at() + grace;
      if (now >= drop_at) {
        plan.ca_crt = signer->pem;
        also("dropped the old CA from ca.crt (the serving certificate is signed by the new one)");
      } else {
        plan.wake_at(drop_at);
      }
    }
  }
  plan.wake_at(renewal_due(*signer));
  for (const auto& c : cas) plan.wake_at(c.not_after);
  return plan;
}

json secret_data(const Plan& p) {
  return {{std::string(kTlsCrt), admission::base64_encode(p.tls_crt)},
          {std::string(kTlsKey), admission::base64_encode(p.tls_key)},
          {std::string(kCaCrt), admission::base64_encode(p.ca_crt)},
          {std::string(kCaKey), admission::base64_encode(p.ca_key)}};
}

}  // namespace

SelfManagedCertificates::SelfManagedCertificates(kube::Client& client,
                                                 tls::ReloadingTlsContext& serving,
                                                 CertificateOptions options)
    : client_(client),
      serving_(serving),
      options_(std::move(options)),
      dns_names_(config::service_dns_names(options_.service_name, options_.ns)) {
  selected_secret_client_ = std::make_unique<FieldSelectedClient>(
      client_, "metadata.name=" + options_.secret_name);
  secret_sink_ = std::make_unique<ObjectSink>(options_.secret_name, [this] { on_secret_changed(); });
  secret_reflector_ = std::make_unique<kube::Reflector>(
      *selected_secret_client_, *secret_sink_,
      one_object_reflector("secret/" + options_.secret_name, kube::collection_path(kSecrets, options_.ns)));
}

SelfManagedCertificates::~SelfManagedCertificates() { stop(); }

kube::ReflectorOptions SelfManagedCertificates::one_object_reflector(std::string name, std::string path) const {
  kube::ReflectorOptions o;
  o.name = std::move(name);
  o.path = std::move(path);
  o.page_size = 10;
  o.watch_timeout = options_.watch_timeout;
  o.backoff = options_.backoff;
  o.log = options_.log;
  return o;
}

TimePoint SelfManagedCertificates::now() const {
  return options_.clock ? options_.clock() : std::chrono::system_clock::now();
}

void SelfManagedCertificates::log(std::string_view level, const std::string& message) const {
  if (options_.log) options_.log(level, message);
}

void SelfManagedCertificates::note_error(const std::string& message) {
  {
    std::lock_guard lock(state_mu_);
    last_error_ = message;
    ++stats_.errors;
  }
  log("error", message);
}

void SelfManagedCertificates::start() {
  std::lock_guard lock(lifecycle_mu_);
  if (started_) return;
  started_ = true;
  secret_reflector_->start();
}

void SelfManagedCertificates::stop() noexcept {
  stop_leading();
  std::lock_guard lock(lifecycle_mu_);
  secret_reflector_->stop();
  started_ = false;
}

bool SelfManagedCertificates::leading() const noexcept {
  std::lock_guard lock(leader_mu_);
  return leading_;
}

CertificateStats SelfManagedCertificates::stats() const {
  std::lock_guard lock(state_mu_);
  return stats_;
}

std::string SelfManagedCertificates::last_error() const {
  std::lock_guard lock(state_mu_);
  return last_error_;
}

std::optional<json> SelfManagedCertificates::observed_secret() const { return secret_sink_->read().first; }

void SelfManagedCertificates::on_secret_changed() {
  wake_leader();
  auto [secret, version] = secret_sink_->read();
  (void)version;
  if (!secret) return;
  const std::string crt = data_field(*secret, kTlsCrt);
  const std::string key = data_field(*secret, kTlsKey);
  const std::string ca = data_field(*secret, kCaCrt);
  {
    std::lock_guard lock(state_mu_);
    ca_not_after_.reset();
    if (auto cas = tls::read_certificate_bundle(ca); cas) {
      for (const auto& c : *cas)
        if (!ca_not_after_ || c.not_after < *ca_not_after_) ca_not_after_ = c.not_after;
    }
  }
  if (crt.empty() || key.empty()) return;
  {
    std::lock_guard lock(state_mu_);
    if (last_tried_pair_ == crt + key) return;  // served already, or reported once
    last_tried_pair_ = crt + key;
  }
  if (auto replaced = serving_.replace_pem(crt, key); !replaced) {
    note_error("the Secret " + options_.ns + "/" + options_.secret_name +
               " holds no usable serving certificate: " + replaced.error());
    return;
  }
  {
    std::lock_guard lock(state_mu_);
    ++stats_.reloads;
  }
  if (!loaded_.exchange(true, std::memory_order_acq_rel))
    log("info", "serving the certificate of Secret " + options_.ns + "/" + options_.secret_name);
}

void SelfManagedCertificates::wake_leader() {
  {
    std::lock_guard lock(leader_mu_);
    leader_wake_ = true;
  }
  leader_cv_.notify_all();
}

bool SelfManagedCertificates::leader_stopping() const {
  std::lock_guard lock(leader_mu_);
  return leader_stop_;
}

void SelfManagedCertificates::start_leading() {
  std::lock_guard lifecycle(lifecycle_mu_);
  {
    std::lock_guard lock(leader_mu_);
    if (leading_) return;
    leading_ = true;
    leader_stop_ = false;
    leader_wake_ = true;
  }
  configs_.clear();
  for (const kube::Resource* r : {&kMutatingWebhookConfigurations, &kValidatingWebhookConfigurations}) {
    auto w = std::make_unique<ConfigWatch>();
    w->resource = r;
    w->client = std::make_unique<FieldSelectedClient>(client_, "metadata.name=" + options_.webhook_config_name);
    w->sink = std::make_unique<ObjectSink>(options_.webhook_config_name, [this] { wake_leader(); });
    w->reflector = std::make_unique<kube::Reflector>(
        *w->client, *w->sink,
        one_object_reflector(std::string(r->plural) + "/" + options_.webhook_config_name, kube::collection_path(*r)));
    configs_.push_back(std::move(w));
  }
  template_watch_.reset();
  if (!options_.webhook_template_configmap.empty()) {
    auto w = std::make_unique<ConfigWatch>();
    w->resource = &kConfigMaps;
    w->client =
        std::make_unique<FieldSelectedClient>(client_, "metadata.name=" + options_.webhook_template_configmap);
    w->sink = std::make_unique<ObjectSink>(options_.webhook_template_configmap, [this] { wake_leader(); });
    w->reflector = std::make_unique<kube::Reflector>(
        *w->client, *w->sink,
        one_object_reflector("configmaps/" + options_.webhook_template_configmap,
                             kube::collection_path(kConfigMaps, options_.ns)));
    template_watch_ = std::move(w);
  }
  working_secret_.reset();
  working_version_ = 0;
  confirmed_bundle_.clear();
  confirmed_since_.reset();
  for (auto& w : configs_) w->reflector->start();
  if (template_watch_) template_watch_->reflector->start();
  leader_thread_ = std::thread([this] { leader_loop(); });
  log("info", "certificates: leading (Secret " + options_.ns + "/" + options_.secret_name + ")");
}

void SelfManagedCertificates::stop_leading() noexcept {
  std::lock_guard lifecycle(lifecycle_mu_);
  {
    std::lock_guard lock(leader_mu_);
    if (!leading_) return;
    leader_stop_ = true;
  }
  leader_cv_.notify_all();
  for (auto& w : configs_) w->reflector->stop();
  if (template_watch_) template_watch_->reflector->stop();
  if (leader_thread_.joinable()) leader_thread_.join();
  configs_.clear();
  template_watch_.reset();
  {
    std::lock_guard lock(leader_mu_);
    leading_ = false;
  }
  log("info", "certificates: no longer leading");
}

void SelfManagedCertificates::leader_loop() {
  while (!leader_stopping()) {
    TimePoint next;
    try {
      next = leader_pass();
    } catch (const std::exception& e) {  // allocation failure, a malformed object
      note_error(std::string("certificates: leader pass failed: ") + e.what());
      next = now() + options_.recheck_interval;
    }
    {
      std::lock_guard lock(state_mu_);
      ++stats_.leader_passes;
    }
    auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(next - now());
    delay = std::clamp(delay, std::chrono::milliseconds(0), options_.recheck_interval);
    std::unique_lock lock(leader_mu_);
    leader_cv_.wait_for(lock, delay, [this] { return leader_stop_ || leader_wake_; });
    leader_wake_ = false;
  }
}

bool SelfManagedCertificates::sync_bundles(const std::string& b64) {
  bool all = true;
  for (auto& w : configs_) {
    if (leader_stopping()) return false;
    if (!w->sink->synced()) {
      all = false;
      continue;
    }
    if (!apply_template(*w, b64)) {
      all = false;
      continue;
    }
    auto [object, version] = w->sink->read();
    (void)version;
    const std::string what = std::string(w->resource->kind) + " " + options_.webhook_config_name;
    if (!object) {
      if (!w->missing_logged) log("warn", "certificates: waiting for the " + what + " to exist");
      w->missing_logged = true;
      continue;  // nothing the API server could call
    }
    w->missing_logged = false;
    const std::string rv = resource_version(*object);
    if (!rv.empty() && rv == w->patched_rv && b64 == w->patched_bundle) continue;  // our patch is on its way
    json ops = json::array();
    std::uint64_t repairs = 0;
    const auto webhooks = object->find("webhooks");
    if (webhooks != object->end() && webhooks->is_array()) {
      for (std::size_t i = 0; i < webhooks->size(); ++i) {
        const json& hook = (*webhooks)[i];
        std::string current;
        if (auto cc = hook.find("clientConfig"); cc != hook.end() && cc->is_object()) {
          if (auto cb = cc->find("caBundle"); cb != cc->end() && cb->is_string()) current = cb->get<std::string>();
        }
        if (current == b64) continue;
        const std::string base = "/webhooks/" + std::to_string(i);
        if (auto name = hook.find("name"); name != hook.end())
          ops.push_back({{"op", "test"}, {"path", base + "/name"}, {"value", *name}});
        if (hook.find("clientConfig") == hook.end() || !hook["clientConfig"].is_object())
          ops.push_back({{"op", "add"}, {"path", base + "/clientConfig"}, {"value", json::object()}});
        ops.push_back({{"op", "add"}, {"path", base + "/clientConfig/caBundle"}, {"value", b64}});
        ++repairs;
      }
    }
    if (repairs == 0) continue;
    auto patched = client_.patch(kube::object_path(*w->resource, "", options_.webhook_config_name),
                                 kube::PatchType::Json, ops);
    if (!patched) {
      all = false;
      if (!patched.failure().not_found())
        note_error("certificates: patching the caBundle of the " + what + ": " + patched.error());
      continue;
    }
    w->patched_rv = rv;
    w->patched_bundle = b64;
    {
      std::lock_guard lock(state_mu_);
      stats_.bundle_repairs += repairs;
    }
    log("info", "certificates: set the caBundle of " + std::to_string(repairs) + " webhook(s) of the " + what);
  }
  if (!all) {
    confirmed_since_.reset();
    confirmed_bundle_.clear();
  } else if (confirmed_bundle_ != b64 || !confirmed_since_) {
    confirmed_bundle_ = b64;
    confirmed_since_ = now();
  }
  return all;
}

bool SelfManagedCertificates::apply_template(ConfigWatch& w, const std::string& b64) {
  if (!template_watch_) return true;
  const std::string what = std::string(w.resource->kind) + " " + options_.webhook_config_name;
  auto waiting = [&](const std::string& why) {
    if (w.waiting_logged != why) log("info", "certificates: " + what + ": " + why);
    w.waiting_logged = why;
    return false;
  };
  if (!template_watch_->sink->synced()) return false;
  const auto [configmap, configmap_version] = template_watch_->sink->read();
  (void)configmap_version;
  if (!configmap) {
    return waiting("waiting for the template ConfigMap " + options_.ns + "/" + options_.webhook_template_configmap);
  }
  const bool mutating = w.resource == &kMutatingWebhookConfigurations;
  auto desired = configuration_from_template(*configmap, mutating ? "mutating.yaml" : "validating.yaml",
                                             w.resource->kind, options_.webhook_config_name, b64);
  if (!desired) {  // logged once per distinct error, counted each pass
    const std::string message =
        "certificates: the template ConfigMap " + options_.webhook_template_configmap + ": " + desired.error();
    if (w.waiting_logged != message) {
      note_error(message);
    } else {
      std::lock_guard lock(state_mu_);
      ++stats_.errors;
    }
    w.waiting_logged = message;
    return false;
  }
  const auto [live, version] = w.sink->read();
  const std::string wanted = annotation(*desired, kFingerprintAnnotation);
  if (live && annotation(*live, kFingerprintAnnotation) == wanted) {
    w.waiting_logged.clear();
    return true;  // as the template says; the caBundle is the caller's
  }
  if (w.written_at_version == version) return false;  // our write is on its way to the cache
  if (options_.replica_ready && !options_.replica_ready()) {
    return waiting("waiting until this replica can answer before applying the template");
  }
  kube::ApiResult<json> written = kube::ApiError{};
  if (!live) {
    written = client_.create(kube::collection_path(*w.resource), *desired);
  } else {
    (*desired)["metadata"]["resourceVersion"] = resource_version(*live);
    written = client_.update(kube::object_path(*w.resource, "", options_.webhook_config_name), *desired,
                             options_.request_timeout);
  }
  if (!written) {
    const kube::ApiError& e = written.failure();
    if (!e.conflict()) note_error("certificates: applying the template to the " + what + ": " + e.message);
    return false;  // a conflict: the watch brings the newer object, the next pass retries
  }
  w.written_at_version = version;
  w.waiting_logged.clear();
  {
    std::lock_guard lock(state_mu_);
    ++stats_.config_applies;
  }
  log("info", std::string("certificates: ") + (live ? "updated" : "created") + " the " + what +
                  " from the template ConfigMap " + options_.webhook_template_configmap);
  return true;
}

TimePoint SelfManagedCertificates::leader_pass() {
  const TimePoint recheck = now() + options_.recheck_interval;
  if (!secret_sink_->synced()) return recheck;
  {
    auto [object, version] = secret_sink_->read();
    if (version != working_version_) {
      working_secret_ = std::move(object);
      working_version_ = version;
    }
  }
  const std::string secret_path = kube::object_path(kSecrets, options_.ns, options_.secret_name);
  const Seconds grace = std::min(options_.rotation_grace, options_.cert_validity / 10);
  std::optional<TimePoint> wake;
  for (int attempt = 0; attempt < 4 && !leader_stopping(); ++attempt) {
    PlanInput in;
    if (working_secret_) {
      in.exists = true;
      in.tls_crt = data_field(*working_secret_, kTlsCrt);
      in.tls_key = data_field(*working_secret_, kTlsKey);
      in.ca_crt = data_field(*working_secret_, kCaCrt);
      in.ca_key = data_field(*working_secret_, kCaKey);
      // An unconfirmed caBundle holds a CA switch back (the plan sees no
      // confirmation); an empty ca.crt is never published.
      if (!in.ca_crt->empty()) sync_bundles(admission::base64_encode(*in.ca_crt));
    }
    std::optional<TimePoint> confirmed;  // (a ?: here makes GCC 12 -O2 warn maybe-uninitialized)
    if (in.exists && confirmed_bundle_ == admission::base64_encode(in.ca_crt.value_or(""))) {
      confirmed = confirmed_since_;
    }
    auto plan = plan_secret(in, now(), confirmed, grace, options_, dns_names_);
    if (!plan) {
      note_error("certificates: " + plan.error());
      return recheck;
    }
    if (!plan->write) {
      wake = plan->wake;
      break;
    }
    if (leader_stopping()) break;
    kube::ApiResult<json> written = kube::ApiError{};
    if (!working_secret_) {
      json body = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata",
                    {{"name", options_.secret_name},
                     {"namespace", options_.ns},
                     {"labels", {{"app.kubernetes.io/managed-by", "isolation-gate"}}}}},
                   {"type", "kubernetes.io/tls"},
                   {"data", secret_data(*plan)}};
      written = client_.create(kube::collection_path(kSecrets, options_.ns), body);
    } else {
      json body = *working_secret_;
      if (!body.contains("data") || !body["data"].is_object()) body["data"] = json::object();
      const json data = secret_data(*plan);
      for (const auto& [k, v] : data.items()) body["data"][k] = v;
      written = client_.update(secret_path, body, options_.request_timeout);
    }
    if (!written) {
      const kube::ApiError& e = written.failure();
      if (e.conflict()) {  // moved on (or created meanwhile): read it again and plan again
        log("info", "certificates: the Secret changed under us; reading it again");
        auto fresh = client_.get(secret_path, options_.request_timeout);
        if (fresh) {
          working_secret_ = std::move(*fresh);
          continue;
        }
        if (fresh.failure().not_found()) {
          working_secret_.reset();
          continue;
        }
        note_error("certificates: reading the Secret: " + fresh.error());
        return recheck;
      }
      if (e.not_found()) {
        working_secret_.reset();
        continue;
      }
      note_error("certificates: writing the Secret " + options_.ns + "/" + options_.secret_name + ": " +
                 e.message);
      return recheck;
    }
    working_secret_ = std::move(*written);
    {
      std::lock_guard lock(state_mu_);
      ++stats_.secret_writes;
      if (plan->leaf_rotated) ++stats_.leaf_rotations;
      if (plan->ca_rotated) ++stats_.ca_rotations;
      last_error_.clear();
    }
    log("info", "certificates: " + plan->why);
    sync_bundles(admission::base64_encode(plan->ca_crt));
    return now();  // the next step at once (usually: nothing to do)
  }
  TimePoint next = recheck;
  if (wake) next = std::min(next, *wake);
  return next;
}

void SelfManagedCertificates::write_metrics(prometheus::TextWriter& out) const {
  using prometheus::Type;
  const CertificateStats s = stats();
  std::optional<TimePoint> ca_not_after;
  {
    std::lock_guard lock(state_mu_);
    ca_not_after = ca_not_after_;
  }
  auto unix_seconds = [](TimePoint t) {
    return static_cast<double>(std::chrono::duration_cast<Seconds>(t.time_since_epoch()).count());
  };
  out.family("isolation_gate_certificate_expiry_seconds", Type::Gauge,
             "notAfter (Unix time) of the served certificate and of the earliest CA of the bundle.");
  if (loaded()) {
    out.sample("isolation_gate_certificate_expiry_seconds", {{"certificate", "serving"}},
               unix_seconds(serving_.not_after()));
  }
  if (ca_not_after) {
    out.sample("isolation_gate_certificate_expiry_seconds", {{"certificate", "ca"}}, unix_seconds(*ca_not_after));
  }
  out.family("isolation_gate_certificate_rotations_total", Type::Counter,
             "Serving certificates and CAs this replica issued as leader after the first.");
  out.sample("isolation_gate_certificate_rotations_total", {{"certificate", "serving"}}, s.leaf_rotations);
  out.sample("isolation_gate_certificate_rotations_total", {{"certificate", "ca"}}, s.ca_rotations);
  out.family("isolation_gate_ca_bundle_repairs_total", Type::Counter,
             "Webhooks whose clientConfig.caBundle was patched back to the Secret's ca.crt.");
  out.sample("isolation_gate_ca_bundle_repairs_total", {}, s.bundle_repairs);
  out.family("isolation_gate_webhook_configuration_applies_total", Type::Counter,
             "Webhook configurations created or replaced from the template ConfigMap (leader).");
  out.sample("isolation_gate_webhook_configuration_applies_total", {}, s.config_applies);
  out.family("isolation_gate_certificate_loaded", Type::Gauge,
             "1 once the certificate of the Secret is the one served.");
  out.sample("isolation_gate_certificate_loaded", {}, std::uint64_t{loaded() ? 1u : 0u});
  out.family("isolation_gate_certificate_errors_total", Type::Counter,
             "Failed certificate operations (Secret writes, caBundle patches, unusable Secret contents).");
  out.sample("isolation_gate_certificate_errors_total", {}, s.errors);
}

}  // namespace ig::controller
