// Leader election on a coordination.k8s.io/v1 Lease (client-go's
// LeaderElector with a LeaseLock): spec.holderIdentity names the leader.
// A candidate takes a Lease held by another only once its spec has not
// changed for lease_duration on our own clock; a leader renews every
// retry_period and loses leadership after renew_deadline without a renew.
//
// Contract:
//  - make() validates: lease_duration > renew_deadline > 1.2 * retry_period,
//    all positive, namespace, name, identity and both callbacks set.
//  - start() runs the loop on its own thread. stop() (noexcept): when
//    leading, on_stopped_leading() first (on the calling thread), then joins,
//    then releases a Lease we hold (trying for at most 2 s).
//  - Callbacks run on the elector thread (on_stopped_leading also from
//    stop()), never concurrently, strictly alternating started/stopped;
//    on_started_leading() must return promptly. on_new_leader reports each
//    change of the observed holder ("" when released).
//  - is_leader() and write_metrics() are thread-safe. An API error is
//    logged once per distinct message.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/log_once.h"
#include "base/prometheus.h"
#include "base/result.h"
#include "kube/api.h"

namespace ig::kube {

// pod_name (the hostname when empty) + "_" + 8 random hex characters.
std::string make_holder_identity(std::string_view pod_name);

struct LeaderElectionConfig {
  std::string namespace_name;  // the Lease's namespace
  std::string lease_name;
  std::string identity;        // make_holder_identity(pod name)
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  // level, message; may be empty.
  std::function<void(std::string_view, std::string_view)> log;
  // Intervals, the loop's waits and the Lease's timestamps (wall()).
  std::shared_ptr<Clock> clock = Clock::steady();
};

struct LeaderCallbacks {
  std::function<void()> on_started_leading;                // required; must return promptly
  std::function<void()> on_stopped_leading;                // required; runs to completion
  std::function<void(const std::string&)> on_new_leader;   // optional; for logs
};

class LeaderElector {
 public:
  static Result<std::unique_ptr<LeaderElector>> make(Client& client, LeaderElectionConfig config,
                                                     LeaderCallbacks callbacks);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void start();
  void stop() noexcept;

  // One attempt of the loop (acquire, or renew), returning the wait before
  // the next. For tests, never with start(); after stop() it does nothing.
  std::chrono::milliseconds step();

  bool is_leader() const noexcept { return leading_.load(std::memory_order_acquire); }
  void write_metrics(prometheus::TextWriter& out) const;

 private:
  LeaderElector(Client& client, LeaderElectionConfig config, LeaderCallbacks callbacks);

  struct Stats {
    std::uint64_t transitions_observed = 0;  // holder changes seen (ours included)
    std::uint64_t acquisitions = 0;
    std::uint64_t renew_failures = 0;  // failed renew attempts
    std::uint64_t lost = 0;            // not counting stop()
  };
  using time_point = Clock::time_point;
  std::chrono::milliseconds candidate_step();
  std::chrono::milliseconds leader_step();
  // Records the Lease as read; reports a change of holder.
  void observe(const nlohmann::json& lease, time_point now);
  // Our spec over `old_spec`, renewed now; a new holder is one more transition.
  nlohmann::json spec_for_us(const nlohmann::json& old_spec, bool same_holder) const;
  void became_leader(const nlohmann::json& lease, time_point attempt_start);
  void renewed(const nlohmann::json& lease, time_point attempt_start);
  void lose_leadership(const std::string& why);
  // Ends leading, if we lead: logs `why`, counts `counter` (if any), on_stopped_leading().
  void stop_leading(std::string_view level, const std::string& why,
                    std::uint64_t Stats::*counter = nullptr) noexcept;
  void count(std::uint64_t Stats::*counter);
  void release() noexcept;
  // PUTs our spec (`releasing`: the released one) on the Lease before
  // `deadline`, at most twice: after a conflict (or a 404 when renewing) it
  // reads the Lease and writes again if it is still ours; `attempt` is the
  // last attempt's start. The Lease written, or the last error; `lost` says
  // why the Lease is no longer ours.
  ApiResult<nlohmann::json> write_lease(bool releasing, time_point deadline, time_point& attempt,
                                        std::string& lost);
  void run();
  bool wait(std::chrono::milliseconds d);
  std::chrono::milliseconds jittered_retry();
  void api_error(const std::string& what, const ApiError& e);
  void api_ok();
  void log(std::string_view level, const std::string& message) const;
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

  Client& client_;
  LeaderElectionConfig config_;
  LeaderCallbacks callbacks_;
  std::string path_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> leading_{false};

  // Leadership transitions and their callbacks (stop() and the elector thread).
  std::mutex leadership_mu_;
  // stats_, the cv wait.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Stats stats_;

  // Elector-thread state (stop() reads it only after the join).
  nlohmann::json lease_;             // the last Lease read or written; null before the first
  bool holds_lease_ = false;         // the Lease's record is ours as last written
  time_point observed_time_{};       // our clock when lease_'s spec was first seen
  time_point last_renew_{};          // our clock at the start of the last successful renew
  LogOnce errors_logged_;            // the last API error logged
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace ig::kube
