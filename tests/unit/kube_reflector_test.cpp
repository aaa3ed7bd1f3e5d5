// The reflector and the store (src/kube/reflector.h, store.h) against a
// scripted in-memory Client: list pagination, watch from the list's
// resourceVersion, bookmarks, 410 Gone as an HTTP status, as an ERROR event
// and as an expired continue token, broken streams, Retry-After and the
// backoff cap. No real waiting: the reflector's waits are recorded.
#include "kube/reflector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <iterator>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "fake_kube_client.h"
#include "kube/store.h"

namespace ig::kube {

// A value that carries its namespace and name: stored without a key copy.
struct Named {
  std::string ns, name, v;
};
template <>
struct KeyParts<Named> {
  static constexpr bool kCarried = true;
  static std::pair<std::string_view, std::string_view> of(const Named& n) noexcept { return {n.ns, n.name}; }
};

namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using namespace std::chrono_literals;

json obj(const std::string& name, const std::string& rv, const std::string& ns = "") {
  json o = {{"metadata", {{"name", name}, {"resourceVersion", rv}}}, {"v", name + "@" + rv}};
  if (!ns.empty()) o["metadata"]["namespace"] = ns;
  return o;
}

ApiResult<std::optional<WatchEvent>> event(WatchEvent::Type t, json o) {
  return std::optional<WatchEvent>(WatchEvent{t, std::move(o)});
}

std::uint64_t relists_total(const ReflectorStats& s) {
  return std::accumulate(std::begin(s.relists), std::end(s.relists), std::uint64_t{0});
}

ApiError error(int code, std::chrono::seconds retry_after = 0s) {
  ApiError e;
  e.code = code;
  e.message = "scripted " + std::to_string(code);
  e.retry_after = retry_after;
  return e;
}

// One scripted watch stream: its events, then how it ends.
struct ScriptedWatch {
  std::vector<ApiResult<std::optional<WatchEvent>>> steps;  // consumed in order
};

// Answers list and watch calls from queues (reactors on the one fake
// client, which records what was asked). When a queue runs dry it asks the
// reflector to stop (the test is over).
struct Script {
  fake::FakeClient api;
  std::deque<ApiResult<ListPage>> lists;
  std::deque<ApiResult<ScriptedWatch>> watches;
  Reflector* reflector = nullptr;

  Script() {
    api.prepend_reactor("list", "", [this](const fake::Action&) -> std::optional<fake::Reply> {
      auto r = pop(lists);
      if (!r) return r.failure();
      return std::move(*r);
    });
    api.prepend_reactor("watch", "", [this](const fake::Action&) -> std::optional<fake::Reply> {
      auto w = pop(watches);
      if (!w) return w.failure();
      return fake::scripted_stream(std::move(w->steps));
    });
  }
  // The next answer of `queue`; once it has run dry, a 503 and the reflector stopped.
  template <typename T>
  ApiResult<T> pop(std::deque<ApiResult<T>>& queue) {
    if (queue.empty()) {
      reflector->stop();
      return error(503);
    }
    auto r = std::move(queue.front());
    queue.pop_front();
    return r;
  }
  std::vector<ListOptions> list_calls() const {
    std::vector<ListOptions> out;
    for (const auto& a : api.actions("list")) out.push_back(a.list);
    return out;
  }
  std::vector<WatchOptions> watch_calls() const {
    std::vector<WatchOptions> out;
    for (const auto& a : api.actions("watch")) out.push_back(a.watch);
    return out;
  }
};

ListPage page(std::vector<json> items, std::string rv, std::string cont = "") {
  ListPage p;
  p.items = json::array();
  for (auto& i : items) p.items.push_back(std::move(i));
  p.resource_version = std::move(rv);
  p.continue_token = std::move(cont);
  return p;
}

struct Fixture {
  Script client;
  int changes = 0;
  Store<std::string> store{[](const json& o) -> Result<std::string> {
                             if (!o.contains("v")) return fail("no v");
                             return o["v"].get<std::string>();
                           },
                           [this](std::string_view) { ++changes; }};
  std::shared_ptr<FakeClock> clock = FakeClock::make_jumping();
  std::unique_ptr<Reflector> reflector;

  Fixture() {
    ReflectorOptions options;
    options.name = "things";
    options.path = "/api/v1/things";
    options.page_size = 2;
    options.clock = clock;
    options.backoff.jitter = 0;  // deterministic waits
    reflector = std::make_unique<Reflector>(client.api, store, options);
    client.reflector = reflector.get();
  }
  // The reflector's waits, in order.
  std::vector<std::chrono::milliseconds> waits() const {
    std::vector<std::chrono::milliseconds> out;
    for (auto d : clock->waits()) out.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(d));
    return out;
  }
  std::string value(const std::string& key) {
    auto v = store.find(key);
    return v ? *v : "(none)";
  }
};

TEST(Reflector, ListsEveryPageThenWatchesFromTheListsResourceVersion) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5"), obj("b", "6")}, "10", "token-1"));
  f.client.lists.push_back(page({obj("c", "7")}, "11"));  // later pages' RV is ignored
  f.client.watches.push_back(ScriptedWatch{{
      event(WatchEvent::Type::Modified, obj("a", "12")),
      event(WatchEvent::Type::Added, obj("d", "13", "ns")),
      event(WatchEvent::Type::Deleted, obj("b", "14")),
  }});
  f.reflector->run();

  ASSERT_EQ(f.client.list_calls().size(), 2u);  // two pages
  EXPECT_EQ(f.client.list_calls()[0].resource_version, "0");  // the first list: the watch cache
  EXPECT_EQ(f.client.list_calls()[0].limit, 2u);
  EXPECT_EQ(f.client.list_calls()[0].continue_token, "");
  EXPECT_EQ(f.client.list_calls()[1].continue_token, "token-1");
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[0].resource_version, "10");
  EXPECT_TRUE(f.client.watch_calls()[0].allow_bookmarks);
  // After a clean end, watch again from the last event's resourceVersion.
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "14");
  EXPECT_TRUE(f.store.synced());
  EXPECT_EQ(f.value("a"), "a@12");
  EXPECT_EQ(f.value("b"), "(none)");
  EXPECT_EQ(f.value("c"), "c@7");
  EXPECT_EQ(f.value("ns/d"), "d@13");
  EXPECT_EQ(f.store.size(), 3u);
  EXPECT_EQ(f.changes, 4);  // one replace, three events
  EXPECT_EQ(f.reflector->stats().events, 3u);
}

TEST(Reflector, BookmarksAdvanceTheResourceVersionWithoutChangingTheStore) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5")}, "10"));
  f.client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Bookmark,
                                                  json{{"metadata", {{"resourceVersion", "40"}}}})}});
  f.reflector->run();
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "40");
  EXPECT_EQ(f.changes, 1);
  EXPECT_EQ(f.reflector->stats().bookmarks, 1u);
}

TEST(Reflector, A410ErrorEventRelistsAndTheRelistReplacesTheStore) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5"), obj("b", "6")}, "10"));
  f.client.watches.push_back(ScriptedWatch{{event(
      WatchEvent::Type::Error,
      json{{"kind", "Status"}, {"code", 410}, {"reason", "Expired"}, {"message", "too old"}})}});
  f.client.lists.push_back(page({obj("b", "20")}, "21"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.list_calls().size(), 2u);
  EXPECT_EQ(f.client.list_calls()[1].continue_token, "");
  EXPECT_EQ(f.client.list_calls()[1].resource_version, "");  // after a 410: a quorum list, paginated
  EXPECT_EQ(f.client.list_calls()[1].limit, 2u);
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "21");
  EXPECT_EQ(f.value("a"), "(none)");  // gone while we were not watching
  EXPECT_EQ(f.value("b"), "b@20");
  EXPECT_EQ(f.reflector->stats().relists[static_cast<std::size_t>(RelistCause::Expired)], 1u);
  EXPECT_EQ(relists_total(f.reflector->stats()), 1u);
  EXPECT_TRUE(f.waits().empty() || f.waits().front() > 0ms);
}

TEST(Reflector, RelistStopsTheWatchAndListsAgain) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5")}, "10"));
  // The second event asks for a list (what the Node cache does when the
  // RuntimeClass's scheduling changes); the third is never applied.
  f.client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Added, obj("b", "11")),
                                            event(WatchEvent::Type::Added, obj("c", "12")),
                                            event(WatchEvent::Type::Added, obj("d", "13"))}});
  f.client.lists.push_back(page({obj("x", "20")}, "21"));
  f.client.watches.push_back(ScriptedWatch{});
  Reflector* reflector = nullptr;
  Store<std::string> asking{[](const json& o) -> Result<std::string> { return o["v"].get<std::string>(); },
                            [&](std::string_view key) {
                              if (key == "c") reflector->relist();
                            }};
  ReflectorOptions options;
  options.name = "things";
  options.path = "/api/v1/things";
  options.clock = FakeClock::make_jumping();
  Reflector r(f.client.api, asking, options);
  reflector = &r;
  f.client.reflector = &r;
  r.run();
  ASSERT_GE(f.client.list_calls().size(), 2u);
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "21");
  auto value = [&](const std::string& k) {
    auto v = asking.find(k);
    return v ? *v : std::string("(none)");
  };
  EXPECT_EQ(value("x"), "x@20");
  EXPECT_EQ(value("d"), "(none)");  // the watch stopped before it
  EXPECT_EQ(value("b"), "(none)");  // replaced by the list
  EXPECT_EQ(r.stats().lists, 2u);
  EXPECT_EQ(r.stats().relists[static_cast<std::size_t>(RelistCause::Requested)], 1u);
  EXPECT_EQ(relists_total(r.stats()), 1u);
  // From the last resourceVersion seen, unpaginated (the watch cache serves it).
  EXPECT_EQ(f.client.list_calls()[1].resource_version, "12");
  EXPECT_EQ(f.client.list_calls()[1].limit, 0u);
}

TEST(Reflector, A410StatusOnTheWatchRequestRelists) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5")}, "10"));
  f.client.watches.push_back(error(410));
  f.client.lists.push_back(page({obj("a", "30")}, "31"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  EXPECT_EQ(f.value("a"), "a@30");
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "31");
}

TEST(Reflector, AnExpiredContinueTokenListsOnceMoreUnpaginated) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5"), obj("b", "6")}, "10", "tok"));
  f.client.lists.push_back(error(410));  // the token is too old
  f.client.lists.push_back(page({obj("a", "5")}, "40"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.list_calls().size(), 3u);
  EXPECT_EQ(f.client.list_calls()[1].continue_token, "tok");
  EXPECT_EQ(f.client.list_calls()[2].continue_token, "");
  EXPECT_EQ(f.client.list_calls()[2].limit, 0u);  // the whole list in one answer, not page 1 again
  EXPECT_EQ(f.client.list_calls()[2].resource_version, f.client.list_calls()[0].resource_version);
  EXPECT_LE(f.waits().size(), 1u);  // at once (a wait only after the empty watch at the end)
  EXPECT_EQ(f.reflector->stats().relists[static_cast<std::size_t>(RelistCause::ContinueExpired)], 1u);
  EXPECT_EQ(f.value("b"), "(none)");  // the half-list never reached the store
  EXPECT_EQ(f.client.watch_calls().at(0).resource_version, "40");
}

TEST(Reflector, ABrokenStreamResumesFromTheLastEventWithoutRelisting) {
  Fixture f;
  f.client.lists.push_back(page({}, "10"));
  ApiError dropped;
  dropped.message = "connection reset";
  f.client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Added, obj("a", "11")),
                                            ApiResult<std::optional<WatchEvent>>(dropped)}});
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "11");
  EXPECT_EQ(f.reflector->stats().lists, 1u);
  EXPECT_EQ(f.value("a"), "a@11");
}

TEST(Reflector, FailuresBackOffExponentiallyCappedAndHonourRetryAfter) {
  Fixture f;
  for (int i = 0; i < 8; ++i) f.client.lists.push_back(error(500));
  f.client.lists.push_back(error(429, 45s));
  f.client.lists.push_back(page({}, "1"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  const auto waits = f.waits();
  ASSERT_GE(waits.size(), 9u);
  EXPECT_THAT(std::vector<std::chrono::milliseconds>(waits.begin(), waits.begin() + 8),
              ElementsAre(800ms, 1600ms, 3200ms, 6400ms, 12800ms, 25600ms, 30000ms, 30000ms));
  EXPECT_EQ(waits[8], 45000ms);  // Retry-After wins over the cap
  EXPECT_TRUE(f.store.synced());
}

ApiError status_error(int code, std::string reason, bool too_large = false) {
  ApiError e = error(code);
  e.reason = std::move(reason);
  e.rv_too_large = too_large;
  return e;
}

TEST(Reflector, AWatchThatCannotBeOpenedRelistsAfterTheBackoffFromTheLastResourceVersion) {
  for (int code : {403, 500, 503}) {
    SCOPED_TRACE(code);
    Fixture f;
    f.client.lists.push_back(page({obj("a", "5")}, "10"));
    f.client.watches.push_back(status_error(code, "Forbidden"));  // list works, watch does not
    f.client.lists.push_back(page({obj("a", "11")}, "12"));
    f.client.watches.push_back(ScriptedWatch{});
    f.reflector->run();
    ASSERT_GE(f.client.list_calls().size(), 2u);
    EXPECT_EQ(f.client.list_calls()[1].resource_version, "10");
    EXPECT_EQ(f.client.list_calls()[1].limit, 0u);
    ASSERT_GE(f.waits().size(), 1u);
    EXPECT_EQ(f.waits()[0], 800ms);
    EXPECT_EQ(f.value("a"), "a@11");
    EXPECT_EQ(f.reflector->stats().relists[static_cast<std::size_t>(RelistCause::WatchFailed)], 1u);
  }
}

TEST(Reflector, A429OrARefusedConnectionWatchesAgainWithoutRelisting) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5")}, "10"));
  f.client.watches.push_back(error(429, 2s));
  ApiError refused = error(0);
  refused.refused = true;
  f.client.watches.push_back(refused);
  f.client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Error,
                                                  json{{"kind", "Status"}, {"code", 429}, {"reason", "TooManyRequests"}})}});
  f.reflector->run();
  ASSERT_GE(f.client.watch_calls().size(), 4u);
  for (const auto& w : f.client.watch_calls()) EXPECT_EQ(w.resource_version, "10");
  EXPECT_EQ(f.reflector->stats().lists, 1u);
  EXPECT_EQ(relists_total(f.reflector->stats()), 0u);
  ASSERT_GE(f.waits().size(), 3u);
  EXPECT_EQ(f.waits()[0], 2000ms);  // Retry-After
}

TEST(Reflector, AnErrorEventOtherThan410And429RelistsAfterTheBackoff) {
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5")}, "10"));
  f.client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Added, obj("b", "11")),
                                            event(WatchEvent::Type::Error,
                                                  json{{"kind", "Status"}, {"code", 500}, {"reason", "InternalError"},
                                                       {"message", "watch cache broke"}})}});
  f.client.lists.push_back(page({obj("b", "20")}, "21"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.list_calls().size(), 2u);
  EXPECT_EQ(f.client.list_calls()[1].resource_version, "11");
  ASSERT_GE(f.waits().size(), 1u);
  EXPECT_EQ(f.reflector->stats().relists[static_cast<std::size_t>(RelistCause::ErrorEvent)], 1u);
  EXPECT_EQ(f.value("b"), "b@20");
}

TEST(Reflector, TooLargeResourceVersionListsFromEtcd) {
  // An etcd restore: the server is behind the reflector's resourceVersion.
  Fixture f;
  f.client.lists.push_back(page({obj("a", "5")}, "100"));
  f.client.watches.push_back(status_error(504, "Timeout", true));
  f.client.lists.push_back(status_error(504, "Timeout", true));  // at "100": still too large
  f.client.lists.push_back(page({obj("a", "7")}, "8"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.list_calls().size(), 3u);
  EXPECT_EQ(f.client.list_calls()[1].resource_version, "");  // the watch said too large: quorum list
  EXPECT_EQ(f.client.list_calls()[2].resource_version, "");
  EXPECT_EQ(f.client.watch_calls().at(1).resource_version, "8");
  EXPECT_EQ(f.value("a"), "a@7");
  EXPECT_EQ(f.reflector->stats().relists[static_cast<std::size_t>(RelistCause::TooLarge)], 1u);
}

TEST(Reflector, AFailedFirstListFallsBackToAQuorumList) {
  Fixture f;
  f.client.lists.push_back(error(500));
  f.client.lists.push_back(page({obj("a", "5")}, "10"));
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.list_calls().size(), 2u);
  EXPECT_EQ(f.client.list_calls()[0].resource_version, "0");
  EXPECT_EQ(f.client.list_calls()[1].resource_version, "");
  EXPECT_EQ(f.client.list_calls()[1].limit, 2u);
  EXPECT_EQ(f.waits().at(0), 800ms);
}

TEST(Reflector, WatchesAskForBookmarksARandomisedTimeoutAndASilenceLimit) {
  Fixture f;
  f.client.lists.push_back(page({}, "1"));
  for (int i = 0; i < 20; ++i) f.client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Bookmark,
                                                                                json{{"metadata", {{"resourceVersion", "1"}}}})}});
  f.reflector->run();
  ASSERT_GE(f.client.watch_calls().size(), 20u);
  std::set<long long> seen;
  for (const auto& w : f.client.watch_calls()) {
    EXPECT_TRUE(w.allow_bookmarks);
    EXPECT_GE(w.timeout, 300s);
    EXPECT_LT(w.timeout, 600s);
    EXPECT_EQ(w.silence, 150'000ms);
    seen.insert(w.timeout.count());
  }
  EXPECT_GT(seen.size(), 1u);  // not all in step
}

TEST(Reflector, ASilentStreamIsReopenedAtOnceAndCounted) {
  Fixture f;
  f.client.lists.push_back(page({}, "10"));
  ApiError silent = error(0);
  silent.silent = true;
  f.client.watches.push_back(ScriptedWatch{{ApiResult<std::optional<WatchEvent>>(silent)}});
  f.client.watches.push_back(ScriptedWatch{});
  f.reflector->run();
  ASSERT_GE(f.client.watch_calls().size(), 2u);
  EXPECT_EQ(f.client.watch_calls()[1].resource_version, "10");
  EXPECT_EQ(f.reflector->stats().silent_watches, 1u);
  EXPECT_EQ(f.reflector->stats().lists, 1u);
  EXPECT_TRUE(f.waits().empty() || f.waits().size() == 1u);  // only the final empty watch may back off
}

TEST(Reflector, ProgressIsTheLastListEventOrBookmark) {
  Script client;
  Store<std::string> store{[](const json& o) -> Result<std::string> { return o["v"].get<std::string>(); }, {}};
  auto clock = FakeClock::make_jumping();
  Reflector* self = nullptr;
  ReflectorOptions options;
  options.name = "things";
  options.path = "/api/v1/things";
  options.clock = clock;
  client.lists.push_back(page({obj("a", "1")}, "1"));
  client.watches.push_back(ScriptedWatch{{event(WatchEvent::Type::Bookmark, json{{"metadata", {{"resourceVersion", "2"}}}})}});
  Reflector r(client.api, store, options);
  self = &r;
  client.reflector = self;
  clock->advance(42s);
  EXPECT_EQ(r.since_progress(), 42s);  // since construction: nothing listed yet
  r.run();
  EXPECT_LE(r.since_progress(), 30s);  // the bookmark, then at most one backoff wait
  clock->advance(100s);
  EXPECT_GE(r.since_progress(), 100s);
}

TEST(Reflector, NotSyncedUntilTheFirstListCompletes) {
  Fixture f;
  f.client.lists.push_back(error(503));
  f.reflector->run();  // the second list call stops it
  EXPECT_FALSE(f.store.synced());
}

TEST(Store, AValueThatCarriesItsKeyIsFoundReplacedAndDeletedByIt) {
  std::vector<std::string> changed;
  Store<Named> store{[](const json& o) -> Result<Named> {
                       return Named{o["metadata"].value("namespace", ""), o["metadata"]["name"], o["v"]};
                     },
                     [&](std::string_view k) { changed.emplace_back(k); }};
  store.begin_replace();
  store.add_listed(obj("a", "1", "team-a"));
  store.add_listed(obj("a", "2", "team-b"));
  store.add_listed(obj("team-a", "3"));  // cluster-scoped "team-a": not "team-a/..."
  store.add_listed(obj("a", "4", "team-a"));  // the same key again: replaces
  store.end_replace("5");
  EXPECT_EQ(store.size(), 3u);
  ASSERT_TRUE(store.find("team-a/a"));
  EXPECT_EQ(store.find("team-a/a")->v, "a@4");
  EXPECT_EQ(store.find("team-b/a")->v, "a@2");
  EXPECT_EQ(store.find("team-a")->v, "team-a@3");
  EXPECT_FALSE(store.find("a"));
  EXPECT_FALSE(store.find("team-a/"));
  EXPECT_FALSE(store.find("team-a/ab"));
  EXPECT_FALSE(store.find("team-/a"));
  store.apply(WatchEvent::Type::Modified, obj("a", "6", "team-b"));
  EXPECT_EQ(store.find("team-b/a")->v, "a@6");
  store.apply(WatchEvent::Type::Deleted, obj("a", "7", "team-a"));
  EXPECT_FALSE(store.find("team-a/a"));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.snapshot().size(), 2u);
  EXPECT_EQ(changed, (std::vector<std::string>{"", "team-b/a", "team-a/a"}));
}

// A decoder that throws (nlohmann's type_error on a field of an unexpected
// type) leaves that object out as a decode error; the reflector's thread
// lives on.
TEST(Store, ADecoderThatThrowsIsADecodeErrorNotACrash) {
  Store<int> store([](const json& o) -> Result<int> { return o.at("n").get<int>(); });
  store.begin_replace();
  store.add_listed(json{{"metadata", {{"name", "x"}}}, {"n", "not a number"}});
  store.add_listed(json{{"metadata", {{"name", "y"}}}, {"n", 2}});
  store.end_replace("1");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.decode_errors(), 1u);
  EXPECT_EQ(store.find("x"), nullptr);  // the one that threw
  store.apply(WatchEvent::Type::Modified, json{{"metadata", {{"name", "y"}}}});  // no "n": at() throws
  EXPECT_EQ(store.find("y"), nullptr);
  EXPECT_EQ(store.decode_errors(), 2u);
}

TEST(Store, AnUndecodableVersionIsDroppedAndCountedNeverServedStale) {
  int changes = 0;
  std::vector<std::string> keys;  // what on_change was told: "" after a relist
  Store<int> store([](const json& o) -> Result<int> {
    if (!o.contains("n")) return fail("no n");
    return o["n"].get<int>();
  }, [&](std::string_view key) {
    ++changes;
    keys.emplace_back(key);
  });
  store.begin_replace();
  store.add_listed(json{{"metadata", {{"name", "x"}}}, {"n", 1}});
  store.add_listed(json{{"metadata", {{"name", "y"}}}});
  store.add_listed(json{{"metadata", json::object()}, {"n", 3}});
  store.end_replace("5");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.decode_errors(), 2u);
  store.apply(WatchEvent::Type::Modified, json{{"metadata", {{"name", "x"}}}});
  EXPECT_EQ(store.find("x"), nullptr);
  EXPECT_EQ(store.decode_errors(), 3u);
  store.apply(WatchEvent::Type::Added, json{{"metadata", {{"name", "z"}, {"namespace", "n"}}}, {"n", 9}});
  auto z = store.find("n/z");
  ASSERT_NE(z, nullptr);
  store.apply(WatchEvent::Type::Deleted, json{{"metadata", {{"name", "z"}, {"namespace", "n"}}}});
  EXPECT_EQ(*z, 9);  // a reader's value outlives the deletion
  EXPECT_EQ(store.find("n/z"), nullptr);
  EXPECT_EQ(changes, 4);
  EXPECT_THAT(keys, ::testing::ElementsAre("", "x", "n/z", "n/z"));
}

TEST(Paths, CollectionAndObjectPathsFollowTheApiLayoutAndEscapeNames) {
  const Resource nodes{"", "v1", "nodes", "Node", false};
  const Resource comps{"gibson.zeroroot.ai", "v1alpha1", "components", "Component", true};
  EXPECT_EQ(collection_path(nodes), "/api/v1/nodes");
  EXPECT_EQ(collection_path(comps), "/apis/gibson.zeroroot.ai/v1alpha1/components");
  EXPECT_EQ(collection_path(comps, "team-a"),
            "/apis/gibson.zeroroot.ai/v1alpha1/namespaces/team-a/components");
  EXPECT_EQ(object_path(comps, "team-a", "x", "status"),
            "/apis/gibson.zeroroot.ai/v1alpha1/namespaces/team-a/components/x/status");
  EXPECT_EQ(object_path(nodes, "", "../secrets?x=1"), "/api/v1/nodes/..%2Fsecrets%3Fx%3D1");
  EXPECT_EQ(object_path(nodes, "", ".."), "/api/v1/nodes/%2E%2E");
}

}  // namespace
}  // namespace ig::kube
