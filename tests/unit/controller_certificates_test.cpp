// Self-managed webhook certificates (src/controller/certificates.h) over an
// in-memory API holding the Secret and both webhook configurations: GET,
// create, conditional update (409 on a stale resourceVersion, and injected
// conflicts), JSON and merge PATCH, list/watch with a field selector. Time is
// a fake clock; every wait is bounded and on a condition. The replicas the
// leader observes are real TLS listeners (server::HttpServer) named by
// EndpointSlices in that API.
#include "controller/certificates.h"
#include "runtime/manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "admission/review.h"
#include "fake_kube_client.h"
#include "kube/resources.h"
#include "kube/tls_material.h"
#include "server/https_server.h"
#include "tls/certificates.h"
#include "tls/server_context.h"

namespace ig::controller {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using TimePoint = std::chrono::system_clock::time_point;

constexpr const char* kNs = "gate-ns";
constexpr const char* kSecret = "gate-tls";
constexpr const char* kConfig = "isolation-gate";
constexpr const char* kService = "gate-svc";

std::string b64(const std::string& s) { return admission::base64_encode(s); }
std::string unb64(const json& v) {
  if (!v.is_string()) return {};
  auto d = kube::decode_base64(v.get<std::string>(), "test");
  return d ? *d : std::string{};
}

const std::string kSecretsPath = kube::collection_path(kube::kSecrets, kNs);
const std::string kSlicesPath = kube::collection_path(kube::kEndpointSlices, kNs);

// A replica's webhook listener on 127.0.0.1, presenting whatever `ctx` holds.
struct Replica {
  std::unique_ptr<server::HttpServer> server;
  std::uint16_t port = 0;
};
Replica listen_with(tls::ReloadingTlsContext& ctx) {
  Replica r;
  r.server = std::make_unique<server::HttpServer>([](server::Request&&) { return server::Response{}; }, ctx);
  server::ListenerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  auto ep = r.server->add_listener(o);
  EXPECT_TRUE(ep) << ep.error();
  if (ep) r.port = ep->port();
  r.server->start(1);
  return r;
}

// The EndpointSlice of one ready replica of the Service.
json endpoint_slice(const std::string& name, std::uint16_t port) {
  return {{"apiVersion", "discovery.k8s.io/v1"},
          {"kind", "EndpointSlice"},
          {"metadata", {{"name", name}, {"namespace", kNs}, {"labels", {{"kubernetes.io/service-name", kService}}}}},
          {"addressType", "IPv4"},
          {"endpoints", json::array({{{"addresses", {"127.0.0.1"}}, {"conditions", {{"ready", true}}}}})},
          {"ports", json::array({{{"name", "https"}, {"port", port}, {"protocol", "TCP"}}})}};
}
const std::string kMutatingPath = kube::collection_path(kube::kMutatingWebhookConfigurations);
const std::string kValidatingPath = kube::collection_path(kube::kValidatingWebhookConfigurations);

json webhook_config(const char* kind, std::vector<std::string> hooks) {
  json c = {{"apiVersion", "admissionregistration.k8s.io/v1"},
            {"kind", kind},
            {"metadata", {{"name", kConfig}}},
            {"webhooks", json::array()}};
  for (const auto& h : hooks)
    c["webhooks"].push_back({{"name", h}, {"clientConfig", {{"service", {{"name", kService}, {"namespace", kNs}}}}}});
  return c;
}

std::vector<std::string> ca_bundles(const std::optional<json>& config) {
  std::vector<std::string> out;
  if (!config) return out;
  for (const auto& w : (*config)["webhooks"]) out.push_back(w["clientConfig"].value("caBundle", std::string{}));
  return out;
}

// The Secret, both webhook configurations and the EndpointSlices in the one
// fake client's tracker; injected conflicts and failures are reactors.
// The certificates as serve_cluster runs them: their runnables on a manager,
// which stops before they go. start()/stop() and the leader callbacks are the
// manager's.
class ManagedCertificates : public SelfManagedCertificates {
 public:
  ManagedCertificates(kube::Client& client, tls::ReloadingTlsContext& serving, CertificateOptions options)
      : SelfManagedCertificates(client, serving, std::move(options)) {
    add_to(manager_);
  }
  ~ManagedCertificates() { manager_.stop(); }
  void start() { ASSERT_TRUE(manager_.start()); }
  void stop() noexcept { manager_.stop(); }
  void start_leading() { manager_.start_leading(); }
  void stop_leading() noexcept { manager_.stop_leading(); }
  bool leading() const { return manager_.leading(); }

 private:
  runtime::Manager manager_;
};

struct SelfManagedCertificatesTest : ::testing::Test {
  kube::fake::FakeClient api;
  std::atomic<int> conflicts_to_inject{0};  // the next N updates: someone else wrote first
  std::atomic<int> failures_to_inject{0};   // the next N Secret creates and updates: 500
  // Its wall() starts now: the certificates are checked by OpenSSL.
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>(FakeClock::kStart, std::chrono::system_clock::now());
  std::unique_ptr<tls::ReloadingTlsContext> serving;
  std::string throwaway_pem;
  const std::vector<std::string> names = config::service_dns_names(kService, kNs);

  SelfManagedCertificatesTest() {
    api.prepend_reactor("update", "", [this](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
      auto current = api.find(a.path);
      if (!current || conflicts_to_inject <= 0) return std::nullopt;
      --conflicts_to_inject;
      (*current)["metadata"]["annotations"]["someone/else"] = (*current)["metadata"]["resourceVersion"];
      (*current)["metadata"].erase("resourceVersion");
      api.put(a.path.substr(0, a.path.rfind('/')), *current);
      return kube::fake::api_error(a.verb, a.path, 409, "Conflict");
    });
    api.prepend_reactor("*", "/secrets", [this](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
      if ((a.verb != "create" && a.verb != "update") || failures_to_inject <= 0) return std::nullopt;
      --failures_to_inject;
      return kube::fake::api_error(a.verb, a.path, 500, "InternalError");
    });
  }
  std::optional<json> find(const std::string& collection, const std::string& name) {
    return api.find(collection + "/" + name);
  }
  // Writes as "VERB COLLECTION" ("create secrets", "patch mutatingwebhookconfigurations").
  int write_count(const std::string& key) {
    const auto space = key.find(' ');
    return static_cast<int>(api.count(key.substr(0, space), "/" + key.substr(space + 1)));
  }
  void SetUp() override {
    auto chain = tls::make_serving_chain({"localhost"}, {}, 1h);
    ASSERT_TRUE(chain);
    throwaway_pem = chain->cert_pem;
    auto ctx = tls::ReloadingTlsContext::from_pem(chain->cert_pem, chain->key_pem, {});
    ASSERT_TRUE(ctx);
    serving = std::move(*ctx);
  }
  void add_configs() {
    api.put(kMutatingPath, webhook_config("MutatingWebhookConfiguration", {"mutate.pods", "mutate.other"}));
    api.put(kValidatingPath, webhook_config("ValidatingWebhookConfiguration",
                                            {"validate.pods", "validate.workloads", "validate.components"}));
  }
  CertificateOptions options() {
    CertificateOptions o;
    o.ns = kNs;
    o.secret_name = kSecret;
    o.webhook_config_name = kConfig;
    o.service_name = kService;
    o.recheck_interval = 20ms;
    o.backoff.initial = 5ms;
    o.backoff.max = 20ms;
    o.clock = clock;
    return o;
  }
  std::unique_ptr<ManagedCertificates> make(CertificateOptions o) {
    return std::make_unique<ManagedCertificates>(api, *serving, std::move(o));
  }
  std::optional<json> secret() { return find(kSecretsPath, kSecret); }
  static std::string field(const std::optional<json>& s, const char* key) {
    if (!s || !s->contains("data") || !(*s)["data"].contains(key)) return {};
    return unb64((*s)["data"][key]);
  }
  // The Secret exists and every webhook of both configurations carries its ca.crt.
  bool published_locked() {
    auto s = find(kSecretsPath, kSecret);
    if (!s) return false;
    const std::string want = (*s)["data"].value("ca.crt", std::string{});
    if (want.empty()) return false;
    for (const auto* path : {&kMutatingPath, &kValidatingPath})
      for (const auto& b : ca_bundles(find(*path, kConfig)))
        if (b != want) return false;
    return true;
  }
  // Bounded wait for a condition that needs no API lock.
  static bool eventually(const std::function<bool()>& pred, std::chrono::seconds limit = 20s) {
    std::mutex m;
    std::condition_variable cv;
    std::unique_lock lock(m);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      cv.wait_for(lock, 5ms);
    }
    return true;
  }
  // Waits until the leader has finished `n` more passes (each started after this call).
  static bool passes(SelfManagedCertificates& c, std::uint64_t n) {
    const auto start = c.stats().leader_passes;
    return eventually([&] { return c.stats().leader_passes >= start + n; });
  }
  // Reconciles (no term of leadership: begin_term() before) until `pred`
  // holds after one; the last result in `last`.
  static bool reconcile_until(SelfManagedCertificates& c, const std::function<bool()>& pred,
                              Result<runtime::Requeue>* last = nullptr, runtime::CancelToken cancel = {}) {
    return eventually([&] {
      auto r = c.reconcile(std::string(SelfManagedCertificates::kKey), cancel);
      if (last) *last = r;
      return pred();
    });
  }
  void expect_verifies_for_all_names(const std::string& leaf, const std::string& bundle, TimePoint at) {
    for (const auto& n : names) {
      auto v = tls::verifies(leaf, bundle, n, at);
      EXPECT_TRUE(v) << n << ": " << (v ? "" : v.error());
    }
  }
};

TEST_F(SelfManagedCertificatesTest, BootstrapCreatesTheSecretAndFillsEveryCaBundle) {
  add_configs();
  auto certs = make(options());
  certs->start();
  EXPECT_FALSE(certs->loaded());
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  ASSERT_TRUE(eventually([&] { return certs->loaded(); }));

  const auto s = secret();
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)["type"], "kubernetes.io/tls");
  const std::string crt = field(s, "tls.crt"), key = field(s, "tls.key"), ca = field(s, "ca.crt"),
                    ca_key = field(s, "ca.key");
  ASSERT_FALSE(crt.empty());
  EXPECT_TRUE(tls::key_matches_certificate(crt, key));
  EXPECT_TRUE(tls::key_matches_certificate(ca, ca_key));
  expect_verifies_for_all_names(crt, ca, clock->wall());
  EXPECT_EQ(write_count("create secrets"), 1);
  // Every webhook of both configurations: 2 + 3.
  EXPECT_EQ(ca_bundles(find(kMutatingPath, kConfig)).size(), 2u);
  EXPECT_EQ(ca_bundles(find(kValidatingPath, kConfig)).size(), 3u);
  // Counted just after the patch answers: wait for the count, then check it.
  ASSERT_TRUE(eventually([&] { return certs->stats().bundle_repairs >= 5; }));
  EXPECT_EQ(certs->stats().bundle_repairs, 5u);
  EXPECT_EQ(serving->certificate_pem(), crt);

  std::string text;
  prometheus::TextWriter w(text);
  certs->write_metrics(w);
  EXPECT_NE(text.find("isolation_gate_certificate_expiry_seconds{certificate=\"serving\"}"), std::string::npos);
  EXPECT_NE(text.find("isolation_gate_certificate_expiry_seconds{certificate=\"ca\"}"), std::string::npos);
  EXPECT_NE(text.find("isolation_gate_certificate_rotations_total{certificate=\"serving\"} 0"), std::string::npos);
  EXPECT_NE(text.find("isolation_gate_ca_bundle_repairs_total 5"), std::string::npos) << text;
  certs->stop();
  EXPECT_FALSE(certs->leading());
}

TEST_F(SelfManagedCertificatesTest, ANewLeaderKeepsAValidSecret) {
  add_configs();
  {
    auto first = make(options());
    first->start();
    first->start_leading();
    ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
    first->stop();
  }
  const auto before = secret();
  auto second = make(options());
  second->start();
  second->start_leading();
  ASSERT_TRUE(eventually([&] { return second->loaded(); }));
  // Edit a caBundle away: its repair proves the new leader has made whole passes.
  ASSERT_TRUE(api.patch(kube::object_path(kube::kValidatingWebhookConfigurations, "", kConfig), kube::PatchType::Json,
                        json::parse(R"([{"op":"replace","path":"/webhooks/1/clientConfig/caBundle","value":""}])")));
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  ASSERT_TRUE(passes(*second, 2));
  const auto after = secret();
  EXPECT_EQ((*after)["metadata"]["resourceVersion"], (*before)["metadata"]["resourceVersion"]);
  EXPECT_EQ(write_count("create secrets"), 1);
  EXPECT_EQ(write_count("update secrets"), 0);
  EXPECT_EQ(serving->certificate_pem(), field(after, "tls.crt"));
}

TEST_F(SelfManagedCertificatesTest, ServingCertificateIsRenewedAtTwoThirdsOfItsLifetime) {
  add_configs();
  auto o = options();
  o.cert_validity = 30s;
  o.ca_validity = 3000s;
  auto certs = make(o);
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  const std::string first_leaf = field(secret(), "tls.crt");
  const std::string ca = field(secret(), "ca.crt");
  auto leaf_info = tls::read_certificate_bundle(first_leaf);
  ASSERT_TRUE(leaf_info);
  EXPECT_EQ(leaf_info->front().not_after, std::chrono::floor<std::chrono::seconds>(clock->wall()) + 30s);

  clock->advance(19s);  // before two thirds (20 s): kept
  ASSERT_TRUE(passes(*certs, 3));
  EXPECT_EQ(field(secret(), "tls.crt"), first_leaf);

  clock->advance(2s);  // past two thirds
  ASSERT_TRUE(api.wait_for([&] {
    auto s = find(kSecretsPath, kSecret);
    return s && unb64((*s)["data"]["tls.crt"]) != first_leaf;
  }));
  const std::string renewed = field(secret(), "tls.crt");
  EXPECT_EQ(field(secret(), "ca.crt"), ca);  // signed by the same CA
  expect_verifies_for_all_names(renewed, ca, clock->wall());
  // Counted after the API's answer: the count may trail the Secret.
  ASSERT_TRUE(eventually([&] { return certs->stats().leaf_rotations >= 1; }));
  EXPECT_EQ(certs->stats().leaf_rotations, 1u);
  EXPECT_EQ(certs->stats().ca_rotations, 0u);
  ASSERT_TRUE(eventually([&] { return serving->certificate_pem() == renewed; }));
}

TEST_F(SelfManagedCertificatesTest, CaRotationKeepsEveryServedLeafVerifiableAtEveryStep) {
  add_configs();
  std::vector<std::string> violations;
  std::size_t most_cas = 0;
  std::vector<std::string> leaves_seen;
  api.on_change([&] {
    auto s = find(kSecretsPath, kSecret);
    if (!s) return;
    const std::string leaf = unb64((*s)["data"]["tls.crt"]);
    const std::string ca = unb64((*s)["data"]["ca.crt"]);
    if (auto cas = tls::read_certificate_bundle(ca); cas) most_cas = std::max(most_cas, cas->size());
    if (leaves_seen.empty() || leaves_seen.back() != leaf) leaves_seen.push_back(leaf);
    // What the API server trusts (every non-empty caBundle) must verify
    // what the Secret says to serve, and what this replica serves now.
    const std::string served = serving->certificate_pem();
    for (const auto* path : {&kMutatingPath, &kValidatingPath}) {
      for (const auto& bundle_b64 : ca_bundles(find(*path, kConfig))) {
        if (bundle_b64.empty()) continue;  // bootstrap: nothing published yet
        const std::string bundle = unb64(bundle_b64);
        for (const std::string* cert : {&leaf, &served}) {
          if (*cert == throwaway_pem) continue;
          if (auto v = tls::verifies(*cert, bundle, names.back(), clock->wall()); !v)
            violations.push_back(*path + ": " + v.error());
        }
      }
    }
  });
  conflicts_to_inject = 2;
  const Replica replica = listen_with(*serving);  // the only ready replica: this one
  api.put(kSlicesPath, endpoint_slice("gate-svc-a", replica.port));
  auto o = options();
  o.ca_validity = 90s;
  o.cert_validity = 60s;
  o.rotation_grace = 3s;  // capped at 6 s (a tenth of 60 s): 3 s
  auto certs = make(o);
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  const std::string first_ca = field(secret(), "ca.crt");

  // Step the clock a second at a time, letting the leader finish passes in
  // between, until the old CA has been rotated out.
  bool rotated_out = false;
  for (int step = 0; step < 200 && !rotated_out; ++step) {
    clock->advance(1s);
    ASSERT_TRUE(passes(*certs, 2));
    ASSERT_TRUE(eventually([&] { return serving->certificate_pem() == field(secret(), "tls.crt"); }));
    const std::string ca = field(secret(), "ca.crt");
    auto cas = tls::read_certificate_bundle(ca);
    ASSERT_TRUE(cas);
    rotated_out = certs->stats().ca_rotations >= 1 && cas->size() == 1 && ca != first_ca;
  }
  ASSERT_TRUE(rotated_out);
  ASSERT_TRUE(api.wait_for([&] { return published_locked() && conflicts_to_inject == 0; }));
  certs->stop();  // the hook's records are read below without the API's lock
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
  EXPECT_EQ(most_cas, 2u);  // old + new were published together
  const std::string new_ca = field(secret(), "ca.crt");
  const std::string leaf = field(secret(), "tls.crt");
  expect_verifies_for_all_names(leaf, new_ca, clock->wall());
  EXPECT_FALSE(tls::verifies(leaf, first_ca, names.front(), clock->wall()));
  EXPECT_TRUE(tls::key_matches_certificate(new_ca, field(secret(), "ca.key")));
  EXPECT_GE(leaves_seen.size(), 3u);  // first, renewed, switched to the new CA
  EXPECT_EQ(certs->stats().ca_rotations, 1u);
}

TEST_F(SelfManagedCertificatesTest, TheOldCaStaysWhileAReadyReplicaServesALeafOfItThenLeaves) {
  // Two ready replicas: this one (follows the Secret) and one whose Secret
  // watch lags: it keeps serving the leaf of the old CA after the switch.
  add_configs();
  auto lagging_chain = tls::make_serving_chain({"localhost"}, {}, 1h);
  ASSERT_TRUE(lagging_chain);
  auto lagging = tls::ReloadingTlsContext::from_pem(lagging_chain->cert_pem, lagging_chain->key_pem, {});
  ASSERT_TRUE(lagging);
  const Replica self = listen_with(*serving);
  const Replica behind = listen_with(**lagging);
  api.put(kSlicesPath, endpoint_slice("gate-svc-a", self.port));
  api.put(kSlicesPath, endpoint_slice("gate-svc-b", behind.port));
  std::mutex log_mu;
  std::vector<std::string> logs;
  auto o = options();
  o.ca_validity = 90s;
  o.cert_validity = 60s;
  o.rotation_grace = 3s;
  o.log = [&](std::string_view, std::string_view m) {
    std::lock_guard lock(log_mu);
    logs.emplace_back(m);
  };
  auto certs = make(o);
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  auto ca_count = [&] {
    auto cas = tls::read_certificate_bundle(field(secret(), "ca.crt"));
    return cas ? cas->size() : 0u;
  };
  // Step the clock until the leaf is switched to the new CA; the lagging
  // replica follows the Secret until the new CA has joined ca.crt.
  bool switched = false;
  std::string old_ca;
  for (int step = 0; step < 200 && !switched; ++step) {
    clock->advance(1s);
    ASSERT_TRUE(passes(*certs, 2));
    if (ca_count() == 1) {
      ASSERT_TRUE((*lagging)->replace_pem(field(secret(), "tls.crt"), field(secret(), "tls.key")));
      continue;
    }
    auto cas = tls::read_certificate_bundle(field(secret(), "ca.crt"));
    ASSERT_TRUE(cas);
    old_ca = cas->front().pem;
    switched = !tls::verifies(field(secret(), "tls.crt"), old_ca, names.front(), clock->wall());
  }
  ASSERT_TRUE(switched);
  ASSERT_TRUE(eventually([&] { return serving->certificate_pem() == field(secret(), "tls.crt"); }));
  ASSERT_TRUE(tls::verifies((*lagging)->certificate_pem(), old_ca, names.front(), clock->wall()));
  // Passes go by (the clock too, within both CAs' lifetimes): the old CA stays.
  for (int i = 0; i < 3; ++i) {
    clock->advance(1s);
    ASSERT_TRUE(passes(*certs, 3));
    EXPECT_EQ(ca_count(), 2u);
  }
  EXPECT_TRUE(api.wait_for([&] { return published_locked(); }));
  {
    std::lock_guard lock(log_mu);
    EXPECT_TRUE(std::any_of(logs.begin(), logs.end(), [](const std::string& m) {
      return m.find("the old CA stays in ca.crt until every ready replica serves a leaf of the new one") !=
             std::string::npos;
    }));
  }
  // The lagging replica catches up: the old CA leaves, from ca.crt and every caBundle.
  ASSERT_TRUE((*lagging)->replace_pem(field(secret(), "tls.crt"), field(secret(), "tls.key")));
  ASSERT_TRUE(api.wait_for([&] {
    auto s = find(kSecretsPath, kSecret);
    auto cas = s ? tls::read_certificate_bundle(unb64((*s)["data"]["ca.crt"])) : Result<std::vector<tls::CertificateInfo>>(fail("none"));
    return cas && cas->size() == 1 && published_locked();
  }));
  EXPECT_FALSE(tls::verifies(field(secret(), "tls.crt"), old_ca, names.front(), clock->wall()));
  certs->stop();
}

TEST_F(SelfManagedCertificatesTest, AFewSecondsLifetimeIsRenewedOnTheRealClock) {
  // No fake clock and the default 5 s re-check: the renewal (2 s into a 3 s
  // lifetime) must come from the schedule, not from the poll.
  add_configs();
  auto o = options();
  o.clock = Clock::steady();
  o.recheck_interval = std::chrono::seconds(5);
  o.cert_validity = 3s;
  o.ca_validity = 600s;
  auto certs = make(o);
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  const std::string first = field(secret(), "tls.crt");
  ASSERT_TRUE(api.wait_for([&] {
    auto s = find(kSecretsPath, kSecret);
    return s && unb64((*s)["data"]["tls.crt"]) != first;
  }));
  const std::string renewed = field(secret(), "tls.crt");
  expect_verifies_for_all_names(renewed, field(secret(), "ca.crt"), std::chrono::system_clock::now());
  ASSERT_TRUE(eventually([&] { return serving->certificate_pem() == renewed; }));
}

TEST_F(SelfManagedCertificatesTest, AnEditedCaBundleIsRestored) {
  add_configs();
  auto certs = make(options());
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  // The bootstrap's five repairs are counted just after their patches answer.
  ASSERT_TRUE(eventually([&] { return certs->stats().bundle_repairs >= 5; }));
  const auto repairs = certs->stats().bundle_repairs;
  ASSERT_EQ(repairs, 5u);
  ASSERT_TRUE(api.patch(kube::object_path(kube::kMutatingWebhookConfigurations, "", kConfig), kube::PatchType::Merge,
                        json::parse(R"({"webhooks":[{"name":"mutate.pods","clientConfig":{"caBundle":"Zm9v"}},
                                                     {"name":"mutate.other","clientConfig":{}}]})")));
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  ASSERT_TRUE(eventually([&] { return certs->stats().bundle_repairs >= repairs + 2; }));
  EXPECT_EQ(certs->stats().bundle_repairs, repairs + 2);
  std::string text;
  prometheus::TextWriter w(text);
  certs->write_metrics(w);
  EXPECT_NE(text.find("isolation_gate_ca_bundle_repairs_total " + std::to_string(repairs + 2)), std::string::npos);
}

TEST_F(SelfManagedCertificatesTest, AMissingConfigurationIsWaitedForThenFilled) {
  api.put(kValidatingPath, webhook_config("ValidatingWebhookConfiguration", {"validate.pods"}));
  std::mutex log_mu;
  int waiting_logs = 0;
  auto o = options();
  o.log = [&](std::string_view, std::string_view m) {
    if (m.find("waiting for the MutatingWebhookConfiguration") != std::string_view::npos) {
      std::lock_guard lock(log_mu);
      ++waiting_logs;
    }
  };
  auto certs = make(o);
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  ASSERT_TRUE(passes(*certs, 5));
  {
    std::lock_guard lock(log_mu);
    EXPECT_EQ(waiting_logs, 1);
  }
  EXPECT_EQ(certs->stats().errors, 0u);
  api.put(kMutatingPath, webhook_config("MutatingWebhookConfiguration", {"mutate.pods"}));
  ASSERT_TRUE(api.wait_for([&] {
    auto b = ca_bundles(find(kMutatingPath, kConfig));
    return !b.empty() && !b[0].empty() && published_locked();
  }));
}

TEST_F(SelfManagedCertificatesTest, ANonLeaderHotReloadsTheSecretsCertificate) {
  add_configs();
  auto chain = tls::make_serving_chain(names, {}, 1h);
  ASSERT_TRUE(chain);
  auto secret_of = [](const tls::CertificateBundle& b) {
    return json{{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", {{"name", kSecret}, {"namespace", kNs}}},
                {"type", "kubernetes.io/tls"},
                {"data",
                 {{"tls.crt", b64(b.cert_pem)},
                  {"tls.key", b64(b.key_pem)},
                  {"ca.crt", b64(b.ca_cert_pem)},
                  {"ca.key", b64(b.ca_key_pem)}}}};
  };
  api.put(kSecretsPath, secret_of(*chain));
  // Another Secret in the namespace is not looked at.
  api.put(kSecretsPath, json{{"metadata", {{"name", "other"}, {"namespace", kNs}}}, {"data", json::object()}});
  auto certs = make(options());
  certs->start();
  ASSERT_TRUE(eventually([&] { return certs->loaded(); }));
  EXPECT_EQ(serving->certificate_pem(), chain->cert_pem);
  const auto reloads = serving->reload_count();

  auto renewed = tls::make_serving_certificate(chain->ca_cert_pem, chain->ca_key_pem, names, {}, 1h);
  ASSERT_TRUE(renewed);
  api.put(kSecretsPath, secret_of(*renewed));
  ASSERT_TRUE(eventually([&] { return serving->certificate_pem() == renewed->cert_pem; }));
  EXPECT_EQ(serving->reload_count(), reloads + 1);

  // A pair that does not match keeps the current certificate.
  auto broken = *renewed;
  broken.key_pem = chain->key_pem;
  api.put(kSecretsPath, secret_of(broken));
  ASSERT_TRUE(eventually([&] { return certs->stats().errors >= 1; }));
  EXPECT_EQ(serving->certificate_pem(), renewed->cert_pem);
  EXPECT_FALSE(certs->leading());
  EXPECT_EQ(write_count("update secrets"), 0);
  EXPECT_EQ(write_count("patch mutatingwebhookconfigurations"), 0);
  EXPECT_EQ(certs->stats().leader_passes, 0u);
  certs->stop();
}

TEST_F(SelfManagedCertificatesTest, StopLeadingJoinsAndLeadingAgainResumes) {
  add_configs();
  auto certs = make(options());
  certs->start();
  certs->start_leading();
  ASSERT_TRUE(api.wait_for([&] { return published_locked(); }));
  ASSERT_TRUE(eventually([&] { return certs->loaded(); }));
  certs->stop_leading();
  EXPECT_FALSE(certs->leading());
  const auto passes_after_stop = certs->stats().leader_passes;
  EXPECT_TRUE(certs->loaded());  // still serving: only the writes stopped
  certs->start_leading();
  ASSERT_TRUE(passes(*certs, 2));
  EXPECT_GT(certs->stats().leader_passes, passes_after_stop);
  EXPECT_EQ(write_count("create secrets"), 1);
}

// Through reconcile(): the engine's view of the pass (what it returns is the
// requeue, the error and the fence the engine acts on).

TEST_F(SelfManagedCertificatesTest, ReconcileRenewsBeforeExpiryAndRequeuesForIt) {
  add_configs();
  auto o = options();
  o.cert_validity = 30s;
  o.recheck_interval = 1h;
  auto certs = make(o);
  certs->start();
  certs->begin_term();
  Result<runtime::Requeue> r = runtime::Requeue{};
  ASSERT_TRUE(reconcile_until(*certs, [&] { return published_locked(); }, &r));
  const std::string first = field(secret(), "tls.crt");
  // The timed step: due by two thirds of the lifetime (20 s), long before the re-check.
  r = certs->reconcile(std::string(SelfManagedCertificates::kKey), {});
  ASSERT_TRUE(r);
  EXPECT_LE(r->after, 20s);
  EXPECT_GT(r->after, 0s);
  clock->advance(19s);
  ASSERT_TRUE(certs->reconcile(std::string(SelfManagedCertificates::kKey), {}));
  EXPECT_EQ(field(secret(), "tls.crt"), first);
  clock->advance(2s);
  ASSERT_TRUE(certs->reconcile(std::string(SelfManagedCertificates::kKey), {}));
  const std::string renewed = field(secret(), "tls.crt");
  EXPECT_NE(renewed, first);
  expect_verifies_for_all_names(renewed, field(secret(), "ca.crt"), clock->wall());
  EXPECT_EQ(certs->stats().leaf_rotations, 1u);
  certs->end_term();
  certs->stop();
}

TEST_F(SelfManagedCertificatesTest, ReconcileKeepsTheOldCaWhileAReplicaServesItsLeaf) {
  add_configs();
  auto lagging_chain = tls::make_serving_chain({"localhost"}, {}, 1h);
  ASSERT_TRUE(lagging_chain);
  auto lagging = tls::ReloadingTlsContext::from_pem(lagging_chain->cert_pem, lagging_chain->key_pem, {});
  ASSERT_TRUE(lagging);
  const Replica self = listen_with(*serving);
  const Replica behind = listen_with(**lagging);
  api.put(kSlicesPath, endpoint_slice("gate-svc-a", self.port));
  api.put(kSlicesPath, endpoint_slice("gate-svc-b", behind.port));
  auto o = options();
  o.ca_validity = 90s;
  o.cert_validity = 60s;
  o.rotation_grace = 3s;
  auto certs = make(o);
  certs->start();
  certs->begin_term();
  ASSERT_TRUE(reconcile_until(*certs, [&] { return published_locked(); }));
  auto ca_count = [&] {
    auto cas = tls::read_certificate_bundle(field(secret(), "ca.crt"));
    return cas ? cas->size() : 0u;
  };
  auto pass = [&] { return certs->reconcile(std::string(SelfManagedCertificates::kKey), {}); };
  bool switched = false;
  std::string old_ca;
  for (int step = 0; step < 200 && !switched; ++step) {
    clock->advance(1s);
    ASSERT_TRUE(pass());
    ASSERT_TRUE(eventually([&] { return serving->certificate_pem() == field(secret(), "tls.crt"); }));
    if (ca_count() == 1) {
      ASSERT_TRUE((*lagging)->replace_pem(field(secret(), "tls.crt"), field(secret(), "tls.key")));
      continue;
    }
    auto cas = tls::read_certificate_bundle(field(secret(), "ca.crt"));
    ASSERT_TRUE(cas);
    old_ca = cas->front().pem;
    switched = !tls::verifies(field(secret(), "tls.crt"), old_ca, names.front(), clock->wall());
  }
  ASSERT_TRUE(switched);
  ASSERT_TRUE(tls::verifies((*lagging)->certificate_pem(), old_ca, names.front(), clock->wall()));
  for (int i = 0; i < 3; ++i) {
    clock->advance(1s);
    auto r = pass();
    ASSERT_TRUE(r);
    EXPECT_LE(r->after, o.recheck_interval);  // the observe step comes again
    EXPECT_EQ(ca_count(), 2u);
  }
  ASSERT_TRUE((*lagging)->replace_pem(field(secret(), "tls.crt"), field(secret(), "tls.key")));
  ASSERT_TRUE(reconcile_until(*certs, [&] { return ca_count() == 1 && published_locked(); }));
  EXPECT_FALSE(tls::verifies(field(secret(), "tls.crt"), old_ca, names.front(), clock->wall()));
  certs->end_term();
  certs->stop();
}

TEST_F(SelfManagedCertificatesTest, AFailedWriteIsAnErrorForTheEnginesBackoffThenWritten) {
  add_configs();
  failures_to_inject = 1;
  auto certs = make(options());
  certs->start();
  certs->begin_term();
  Result<runtime::Requeue> r = runtime::Requeue{};
  ASSERT_TRUE(reconcile_until(*certs, [&] { return write_count("create secrets") >= 1; }, &r));
  ASSERT_FALSE(r);  // the engine retries it with the key's backoff
  EXPECT_NE(r.error().find("writing the Secret"), std::string::npos) << r.error();
  EXPECT_FALSE(secret());
  EXPECT_GE(certs->stats().errors, 1u);
  EXPECT_NE(r.error().find("500"), std::string::npos);
  r = certs->reconcile(std::string(SelfManagedCertificates::kKey), {});
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(secret());
  EXPECT_EQ(write_count("create secrets"), 2);  // the failed one, then the one written
  EXPECT_EQ(write_count("update secrets"), 0);
  certs->end_term();
  certs->stop();
}

TEST_F(SelfManagedCertificatesTest, NothingIsWrittenOnceTheCancelTokenIsStopped) {
  add_configs();
  // The chart's pre-created Secret, empty: seeing it means the watch has listed.
  api.put(kSecretsPath, {{"apiVersion", "v1"},
                         {"kind", "Secret"},
                         {"metadata", {{"name", kSecret}, {"namespace", kNs}}},
                         {"type", "kubernetes.io/tls"}});
  auto certs = make(options());
  certs->start();
  ASSERT_TRUE(api.wait_actions(1, "watch", kSecretsPath));  // listed: the watch follows the list
  certs->begin_term();
  std::stop_source lost;
  lost.request_stop();
  for (int i = 0; i < 5; ++i) {
    auto r = certs->reconcile(std::string(SelfManagedCertificates::kKey), lost.get_token());
    EXPECT_TRUE(r);
  }
  EXPECT_EQ(write_count("update secrets") + write_count("create secrets"), 0);
  EXPECT_EQ(write_count("patch mutatingwebhookconfigurations") +
                write_count("patch validatingwebhookconfigurations"),
            0);
  // Not cancelled: the same pass writes.
  ASSERT_TRUE(reconcile_until(*certs, [&] { return published_locked(); }));
  EXPECT_GE(write_count("update secrets"), 1);
  certs->end_term();
  certs->stop();
}

}  // namespace
}  // namespace ig::controller
