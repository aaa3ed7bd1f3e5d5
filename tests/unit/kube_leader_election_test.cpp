// Leader election on a Lease (kube/leader_election.h).
//
// Most tests drive electors with step() against an in-memory Lease store with
// the API server's conflict semantics (409 on a stale resourceVersion, 404
// when absent, 409 AlreadyExists on a second create), each elector with a
// client of its own (for injected failures and hangs) and a fake clock of its
// own: a small scheduler always runs the elector whose next attempt is due
// first, so the whole exchange is deterministic and nothing sleeps.
// One test runs two electors on threads, on real time, against the test API
// server over HTTPS (tests/apiserver/fake_apiserver.py), with bounded waits.
#include "kube/leader_election.h"

#include "apiserver_test_support.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_kube_client.h"
#include "kube/http_client.h"
#include "base/rfc3339.h"
#include "kube/resources.h"
#include "tls/certificates.h"


namespace ig::kube {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

constexpr const char* kNs = "ig-system";
constexpr const char* kName = "isolation-gate-leader";

// --- a fake clock per elector ------------------------------------------------------

// 2026-12-02T21:00:00Z at the start, plus the elector's skew.
const std::chrono::system_clock::time_point kWallStart{std::chrono::seconds(1796245200)};

std::unique_ptr<FakeClock> skewed_clock(std::chrono::system_clock::duration wall_skew) {
  return std::make_unique<FakeClock>(FakeClock::kStart, kWallStart + wall_skew);
}

// The clock's reading when its wall() was `w`.
Clock::time_point to_steady(FakeClock& clock, std::chrono::system_clock::time_point w) {
  return clock.now() - std::chrono::duration_cast<Clock::duration>(clock.wall() - w);
}

// A counter in the elector's metrics text: isolation_gate_leader_<name>_total.
std::uint64_t counter(const LeaderElector& e, const std::string& name) {
  std::string text;
  prometheus::TextWriter out(text);
  e.write_metrics(out);
  const std::string line = "\nisolation_gate_leader_" + name + "_total ";
  const auto at = text.find(line);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << line << " in:\n" << text;
    return ~std::uint64_t{0};
  }
  return std::stoull(text.substr(at + line.size()));
}

// --- one Lease with the API server's semantics --------------------------------------

// The Lease in the one fake client's tracker, which every node's client
// shares (conditional PUT: 409 on a stale resourceVersion, 409 on a create
// of a Lease that exists, 404 on a missing one).
struct LeaseStore {
  fake::FakeClient api;          // the tracker's own client: test-side reads and writes
  std::vector<json> put_bodies;  // every PUT that reached the store, as sent

  std::string object_path() const { return kube::object_path(kLeases, kNs, kName); }
  std::optional<json> lease() const { return api.find(object_path()); }
  // Stores `l` as it is (a resourceVersion it has is kept, else a new one).
  void set(json l) { api.put(collection_path(kLeases, kNs), std::move(l), /*keep_version=*/true); }
  std::string holder() const { return lease() ? (*lease())["spec"].value("holderIdentity", "") : ""; }
  // spec.renewTime: the wall time of the holder's last successful renew.
  std::chrono::system_clock::time_point renew_time() const {
    return parse_rfc3339((*lease())["spec"]["renewTime"].get<std::string>()).value();
  }
  long long transitions() const { return lease() ? (*lease())["spec"].value("leaseTransitions", -1LL) : -1; }
  // A write from outside (another controller stealing the Lease).
  void backdoor_set_holder(const std::string& h) {
    json l = *lease();
    l["spec"]["holderIdentity"] = h;
    l["metadata"].erase("resourceVersion");
    set(std::move(l));
  }
};

ApiError api_error(std::string message, int code, std::string reason) {
  ApiError e;
  e.message = std::move(message);
  e.code = code;
  e.reason = std::move(reason);
  return e;
}

// --- electors on fake clocks, scheduled by due time ------------------------------------

struct Node {
  std::string name;
  std::unique_ptr<FakeClock> clock;
  std::unique_ptr<fake::FakeClient> client;  // on the cluster's tracker
  // Faults of this node's API calls (reactors on its client).
  bool fail_gets = false;
  bool fail_updates = false;
  bool hang_updates = false;       // the call takes its whole timeout, then fails (code 0)
  bool create_loses_race = false;  // another replica creates the Lease just before us
  std::vector<milliseconds> update_timeouts() const {
    std::vector<milliseconds> out;
    for (const auto& a : client->actions("update")) out.push_back(a.timeout);
    return out;
  }
  Clock::time_point due;
  int started = 0, stopped = 0;
  std::optional<Clock::time_point> started_at, stopped_at;
  std::vector<std::string> new_leaders;
  std::vector<std::pair<std::string, std::string>> logs;
  std::unique_ptr<LeaderElector> elector;  // last: destroyed (stopped) first
};

LeaderElectionConfig base_config(const std::string& identity) {
  LeaderElectionConfig c;
  c.namespace_name = kNs;
  c.lease_name = kName;
  c.identity = identity;
  return c;
}

class Cluster {
 public:
  std::vector<std::string> events;  // callbacks and PUTs in order
  LeaseStore store;

  Node& add(const std::string& identity, std::chrono::system_clock::duration wall_skew = {}) {
    auto n = std::make_unique<Node>();
    Node& node = *n;
    node.name = identity;
    node.clock = skewed_clock(wall_skew);
    node.clock->set(now_);
    node.due = now_;
    node.client = std::make_unique<fake::FakeClient>(store.api.tracker());
    node.client->prepend_reactor("*", "", [this, &node](const fake::Action& a) { return lease_call(node, a); });
    LeaderElectionConfig c = base_config(identity);
    FakeClock* clock = node.clock.get();
    c.clock = std::shared_ptr<Clock>(clock, [](Clock*) {});
    c.log = [&node](std::string_view level, std::string_view m) { node.logs.emplace_back(level, m); };
    LeaderCallbacks cb;
    cb.on_started_leading = [this, &node] {
      ++node.started;
      node.started_at = node.clock->now();
      events.push_back(node.name + " started");
    };
    cb.on_stopped_leading = [this, &node] {
      ++node.stopped;
      node.stopped_at = node.clock->now();
      events.push_back(node.name + " stopped");
    };
    cb.on_new_leader = [&node](const std::string& id) { node.new_leaders.push_back(id); };
    auto e = LeaderElector::make(*node.client, std::move(c), std::move(cb));
    EXPECT_TRUE(e) << e.error();
    node.elector = std::move(*e);
    nodes_.push_back(std::move(n));
    return node;
  }

  // A node's call: its faults, then the tracker.
  std::optional<fake::Reply> lease_call(Node& node, const fake::Action& a) {
    const bool on_lease = a.path == (a.verb == "create" ? collection_path(kLeases, kNs) : store.object_path());
    if (!on_lease || (a.verb != "get" && a.verb != "create" && a.verb != "update")) {
      ADD_FAILURE() << "unexpected " << a.verb << " " << a.path;
      return api_error("unexpected", 501, "");
    }
    if (a.verb == "get" && node.fail_gets)
      return api_error("GET " + a.path + ": 503 ServiceUnavailable: injected", 503, "ServiceUnavailable");
    if (a.verb == "create") {
      if (node.create_loses_race) {
        node.create_loses_race = false;
        json other = a.body;
        other["spec"]["holderIdentity"] = "racer";
        store.set(other);
      }
      EXPECT_EQ(a.body["metadata"]["name"], kName);
      EXPECT_EQ(a.body["metadata"]["namespace"], kNs);
      EXPECT_EQ(a.body["apiVersion"], "coordination.k8s.io/v1");
      EXPECT_EQ(a.body["kind"], "Lease");
    }
    if (a.verb != "update") return std::nullopt;
    if (node.hang_updates) {
      node.clock->advance(a.timeout);
      return api_error("PUT " + a.path + ": no answer within " + std::to_string(a.timeout.count()) + " ms", 0, "");
    }
    if (node.fail_updates) return api_error("PUT " + a.path + ": 503 ServiceUnavailable: injected", 503, "ServiceUnavailable");
    EXPECT_FALSE(a.body["metadata"].value("resourceVersion", "").empty()) << "every Lease PUT must be conditional";
    fake::Reply r = node.client->track(a);
    if (!r.error) {
      store.put_bodies.push_back(a.body);
      events.push_back("PUT holder=" + a.body["spec"].value("holderIdentity", ""));
    }
    return std::optional<fake::Reply>(std::move(r));
  }

  // Runs the elector that is due first; false after `max_steps` steps.
  void step_next() {
    Node* next = nullptr;
    for (auto& n : nodes_) {
      if (n->elector && (next == nullptr || n->due < next->due)) next = n.get();
    }
    ASSERT_NE(next, nullptr);
    now_ = std::max(now_, next->due);
    next->clock->set(std::max(now_, next->clock->now()));
    const milliseconds wait = next->elector->step();
    next->due = next->clock->now() + wait;
    check_at_most_one_leader();
  }

  template <typename Pred>
  bool run_until(Pred pred, int max_steps = 500) {
    for (int i = 0; i < max_steps; ++i) {
      if (pred()) return true;
      step_next();
      if (::testing::Test::HasFatalFailure()) return false;
    }
    return pred();
  }

  void run_for(milliseconds d) {
    const auto until = now_ + d;
    for (int i = 0; i < 10000; ++i) {
      auto next = std::min_element(nodes_.begin(), nodes_.end(),
                                   [](auto& a, auto& b) { return a->due < b->due; });
      if ((*next)->due > until) break;
      step_next();
    }
    now_ = std::max(now_, until);
  }

  // "At most one leader" as the Lease protocol promises: no two electors
  // between on_started_leading and on_stopped_leading at once.
  void check_at_most_one_leader() {
    int leading = 0;
    for (auto& n : nodes_) leading += n->elector && n->elector->is_leader() ? 1 : 0;
    EXPECT_LE(leading, 1) << "two leaders at once";
  }

  Clock::time_point now() const { return now_; }

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  Clock::time_point now_ = FakeClock::kStart;
};

const LeaderElectionConfig kDefaults = base_config("x");

// --- config and helpers ---------------------------------------------------------------

// LeaderElector::make() with callbacks set: fails only on the config.
Result<void> validate(const LeaderElectionConfig& c) {
  fake::FakeClient client;
  auto made = LeaderElector::make(client, c, {[] {}, [] {}, {}});
  if (!made) return made.failure();
  return {};
}

TEST(KubeLeaderElection, ValidatesDurationsLikeClientGo) {
  EXPECT_TRUE(validate(base_config("a")));
  EXPECT_EQ(kDefaults.lease_duration, 15s);
  EXPECT_EQ(kDefaults.renew_deadline, 10s);
  EXPECT_EQ(kDefaults.retry_period, 2s);

  auto c = base_config("a");
  c.lease_duration = 10s;  // == renew deadline
  auto r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("lease duration"), std::string::npos) << r.error();

  c = base_config("a");
  c.renew_deadline = 2400ms;  // == 1.2 * retry period
  r = validate(c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("1.2 times the retry period"), std::string::npos) << r.error();
  c.renew_deadline = 2401ms;
  EXPECT_TRUE(validate(c));

  c = base_config("a");
  c.retry_period = 0ms;
  EXPECT_FALSE(validate(c));
  c = base_config("");
  EXPECT_FALSE(validate(c));
  c = base_config("a");
  c.lease_name.clear();
  EXPECT_FALSE(validate(c));
  c = base_config("a");
  c.namespace_name.clear();
  EXPECT_FALSE(validate(c));

  fake::FakeClient client;
  auto bad = LeaderElector::make(client, base_config("a"), LeaderCallbacks{});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("on_started_leading"), std::string::npos);
  auto c2 = base_config("a");
  c2.renew_deadline = 20s;
  EXPECT_FALSE(LeaderElector::make(client, c2, {[] {}, [] {}, {}}));
}

TEST(KubeLeaderElection, HolderIdentityIsPodNameAndRandomSuffix) {
  const std::string a = make_holder_identity("gate-7d9f-abcde");
  const std::string b = make_holder_identity("gate-7d9f-abcde");
  ASSERT_EQ(a.size(), std::string("gate-7d9f-abcde_").size() + 8);
  EXPECT_EQ(a.rfind("gate-7d9f-abcde_", 0), 0u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", a.size() - 8), std::string::npos) << a;
  EXPECT_NE(a, b);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string h = make_holder_identity("");
  EXPECT_EQ(h.rfind(std::string(host) + "_", 0), 0u) << h;
}

TEST(KubeLeaderElection, MicroTimeIsRfc3339WithMicroseconds) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1796245200)) +
                 std::chrono::microseconds(123456);
  EXPECT_EQ(format_micro_time(t), "2026-12-02T21:00:00.123456Z");
  EXPECT_EQ(format_micro_time(std::chrono::system_clock::time_point(std::chrono::seconds(0))),
            "1970-01-01T00:00:00.000000Z");
}

// --- acquiring ------------------------------------------------------------------------

TEST(KubeLeaderElection, TwoContendExactlyOneLeadsAndRenews) {
  Cluster k;
  Node& a = k.add("a_00000001");
  Node& b = k.add("b_00000002");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader() || b.elector->is_leader(); }));
  Node& leader = a.elector->is_leader() ? a : b;
  Node& other = &leader == &a ? b : a;
  EXPECT_EQ(k.store.holder(), leader.name);
  EXPECT_EQ(k.store.transitions(), 0);
  const json first = *k.store.lease();
  EXPECT_EQ(first["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(first["spec"]["acquireTime"], first["spec"]["renewTime"]);
  EXPECT_EQ(first["spec"]["renewTime"].get<std::string>().size(), std::string("2026-12-02T21:00:00.000000Z").size());

  // A minute of contention: the leader renews every retry period, the other never leads.
  k.run_for(60s);
  EXPECT_TRUE(leader.elector->is_leader());
  EXPECT_FALSE(other.elector->is_leader());
  EXPECT_EQ(leader.started, 1);
  EXPECT_EQ(leader.stopped, 0);
  EXPECT_EQ(other.started, 0);
  EXPECT_EQ(other.new_leaders.back(), leader.name);
  EXPECT_EQ(other.new_leaders, std::vector<std::string>{leader.name});
  EXPECT_GE(k.store.put_bodies.size(), 29u);  // about 60 s / 2 s renews
  EXPECT_LE(k.store.put_bodies.size(), 31u);
  for (const json& put : k.store.put_bodies) {
    EXPECT_EQ(put["spec"]["holderIdentity"], leader.name);
    EXPECT_EQ(put["spec"]["acquireTime"], first["spec"]["acquireTime"]);
    EXPECT_EQ(put["spec"]["leaseTransitions"], 0);
  }
  EXPECT_NE((*k.store.lease())["spec"]["renewTime"], first["spec"]["renewTime"]);
  EXPECT_EQ(counter(*leader.elector, "acquisitions"), 1u);
  EXPECT_EQ(counter(*leader.elector, "renew_failures"), 0u);
  EXPECT_EQ(k.store.renew_time(), leader.clock->wall());  // its last step renewed
}

TEST(KubeLeaderElection, CandidateRetriesWithJitter) {
  Cluster k;
  Node& a = k.add("a_1");
  k.store.set(json{{"metadata", {{"name", kName}, {"namespace", kNs}, {"resourceVersion", "5"}}},
                       {"spec", {{"holderIdentity", "someone"}, {"leaseDurationSeconds", 15}}}});
  std::vector<milliseconds> waits;
  for (int i = 0; i < 50; ++i) waits.push_back(a.elector->step());
  for (auto w : waits) {
    EXPECT_GE(w, 2000ms);
    EXPECT_LT(w, 2400ms);
  }
  EXPECT_GT(*std::max_element(waits.begin(), waits.end()), *std::min_element(waits.begin(), waits.end()));
}

TEST(KubeLeaderElection, CreateRaceLostRetriesAndObservesTheWinner) {
  Cluster k;
  Node& a = k.add("a_1");
  a.create_loses_race = true;
  a.elector->step();  // GET 404, POST 409 AlreadyExists
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(k.store.holder(), "racer");
  a.elector->step();
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(a.new_leaders.back(), "racer");
}

// --- losing and taking over -------------------------------------------------------------

TEST(KubeLeaderElection, FailingApiStopsLeadingWithinRenewDeadlineThenOtherTakesOverAfterLeaseDuration) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  // B's wall clock is an hour ahead: the Lease's renewTime looks ancient to it,
  // which must not matter (only B's own observation time does).
  Node& b = k.add("b_2", std::chrono::hours(1));
  k.run_for(10s);
  ASSERT_TRUE(a.elector->is_leader());
  const auto last_put_count = k.store.put_bodies.size();
  const auto last_renew = k.store.renew_time();  // A's last successful renew

  a.fail_updates = true;
  ASSERT_TRUE(k.run_until([&] { return b.elector->is_leader(); }, 2000));
  ASSERT_EQ(k.store.put_bodies.size(), last_put_count + 1);  // B's takeover only

  // A stopped no later than renew_deadline after its last successful renew
  // (by its own clock), and well before the lease duration.
  ASSERT_TRUE(a.stopped_at);
  const auto a_last_renew = to_steady(*a.clock, last_renew);
  EXPECT_LE(*a.stopped_at - a_last_renew, 10s);
  EXPECT_LT(*a.stopped_at - a_last_renew, 15s);
  EXPECT_EQ(a.stopped, 1);
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(counter(*a.elector, "lost"), 1u);
  EXPECT_GE(counter(*a.elector, "renew_failures"), 4u);

  // B took over only after the record went unchanged for 15 s on B's clock,
  // and after A had stopped leading.
  ASSERT_TRUE(b.started_at);
  EXPECT_LT(*a.stopped_at, *b.started_at);
  EXPECT_GE(*b.started_at - *a.stopped_at, 5s);  // lease_duration - renew_deadline of margin
  const auto order = std::find(k.events.begin(), k.events.end(), "a_1 stopped");
  EXPECT_LT(order, std::find(k.events.begin(), k.events.end(), "b_2 started"));
  EXPECT_EQ(k.store.holder(), "b_2");
  EXPECT_EQ(k.store.transitions(), 1);
  EXPECT_NE((*k.store.lease())["spec"]["acquireTime"], k.store.put_bodies.front()["spec"]["acquireTime"]);
  EXPECT_EQ(counter(*b.elector, "acquisitions"), 1u);
  EXPECT_EQ(b.new_leaders, (std::vector<std::string>{"a_1", "b_2"}));
  EXPECT_EQ(a.new_leaders.back(), "a_1");  // A's updates fail, its GETs still work...
  k.run_for(4s);
  EXPECT_EQ(a.new_leaders.back(), "b_2");  // ...so it sees B
  EXPECT_FALSE(a.elector->is_leader());

  // The errors were logged once, not every retry period.
  const auto warns = std::count_if(a.logs.begin(), a.logs.end(), [](auto& l) {
    return l.first == "warn" && l.second.find("503 ServiceUnavailable: injected") != std::string::npos &&
           l.second.find("leadership lost") == std::string::npos;
  });
  EXPECT_LE(warns, 2);  // renewing, then acquiring (a different message)
  EXPECT_GE(warns, 1);
}

TEST(KubeLeaderElection, OtherWaitsLeaseDurationOnItsOwnClockFromFirstObservation) {
  Cluster k;
  // A stale record from a holder that is gone; its renewTime is a year old by
  // B's wall clock, yet B must wait a full lease duration from when it first saw it.
  k.store.set(json{{"metadata", {{"name", kName}, {"namespace", kNs}, {"resourceVersion", "7"}}},
                       {"spec",
                        {{"holderIdentity", "gone_1"},
                         {"leaseDurationSeconds", 15},
                         {"acquireTime", "2025-01-01T00:00:00.000000Z"},
                         {"renewTime", "2025-01-01T00:00:00.000000Z"},
                         {"leaseTransitions", 4}}}});
  Node& b = k.add("b_2");
  const auto first_seen = k.now();
  ASSERT_TRUE(k.run_until([&] { return b.elector->is_leader(); }));
  ASSERT_TRUE(b.started_at);
  EXPECT_GE(*b.started_at - first_seen, 15s);
  EXPECT_LT(*b.started_at - first_seen, 15s + 2400ms);
  EXPECT_EQ(k.store.transitions(), 5);
  EXPECT_EQ(b.new_leaders, (std::vector<std::string>{"gone_1", "b_2"}));
}

TEST(KubeLeaderElection, HangingRenewsAreBoundedByTheRenewDeadline) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  k.run_for(4s);
  const auto before = a.update_timeouts().size();
  a.hang_updates = true;
  const auto hang_start = a.clock->now();
  ASSERT_TRUE(k.run_until([&] { return a.stopped == 1; }));
  ASSERT_TRUE(a.stopped_at);
  EXPECT_LE(*a.stopped_at - to_steady(*a.clock, k.store.renew_time()), 10s);  // its last successful renew
  // The last good renew began at most one retry period before the hang: the
  // loss comes at most renew_deadline after it, never a whole extra timeout later.
  EXPECT_LE(*a.stopped_at - hang_start, 10s);
  ASSERT_GT(a.update_timeouts().size(), before);
  for (std::size_t i = before; i < a.update_timeouts().size(); ++i) {
    EXPECT_LE(a.update_timeouts()[i], 10s);
  }
  EXPECT_FALSE(a.elector->is_leader());
}

TEST(KubeLeaderElection, StolenLeaseConflictStopsLeadingAtOnceAndIsNotReleased) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  k.store.backdoor_set_holder("thief_9");
  const auto puts = k.store.put_bodies.size();
  a.elector->step();  // renew: 409, GET: held by thief_9
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(a.stopped, 1);
  EXPECT_EQ(counter(*a.elector, "lost"), 1u);
  EXPECT_EQ(a.new_leaders.back(), "thief_9");
  a.elector->stop();
  EXPECT_EQ(a.stopped, 1);  // not twice
  EXPECT_EQ(k.store.holder(), "thief_9");
  EXPECT_EQ(k.store.put_bodies.size(), puts);  // no release of a Lease we do not hold
}

TEST(KubeLeaderElection, ConflictFromOurOwnRecordRenewsOnTheNewVersion) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  // Someone touched the Lease's labels: the resourceVersion moved, the holder did not.
  json touched = *k.store.lease();
  touched["metadata"]["labels"] = {{"x", "y"}};
  touched["metadata"].erase("resourceVersion");  // a new one
  k.store.set(touched);
  a.elector->step();
  EXPECT_TRUE(a.elector->is_leader());
  EXPECT_EQ(a.stopped, 0);
  EXPECT_EQ((*k.store.lease())["metadata"]["labels"]["x"], "y");
  EXPECT_EQ(counter(*a.elector, "renew_failures"), 0u);
}

// --- stop() -------------------------------------------------------------------------------

TEST(KubeLeaderElection, StopStopsLoopsFirstThenReleasesAndOtherAcquiresWithinARetryPeriod) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  Node& b = k.add("b_2");
  k.run_for(6s);
  ASSERT_TRUE(a.elector->is_leader());
  k.events.clear();
  a.elector->stop();
  ASSERT_EQ(k.events.size(), 2u);
  EXPECT_EQ(k.events[0], "a_1 stopped");
  EXPECT_EQ(k.events[1], "PUT holder=");
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(k.store.holder(), "");
  EXPECT_EQ((*k.store.lease())["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(k.store.transitions(), 0);
  EXPECT_EQ(counter(*a.elector, "lost"), 0u);  // a stop is not a loss

  const auto released_at = k.now();
  ASSERT_TRUE(k.run_until([&] { return b.elector->is_leader(); }, 5));
  ASSERT_TRUE(b.started_at);
  EXPECT_LE(*b.started_at - released_at, 2400ms);  // one jittered retry period
  EXPECT_EQ(k.store.transitions(), 1);
  EXPECT_EQ(b.new_leaders, (std::vector<std::string>{"a_1", "", "b_2"}));
  EXPECT_EQ(counter(*b.elector, "transitions"), 2u);
}

TEST(KubeLeaderElection, StopOfACandidateWritesNothing) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  Node& b = k.add("b_2");
  b.elector->step();
  const auto puts = k.store.put_bodies.size();
  b.elector->stop();
  EXPECT_EQ(k.store.put_bodies.size(), puts);
  EXPECT_EQ(b.stopped, 0);
  EXPECT_EQ(k.store.holder(), "a_1");
}

TEST(KubeLeaderElection, LeaseTransitionsCountEveryHolderChange) {
  Cluster k;
  Node* current = &k.add("n0_0");
  ASSERT_TRUE(k.run_until([&] { return current->elector->is_leader(); }));
  EXPECT_EQ(k.store.transitions(), 0);
  for (int i = 1; i <= 4; ++i) {
    Node& next = k.add("n" + std::to_string(i) + "_" + std::to_string(i));
    k.run_for(3s);
    if (i % 2 == 1) {
      current->elector->stop();  // hand-over by release
    } else {
      current->fail_updates = true;  // hand-over by expiry
      current->fail_gets = true;
    }
    ASSERT_TRUE(k.run_until([&] { return next.elector->is_leader(); }, 2000)) << i;
    EXPECT_EQ(k.store.transitions(), i);
    EXPECT_EQ(k.store.holder(), next.name);
    if (i % 2 == 0) current->elector->stop();
    current = &next;
  }
}

TEST(KubeLeaderElection, LeaderThatLostRetakesItsOwnUnchangedLeaseWithoutATransition) {
  Cluster k;
  Node& a = k.add("a_1");
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }));
  a.fail_updates = true;
  ASSERT_TRUE(k.run_until([&] { return a.stopped == 1; }));
  a.fail_updates = false;
  ASSERT_TRUE(k.run_until([&] { return a.elector->is_leader(); }, 5));
  EXPECT_EQ(a.started, 2);
  EXPECT_EQ(k.store.transitions(), 0);
  EXPECT_EQ(counter(*a.elector, "acquisitions"), 2u);
  EXPECT_EQ(counter(*a.elector, "lost"), 1u);
  const auto recovered = std::count_if(a.logs.begin(), a.logs.end(), [](auto& l) {
    return l.first == "info" && l.second.find("answers again") != std::string::npos;
  });
  EXPECT_EQ(recovered, 1);
}

TEST(KubeLeaderElection, ApiErrorsAreLoggedOncePerDistinctError) {
  Cluster k;
  Node& a = k.add("a_1");
  a.fail_gets = true;
  for (int i = 0; i < 20; ++i) a.elector->step();
  const auto warns = std::count_if(a.logs.begin(), a.logs.end(), [](auto& l) { return l.first == "warn"; });
  EXPECT_EQ(warns, 1);
  const auto it = std::find_if(a.logs.begin(), a.logs.end(), [](auto& l) { return l.first == "warn"; });
  ASSERT_NE(it, a.logs.end());
  EXPECT_NE(it->second.find("GET /apis/coordination.k8s.io/v1/namespaces/ig-system/leases/isolation-gate-leader: 503"),
            std::string::npos) << it->second;
  a.fail_gets = false;
  a.elector->step();
  EXPECT_TRUE(a.elector->is_leader());
}

// --- threads, real time, the test API server over HTTPS ---------------------------------------

using test_support::FakeApiServer;


// Callbacks of electors on threads, in order, with a bounded wait.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;
  std::map<std::string, int> leading;  // +1 started, -1 stopped
  std::map<std::string, std::string> holder_seen;  // the last on_new_leader
  int max_leaders = 0;

  LeaderCallbacks callbacks(const std::string& who) {
    LeaderCallbacks cb;
    cb.on_started_leading = [this, who] { note(who, " started", +1); };
    cb.on_stopped_leading = [this, who] { note(who, " stopped", -1); };
    cb.on_new_leader = [this, who](const std::string& holder) {
      std::lock_guard lock(mu);
      holder_seen[who] = holder;
    };
    return cb;
  }
  void note(const std::string& who, const char* what, int delta) {
    std::lock_guard lock(mu);
    events.push_back(who + what);
    leading[who] += delta;
    int n = 0;
    for (auto& [_, v] : leading) n += v;
    max_leaders = std::max(max_leaders, n);
    cv.notify_all();
  }
  bool wait_for(const std::string& event, std::chrono::seconds bound) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, bound, [&] { return std::find(events.begin(), events.end(), event) != events.end(); });
  }
  bool wait_for_any_start(std::chrono::seconds bound) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, bound, [&] { return !events.empty(); });
  }
};

TEST(KubeLeaderElectionHttps, TwoElectorsHandOverOnStop) {
  char tmpl[] = "/tmp/kube_leader_election_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto chain = tls::make_serving_chain({"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
  ASSERT_TRUE(chain) << chain.error();
  std::string error;
  auto server = FakeApiServer::start(dir, chain->cert_pem, chain->key_pem, "", &error);
  ASSERT_TRUE(server) << error;

  ClusterConfig cc;
  cc.server = server->url();
  cc.ca_pem = chain->ca_cert_pem;
  HttpClientOptions o;
  o.qps = 1000;
  o.burst = 1000;
  o.request_timeout = 5s;
  auto client = HttpClient::make(cc, "0.1.0", o);
  ASSERT_TRUE(client) << client.error();

  Recorder rec;
  std::mutex log_mu;
  std::vector<std::string> logs;
  auto make = [&](const std::string& who) {
    LeaderElectionConfig c = base_config(who);
    c.lease_duration = 3s;
    c.renew_deadline = 2s;
    c.retry_period = 500ms;
    c.log = [&](std::string_view level, std::string_view m) {
      std::lock_guard lock(log_mu);
      logs.push_back(std::string(level) + " " + std::string(m));
    };
    auto e = LeaderElector::make(**client, c, rec.callbacks(who));
    EXPECT_TRUE(e) << e.error();
    return e ? std::move(*e) : nullptr;
  };
  const std::string id_a = make_holder_identity("pod-a"), id_b = make_holder_identity("pod-b");
  auto a = make(id_a);
  auto b = make(id_b);
  ASSERT_TRUE(a && b);
  a->start();
  b->start();
  auto all_logs = [&] {
    std::lock_guard lock(log_mu);
    std::string out;
    for (const auto& l : logs) out += l + "\n";
    return out;
  };
  ASSERT_TRUE(rec.wait_for_any_start(20s)) << "nobody led within 20 s:\n" << all_logs();
  LeaderElector* leader = nullptr;
  std::string first;
  {
    std::lock_guard lock(rec.mu);
    first = rec.events.front();
  }
  leader = first.rfind(id_a, 0) == 0 ? a.get() : b.get();
  LeaderElector* other = leader == a.get() ? b.get() : a.get();
  const std::string& leader_id = leader == a.get() ? id_a : id_b;
  const std::string& other_id = leader == a.get() ? id_b : id_a;
  EXPECT_TRUE(leader->is_leader());
  EXPECT_FALSE(other->is_leader());

  leader->stop();
  EXPECT_FALSE(leader->is_leader());
  ASSERT_TRUE(rec.wait_for(other_id + " started", 20s)) << "no hand-over within 20 s:\n" << all_logs();
  EXPECT_TRUE(other->is_leader());
  {
    std::lock_guard lock(rec.mu);
    ASSERT_EQ(rec.events.size(), 3u);
    EXPECT_EQ(rec.events[0], leader_id + " started");
    EXPECT_EQ(rec.events[1], leader_id + " stopped");
    EXPECT_EQ(rec.events[2], other_id + " started");
    EXPECT_EQ(rec.max_leaders, 1);
  }
  auto lease = (*client)->get(object_path(kLeases, kNs, kName), 5000ms);
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], other_id);
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 3);
  {
    std::lock_guard lock(rec.mu);
    EXPECT_EQ(rec.holder_seen[other_id], other_id);
  }

  other->stop();
  EXPECT_FALSE(other->is_leader());
  lease = (*client)->get(object_path(kLeases, kNs, kName), 5000ms);
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  {
    std::lock_guard lock(log_mu);
    for (const auto& l : logs) EXPECT_EQ(l.rfind("warn", 0), std::string::npos) << l;
  }
  a.reset();
  b.reset();
  client->reset();
  server.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ig::kube
