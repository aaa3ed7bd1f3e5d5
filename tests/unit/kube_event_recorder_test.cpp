// The Event recorder (kube/event_recorder.h's correlator, controller/event_writer.h's
// writer): pure tests of the correlator; the writer through reconcile(); and
// the whole recorder against an in-memory
// kube::Client (events stored by path, merge patches applied, failures
// scripted, calls counted) with a fake clock, and against the test API server
// (tests/apiserver/fake_apiserver.py) over HTTPS through kube::HttpClient.
//
// Covered: one occurrence -> one Event with every field; repeats -> one Event
// whose series.count counts them; distinct keys -> distinct Events; cluster-
// scoped objects -> "default"; the note cut at 1 KiB; the per-object and the
// global token buckets (writes bounded, counts kept true, a token later
// writes the pending count); the queue bound (record() refuses, counts, never
// blocks, also from 4 threads at once); 404 on the series patch -> a new
// Event; stop() flushes pending counts; retriable errors retried, others
// dropped and logged once; the dedup window and the LRU cap.
//
// Every wait is bounded and on a condition (calls made, stats reached,
// flush()); nothing asserts on elapsed time.
#include "kube/event_recorder.h"

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

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "controller/event_writer.h"
#include "runtime/manager.h"
#include "fake_kube_client.h"
#include "kube/http_client.h"
#include "tls/certificates.h"


namespace ig::kube {
namespace {

using namespace std::chrono_literals;
using controller::EventWriter;
using nlohmann::json;
namespace fs = std::filesystem;

// The writer as serve_cluster runs it: its runnable on a manager, which stops
// before the writer goes. start() is the manager's.
class RunningWriter : public EventWriter {
 public:
  using EventWriter::EventWriter;
  ~RunningWriter() override { manager_.stop(); }
  void start() {
    manager_.add(runnable(), /*needs_leader=*/false);
    ASSERT_TRUE(manager_.start());
  }

 private:
  runtime::Manager manager_;
};

// --- the fake clock's wall time at its start -------------------------------------

// 2024-05-01T12:03:04.123456Z
const std::chrono::system_clock::time_point kWall0{std::chrono::seconds(1714564984) +
                                                   std::chrono::microseconds(123456)};

// --- an in-memory API for events -----------------------------------------------------

// Events in the one fake client's tracker (create, merge patch, 409 on a
// name taken, 404 on a missing one); faults, a lost answer and a closed gate
// are reactors, and the client records every call.
struct MemoryEvents {
  struct Call {
    std::string verb;  // POST, PATCH
    std::string path;
    json body;
  };
  static constexpr std::string_view kEvents = "/apis/events.k8s.io/v1/events";
  fake::FakeClient client;

  MemoryEvents() {
    client.prepend_reactor("create", "", [this](const fake::Action& a) -> std::optional<fake::Reply> {
      std::lock_guard lock(mu_);
      if (!lose_next_answer_) return std::nullopt;
      lose_next_answer_ = false;  // stored, but the answer never comes: a timeout
      (void)client.track(a);
      return error(0, "");
    });
    client.prepend_reactor("*", "", [this](const fake::Action& a) -> std::optional<fake::Reply> {
      std::lock_guard lock(mu_);
      for (auto it = faults_.begin(); it != faults_.end(); ++it) {
        if (it->verb != a.verb) continue;
        ApiError e = error(it->code, it->reason);
        faults_.erase(it);
        return e;
      }
      return std::nullopt;
    });
    client.prepend_reactor("*", "", [this](const fake::Action&) -> std::optional<fake::Reply> {
      gate_.wait({}, 20s);
      return std::nullopt;
    });
  }
  // The next call of `verb` (POST, PATCH) answers `code` (once per call to this).
  void fail_next(const std::string& verb, int code, const std::string& reason) {
    std::lock_guard lock(mu_);
    faults_.push_back({verb == "POST" ? "create" : "patch", code, reason});
  }
  // The next create is stored and answered as a timeout (code 0).
  void lose_next_answer() {
    std::lock_guard lock(mu_);
    lose_next_answer_ = true;
  }
  // While closed, calls wait inside the client (the worker is busy).
  void close_gate() { gate_.close(); }
  void open_gate() { gate_.open(); }
  void erase_all() {
    for (const auto& e : events())
      client.erase(std::string("/apis/events.k8s.io/v1/namespaces/") + e["metadata"].value("namespace", "") +
                   "/events/" + e["metadata"].value("name", ""));
  }
  bool wait_calls(std::size_t n, std::chrono::milliseconds bound = 10s) { return client.wait_actions(n, "*", "", bound); }
  std::vector<Call> calls() const {
    std::vector<Call> out;
    for (const auto& a : client.actions()) out.push_back({a.verb == "create" ? "POST" : "PATCH", a.path, a.body});
    return out;
  }
  std::vector<json> events() const { return client.objects(kEvents); }

 private:
  struct Fault {
    std::string verb;
    int code;
    std::string reason;
  };
  static ApiError error(int code, const std::string& reason) {
    return ApiError{"memory: " + std::to_string(code) + " " + reason + ": injected", code, reason, {}};
  }

  std::mutex mu_;
  std::deque<Fault> faults_;
  fake::Gate gate_{true};
  bool lose_next_answer_ = false;
};

// --- helpers ------------------------------------------------------------------------------

EventSpec spec(std::string name, std::string reason = "PodDenied", std::string ns = "team-a",
               std::string action = "Admit", std::string type = "Warning") {
  EventSpec s;
  std::string uid = "uid-" + name;
  s.regarding = {"ReplicaSet", "apps/v1", std::move(ns), std::move(name), std::move(uid)};
  s.type = std::move(type);
  s.reason = std::move(reason);
  s.action = std::move(action);
  s.note = "denied: untrusted content without a sandbox";
  return s;
}

struct Fixture {
  MemoryEvents api;
  std::shared_ptr<ig::FakeClock> clock = std::make_shared<ig::FakeClock>(ig::FakeClock::kStart, kWall0);
  std::mutex log_mu;
  std::vector<std::string> logs;

  EventRecorderOptions options() {
    EventRecorderOptions o;
    o.reporting_controller = "isolation-gate";
    o.reporting_instance = "isolation-gate-7d9f-abcde";
    o.global_qps = 0;  // unlimited unless a test sets it
    o.retry_initial = 1ms;
    o.retry_max = 4ms;
    o.clock = clock;
    o.log = [this](std::string_view level, std::string_view message) {
      std::lock_guard lock(log_mu);
      logs.push_back(std::string(level) + ": " + std::string(message));
    };
    return o;
  }
  std::vector<std::string> log_lines() {
    std::lock_guard lock(log_mu);
    return logs;
  }
};

// A bounded wait for a condition on the recorder's stats.
template <typename Pred>
bool wait_stats(EventWriter& r, Pred pred, std::chrono::milliseconds bound = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!pred(r.stats())) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::size_t count_verb(const std::vector<MemoryEvents::Call>& calls, const std::string& verb) {
  std::size_t n = 0;
  for (const auto& c : calls) n += c.verb == verb;
  return n;
}

// --- tests ------------------------------------------------------------------------------------

TEST(KubeEventRecorder, MicroTimeIsRfc3339WithMicroseconds) {
  EXPECT_EQ(format_micro_time(std::chrono::system_clock::time_point(std::chrono::seconds(1714564984) +
                                                                    std::chrono::microseconds(123456))),
            "2024-05-01T12:03:04.123456Z");
  EXPECT_EQ(format_micro_time(std::chrono::system_clock::time_point(std::chrono::seconds(0))),
            "1970-01-01T00:00:00.000000Z");
}

TEST(KubeEventRecorder, OneOccurrenceCreatesOneEventWithEveryField) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].verb, "POST");
  EXPECT_EQ(calls[0].path, "/apis/events.k8s.io/v1/namespaces/team-a/events");
  const json& ev = calls[0].body;
  EXPECT_EQ(ev["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(ev["kind"], "Event");
  EXPECT_TRUE(std::regex_match(ev["metadata"]["name"].get<std::string>(), std::regex("web\\.[0-9a-f]{16}")))
      << ev.dump();
  EXPECT_EQ(ev["metadata"]["namespace"], "team-a");
  EXPECT_EQ(ev["eventTime"], "2024-05-01T12:03:04.123456Z");
  EXPECT_EQ(ev["reportingController"], "isolation-gate");
  EXPECT_EQ(ev["reportingInstance"], "isolation-gate-7d9f-abcde");
  EXPECT_EQ(ev["action"], "Admit");
  EXPECT_EQ(ev["reason"], "PodDenied");
  EXPECT_EQ(ev["note"], "denied: untrusted content without a sandbox");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["regarding"], (json{{"kind", "ReplicaSet"},
                                   {"apiVersion", "apps/v1"},
                                   {"namespace", "team-a"},
                                   {"name", "web"},
                                   {"uid", "uid-web"}}));
  EXPECT_FALSE(ev.contains("series"));
  const auto st = r.stats();
  EXPECT_EQ(st.recorded, 1u);
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.series_updates, 0u);
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.series, 1u);
}

TEST(KubeEventRecorder, RepeatsUpdateThatEventsSeries) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  for (int i = 1; i <= 5; ++i) {
    f.clock->advance(1s);
    EventSpec s = spec("web");
    s.note = "denied, occurrence " + std::to_string(i + 1);
    ASSERT_TRUE(r.record(s));
  }
  ASSERT_TRUE(r.flush(10s));
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 1u);
  const json& ev = events[0];
  EXPECT_EQ(ev["series"]["count"], 6);
  EXPECT_EQ(ev["series"]["lastObservedTime"], "2024-05-01T12:03:09.123456Z");
  EXPECT_EQ(ev["eventTime"], "2024-05-01T12:03:04.123456Z");
  EXPECT_EQ(ev["note"], "denied: untrusted content without a sandbox");  // immutable: the first one's
  const auto calls = f.api.calls();
  EXPECT_EQ(count_verb(calls, "POST"), 1u);
  const std::string event_path = calls[0].path + "/" + ev["metadata"]["name"].get<std::string>();
  for (std::size_t i = 1; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].verb, "PATCH");
    EXPECT_EQ(calls[i].path, event_path);
    EXPECT_EQ(calls[i].body.size(), 1u) << calls[i].body.dump();  // series only: the rest is immutable
    EXPECT_TRUE(calls[i].body.contains("series"));
  }
  const auto st = r.stats();
  EXPECT_EQ(st.recorded, 6u);
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.series_updates, calls.size() - 1);
  EXPECT_EQ(st.dropped_rate_limited, 0u);
}

TEST(KubeEventRecorder, FirstRepeatCountsTwo) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].verb, "PATCH");
  EXPECT_EQ(calls[1].body["series"]["count"], 2);
}

TEST(KubeEventRecorder, DistinctKeysMakeDistinctEvents) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  ASSERT_TRUE(r.record(spec("web", "PodDenied")));
  ASSERT_TRUE(r.record(spec("web", "SandboxRequired")));
  ASSERT_TRUE(r.record(spec("web", "PodDenied", "team-a", "Evict")));
  ASSERT_TRUE(r.record(spec("web", "PodDenied", "team-a", "Admit", "Normal")));
  ASSERT_TRUE(r.record(spec("api", "PodDenied")));
  ASSERT_TRUE(r.record(spec("web", "PodDenied", "team-b")));
  ASSERT_TRUE(r.record(spec("web", "PodDenied")));  // a repeat of the first
  ASSERT_TRUE(r.flush(10s));
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 6u);
  int with_series = 0;
  for (const json& e : events) with_series += e.contains("series");
  EXPECT_EQ(with_series, 1);
  EXPECT_EQ(r.stats().created, 6u);
}

TEST(KubeEventRecorder, ClusterScopedObjectsGoToTheDefaultNamespace) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  EventSpec s = spec("team-a", "NamespaceNotEnforced", "");
  s.regarding.kind = "Namespace";
  s.regarding.api_version = "v1";
  ASSERT_TRUE(r.record(s));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].path, "/apis/events.k8s.io/v1/namespaces/default/events");
  EXPECT_EQ(calls[0].body["metadata"]["namespace"], "default");
  EXPECT_FALSE(calls[0].body["regarding"].contains("namespace"));
  EXPECT_EQ(calls[0].body["regarding"]["kind"], "Namespace");
}

TEST(KubeEventRecorder, TheRelatedObjectIsWrittenAndPartOfTheKey) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  auto about = [](std::string pod) {
    EventSpec s = spec("team-c", "WouldDenyWhenEnforced", "", "Audit");
    s.regarding.kind = "Namespace";
    s.regarding.api_version = "v1";
    s.related = {"Pod", "v1", "team-c", pod, "uid-" + pod};
    return s;
  };
  ASSERT_TRUE(r.record(about("a")));
  ASSERT_TRUE(r.record(about("b")));
  ASSERT_TRUE(r.record(about("a")));  // a repeat of the first
  ASSERT_TRUE(r.record(spec("team-c", "WouldDenyWhenEnforced", "", "Audit")));  // none related: its own key
  ASSERT_TRUE(r.flush(10s));
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 3u);
  std::map<std::string, json> by_related;
  for (const json& e : events) by_related[e.contains("related") ? e["related"]["name"].get<std::string>() : ""] = e;
  EXPECT_EQ(by_related["a"]["related"], (json{{"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", "team-c"},
                                              {"name", "a"}, {"uid", "uid-a"}}));
  EXPECT_EQ(by_related["a"]["series"]["count"], 2);
  EXPECT_FALSE(by_related["b"].contains("series"));
  EXPECT_EQ(by_related["b"]["regarding"]["name"], "team-c");
  EXPECT_TRUE(by_related.count(""));
}

TEST(KubeEventRecorder, NamesThatCannotPrefixAnEventNameGetARandomOne) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  EventSpec s = spec("system:controller:thing");  // valid for RBAC objects, not for an Event name
  ASSERT_TRUE(r.record(s));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(std::regex_match(calls[0].body["metadata"]["name"].get<std::string>(), std::regex("[0-9a-f]{32}")));
  EXPECT_EQ(calls[0].body["regarding"]["name"], "system:controller:thing");
}

TEST(KubeEventRecorder, NoteIsCutAtOneKibOnAUtf8Boundary) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  EventSpec s = spec("web");
  s.note.clear();
  for (int i = 0; i < 1000; ++i) s.note += "\xc3\xa9";  // é, 2 bytes
  ASSERT_TRUE(r.record(s));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 1u);
  const std::string note = calls[0].body["note"];
  EXPECT_LE(note.size(), kMaxEventNote);
  EXPECT_GE(note.size(), kMaxEventNote - 4);
  ASSERT_GE(note.size(), 3u);
  EXPECT_EQ(note.substr(note.size() - 3), "...");
  const std::string body = note.substr(0, note.size() - 3);
  EXPECT_EQ(body.size() % 2, 0u);  // whole characters only
  EXPECT_EQ(calls[0].body.dump().find("\\u"), std::string::npos);
}

TEST(KubeEventRecorder, InvalidSpecsAreRefusedAndCounted) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  EventSpec no_name = spec("");
  EventSpec no_reason = spec("web", "");
  EventSpec no_action = spec("web", "PodDenied", "team-a", "");
  EventSpec bad_type = spec("web", "PodDenied", "team-a", "Admit", "Error");
  EventSpec long_reason = spec("web", std::string(129, 'R'));
  EXPECT_FALSE(r.record(no_name));
  EXPECT_FALSE(r.record(no_reason));
  EXPECT_FALSE(r.record(no_action));
  EXPECT_FALSE(r.record(bad_type));
  EXPECT_FALSE(r.record(long_reason));
  EXPECT_EQ(r.stats().dropped_invalid, 5u);
  EXPECT_EQ(r.stats().recorded, 0u);
}

TEST(KubeEventRecorder, PerObjectBucketHoldsBackWritesAndATokenLaterWritesThePendingCount) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.object_burst = 3;
  o.object_refill = 5min;
  RunningWriter r(f.api.client, o);
  r.start();
  for (std::size_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(r.record(spec("web")));
    ASSERT_TRUE(f.api.wait_calls(i));
  }
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r.record(spec("web")));
  // The worker has seen all ten and holds them: no token for this object.
  ASSERT_TRUE(wait_stats(r, [](const EventRecorderStats& s) { return s.pending == 10; }));
  EXPECT_EQ(f.api.calls().size(), 3u);
  EXPECT_EQ(r.stats().dropped_rate_limited, 0u);

  // Another object is not held back by this one's bucket.
  ASSERT_TRUE(r.record(spec("api")));
  ASSERT_TRUE(f.api.wait_calls(4));
  EXPECT_EQ(f.api.calls()[3].body["regarding"]["name"], "api");

  f.clock->advance(5min);
  r.wake();
  ASSERT_TRUE(f.api.wait_calls(5));
  const auto calls = f.api.calls();
  EXPECT_EQ(calls[4].verb, "PATCH");
  EXPECT_EQ(calls[4].body["series"]["count"], 13);
  ASSERT_TRUE(wait_stats(r, [](const EventRecorderStats& s) { return s.pending == 0; }));
  EXPECT_EQ(r.stats().dropped_rate_limited, 0u);
}

TEST(KubeEventRecorder, ABurstOfAThousandMakesAFewWritesAndTheRightCount) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());  // burst 25, one token per 5 minutes
  r.start();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(r.record(spec("crashloop")));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  EXPECT_LE(calls.size(), 25u + 2u);
  EXPECT_EQ(count_verb(calls, "POST"), 1u);
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["series"]["count"], 1000);
  const auto st = r.stats();
  EXPECT_EQ(st.recorded, 1000u);
  EXPECT_EQ(st.dropped_rate_limited, 0u);
  EXPECT_EQ(st.created + st.series_updates, calls.size());
}

TEST(KubeEventRecorder, GlobalBucketBoundsAllWrites) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.global_qps = 1;
  o.global_burst = 3;
  RunningWriter r(f.api.client, o);
  r.start();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r.record(spec("obj-" + std::to_string(i))));
  ASSERT_TRUE(wait_stats(r, [](const EventRecorderStats& s) { return s.created == 3 && s.pending == 7; }));
  EXPECT_EQ(f.api.calls().size(), 3u);
  f.clock->advance(1s);
  r.wake();
  ASSERT_TRUE(wait_stats(r, [](const EventRecorderStats& s) { return s.created == 4 && s.pending == 6; }));
  EXPECT_EQ(f.api.calls().size(), 4u);
  for (std::uint64_t created = 5; created <= 10; ++created) {  // one a second
    f.clock->advance(1s);
    r.wake();
    ASSERT_TRUE(wait_stats(r, [&](const EventRecorderStats& s) { return s.created == created; }));
  }
  EXPECT_EQ(f.api.calls().size(), 10u);
  EXPECT_EQ(r.stats().pending, 0u);
}

TEST(KubeEventRecorder, FullQueueRefusesAndCounts) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.queue_capacity = 100;
  RunningWriter r(f.api.client, o);  // not started: nothing drains the queue
  int accepted = 0, refused = 0;
  for (int i = 0; i < 150; ++i) (r.record(spec("web")) ? accepted : refused)++;
  EXPECT_EQ(accepted, 100);
  EXPECT_EQ(refused, 50);
  EXPECT_EQ(r.stats().dropped_queue_full, 50u);
  EXPECT_EQ(r.stats().recorded, 100u);
  r.start();  // what was queued before start() is written
  ASSERT_TRUE(r.flush(10s));
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["series"]["count"], 100);
  bool logged = false;
  for (const auto& l : f.log_lines()) logged |= l.find("queue is full") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST(KubeEventRecorder, RecordNeverBlocksFromFourThreadsWhileTheApiHangs) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.queue_capacity = 1000;
  o.stop_flush = 100ms;
  RunningWriter r(f.api.client, o);
  r.start();
  f.api.close_gate();
  ASSERT_TRUE(r.record(spec("first")));
  ASSERT_TRUE(f.api.wait_calls(1));  // the worker is inside the client, stuck
  std::atomic<std::uint64_t> accepted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25'000; ++i) {
        if (r.record(spec("obj-" + std::to_string(t) + "-" + std::to_string(i % 50))))
          ++accepted;
        else
          ++refused;
      }
    });
  }
  for (auto& th : threads) th.join();  // they all returned while the API hangs
  EXPECT_EQ(accepted + refused, 100'000u);
  EXPECT_EQ(accepted.load(), 1000u);  // exactly the queue
  const auto st = r.stats();
  EXPECT_EQ(st.recorded, 1u + accepted.load());
  EXPECT_EQ(st.dropped_queue_full, refused.load());
  f.api.open_gate();
  r.stop();
  EXPECT_FALSE(r.record(spec("late")));
  EXPECT_EQ(r.stats().dropped_stopped, 1u);
}

TEST(KubeEventRecorder, SeriesPatchNotFoundCreatesANewEvent) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  const std::string first = f.api.events().at(0)["metadata"]["name"];
  f.api.erase_all();  // garbage collected (the events TTL)
  EventSpec again = spec("web");
  again.note = "denied again";
  ASSERT_TRUE(r.record(again));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].verb, "PATCH");
  EXPECT_EQ(calls[2].verb, "POST");
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0]["metadata"]["name"], first);
  EXPECT_EQ(events[0]["series"]["count"], 2);  // the series goes on
  EXPECT_EQ(events[0]["note"], "denied again");  // a new Event takes the latest note
  const auto st = r.stats();
  EXPECT_EQ(st.created, 2u);
  EXPECT_EQ(st.recreated, 1u);
  EXPECT_EQ(st.send_errors, 0u);
  // Repeats now patch the new Event.
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  EXPECT_EQ(f.api.events().at(0)["series"]["count"], 3);
  EXPECT_EQ(f.api.calls().back().verb, "PATCH");
}

TEST(KubeEventRecorder, StopFlushesPendingCounts) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.object_burst = 1;
  RunningWriter r(f.api.client, o);
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(f.api.wait_calls(1));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(wait_stats(r, [](const EventRecorderStats& s) { return s.pending == 5; }));
  r.stop();
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["series"]["count"], 6);
  const auto st = r.stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.dropped_rate_limited, 0u);
  EXPECT_EQ(st.series_updates, 1u);
}

TEST(KubeEventRecorder, StopCountsWhatItCouldNotWrite) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.global_qps = 1;
  o.global_burst = 1;  // the fake clock never refills it
  o.stop_flush = 50ms;
  RunningWriter r(f.api.client, o);
  r.start();
  ASSERT_TRUE(r.record(spec("a")));
  ASSERT_TRUE(f.api.wait_calls(1));
  ASSERT_TRUE(r.record(spec("b")));
  ASSERT_TRUE(r.record(spec("b")));
  ASSERT_TRUE(wait_stats(r, [](const EventRecorderStats& s) { return s.pending == 2; }));
  r.stop();
  EXPECT_EQ(f.api.calls().size(), 1u);
  EXPECT_EQ(r.stats().dropped_rate_limited, 2u);
}

TEST(KubeEventRecorder, RetriableErrorsAreRetried) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  f.api.fail_next("POST", 503, "ServiceUnavailable");
  f.api.fail_next("POST", 0, "");  // no answer
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  EXPECT_EQ(f.api.calls().size(), 3u);
  EXPECT_EQ(f.api.events().size(), 1u);
  const auto st = r.stats();
  EXPECT_EQ(st.retries, 2u);
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.send_errors, 0u);
}

TEST(KubeEventRecorder, ACreateThatTimedOutButLandedIsWrittenOnceWhenItsRetryMeetsIt) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  f.api.lose_next_answer();
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 2u);  // the create whose answer was lost, its retry (409 AlreadyExists)
  EXPECT_EQ(calls[0].verb, "POST");
  EXPECT_EQ(calls[1].verb, "POST");
  EXPECT_EQ(calls[0].body["metadata"]["name"], calls[1].body["metadata"]["name"]);  // the same Event
  EXPECT_EQ(f.api.events().size(), 1u);
  auto st = r.stats();
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.retries, 1u);
  EXPECT_EQ(st.send_errors, 0u);
  for (const auto& line : f.log_lines()) EXPECT_EQ(line.find("AlreadyExists"), std::string::npos) << line;
  // That Event is ours: a repeat patches its series, no second Event.
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  EXPECT_EQ(count_verb(f.api.calls(), "POST"), 2u);
  EXPECT_EQ(count_verb(f.api.calls(), "PATCH"), 1u);
  ASSERT_EQ(f.api.events().size(), 1u);
  EXPECT_EQ(f.api.events().at(0)["series"]["count"], 2);
  EXPECT_EQ(r.stats().series_updates, 1u);
}

TEST(KubeEventRecorder, RetriesSpentDropTheWriteAndCountIt) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.max_attempts = 3;
  RunningWriter r(f.api.client, o);
  for (int i = 0; i < 3; ++i) f.api.fail_next("PATCH", 500, "InternalError");
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  EXPECT_EQ(f.api.calls().size(), 4u);  // POST, then PATCH three times
  auto st = r.stats();
  EXPECT_EQ(st.retries, 2u);
  EXPECT_EQ(st.send_errors, 1u);
  EXPECT_EQ(st.pending, 0u);
  // The Event is still live: the next repeat patches it with the true count.
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  EXPECT_EQ(f.api.events().at(0)["series"]["count"], 3);
}

TEST(KubeEventRecorder, OtherErrorsAreDroppedAndLoggedOnce) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());
  f.api.fail_next("POST", 403, "Forbidden");
  f.api.fail_next("POST", 403, "Forbidden");
  r.start();
  ASSERT_TRUE(r.record(spec("a")));
  ASSERT_TRUE(r.record(spec("b")));
  ASSERT_TRUE(r.flush(10s));
  EXPECT_EQ(f.api.calls().size(), 2u);  // not retried
  EXPECT_EQ(r.stats().send_errors, 2u);
  EXPECT_EQ(r.stats().retries, 0u);
  int warnings = 0;
  for (const auto& l : f.log_lines()) warnings += l.find("403 Forbidden") != std::string::npos;
  EXPECT_EQ(warnings, 1);
  // A failed create is forgotten: the next occurrence tries a new Event.
  ASSERT_TRUE(r.record(spec("a")));
  ASSERT_TRUE(r.flush(10s));
  const auto events = f.api.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].contains("series"));
}

TEST(KubeEventRecorder, IdleKeysExpireAndANewOccurrenceStartsANewEvent) {
  Fixture f;
  RunningWriter r(f.api.client, f.options());  // window: 30 minutes
  r.start();
  ASSERT_TRUE(r.record(spec("web")));
  ASSERT_TRUE(r.flush(10s));
  f.clock->advance(29min);
  ASSERT_TRUE(r.record(spec("web")));  // within the window: a repeat
  ASSERT_TRUE(r.flush(10s));
  f.clock->advance(31min);
  ASSERT_TRUE(r.record(spec("web")));  // idle past the window: a new Event
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].verb, "PATCH");
  EXPECT_EQ(calls[2].verb, "POST");
  EXPECT_EQ(f.api.events().size(), 2u);
  EXPECT_EQ(r.stats().series, 1u);
}

TEST(KubeEventRecorder, TheCacheIsBoundedLeastRecentlyUsedFirst) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.max_series = 2;
  RunningWriter r(f.api.client, o);
  r.start();
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(r.record(spec(name)));
    ASSERT_TRUE(r.flush(10s));
  }
  EXPECT_EQ(r.stats().series, 2u);
  ASSERT_TRUE(r.record(spec("c")));  // still cached: a repeat
  ASSERT_TRUE(r.record(spec("a")));  // evicted: a new Event
  ASSERT_TRUE(r.flush(10s));
  const auto calls = f.api.calls();
  EXPECT_EQ(count_verb(calls, "POST"), 4u);
  EXPECT_EQ(count_verb(calls, "PATCH"), 1u);
}

// --- the correlator, pure: time passed in ---------------------------------------------------

using Verb = EventWrite::Verb;
using Outcome = EventCorrelator::Outcome;

struct Pure {
  EventRecorderOptions options;
  ig::FakeClock clock{ig::FakeClock::kStart, kWall0};
  std::unique_ptr<EventCorrelator> c;

  explicit Pure(std::function<void(EventRecorderOptions&)> tweak = {}) {
    options.reporting_controller = "isolation-gate";
    options.reporting_instance = "isolation-gate-0";
    options.global_qps = 0;
    if (tweak) tweak(options);
    c = std::make_unique<EventCorrelator>(options, clock.now());
  }
  std::string observe(const EventSpec& s) { return c->observe(s, clock.now(), clock.wall()); }
  EventWrite next(const std::string& key, bool flushing = false) { return c->next(key, clock.now(), flushing); }
  EventWrite write(const std::string& key) {  // the next write, done as written
    EventWrite w = next(key);
    if (w.verb == Verb::Create || w.verb == Verb::Patch) c->done(key, w, Outcome::Written);
    return w;
  }
};

TEST(KubeEventCorrelator, RepeatsAggregateIntoOneCreateThenOneSeriesPatch) {
  Pure p;
  std::string key;
  for (int i = 0; i < 3; ++i) key = p.observe(spec("web"));
  EXPECT_EQ(key, event_key(spec("web")));
  EXPECT_EQ(p.c->queued(), 3u);
  EventWrite w = p.write(key);
  ASSERT_EQ(w.verb, Verb::Create);
  EXPECT_EQ(w.path, "/apis/events.k8s.io/v1/namespaces/team-a/events");
  EXPECT_EQ(w.count, 3u);
  EXPECT_EQ(w.body["series"]["count"], 3);
  const std::string name = w.body["metadata"]["name"];
  EXPECT_EQ(p.c->queued(), 0u);
  EXPECT_EQ(p.c->pending(), 0u);
  EXPECT_EQ(p.next(key).verb, Verb::None);  // the Event shows every occurrence
  p.clock.advance(1s);
  p.observe(spec("web"));
  w = p.write(key);
  ASSERT_EQ(w.verb, Verb::Patch);
  EXPECT_EQ(w.path, "/apis/events.k8s.io/v1/namespaces/team-a/events/" + name);
  EXPECT_EQ(w.body, (json{{"series", {{"count", 4}, {"lastObservedTime", "2024-05-01T12:03:05.123456Z"}}}}));
  EventRecorderStats st;
  p.c->add_stats(st);
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.series_updates, 1u);
  EXPECT_EQ(st.series, 1u);
}

TEST(KubeEventCorrelator, TheSpamFilterHoldsAnObjectBackUntilItsBucketRefills) {
  Pure p([](EventRecorderOptions& o) {
    o.object_burst = 2;
    o.object_refill = 5min;
  });
  const std::string web = p.observe(spec("web"));
  EXPECT_EQ(p.write(web).verb, Verb::Create);
  p.observe(spec("web"));
  EXPECT_EQ(p.write(web).verb, Verb::Patch);
  p.observe(spec("web"));
  p.observe(spec("web"));
  EventWrite w = p.next(web);
  ASSERT_EQ(w.verb, Verb::Wait);  // held back, not dropped
  EXPECT_EQ(w.wait, std::chrono::duration_cast<Clock::duration>(5min));
  EXPECT_EQ(p.c->pending(), 2u);
  const std::string api = p.observe(spec("api"));  // another object has its own bucket
  EXPECT_EQ(p.write(api).verb, Verb::Create);
  EXPECT_EQ(p.next(web, /*flushing=*/true).verb, Verb::Patch);  // a flush ignores the object's bucket
  p.clock.advance(5min);
  w = p.write(web);
  ASSERT_EQ(w.verb, Verb::Patch);
  EXPECT_EQ(w.count, 4u);
}

TEST(KubeEventCorrelator, TheGlobalBucketBoundsEveryKey) {
  Pure p([](EventRecorderOptions& o) {
    o.global_qps = 1;
    o.global_burst = 1;
  });
  EXPECT_EQ(p.write(p.observe(spec("a"))).verb, Verb::Create);
  const std::string b = p.observe(spec("b"));
  EXPECT_EQ(p.next(b).verb, Verb::Wait);
  EXPECT_EQ(p.next(b, /*flushing=*/true).verb, Verb::Wait);  // a flush still pays the global bucket
  p.clock.advance(1s);
  EXPECT_EQ(p.write(b).verb, Verb::Create);
}

TEST(KubeEventCorrelator, PatchGoneCreatesANewEventWithTheSeriesAndNoNewToken) {
  Pure p([](EventRecorderOptions& o) { o.object_burst = 2; });
  const std::string key = p.observe(spec("web"));
  const EventWrite first = p.write(key);
  p.observe(spec("web"));
  EventWrite w = p.next(key);
  ASSERT_EQ(w.verb, Verb::Patch);
  p.c->done(key, w, Outcome::Gone);  // the bucket is empty now; the re-create needs no token
  w = p.next(key);
  ASSERT_EQ(w.verb, Verb::Create);
  EXPECT_NE(w.body["metadata"]["name"], first.body["metadata"]["name"]);
  EXPECT_EQ(w.body["series"]["count"], 2);
  p.c->done(key, w, Outcome::Written);
  EventRecorderStats st;
  p.c->add_stats(st);
  EXPECT_EQ(st.created, 2u);
  EXPECT_EQ(st.recreated, 1u);
}

TEST(KubeEventCorrelator, ARetryKeepsTheEventsNameAndAFailedCreateForgetsTheKey) {
  Pure p;
  const std::string key = p.observe(spec("web"));
  const EventWrite w = p.next(key);
  p.c->done(key, w, Outcome::Retry);
  EXPECT_EQ(p.c->failed_attempts(key), 1);
  const EventWrite again = p.next(key);
  ASSERT_EQ(again.verb, Verb::Create);
  EXPECT_EQ(again.body["metadata"]["name"], w.body["metadata"]["name"]);
  p.c->done(key, again, Outcome::Failed);
  EXPECT_EQ(p.c->pending(), 0u);
  EventRecorderStats st;
  p.c->add_stats(st);
  EXPECT_EQ(st.series, 0u);
  EXPECT_EQ(st.created, 0u);
}

TEST(KubeEventCorrelator, TheLeastRecentlyUsedKeyIsEvictedAndItsUnwrittenCountDropped) {
  Pure p([](EventRecorderOptions& o) { o.max_series = 2; });
  const std::string a = p.observe(spec("a"));
  p.write(a);
  p.observe(spec("a"));  // unwritten when evicted
  p.observe(spec("b"));
  p.observe(spec("a"));  // a is the most recent again
  p.observe(spec("c"));  // evicts b (never written)
  EventRecorderStats st;
  p.c->add_stats(st);
  EXPECT_EQ(st.series, 2u);
  EXPECT_EQ(st.dropped_rate_limited, 1u);
  EXPECT_EQ(p.c->queued(), 3u);  // a's two repeats, c
  EXPECT_EQ(p.next(event_key(spec("b"))).verb, Verb::None);
  p.observe(spec("d"));  // evicts a: its two unwritten occurrences
  p.c->add_stats(st = {});
  EXPECT_EQ(st.dropped_rate_limited, 3u);
  EXPECT_EQ(p.write(p.observe(spec("a"))).verb, Verb::Create);  // a new Event
}

TEST(KubeEventCorrelator, AKeyIdlePastTheWindowStartsANewEvent) {
  Pure p;
  const std::string key = p.observe(spec("web"));
  p.write(key);
  p.clock.advance(29min);
  p.observe(spec("web"));
  EXPECT_EQ(p.write(key).verb, Verb::Patch);
  p.clock.advance(31min);
  p.observe(spec("web"));
  const EventWrite w = p.write(key);
  ASSERT_EQ(w.verb, Verb::Create);
  EXPECT_FALSE(w.body.contains("series"));
}

// --- the writer through reconcile() (not started: no worker) ----------------------------------

TEST(EventWriterReconcile, ARetriableFailureIsRequeuedWithBackoffThenWritten) {
  Fixture f;
  EventWriter w(f.api.client, f.options());
  f.api.fail_next("POST", 503, "ServiceUnavailable");
  ASSERT_TRUE(w.record(spec("web")));
  const std::string key = event_key(spec("web"));
  auto r = w.reconcile(key, {});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->requeue);  // the engine's per-key backoff
  EXPECT_EQ(r->after, Clock::duration::zero());
  EXPECT_EQ(w.stats().retries, 1u);
  EXPECT_EQ(w.stats().pending, 1u);
  r = w.reconcile(key, {});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->requeue);
  EXPECT_EQ(w.stats().created, 1u);
  EXPECT_EQ(w.stats().pending, 0u);
  EXPECT_EQ(f.api.calls().size(), 2u);
}

TEST(EventWriterReconcile, AlreadyExistsAfterALostAnswerIsASuccess) {
  Fixture f;
  EventWriter w(f.api.client, f.options());
  f.api.lose_next_answer();
  ASSERT_TRUE(w.record(spec("web")));
  const std::string key = event_key(spec("web"));
  ASSERT_TRUE(w.reconcile(key, {}));
  const auto r = w.reconcile(key, {});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->requeue);
  const auto calls = f.api.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].body["metadata"]["name"], calls[1].body["metadata"]["name"]);
  const auto st = w.stats();
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.send_errors, 0u);
  EXPECT_EQ(st.pending, 0u);
}

TEST(EventWriterReconcile, NoTokenIsARequeueAfterTheWait) {
  Fixture f;
  EventRecorderOptions o = f.options();
  o.object_burst = 1;
  EventWriter w(f.api.client, o);
  ASSERT_TRUE(w.record(spec("web")));
  const std::string key = event_key(spec("web"));
  ASSERT_TRUE(w.reconcile(key, {}));
  ASSERT_TRUE(w.record(spec("web")));
  const auto r = w.reconcile(key, {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->after, std::chrono::duration_cast<Clock::duration>(5min));
  EXPECT_EQ(f.api.calls().size(), 1u);
}

TEST(EventWriterReconcile, ACancelledReconcileSendsNothing) {
  Fixture f;
  EventWriter w(f.api.client, f.options());
  ASSERT_TRUE(w.record(spec("web")));
  std::stop_source stop;
  stop.request_stop();
  const auto r = w.reconcile(event_key(spec("web")), stop.get_token());
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->requeue);
  EXPECT_TRUE(f.api.calls().empty());
  EXPECT_EQ(w.stats().pending, 1u);
  w.stop();  // never started: what was queued is counted as dropped at stop
  EXPECT_EQ(w.stats().dropped_stopped, 1u);
}

// --- against the test API server over HTTPS ----------------------------------------------

using test_support::FakeApiServer;

class KubeEventRecorderHttps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/kube_event_recorder_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    auto chain = tls::make_serving_chain({"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
    ASSERT_TRUE(chain) << chain.error();
    chain_ = new tls::CertificateBundle(*chain);
    std::string error;
    server_ = FakeApiServer::start(*dir_, chain_->cert_pem, chain_->key_pem, "", &error).release();
    if (!server_) FAIL() << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete chain_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the test API server did not start";
    server_->control("reset_faults");
    ClusterConfig c;
    c.server = server_->url();
    c.ca_pem = chain_->ca_cert_pem;
    HttpClientOptions o;
    o.qps = 1000;
    o.burst = 1000;
    o.request_timeout = 10s;
    auto made = HttpClient::make(c, "0.1.0", o);
    ASSERT_TRUE(made) << made.error();
    client_ = std::move(*made);
  }

  json events(const std::string& ns) {
    return server_->control("list", {{"resource", "events.events.k8s.io"}, {"namespace", ns}});
  }

  static inline std::string* dir_ = nullptr;
  static inline tls::CertificateBundle* chain_ = nullptr;
  static inline FakeApiServer* server_ = nullptr;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(KubeEventRecorderHttps, CreatesPatchesAndRecreatesOverHttps) {
  EventRecorderOptions o;
  o.reporting_controller = "isolation-gate";
  o.reporting_instance = "isolation-gate-0";
  o.retry_initial = 1ms;
  RunningWriter r(*client_, o);
  r.start();
  ASSERT_TRUE(r.record(spec("web", "PodDenied", "https-a")));
  ASSERT_TRUE(r.flush(20s));
  json list = events("https-a");
  ASSERT_EQ(list.size(), 1u) << list.dump();
  const json first = list[0];
  EXPECT_EQ(first["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(first["reason"], "PodDenied");
  EXPECT_EQ(first["action"], "Admit");
  EXPECT_EQ(first["type"], "Warning");
  EXPECT_EQ(first["reportingController"], "isolation-gate");
  EXPECT_EQ(first["reportingInstance"], "isolation-gate-0");
  EXPECT_EQ(first["regarding"]["uid"], "uid-web");
  EXPECT_TRUE(std::regex_match(first["eventTime"].get<std::string>(),
                               std::regex("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z")));

  for (int i = 0; i < 5; ++i) ASSERT_TRUE(r.record(spec("web", "PodDenied", "https-a")));
  ASSERT_TRUE(r.flush(20s));
  list = events("https-a");
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["metadata"]["name"], first["metadata"]["name"]);
  EXPECT_EQ(list[0]["series"]["count"], 6);

  // A retriable failure on the next patch is retried.
  server_->control("inject_fault", {{"status", 503}, {"method", "PATCH"}, {"count", 1}});
  ASSERT_TRUE(r.record(spec("web", "PodDenied", "https-a")));
  ASSERT_TRUE(r.flush(20s));
  EXPECT_EQ(events("https-a")[0]["series"]["count"], 7);
  EXPECT_EQ(r.stats().retries, 1u);

  // Garbage collected: the series patch answers 404 and a new Event is made.
  server_->control("delete", {{"resource", "events.events.k8s.io"},
                              {"name", first["metadata"]["name"]},
                              {"namespace", "https-a"}});
  ASSERT_TRUE(r.record(spec("web", "PodDenied", "https-a")));
  ASSERT_TRUE(r.flush(20s));
  list = events("https-a");
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_NE(list[0]["metadata"]["name"], first["metadata"]["name"]);
  EXPECT_EQ(list[0]["series"]["count"], 8);
  const auto st = r.stats();
  EXPECT_EQ(st.created, 2u);
  EXPECT_EQ(st.recreated, 1u);
  EXPECT_EQ(st.send_errors, 0u);
  r.stop();
}

}  // namespace
}  // namespace ig::kube
