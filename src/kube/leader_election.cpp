#include "kube/leader_election.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "kube/resources.h"

namespace ig::kube {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kReleaseTimeout{2'000};  // stop()'s release

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

const json& spec_of(const json& lease) {
  static const json kEmpty = json::object();
  if (!lease.is_object()) return kEmpty;
  auto s = lease.find("spec");
  return s != lease.end() && s->is_object() ? *s : kEmpty;
}

std::string holder_of(const json& spec) {
  auto h = spec.find("holderIdentity");
  return h != spec.end() && h->is_string() ? h->get<std::string>() : std::string();
}

std::int64_t int_field(const json& spec, const char* name) {
  auto f = spec.find(name);
  return f != spec.end() && f->is_number_integer() ? f->get<std::int64_t>() : 0;
}

std::string ms_text(milliseconds d) { return std::to_string(d.count()) + " ms"; }

milliseconds to_ms(Clock::time_point::duration d) {
  return std::chrono::duration_cast<milliseconds>(d);
}

// What is left of a call's time (at least 1 ms).
milliseconds time_left(Clock::time_point deadline, Clock::time_point now) {
  return std::max(milliseconds(1), to_ms(deadline - now));
}

// The durations and the required fields; the error names the rule.
Result<void> validate(const LeaderElectionConfig& c) {
  if (c.namespace_name.empty()) return fail("leader election: the Lease namespace is empty");
  if (c.lease_name.empty()) return fail("leader election: the Lease name is empty");
  if (c.identity.empty()) return fail("leader election: the holder identity is empty");
  if (c.lease_duration.count() <= 0 || c.renew_deadline.count() <= 0 || c.retry_period.count() <= 0) {
    return fail("leader election: lease duration, renew deadline and retry period must be positive");
  }
  if (c.lease_duration <= c.renew_deadline) {
    return fail("leader election: the lease duration (" + ms_text(c.lease_duration) +
                ") must be greater than the renew deadline (" + ms_text(c.renew_deadline) + ")");
  }
  // client-go: RenewDeadline > JitterFactor * RetryPeriod, JitterFactor 1.2.
  if (static_cast<double>(c.renew_deadline.count()) <= 1.2 * static_cast<double>(c.retry_period.count())) {
    return fail("leader election: the renew deadline (" + ms_text(c.renew_deadline) +
                ") must be greater than 1.2 times the retry period (" + ms_text(c.retry_period) + ")");
  }
  return {};
}

}  // namespace

std::string make_holder_identity(std::string_view pod_name) {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(std::random_device{}()));
  return (pod_name.empty() ? hostname() : std::string(pod_name)) + "_" + hex;
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::make(Client& client, LeaderElectionConfig config,
                                                           LeaderCallbacks callbacks) {
  if (auto ok = validate(config); !ok) return ok.failure();
  if (!callbacks.on_started_leading || !callbacks.on_stopped_leading) {
    return fail("leader election: on_started_leading and on_stopped_leading are required");
  }
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(client, std::move(config), std::move(callbacks)));
}

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config, LeaderCallbacks callbacks)
    : client_(client), config_(std::move(config)), callbacks_(std::move(callbacks)) {
  path_ = object_path(kLeases, config_.namespace_name, config_.lease_name);
}

LeaderElector::~LeaderElector() { stop(); }

void LeaderElector::start() {
  stopping_.store(false, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::run() {
  while (!stopping()) {
    const milliseconds d = step();
    if (!wait(d)) break;
  }
}

void LeaderElector::stop() noexcept {
  stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(mu_);  // a waiter between its check and its wait sees the flag
  }
  cv_.notify_all();
  stop_leading("info", "stopping: leading ends; the leader's loops stop before the Lease is released");
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) return;  // from a callback: no join, no release
    thread_.join();
  }
  release();
}

void LeaderElector::write_metrics(prometheus::TextWriter& out) const {
  std::lock_guard lock(mu_);
  const Stats& s = stats_;
  const struct {
    std::string_view name;
    prometheus::Help help;
    std::uint64_t value;
  } counters[] = {
      {"isolation_gate_leader_transitions_total", "Changes of the Lease's holder this replica observed.",
       s.transitions_observed},
      {"isolation_gate_leader_acquisitions_total", "Times this replica became leader.", s.acquisitions},
      {"isolation_gate_leader_lost_total", "Times this replica stopped leading because it could not renew in time.",
       s.lost},
      {"isolation_gate_leader_renew_failures_total", "Lease renewals that failed.", s.renew_failures},
  };
  for (const auto& c : counters) {
    out.family(c.name, prometheus::Type::Counter, c.help);
    out.sample(c.name, {}, c.value);
  }
}

void LeaderElector::log(std::string_view level, const std::string& message) const {
  if (config_.log) config_.log(level, "leader election " + path_ + " (" + config_.identity + "): " + message);
}

bool LeaderElector::wait(milliseconds d) {
  std::unique_lock lock(mu_);
  const auto deadline = config_.clock->now() + d;
  while (!stopping() && config_.clock->now() < deadline) config_.clock->wait_until(lock, cv_, deadline);
  return !stopping();
}

milliseconds LeaderElector::jittered_retry() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double base = static_cast<double>(config_.retry_period.count());
  return milliseconds(static_cast<long long>(base * (1.0 + 0.2 * unit(rng_))));
}

void LeaderElector::api_error(const std::string& what, const ApiError& e) {
  std::string message = what + ": " + e.message;
  if (errors_logged_.first(message)) log("warn", message);
}

void LeaderElector::api_ok() {
  if (auto last = errors_logged_.cleared()) log("info", "the API answers again (after: " + *last + ")");
}

json LeaderElector::spec_for_us(const json& old_spec, bool same_holder) const {
  const std::string now = format_micro_time(config_.clock->wall());
  const auto secs = std::max<std::int64_t>(1, (config_.lease_duration.count() + 999) / 1000);
  json spec = old_spec.is_object() ? old_spec : json::object();
  spec["holderIdentity"] = config_.identity;
  spec["leaseDurationSeconds"] = secs;
  spec["renewTime"] = now;
  if (!same_holder || !old_spec.contains("acquireTime")) spec["acquireTime"] = now;
  spec["leaseTransitions"] = int_field(old_spec, "leaseTransitions") + (same_holder ? 0 : 1);
  return spec;
}

void LeaderElector::observe(const json& lease, time_point now) {
  const bool first = lease_.is_null();
  const bool changed = first || spec_of(lease) != spec_of(lease_);
  const std::string old_holder = holder_of(spec_of(lease_));
  lease_ = lease;
  if (!changed) return;
  observed_time_ = now;
  const std::string new_holder = holder_of(spec_of(lease_));
  if (!first && new_holder == old_holder) return;
  if (!first) count(&Stats::transitions_observed);
  log("info", new_holder.empty() ? std::string("the Lease is free") : "the leader is " + new_holder);
  if (callbacks_.on_new_leader) {
    std::lock_guard lock(leadership_mu_);
    callbacks_.on_new_leader(new_holder);
  }
}

void LeaderElector::became_leader(const json& lease, time_point attempt_start) {
  renewed(lease, attempt_start);
  std::lock_guard lock(leadership_mu_);
  if (stopping() || leading_.load(std::memory_order_acquire)) return;  // stop() releases it
  leading_.store(true, std::memory_order_release);
  count(&Stats::acquisitions);
  log("info", "acquired the Lease; leading");
  callbacks_.on_started_leading();
}

void LeaderElector::renewed(const json& lease, time_point attempt_start) {
  api_ok();
  observe(lease, config_.clock->now());
  holds_lease_ = true;
  last_renew_ = attempt_start;
}

void LeaderElector::lose_leadership(const std::string& why) {
  holds_lease_ = false;
  stop_leading("warn", "leadership lost: " + why, &Stats::lost);
}

void LeaderElector::stop_leading(std::string_view level, const std::string& why,
                                 std::uint64_t Stats::*counter) noexcept {
  std::lock_guard lock(leadership_mu_);
  if (!leading_.exchange(false, std::memory_order_acq_rel)) return;
  if (counter != nullptr) count(counter);
  try {
    log(level, why);
    callbacks_.on_stopped_leading();
  } catch (...) {
    log("error", "on_stopped_leading threw");
  }
}

void LeaderElector::count(std::uint64_t Stats::*counter) {
  std::lock_guard lock(mu_);
  ++(stats_.*counter);
}

milliseconds LeaderElector::step() {
  if (stopping()) return config_.retry_period;  // after stop(): nothing, until start()
  return leading_.load(std::memory_order_acquire) ? leader_step() : candidate_step();
}

milliseconds LeaderElector::candidate_step() {
  const time_point start = config_.clock->now();
  auto got = client_.get(path_, config_.renew_deadline);
  if (!got && !got.failure().not_found()) {
    api_error("reading the Lease", got.failure());
    return jittered_retry();
  }
  json body;
  if (got) {
    const time_point observed_at = config_.clock->now();
    observe(*got, observed_at);
    const std::string holder = holder_of(spec_of(lease_));
    const bool ours = holder == config_.identity;
    if (!holder.empty() && !ours) {
      // The holder's own duration, measured on our clock from when we first saw
      // this record (client-go's observedTime); ours when the record has none.
      const std::int64_t secs = int_field(spec_of(lease_), "leaseDurationSeconds");
      const auto duration = secs > 0 ? milliseconds(secs * 1000) : config_.lease_duration;
      if (observed_at < observed_time_ + duration) {
        api_ok();
        return jittered_retry();
      }
      log("info", "the Lease of " + holder + " has not been renewed for " + ms_text(duration) +
                      " on our clock; taking it over");
    }
    body = *got;
    body["spec"] = spec_for_us(spec_of(lease_), ours);
  } else {
    body = {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", config_.lease_name}, {"namespace", config_.namespace_name}}},
            {"spec", spec_for_us(json::object(), true)}};  // a new Lease: no transition
  }
  auto written = got ? client_.update(path_, body, config_.renew_deadline)
                     : client_.create(collection_path(kLeases, config_.namespace_name), body);
  if (!written) {
    if (written.failure().conflict()) {
      log("debug", "another replica wrote the Lease first; retrying");
    } else {
      api_error(got ? "acquiring the Lease" : "creating the Lease", written.failure());
    }
    return jittered_retry();
  }
  became_leader(*written, start);
  return config_.retry_period;
}

milliseconds LeaderElector::leader_step() {
  const time_point deadline = last_renew_ + config_.renew_deadline;
  if (config_.clock->now() >= deadline) {
    lose_leadership("no successful renew for " + ms_text(config_.renew_deadline));
    return jittered_retry();
  }
  time_point attempt;
  std::string lost;
  auto put = write_lease(/*releasing=*/false, deadline, attempt, lost);
  if (put) {
    renewed(*put, attempt);
    return config_.retry_period;
  }
  if (!lost.empty()) {
    lose_leadership(lost);
    return jittered_retry();
  }
  count(&Stats::renew_failures);
  api_error("renewing the Lease", put.failure());
  const time_point now = config_.clock->now();
  if (now >= deadline) {
    lose_leadership("no successful renew for " + ms_text(config_.renew_deadline) + " (last: " +
                    put.failure().message + ")");
    return jittered_retry();
  }
  // Wake at the deadline at the latest, so the loss is noticed on time.
  return std::min(config_.retry_period, to_ms(deadline - now) + milliseconds(1));
}

void LeaderElector::release() noexcept {
  if (!holds_lease_) return;
  holds_lease_ = false;
  try {
    time_point attempt;
    std::string lost;
    auto put = write_lease(/*releasing=*/true, config_.clock->now() + kReleaseTimeout, attempt, lost);
    if (put) {
      observe(*put, config_.clock->now());
      log("info", "released the Lease");
    } else if (!lost.empty()) {
      log("info", "not releasing the Lease: it is no longer ours");
    } else {
      log("warn", "releasing the Lease: " + put.failure().message);
    }
  } catch (...) {
    log("error", "releasing the Lease failed with an exception");
  }
}

ApiResult<json> LeaderElector::write_lease(bool releasing, time_point deadline, time_point& attempt,
                                           std::string& lost) {
  ApiError error;  // (the loop's first attempt is always made: deadline is ahead)
  for (int i = 0; i < 2; ++i) {
    attempt = config_.clock->now();
    if (attempt >= deadline) break;
    json body = lease_;
    body["spec"] = spec_for_us(spec_of(lease_), true);
    if (releasing) {
      body["spec"]["holderIdentity"] = "";
      body["spec"]["leaseDurationSeconds"] = 1;
      body["spec"]["acquireTime"] = body["spec"]["renewTime"];
    }
    auto put = client_.update(path_, body, time_left(deadline, attempt));
    if (put) return put;
    error = put.failure();
    // Someone else wrote the Lease (or deleted it): read what is there now.
    const time_point now = config_.clock->now();
    if (i > 0 || !(error.conflict() || (!releasing && error.not_found())) || now >= deadline) break;
    auto got = client_.get(path_, time_left(deadline, now));
    if (!got) {
      if (!releasing && got.failure().not_found()) lost = "the Lease was deleted";
      return got.failure();
    }
    observe(*got, config_.clock->now());
    if (const std::string holder = holder_of(spec_of(lease_)); holder != config_.identity) {
      lost = holder.empty() ? std::string("the Lease was released by someone else")
                            : "the Lease is now held by " + holder;
      return error;
    }
    // Still ours (someone touched its metadata): write on the new version.
  }
  return error;
}

}  // namespace ig::kube
