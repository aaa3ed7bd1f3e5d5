// The Component status loop (leader only; docs/operations.md, "Component
// status"): keeps every Component's status subresource equal to
// desired_status() (controller/component_status.h), writing only when it
// changes.
//
// The shape is controller-runtime's: a work queue of keys, deduplicated (a
// key queued twice is processed once), `workers` workers (its
// MaxConcurrentReconciles; a key is never processed by two at once: one
// enqueued while it is processed is processed again after); triggers enqueue
// keys:
// a Component change its key, a sandbox flip or a relist every key
// (enqueue_all), a drift count change its Component's key.
//
// Contract:
//  - Nothing is written while ready() is false (the operator's: the
//    Component, RuntimeClass and Node caches have synced, the sandbox is
//    settled, Cluster::settled(), and the drift audit has made a pass, so
//    driftedPods is known): keys wait, and a key whose status was computed
//    as it turned false is queued again, not written. Nothing after stop().
//  - A key is written when the desired status's fingerprint differs from
//    the one the cache holds and from the one this writer last wrote for it
//    (so the interval between our write and its watch event does not cause
//    a second write); the cache's fingerprint covers only the gate's own
//    fields and conditions (holds_status()), so another manager's condition
//    causes no write. The write is a server-side apply of the status
//    subresource (apply_configuration(), field manager kFieldManager,
//    force: the gate is the sole owner of its fields); runtimeClassName is
//    left out when not RequireSetec, so the API server removes it (and,
//    when the answer still holds it, a merge patch removes it: an earlier
//    version's merge patches co-own it; leftover_fields_patch()).
//  - Errors: 404 (the Component is gone) drops the key; others requeue it
//    with exponential backoff per key (500 ms doubling to 30 s), logged once
//    per distinct message. The client's rate limit paces the writes (shared
//    by every worker: more workers only help while one write's round trip,
//    not the limit, is what bounds the rate).
//  - start()/stop() (stop is prompt: no new write starts after it; a write
//    in flight finishes within the client's request timeout) may be called
//    again for each term of leadership, from any threads but the workers': one
//    runs at a time, so a start() that meets a stop() still joining the last
//    term's workers waits for it. enqueue*() are thread-safe and never
//    block on the network.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "admission/context.h"
#include "controller/component_status.h"
#include "kube/api.h"
#include "kube/store.h"

namespace ig::controller {

struct StatusWriterOptions {
  std::string runtime_class;
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;
  std::function<std::size_t(std::string_view component_key)> drifted_pods;  // empty: 0
  std::function<bool()> ready;                                              // empty: always
  std::function<std::time_t()> now;                                         // empty: time()
  std::chrono::milliseconds retry_initial{500}, retry_max{30'000};
  std::size_t workers = 1;  // --status-workers; at least 1
  std::function<void(std::string_view level, std::string_view message)> log;
};

struct StatusWriterStats {
  std::uint64_t writes = 0;      // status patches that succeeded
  std::uint64_t unchanged = 0;   // keys processed with nothing to write
  std::uint64_t errors = 0;      // failed patches
  std::size_t queued = 0;        // keys waiting now
};

class StatusWriter {
 public:
  StatusWriter(kube::Client& client, const kube::Store<ComponentRecord>& components,
               const admission::SandboxView& sandbox, StatusWriterOptions options);
  ~StatusWriter();
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  void start();           // enqueues every key, then runs the workers
  void stop() noexcept;
  void enqueue(std::string_view key);
  void enqueue_all();
  StatusWriterStats stats() const;

 private:
  void run();
  bool next(std::string& key);  // false when stopping; marks the key in process
  bool push(std::string key);   // under mu_: queues `key` unless queued; false if it was
  bool take(std::string& key);  // under mu_: claims `key` unless in process (then dirty)
  void done(const std::string& key);
  void process(const std::string& key);

  kube::Client& client_;
  const kube::Store<ComponentRecord>& components_;
  const admission::SandboxView& sandbox_;
  const StatusWriterOptions options_;

  std::mutex lifecycle_;  // start() and stop(), one at a time (taken before mu_)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::unordered_set<std::string> queued_;
  // Every key of an enqueue_all() (a new term, a relist, a sandbox flip),
  // packed: one string of all keys and where each ends, about 30 bytes a
  // Component instead of a queue_ and queued_ entry each (~170 bytes); taken
  // after queue_, from the front. A key in both is checked twice (the second
  // finds nothing to write).
  std::string sweep_keys_;
  std::vector<std::uint32_t> sweep_ends_;
  std::size_t sweep_next_ = 0;
  std::multimap<std::chrono::steady_clock::time_point, std::string> retry_;  // due -> key
  std::unordered_map<std::string, std::chrono::milliseconds> backoff_;
  bool all_pending_ = false;
  bool stopping_ = true;
  std::vector<std::thread> threads_;
  StatusWriterStats stats_;
  std::string last_error_;
  // Keys a worker is processing, and those of them enqueued again meanwhile.
  std::unordered_set<std::string> processing_, dirty_;
  // key -> fingerprint this writer last wrote, until the cache shows it.
  std::unordered_map<std::string, std::uint64_t> written_;
};

}  // namespace ig::controller
