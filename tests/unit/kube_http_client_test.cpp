// The cpprestsdk API client (kube/http_client.h) against the test API server
// (tests/apiserver/fake_apiserver.py, run as a subprocess over real TLS and
// steered through its control API): GET, LIST pages, errors with the Status
// and Retry-After, CREATE, merge/JSON patch and /status, WATCH under awkward
// chunking and dropped connections, token rotation, User-Agent, the cluster
// CA as the only trust, host name checks, deadlines and stop().
//
// Every wait is bounded: a call that hangs fails its test (and is unblocked
// with stop() or by its own deadline), never the whole run.
#include "kube/http_client.h"

#include "apiserver_test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kube/reflector.h"
#include "kube/resources.h"
#include "kube/store.h"
#include "tls/certificates.h"


namespace ig::kube {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using nlohmann::json;

#ifndef IG_SOURCE_DIR
#error "IG_SOURCE_DIR must name the source tree"
#endif

constexpr const char* kVersion = "0.1.0";
constexpr Resource kComponents{"gibson.zeroroot.ai", "v1alpha1", "components", "Component", true};

void write_atomically(const std::string& path, const std::string& text) {
  auto ok = tls::write_file_atomically(path, text, 0600);
  ASSERT_TRUE(ok) << ok.error();
}

using test_support::FakeApiServer;

// --- the fixture ----------------------------------------------------------------

class KubeHttpClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/kube_http_client_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    auto chain = tls::make_serving_chain({"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
    ASSERT_TRUE(chain) << chain.error();
    chain_ = new tls::CertificateBundle(*chain);
    token_file_ = new std::string(*dir_ + "/token");
    std::ofstream(*token_file_) << "token-1\n";
    std::string error;
    server_ = FakeApiServer::start(*dir_, chain_->cert_pem, chain_->key_pem, *token_file_, &error).release();
    ASSERT_NE(server_, nullptr) << error;
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete chain_;
    delete token_file_;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the test API server did not start";
    server().control("reset_faults");
    server().control("set_bookmark_interval", {{"seconds", 0.2}});
    ns_ = "t" + std::to_string(++counter_);
  }

  static FakeApiServer& server() { return *server_; }

  ClusterConfig config() const {
    ClusterConfig c;
    c.server = server_->url();
    c.ca_pem = chain_->ca_cert_pem;
    c.token_file = *token_file_;
    return c;
  }

  static HttpClientOptions fast_options() {
    HttpClientOptions o;
    o.qps = 1000;
    o.burst = 1000;
    o.request_timeout = 10s;
    return o;
  }

  std::unique_ptr<HttpClient> client(HttpClientOptions o = fast_options()) const {
    auto c = HttpClient::make(config(), kVersion, std::move(o));
    EXPECT_TRUE(c) << c.error();
    return c ? std::move(*c) : nullptr;
  }

  static json component(const std::string& name, const std::string& ns, json spec = json::object()) {
    return {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
            {"kind", "Component"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", std::move(spec)}};
  }

  void backdoor_create(const std::string& resource, const json& obj, const std::string& ns = "") {
    json args = {{"resource", resource}, {"obj", obj}};
    if (!ns.empty()) args["namespace"] = ns;
    server().control("create", args);
  }

  std::string components() const { return collection_path(kComponents, ns_); }

  // next() on another thread, bounded; a hang stops the stream and fails.
  static ApiResult<std::optional<WatchEvent>> bounded_next(WatchStream& s, std::chrono::seconds bound = 10s) {
    auto f = std::async(std::launch::async, [&] { return s.next(); });
    if (f.wait_for(bound) != std::future_status::ready) {
      ADD_FAILURE() << "next() did not return within " << bound.count() << " s";
      s.stop();
    }
    return f.get();
  }

  // The next event that is not a BOOKMARK.
  static ApiResult<std::optional<WatchEvent>> next_data(WatchStream& s) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      auto e = bounded_next(s);
      if (!e || !e->has_value() || (*e)->type != WatchEvent::Type::Bookmark) return e;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "only bookmarks for 20 s";
        return e;
      }
    }
  }

  static inline std::string* dir_ = nullptr;
  static inline tls::CertificateBundle* chain_ = nullptr;
  static inline std::string* token_file_ = nullptr;
  static inline FakeApiServer* server_ = nullptr;
  static inline int counter_ = 0;
  std::string ns_;
};

// --- GET, User-Agent, token ------------------------------------------------------

TEST_F(KubeHttpClientTest, GetSendsUserAgentAndToken) {
  backdoor_create("nodes", {{"metadata", {{"name", "get-" + ns_}}}});
  auto c = client();
  ASSERT_TRUE(c);
  const int mark = server().control("request_mark").get<int>();
  auto node = c->get(object_path(kNodes, "", "get-" + ns_), 5000ms);
  ASSERT_TRUE(node) << node.error();
  EXPECT_EQ((*node)["metadata"]["name"], "get-" + ns_);
  EXPECT_FALSE((*node)["metadata"]["resourceVersion"].get<std::string>().empty());
  const json seen = server().control("requests", {{"since", mark}, {"path", "^/api/v1/nodes/get-"}});
  ASSERT_EQ(seen.size(), 1u) << seen.dump();
  EXPECT_EQ(seen[0]["user_agent"], "isolation-gate/0.1.0");
  EXPECT_EQ(seen[0]["authorization"], "Bearer token-1");
  EXPECT_EQ(seen[0]["status"], 200);
}

// --- LIST --------------------------------------------------------------------------

TEST_F(KubeHttpClientTest, ListPaginatesWithContinueAndEncodesSelectors) {
  for (int i = 0; i < 5; ++i) {
    json obj = component("c" + std::to_string(i), ns_);
    obj["metadata"]["labels"] = {{"tier", i % 2 == 0 ? "a" : "b"}};
    backdoor_create("components", obj, ns_);
  }
  auto c = client();
  ASSERT_TRUE(c);
  ListOptions o;
  o.limit = 2;
  std::vector<std::string> names;
  std::string rv;
  int pages = 0;
  do {
    auto page = c->list(components(), o);
    ASSERT_TRUE(page) << page.error();
    ++pages;
    for (const json& item : page->items) names.push_back(item["metadata"]["name"]);
    if (rv.empty()) rv = page->resource_version;
    EXPECT_EQ(page->resource_version, rv);  // one snapshot across pages
    o.continue_token = page->continue_token;  // opaque, contains '+': must be URL-encoded
    ASSERT_LT(pages, 10);
  } while (!o.continue_token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"c0", "c1", "c2", "c3", "c4"}));

  ListOptions sel;
  sel.label_selector = "tier in (b, x)";
  auto page = c->list(components(), sel);
  ASSERT_TRUE(page) << page.error();
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_EQ(page->items[0]["metadata"]["name"], "c1");
  EXPECT_EQ(page->continue_token, "");
}

TEST_F(KubeHttpClientTest, QueriesAreEncoded) {
  auto c = client();
  ASSERT_TRUE(c);
  const int mark = server().control("request_mark").get<int>();
  ListOptions o;
  o.limit = 10;
  o.continue_token = "a+b/c=";
  o.label_selector = "app=x,tier in (a,b)";
  (void)c->list(components(), o);  // only the query the server saw matters here
  WatchOptions w;
  w.resource_version = "42";
  w.timeout = 300s;
  if (auto stream = c->watch(components(), w)) (*stream)->stop();
  const json seen = server().control("requests", {{"since", mark}, {"path", "/namespaces/" + ns_ + "/components$"}});
  ASSERT_EQ(seen.size(), 2u) << seen.dump();
  EXPECT_EQ(seen[0]["query_string"], "limit=10&continue=a%2Bb%2Fc%3D&labelSelector=app%3Dx%2Ctier%20in%20%28a%2Cb%29");
  EXPECT_EQ(seen[1]["query_string"], "watch=true&resourceVersion=42&allowWatchBookmarks=true&timeoutSeconds=300");
}

// --- errors ------------------------------------------------------------------------

TEST_F(KubeHttpClientTest, ErrorsCarryTheStatus) {
  auto c = client();
  ASSERT_TRUE(c);
  // 404 from the server's own Status.
  auto missing = c->get("/api/v1/nodes/absent-" + ns_, 5000ms);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.failure().code, 404);
  EXPECT_TRUE(missing.failure().not_found());
  EXPECT_EQ(missing.failure().reason, "NotFound");
  EXPECT_EQ(missing.error(), "GET /api/v1/nodes/absent-" + ns_ + ": 404 NotFound: nodes \"absent-" + ns_ +
                                 "\" not found");
  EXPECT_FALSE(missing.failure().retriable());

  // 409: create what exists.
  ASSERT_TRUE(c->create(components(), component("dup", ns_)));
  auto dup = c->create(components(), component("dup", ns_));
  ASSERT_FALSE(dup);
  EXPECT_TRUE(dup.failure().conflict());
  EXPECT_EQ(dup.failure().reason, "AlreadyExists");
  EXPECT_EQ(dup.error().rfind("CREATE " + components() + ": 409 AlreadyExists: ", 0), 0u) << dup.error();

  // 410 on a LIST.
  server().control("inject_fault", {{"status", 410}, {"path", "/namespaces/" + ns_ + "/components$"},
                                    {"message", "The resourceVersion for the provided list is too old."}});
  auto gone = c->list(components(), {});
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.failure().gone());
  EXPECT_EQ(gone.error(), "LIST " + components() + ": 410 Expired: The resourceVersion for the provided list is too old.");

  // 429 and 503 with Retry-After; 500 retriable without.
  server().control("inject_fault", {{"status", 429}, {"path", "/nodes/x429$"}, {"retry_after", 7}});
  auto busy = c->get("/api/v1/nodes/x429", 5000ms);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.failure().code, 429);
  EXPECT_EQ(busy.failure().reason, "TooManyRequests");
  EXPECT_EQ(busy.failure().retry_after, 7s);
  EXPECT_TRUE(busy.failure().retriable());
  server().control("inject_fault", {{"status", 503}, {"path", "/nodes/x503$"}, {"retry_after", 3}});
  auto unavailable = c->get("/api/v1/nodes/x503", 5000ms);
  ASSERT_FALSE(unavailable);
  EXPECT_EQ(unavailable.failure().code, 503);
  EXPECT_EQ(unavailable.failure().retry_after, 3s);
  server().control("inject_fault", {{"status", 500}, {"path", "/nodes/x500$"}});
  auto internal = c->get("/api/v1/nodes/x500", 5000ms);
  ASSERT_FALSE(internal);
  EXPECT_EQ(internal.failure().code, 500);
  EXPECT_EQ(internal.failure().retry_after, 0s);
  EXPECT_TRUE(internal.failure().retriable());
  EXPECT_EQ(internal.error(), "GET /api/v1/nodes/x500: 500 InternalError: Internal error occurred: injected fault");

  // 403 from a fault: not retried, no token re-read loop.
  server().control("inject_fault", {{"status", 403}, {"path", "/nodes/x403$"}});
  auto forbidden = c->get("/api/v1/nodes/x403", 5000ms);
  ASSERT_FALSE(forbidden);
  EXPECT_EQ(forbidden.failure().code, 403);
  EXPECT_EQ(forbidden.failure().reason, "Forbidden");
}

TEST_F(KubeHttpClientTest, ClosedWithoutAnAnswerIsCodeZero) {
  auto c = client();
  ASSERT_TRUE(c);
  server().control("inject_fault", {{"status", "close"}, {"path", "/nodes/closed$"}});
  auto r = c->get("/api/v1/nodes/closed", 5000ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, 0);
  EXPECT_FALSE(r.failure().refused);
  EXPECT_TRUE(r.failure().retriable());
  EXPECT_EQ(r.error().rfind("GET /api/v1/nodes/closed: ", 0), 0u) << r.error();
}

TEST_F(KubeHttpClientTest, ConnectionRefusedIsCodeZero) {
  ClusterConfig cfg = config();
  cfg.server = "https://127.0.0.1:1";
  auto c = HttpClient::make(cfg, kVersion, fast_options());
  ASSERT_TRUE(c) << c.error();
  auto r = (*c)->get("/api/v1/nodes", 5000ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, 0);
  EXPECT_TRUE(r.failure().refused) << r.error();  // the reflector watches again rather than relisting
  EXPECT_EQ(r.error().rfind("GET /api/v1/nodes: no answer from https://127.0.0.1:1: ", 0), 0u) << r.error();
}

TEST_F(KubeHttpClientTest, DeadlineBoundsASlowAnswer) {
  auto c = client();
  ASSERT_TRUE(c);
  server().control("add_delay", {{"seconds", 5}, {"path", "/nodes/slow$"}});
  const auto start = std::chrono::steady_clock::now();
  auto r = c->get("/api/v1/nodes/slow", 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, 0);
  EXPECT_NE(r.error().find("timed out"), std::string::npos) << r.error();
  EXPECT_LT(took, 4s);  // the 5 s delay was not waited for
  server().control("clear_delays");
  // The client still works after a cancelled request.
  auto after = c->get("/api/v1/nodes/absent", 5000ms);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.failure().code, 404) << after.error();
}

// --- CREATE and PATCH ----------------------------------------------------------------

TEST_F(KubeHttpClientTest, CreateAndPatches) {
  auto c = client();
  ASSERT_TRUE(c);
  auto created = c->create(components(), component("p", ns_, {{"kind", "tool"}, {"image", "a"}}));
  ASSERT_TRUE(created) << created.error();
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());
  const std::string path = object_path(kComponents, ns_, "p");

  auto merged = c->patch(path, PatchType::Merge, {{"spec", {{"image", "b"}}}});
  ASSERT_TRUE(merged) << merged.error();
  EXPECT_EQ((*merged)["spec"]["image"], "b");
  EXPECT_EQ((*merged)["spec"]["kind"], "tool");

  auto patched = c->patch(path, PatchType::Json,
                          json::array({{{"op", "add"}, {"path", "/metadata/labels"}, {"value", {{"x", "y"}}}},
                                       {{"op", "replace"}, {"path", "/spec/image"}, {"value", "c"}}}));
  ASSERT_TRUE(patched) << patched.error();
  EXPECT_EQ((*patched)["metadata"]["labels"]["x"], "y");
  EXPECT_EQ((*patched)["spec"]["image"], "c");

  // The status subresource changes only .status.
  auto status = c->patch(object_path(kComponents, ns_, "p", "status"), PatchType::Merge,
                         {{"status", {{"phase", "Ready"}}}, {"spec", {{"image", "ignored"}}}});
  ASSERT_TRUE(status) << status.error();
  EXPECT_EQ((*status)["status"]["phase"], "Ready");
  EXPECT_EQ((*status)["spec"]["image"], "c");
  auto got = c->get(path, 5000ms);
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)["status"]["phase"], "Ready");

  // A failed JSON patch test is the server's 422.
  auto failed = c->patch(path, PatchType::Json,
                         json::array({{{"op", "test"}, {"path", "/spec/image"}, {"value", "zzz"}}}));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.failure().code, 422);
  EXPECT_EQ(failed.failure().reason, "Invalid");

  // The Content-Types the server saw.
  const json seen = server().control("requests", {{"method", "PATCH"}, {"path", "/namespaces/" + ns_ + "/"}});
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0]["headers"]["Content-Type"], "application/merge-patch+json");
  EXPECT_EQ(seen[1]["headers"]["Content-Type"], "application/json-patch+json");
}

// Server-side apply: the field manager and force in the query, the apply
// Content-Type, the server's merge per list key, and its 409 answered as an
// ApiError with the Status (a conflict without force).
TEST_F(KubeHttpClientTest, ServerSideApply) {
  auto c = client();
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->create(components(), component("s", ns_, {{"kind", "tool"}})));
  const std::string status = object_path(kComponents, ns_, "s", "status");
  auto condition = [](const char* type, const char* value) {
    return json{{"type", type}, {"status", value}, {"reason", "R"}, {"message", "m"},
                {"lastTransitionTime", "2026-01-01T00:00:00Z"}};
  };
  auto config = [&](json status_fields) {
    return json{{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
                {"kind", "Component"},
                {"metadata", {{"name", "s"}, {"namespace", ns_}}},
                {"status", std::move(status_fields)}};
  };
  auto mine = c->apply(status, config({{"isolation", "Deny"}, {"conditions", {condition("Admitted", "True")}}}),
                       "isolation-gate", true, 5000ms);
  ASSERT_TRUE(mine) << mine.error();
  auto theirs = c->apply(status, config({{"conditions", {condition("Other", "True")}}}), "someone-else", false,
                         5000ms);
  ASSERT_TRUE(theirs) << theirs.error();
  ASSERT_EQ((*theirs)["status"]["conditions"].size(), 2u);  // merged per type

  auto conflict = c->apply(status, config({{"isolation", "AllowInProcess"}}), "someone-else", false, 5000ms);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.failure().code, 409);
  EXPECT_EQ(conflict.failure().reason, "Conflict");
  EXPECT_NE(conflict.error().find("APPLY " + status + ": 409 Conflict: Apply failed with 1 conflict"),
            std::string::npos)
      << conflict.error();

  const json seen = server().control("requests", {{"method", "PATCH"}, {"path", "/namespaces/" + ns_ + "/"}});
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0]["headers"]["Content-Type"], "application/apply-patch+yaml");
  EXPECT_EQ(seen[0]["query_string"], "fieldManager=isolation-gate&force=true");
  EXPECT_EQ(seen[1]["query_string"], "fieldManager=someone-else");
}

TEST_F(KubeHttpClientTest, UpdateIsConditionalOnTheResourceVersion) {
  auto c = client();
  ASSERT_TRUE(c);
  auto created = c->create(components(), component("u", ns_, {{"kind", "tool"}, {"image", "a"}}));
  ASSERT_TRUE(created) << created.error();
  const std::string path = object_path(kComponents, ns_, "u");

  json next = *created;
  next["spec"]["image"] = "b";
  auto updated = c->update(path, next, 5000ms);
  ASSERT_TRUE(updated) << updated.error();
  EXPECT_EQ((*updated)["spec"]["image"], "b");
  EXPECT_NE((*updated)["metadata"]["resourceVersion"], (*created)["metadata"]["resourceVersion"]);

  // The same body again carries the old resourceVersion: 409, nothing written.
  next["spec"]["image"] = "c";
  auto stale = c->update(path, next, 5000ms);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.failure().code, 409);
  EXPECT_TRUE(stale.failure().conflict());
  auto got = c->get(path, 5000ms);
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)["spec"]["image"], "b");

  const json seen = server().control("requests", {{"method", "PUT"}, {"path", "/namespaces/" + ns_ + "/"}});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0]["headers"]["Content-Type"], "application/json");
}

// --- WATCH -----------------------------------------------------------------------------

TEST_F(KubeHttpClientTest, WatchDecodesEventsUnderAwkwardChunking) {
  auto c = client();
  ASSERT_TRUE(c);
  auto page = c->list(components(), {});
  ASSERT_TRUE(page) << page.error();
  server().control("set_watch_chunking", {{"mode", "random"}, {"seed", 7}, {"max_chunk", 5}});
  WatchOptions w;
  w.resource_version = page->resource_version;
  w.timeout = 60s;
  auto stream = c->watch(components(), w);
  ASSERT_TRUE(stream) << stream.error();
  // The watch request carried the options.
  const json req = server().control(
      "wait_for_request", {{"watch", true}, {"path", "/namespaces/" + ns_ + "/components$"}, {"timeout", 5}});
  EXPECT_EQ(req["query"]["allowWatchBookmarks"], "true") << req.dump();
  EXPECT_EQ(req["query"]["resourceVersion"], page->resource_version);
  EXPECT_EQ(req["query"]["timeoutSeconds"], "60");
  EXPECT_EQ(req["user_agent"], "isolation-gate/0.1.0");

  backdoor_create("components", component("w1", ns_), ns_);
  const std::string big(1u << 20, 'z');
  backdoor_create("components", component("w2", ns_, {{"blob", big}}), ns_);
  server().control("patch", {{"resource", "components"}, {"name", "w1"}, {"namespace", ns_},
                             {"patch", {{"spec", {{"x", "é€𝄞"}}}}}});
  server().control("delete", {{"resource", "components"}, {"name", "w1"}, {"namespace", ns_}});

  auto e1 = next_data(**stream);
  ASSERT_TRUE(e1) << e1.error();
  ASSERT_TRUE(e1->has_value());
  EXPECT_EQ((*e1)->type, WatchEvent::Type::Added);
  EXPECT_EQ((*e1)->object["metadata"]["name"], "w1");
  auto e2 = next_data(**stream);
  ASSERT_TRUE(e2 && e2->has_value()) << (e2 ? "end" : e2.error());
  EXPECT_EQ((*e2)->object["spec"]["blob"].get<std::string>().size(), big.size());
  auto e3 = next_data(**stream);
  ASSERT_TRUE(e3 && e3->has_value());
  EXPECT_EQ((*e3)->type, WatchEvent::Type::Modified);
  EXPECT_EQ((*e3)->object["spec"]["x"], "é€𝄞");
  auto e4 = next_data(**stream);
  ASSERT_TRUE(e4 && e4->has_value());
  EXPECT_EQ((*e4)->type, WatchEvent::Type::Deleted);
}

TEST_F(KubeHttpClientTest, WatchBookmarksAndCleanEnd) {
  auto c = client();
  ASSERT_TRUE(c);
  server().control("set_watch_chunking", {{"mode", "byte"}});
  WatchOptions w;
  w.timeout = 1s;  // the server ends the stream after 1 s, with a final bookmark
  auto stream = c->watch(components(), w);
  ASSERT_TRUE(stream) << stream.error();
  bool bookmark = false;
  for (int i = 0; i < 100; ++i) {
    auto e = bounded_next(**stream);
    ASSERT_TRUE(e) << e.error();
    if (!e->has_value()) break;
    if ((*e)->type == WatchEvent::Type::Bookmark) {
      bookmark = true;
      EXPECT_FALSE((*e)->object["metadata"]["resourceVersion"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(bookmark);
  // After the end, next() keeps saying so.
  auto again = bounded_next(**stream);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->has_value());
}

TEST_F(KubeHttpClientTest, WatchExpiredIsAnErrorEventOrA410) {
  auto c = client();
  ASSERT_TRUE(c);
  backdoor_create("components", component("old", ns_), ns_);
  server().control("delete", {{"resource", "components"}, {"name", "old"}, {"namespace", ns_}});
  server().control("compact");
  WatchOptions w;
  w.resource_version = "1";
  auto stream = c->watch(components(), w);
  ASSERT_TRUE(stream) << stream.error();
  auto e = next_data(**stream);
  ASSERT_TRUE(e && e->has_value()) << (e ? "end" : e.error());
  EXPECT_EQ((*e)->type, WatchEvent::Type::Error);
  EXPECT_EQ((*e)->object["code"], 410);
  server().control("set_watch_expired_mode", {{"mode", "http"}});
  auto refused = c->watch(components(), w);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.failure().gone()) << refused.error();
  EXPECT_EQ(refused.error().rfind("WATCH " + components() + ": 410 Expired: too old resource version", 0), 0u)
      << refused.error();
}

TEST_F(KubeHttpClientTest, ASilentWatchIsClosedAfterTheSilenceLimit) {
  auto c = client();
  ASSERT_TRUE(c);
  WatchOptions w;
  w.silence = 500ms;
  auto stream = c->watch(components(), w);
  ASSERT_TRUE(stream) << stream.error();
  server().control("wait_for_watch", {{"resource", "components"}, {"timeout", 5}});
  // The open watch goes silent: not one byte, not even a bookmark (a dead connection).
  server().control("set_watch_silence", {{"resource", "components"}, {"future", false}});
  backdoor_create("components", component("held", ns_), ns_);
  std::optional<ApiError> error;
  for (int i = 0; i < 100 && !error; ++i) {  // bookmarks sent before the silence, then the error
    auto e = bounded_next(**stream);
    if (!e) error = e.failure();
    else ASSERT_TRUE(e->has_value()) << "a silent watch ended as if cleanly";
  }
  server().control("set_watch_silence", {{"resource", "components"}, {"enabled", false}});
  ASSERT_TRUE(error);
  EXPECT_TRUE(error->silent) << error->message;
  EXPECT_EQ(error->code, 0);
  EXPECT_NE(error->message.find("the stream is silent"), std::string::npos) << error->message;
}

TEST_F(KubeHttpClientTest, TooLargeResourceVersionIsFlaggedFromTheStatusCause) {
  auto c = client();
  ASSERT_TRUE(c);
  const auto now = std::stoll(server().control("resource_version").get<std::string>());
  WatchOptions w;
  w.resource_version = std::to_string(now + 1000);  // ahead of the server: it waits, then 504
  auto ahead = c->watch(components(), w);
  ASSERT_FALSE(ahead);
  EXPECT_EQ(ahead.failure().code, 504);
  EXPECT_TRUE(ahead.failure().rv_too_large) << ahead.error();
  server().control("inject_fault", {{"status", 504}, {"path", "/namespaces/" + ns_ + "/components$"}});
  auto timeout = c->list(components(), {});  // a plain 504 Timeout is not "too large"
  ASSERT_FALSE(timeout);
  EXPECT_FALSE(timeout.failure().rv_too_large);
}

TEST_F(KubeHttpClientTest, DroppedWatchIsAnErrorNotAHang) {
  auto c = client();
  ASSERT_TRUE(c);
  for (bool mid_event : {false, true}) {
    SCOPED_TRACE(mid_event ? "mid-event" : "between events");
    auto stream = c->watch(components(), {});
    ASSERT_TRUE(stream) << stream.error();
    server().control("wait_for_watch", {{"resource", "components"}, {"timeout", 5}});
    server().control("drop_watches", {{"resource", "components"}, {"after_events", 1}, {"mid_event", mid_event}});
    const std::string name = std::string("drop-") + (mid_event ? "m" : "b");
    backdoor_create("components", component(name + "1", ns_), ns_);
    backdoor_create("components", component(name + "2", ns_), ns_);
    std::optional<std::string> error;
    for (int i = 0; i < 50 && !error; ++i) {
      auto e = bounded_next(**stream);
      if (!e) {
        error = e.error();
        EXPECT_EQ(e.failure().code, 0);
        EXPECT_TRUE(e.failure().retriable());
        break;
      }
      ASSERT_TRUE(e->has_value()) << "a dropped watch ended as if cleanly";
    }
    ASSERT_TRUE(error);
    EXPECT_EQ(error->rfind("WATCH " + components() + ": ", 0), 0u) << *error;
    // The error is final.
    EXPECT_FALSE(bounded_next(**stream));
  }
}

TEST_F(KubeHttpClientTest, StopEndsABlockedNextPromptly) {
  auto c = client();
  ASSERT_TRUE(c);
  WatchOptions w;
  w.allow_bookmarks = false;
  w.timeout = 600s;
  auto stream = c->watch(components(), w);
  ASSERT_TRUE(stream) << stream.error();
  WatchStream* s = stream->get();
  auto f = std::async(std::launch::async, [s] { return s->next(); });
  // Nothing happens in this namespace: next() blocks.
  EXPECT_EQ(f.wait_for(200ms), std::future_status::timeout);
  const auto start = std::chrono::steady_clock::now();
  s->stop();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  auto r = f.get();
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->has_value());
  // The connection is gone: the server notices when it writes to it (the
  // first write after the close may still succeed; the next fails).
  for (int i = 0; i < 3; ++i) backdoor_create("components", component("after-stop-" + std::to_string(i), ns_), ns_);
  server().control("wait_for_watches_closed", {{"resource", "components"}, {"timeout", 5}});
}

TEST_F(KubeHttpClientTest, StreamOutlivesItsClient) {
  std::unique_ptr<WatchStream> stream;
  {
    auto c = client();
    ASSERT_TRUE(c);
    auto s = c->watch(components(), {});
    ASSERT_TRUE(s) << s.error();
    stream = std::move(*s);
  }
  backdoor_create("components", component("after", ns_), ns_);
  auto e = next_data(*stream);
  ASSERT_TRUE(e && e->has_value()) << (e ? "end" : e.error());
  EXPECT_EQ((*e)->object["metadata"]["name"], "after");
}

// --- the token ---------------------------------------------------------------------------

TEST_F(KubeHttpClientTest, RotatedTokenIsUsedAtOnce) {
  // The clock stands still: the token file's once-a-second re-check never
  // comes, so only the 401 path can pick up the new token (the rate limiter,
  // at 1000 QPS, never waits).
  HttpClientOptions o = fast_options();
  o.clock = std::make_shared<FakeClock>(std::chrono::steady_clock::now());
  auto c = client(o);
  ASSERT_TRUE(c);
  struct Restore {  // the other tests' clients follow the file too (re-read on a 401)
    ~Restore() { (void)tls::write_file_atomically(*token_file_, "token-1\n", 0600); }
  } restore;
  ASSERT_TRUE(c->list(components(), {}));
  // Rotate: the server now accepts only the new token; the client's cached
  // token gets a 401, the client re-reads the file and retries once.
  write_atomically(*token_file_, "token-2\n");
  const int mark = server().control("request_mark").get<int>();
  auto page = c->list(components(), {});
  ASSERT_TRUE(page) << page.error();
  const json seen = server().control("requests", {{"since", mark}, {"path", "/namespaces/" + ns_ + "/"}});
  ASSERT_EQ(seen.size(), 2u) << seen.dump();
  EXPECT_EQ(seen[0]["status"], 401);
  EXPECT_EQ(seen[0]["authorization"], "Bearer token-1");
  EXPECT_EQ(seen[1]["status"], 200);
  EXPECT_EQ(seen[1]["authorization"], "Bearer token-2");
  // A watch start follows the same rule.
  write_atomically(*token_file_, "token-3\n");
  const int wmark = server().control("request_mark").get<int>();
  auto stream = c->watch(components(), {});
  ASSERT_TRUE(stream) << stream.error();
  const json w = server().control("requests", {{"since", wmark}, {"watch", true}});
  ASSERT_EQ(w.size(), 2u) << w.dump();
  EXPECT_EQ(w[0]["status"], 401);
  EXPECT_EQ(w[1]["authorization"], "Bearer token-3");
  // A 401 while the file has not changed is answered as it is, not retried.
  server().control("inject_fault", {{"status", 401}, {"path", "/nodes/x401$"}});
  const int dmark = server().control("request_mark").get<int>();
  auto denied = c->get("/api/v1/nodes/x401", 5000ms);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.failure().code, 401);
  EXPECT_EQ(denied.failure().reason, "Unauthorized");
  EXPECT_EQ(server().control("requests", {{"since", dmark}, {"path", "/nodes/x401$"}}).size(), 1u);
}

// --- trust -------------------------------------------------------------------------------

TEST_F(KubeHttpClientTest, OnlyTheClusterCaIsTrusted) {
  auto other = tls::make_serving_chain({"localhost"}, {"127.0.0.1"}, std::chrono::hours(1));
  ASSERT_TRUE(other);
  ClusterConfig cfg = config();
  cfg.ca_pem = other->ca_cert_pem;  // not the server's CA
  auto c = HttpClient::make(cfg, kVersion, fast_options());
  ASSERT_TRUE(c) << c.error();
  const int mark = server().control("request_mark").get<int>();
  auto r = (*c)->get("/api/v1/nodes", 5000ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, 0);
  EXPECT_NE(r.error().find("SSL handshake"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("signed by the cluster CA"), std::string::npos) << r.error();
  EXPECT_TRUE(server().control("requests", {{"since", mark}}).empty());  // no HTTP reached it
  // Two CAs in the bundle, the server's among them: trusted.
  cfg.ca_pem = other->ca_cert_pem + chain_->ca_cert_pem;
  auto both = HttpClient::make(cfg, kVersion, fast_options());
  ASSERT_TRUE(both) << both.error();
  auto ok = (*both)->get("/api/v1/namespaces/default", 5000ms);
  EXPECT_TRUE(ok || ok.failure().code == 404) << ok.error();
}

TEST_F(KubeHttpClientTest, ServerCertificateMustNameTheHost) {
  // A second server whose certificate, from the same CA, names another host.
  auto leaf = tls::make_serving_certificate(chain_->ca_cert_pem, chain_->ca_key_pem, {"other.example"}, {},
                                            std::chrono::hours(1));
  ASSERT_TRUE(leaf) << leaf.error();
  const std::string dir = *dir_ + "/other";
  fs::create_directories(dir);
  std::string error;
  auto other = FakeApiServer::start(dir, leaf->cert_pem, leaf->key_pem, "", &error);
  ASSERT_NE(other, nullptr) << error;
  ClusterConfig cfg = config();
  cfg.server = other->url();
  auto c = HttpClient::make(cfg, kVersion, fast_options());
  ASSERT_TRUE(c) << c.error();
  auto r = (*c)->get("/api/v1/nodes", 5000ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, 0);
  EXPECT_NE(r.error().find("SSL handshake"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("name 127.0.0.1"), std::string::npos) << r.error();
}

// --- the rate limiter ---------------------------------------------------------------------

TEST_F(KubeHttpClientTest, RateLimiterBeforeEveryRequestAndWatch) {
  // Jumping, from the real time: the client's deadlines are steady_clock::now()
  // + timeout, so a clock far from it would put every slot past the deadline.
  auto clock = FakeClock::make_jumping(std::chrono::steady_clock::now());
  HttpClientOptions o = fast_options();
  o.qps = 1;
  o.burst = 1;
  o.clock = clock;
  auto c = client(o);
  ASSERT_TRUE(c);
  {
    auto first = c->list(components(), {});  // the burst
    ASSERT_TRUE(first) << first.error();
  }
  EXPECT_EQ(clock->waits().size(), 0u);
  {
    auto second = c->list(components(), {});
    ASSERT_TRUE(second) << second.error();
  }
  EXPECT_EQ(clock->waits().size(), 1u);
  auto w = c->watch(components(), {});
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(clock->waits().size(), 2u);
  ASSERT_TRUE(c->create(components(), component("rl", ns_)));
  EXPECT_EQ(clock->waits().size(), 3u);
}

TEST_F(KubeHttpClientTest, RateLimiterWaitCountsAgainstTheDeadline) {
  HttpClientOptions o = fast_options();
  o.qps = 0.01;  // one request per 100 s
  o.burst = 1;
  auto c = client(o);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->get(object_path(kNodes, "", "x"), 5000ms).failure().code == 404);
  const auto start = std::chrono::steady_clock::now();
  auto r = c->get(object_path(kNodes, "", "x"), 500ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, 0);
  EXPECT_NE(r.error().find("client rate limit"), std::string::npos) << r.error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// --- the whole stack: Reflector and Store on this client ---------------------------------

// Polls `done` until it holds or `bound` passes (the condition is the
// assertion; the polling interval is not).
template <typename F>
bool eventually(F done, std::chrono::seconds bound = 15s) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

TEST_F(KubeHttpClientTest, ReflectorFollowsTheServerThroughDropsAnOutageAndA410) {
  auto c = client();
  ASSERT_TRUE(c);
  for (int i = 0; i < 5; ++i) backdoor_create("components", component("r" + std::to_string(i), ns_, {{"v", "0"}}), ns_);
  Store<std::string> store([](const json& o) -> Result<std::string> {
    auto spec = o.find("spec");
    if (spec == o.end() || !spec->is_object() || !spec->contains("v")) return std::string();
    return (*spec)["v"].get<std::string>();
  });
  ReflectorOptions ro;
  ro.name = "components";
  ro.path = components();
  ro.page_size = 2;
  ro.watch_timeout = 5s;
  ro.backoff.initial = 10ms;
  ro.backoff.max = 200ms;
  Reflector reflector(*c, store, ro);
  reflector.start();
  auto value = [&](const std::string& name) {
    auto v = store.find(ns_ + "/" + name);
    return v ? *v : std::string("(absent)");
  };
  ASSERT_TRUE(eventually([&] { return store.synced() && store.size() == 5; })) << store.size();

  // Changes arrive through the watch.
  backdoor_create("components", component("r5", ns_, {{"v", "0"}}), ns_);
  server().control("patch", {{"resource", "components"}, {"name", "r0"}, {"namespace", ns_},
                             {"patch", {{"spec", {{"v", "1"}}}}}});
  server().control("delete", {{"resource", "components"}, {"name", "r1"}, {"namespace", ns_}});
  ASSERT_TRUE(eventually([&] { return value("r5") == "0" && value("r0") == "1" && value("r1") == "(absent)"; }));

  // A dropped watch (mid-event): the reflector watches again and misses nothing.
  const int started = server().control("watches_started", {{"resource", "components"}}).get<int>();
  server().control("set_watch_chunking", {{"mode", "random"}, {"seed", 3}, {"max_chunk", 9}});
  server().control("drop_watches", {{"resource", "components"}, {"after_events", 1}, {"mid_event", true}});
  server().control("patch", {{"resource", "components"}, {"name", "r2"}, {"namespace", ns_},
                             {"patch", {{"spec", {{"v", "2"}}}}}});
  server().control("patch", {{"resource", "components"}, {"name", "r3"}, {"namespace", ns_},
                             {"patch", {{"spec", {{"v", "3"}}}}}});
  server().control("wait_for_watch", {{"resource", "components"}, {"started_after", started}, {"timeout", 10}});
  ASSERT_TRUE(eventually([&] { return value("r2") == "2" && value("r3") == "3"; }));

  // The API server goes away; meanwhile objects change and history is
  // compacted, so the reflector's resourceVersion is too old when it comes
  // back: 410, relist, and the store matches the server again.
  server().control("go_away");
  server().control("delete", {{"resource", "components"}, {"name", "r4"}, {"namespace", ns_}});
  backdoor_create("components", component("r6", ns_, {{"v", "6"}}), ns_);
  server().control("compact");
  server().control("come_back");
  ASSERT_TRUE(eventually([&] { return value("r4") == "(absent)" && value("r6") == "6"; }))
      << "r4=" << value("r4") << " r6=" << value("r6");
  EXPECT_GE(reflector.stats().relists[static_cast<std::size_t>(RelistCause::Expired)], 1u);
  EXPECT_GE(reflector.stats().lists, 2u);
  EXPECT_EQ(store.size(), 5u);  // r0 r2 r3 r5 r6
  reflector.stop();
}

// --- construction ------------------------------------------------------------------------------

TEST(KubeHttpClientMake, RefusesWhatItCannotUse) {
  auto chain = tls::make_serving_chain({"localhost"}, {}, std::chrono::hours(1));
  ASSERT_TRUE(chain);
  ClusterConfig c;
  c.server = "http://127.0.0.1:80";
  c.ca_pem = chain->ca_cert_pem;
  auto r = HttpClient::make(c, kVersion);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "API client for \"http://127.0.0.1:80\": the server is not an https:// URL");
  c.server = "https://127.0.0.1:6443";
  c.ca_pem = "nope";
  r = HttpClient::make(c, kVersion);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "API client for \"https://127.0.0.1:6443\": cluster CA: no PEM CERTIFICATE found");
  c.ca_pem = chain->ca_cert_pem;
  c.client_cert_pem = chain->cert_pem;
  r = HttpClient::make(c, kVersion);
  ASSERT_FALSE(r);
  c.client_key_pem = chain->key_pem;
  r = HttpClient::make(c, kVersion);
  EXPECT_TRUE(r) << r.error();
}

}  // namespace
}  // namespace ig::kube
