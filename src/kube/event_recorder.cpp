#include "kube/event_recorder.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <deque>
#include <exception>
#include <list>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/quote.h"

namespace ig::kube {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using nlohmann::json;

class RealEventClock final : public EventClock {
 public:
  SteadyTime now() override { return std::chrono::steady_clock::now(); }
  WallTime wall() override { return std::chrono::system_clock::now(); }
};

constexpr char kSep = '\x1f';  // never in a Kubernetes name, kind, reason or action
constexpr std::size_t kMaxLoggedErrors = 256;

// A token bucket: `rate` tokens a second, at most `burst`. Its tokens may go
// below zero (a debt, paid back by time) when a retry is charged.
struct Bucket {
  double tokens = 0;
  SteadyTime last{};

  void refill(SteadyTime now, double rate, double burst) {
    if (now <= last) return;
    tokens = std::min(burst, tokens + std::chrono::duration<double>(now - last).count() * rate);
    last = now;
  }
  bool take(SteadyTime now, double rate, double burst) {
    refill(now, rate, burst);
    if (tokens < 1.0) return false;
    tokens -= 1.0;
    return true;
  }
  // When the next token is there (after a failed take() at `last`).
  SteadyTime ready(double rate) const {
    const double wait_s = (1.0 - tokens) / rate;
    return last + std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(wait_s)) +
           std::chrono::microseconds(1);
  }
};

bool dns_label_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 subdomain, as metadata.name of an Event must be.
bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find('.', start);
    if (end == std::string_view::npos) end = s.size();
    const std::string_view label = s.substr(start, end - start);
    if (label.empty() || !dns_label_char(label.front()) || !dns_label_char(label.back())) return false;
    for (char c : label)
      if (!dns_label_char(c) && c != '-') return false;
    start = end + 1;
  }
  return true;
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

json reference_json(const ObjectReference& r) {
  json j = json::object();
  if (!r.kind.empty()) j["kind"] = r.kind;
  if (!r.api_version.empty()) j["apiVersion"] = r.api_version;
  if (!r.namespace_.empty()) j["namespace"] = r.namespace_;
  j["name"] = r.name;
  if (!r.uid.empty()) j["uid"] = r.uid;
  return j;
}

}  // namespace


std::shared_ptr<EventClock> EventClock::real() {
  static const std::shared_ptr<EventClock> kClock = std::make_shared<RealEventClock>();
  return kClock;
}

// --- the worker's state ----------------------------------------------------------

struct EventRecorder::State {
  struct Series {
    std::string object_key;
    EventSpec spec;                 // the latest occurrence's (a new Event takes its note)
    std::string event_namespace;
    std::string event_name;         // of the live Event, or of the one to create
    WallTime event_time{};          // the first occurrence
    WallTime last_observed{};       // the latest occurrence
    SteadyTime last_seen{};
    std::uint64_t count = 0;        // occurrences observed
    std::uint64_t written = 0;      // occurrences the server's Event shows (or given up)
    bool live = false;              // the Event exists (we created it)
    bool queued = false;            // in `pending`
    std::list<std::string>::iterator lru;
    bool has_pending() const { return count > written; }
  };
  struct ObjectBucket {
    Bucket bucket;
    std::list<std::string>::iterator lru;
  };
  // The worker's own counters, copied into stats_ under the mutex.
  struct Counts {
    std::uint64_t created = 0, recreated = 0, series_updates = 0, dropped_rate_limited = 0, send_errors = 0,
                  retries = 0, pending = 0, series = 0;
  };

  std::unordered_map<std::string, Series> series;
  std::list<std::string> lru;         // front: most recently seen
  std::deque<std::string> pending;    // keys waiting for a write, oldest first
  std::unordered_map<std::string, ObjectBucket> buckets;
  std::list<std::string> bucket_lru;  // front: most recently used
  Bucket global;
  std::mt19937_64 rng{std::random_device{}()};
  std::unordered_set<std::string> logged;  // distinct errors already logged
  Counts counts;
  std::uint64_t queue_full_logged = 0;
  SteadyTime queue_full_logged_at{};
};

namespace {

double object_rate(const EventRecorderOptions& o) {
  const double s = std::chrono::duration<double>(o.object_refill).count();
  return s > 0 ? 1.0 / s : 0.0;
}

}  // namespace

EventRecorder::EventRecorder(Client& client, EventRecorderOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : EventClock::real()),
      state_(std::make_unique<State>()) {
  if (options_.reporting_instance.size() > kMaxEventField)
    options_.reporting_instance = cut_utf8(options_.reporting_instance, kMaxEventField);
  options_.queue_capacity = std::max<std::size_t>(1, options_.queue_capacity);
  options_.object_burst = std::max(1, options_.object_burst);
  options_.global_burst = std::max(1, options_.global_burst);
  options_.max_series = std::max<std::size_t>(1, options_.max_series);
  options_.max_attempts = std::max(1, options_.max_attempts);
  if (options_.wait_cap <= std::chrono::milliseconds::zero()) options_.wait_cap = std::chrono::milliseconds(30'000);
  queue_.reserve(options_.queue_capacity);
  state_->global.tokens = options_.global_burst;
  state_->global.last = clock_->now();
}

EventRecorder::~EventRecorder() { stop(); }

bool EventRecorder::record(EventSpec spec) noexcept {
  try {
    const bool valid = !spec.regarding.name.empty() && !spec.reason.empty() && !spec.action.empty() &&
                       spec.reason.size() <= kMaxEventField && spec.action.size() <= kMaxEventField &&
                       (spec.type == "Normal" || spec.type == "Warning");
    if (!valid) {
      std::lock_guard lock(mu_);
      ++stats_.dropped_invalid;
      return false;
    }
    Occurrence o{std::move(spec), clock_->now(), clock_->wall()};
    {
      std::lock_guard lock(mu_);
      if (stopped_) {
        ++stats_.dropped_stopped;
        return false;
      }
      if (queue_.size() >= options_.queue_capacity) {
        ++stats_.dropped_queue_full;
        return false;
      }
      queue_.push_back(std::move(o));  // capacity reserved: no allocation
      ++stats_.recorded;
      signal_ = true;
    }
    cv_.notify_one();
    return true;
  } catch (...) {
    try {
      std::lock_guard lock(mu_);
      ++stats_.dropped_queue_full;
    } catch (...) {
    }
    return false;
  }
}

void EventRecorder::start() {
  std::lock_guard lock(mu_);
  if (running_ || stopped_) return;
  running_ = true;
  thread_ = std::thread([this] { run(); });
}

void EventRecorder::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    if (stopped_ && !thread_.joinable()) return;
    stopped_ = true;
    if (!running_) {
      stats_.dropped_stopped += queue_.size();
      queue_.clear();
    }
    stopping_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + options_.stop_flush;
    signal_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EventRecorder::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!running_ || stopping_) return false;
  ++flush_waiters_;
  const std::uint64_t seq = idle_seq_;
  signal_ = true;
  cv_.notify_all();
  idle_cv_.wait_for(lock, timeout, [&] { return idle_seq_ > seq || !running_; });
  --flush_waiters_;
  return idle_seq_ > seq;
}

void EventRecorder::wake() noexcept {
  {
    std::lock_guard lock(mu_);
    signal_ = true;
  }
  cv_.notify_all();
}

EventRecorderStats EventRecorder::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void EventRecorder::log(std::string_view level, const std::string& message) {
  if (!options_.log) return;
  try {
    options_.log(level, message);
  } catch (...) {
  }
}

void EventRecorder::wait_locked(std::unique_lock<std::mutex>& lock, std::chrono::nanoseconds d) {
  d = std::clamp<std::chrono::nanoseconds>(d, std::chrono::milliseconds(1), options_.wait_cap);
  auto until = std::chrono::steady_clock::now() + d;
  if (stopping_) until = std::min(until, stop_deadline_);
  cv_.wait_until(lock, until, [&] { return signal_; });
}

// --- the worker ---------------------------------------------------------------------

void EventRecorder::run() {
  State& s = *state_;
  const double obj_rate = object_rate(options_);
  const double obj_burst = options_.object_burst;
  const double glob_rate = options_.global_qps;
  const double glob_burst = options_.global_burst;

  auto object_bucket = [&](const std::string& object_key, SteadyTime now) -> Bucket& {
    auto it = s.buckets.find(object_key);
    if (it != s.buckets.end()) {
      s.bucket_lru.splice(s.bucket_lru.begin(), s.bucket_lru, it->second.lru);
      return it->second.bucket;
    }
    while (s.buckets.size() >= options_.max_series && !s.bucket_lru.empty()) {
      s.buckets.erase(s.bucket_lru.back());
      s.bucket_lru.pop_back();
    }
    s.bucket_lru.push_front(object_key);
    State::ObjectBucket b;
    b.bucket.tokens = obj_burst;
    b.bucket.last = now;
    b.lru = s.bucket_lru.begin();
    return s.buckets.emplace(object_key, std::move(b)).first->second.bucket;
  };

  auto erase_series = [&](std::unordered_map<std::string, State::Series>::iterator it) {
    s.lru.erase(it->second.lru);
    s.series.erase(it);  // a stale entry in `pending` is skipped
  };

  auto mark_pending = [&](const std::string& key, State::Series& x) {
    if (!x.queued && x.has_pending()) {
      x.queued = true;
      s.pending.push_back(key);
    }
  };

  auto absorb = [&](Occurrence& o) {
    std::string object_key;
    const ObjectReference& r = o.spec.regarding;
    object_key.reserve(r.kind.size() + r.namespace_.size() + r.name.size() + r.uid.size() + 3);
    object_key.append(r.kind).append(1, kSep).append(r.namespace_).append(1, kSep).append(r.name).append(1, kSep)
        .append(r.uid);
    std::string key = object_key;
    key.append(1, kSep).append(o.spec.type).append(1, kSep).append(o.spec.reason).append(1, kSep)
        .append(o.spec.action);
    if (const ObjectReference& rel = o.spec.related; !rel.name.empty()) {
      key.append(1, kSep).append(rel.kind).append(1, kSep).append(rel.namespace_).append(1, kSep).append(rel.name)
          .append(1, kSep).append(rel.uid);
    }
    o.spec.note = cut_utf8(o.spec.note, kMaxEventNote);

    auto it = s.series.find(key);
    if (it != s.series.end() && !it->second.has_pending() && o.at - it->second.last_seen > options_.series_window) {
      erase_series(it);
      it = s.series.end();
    }
    if (it != s.series.end()) {
      State::Series& x = it->second;
      ++x.count;
      x.spec.note = std::move(o.spec.note);
      x.last_observed = o.wall;
      x.last_seen = o.at;
      s.lru.splice(s.lru.begin(), s.lru, x.lru);
      mark_pending(key, x);
      return;
    }
    while (s.series.size() >= options_.max_series && !s.lru.empty()) {
      auto victim = s.series.find(s.lru.back());
      if (victim->second.has_pending()) s.counts.dropped_rate_limited += victim->second.count - victim->second.written;
      erase_series(victim);
    }
    State::Series x;
    x.object_key = std::move(object_key);
    x.event_namespace = r.namespace_.empty() ? "default" : r.namespace_;
    x.spec = std::move(o.spec);
    x.event_time = o.wall;
    x.last_observed = o.wall;
    x.last_seen = o.at;
    x.count = 1;
    s.lru.push_front(key);
    x.lru = s.lru.begin();
    auto [ins, _] = s.series.emplace(key, std::move(x));
    mark_pending(ins->first, ins->second);
  };

  // Forgets keys idle past the window (oldest first) whose Event shows every occurrence.
  auto prune = [&](SteadyTime now) {
    while (!s.lru.empty()) {
      auto it = s.series.find(s.lru.back());
      if (it->second.has_pending() || now - it->second.last_seen <= options_.series_window) break;
      erase_series(it);
    }
  };

  auto new_name = [&](const std::string& object_name) {
    std::string name = object_name + "." + hex16(s.rng());
    if (!is_dns_subdomain(name)) name = hex16(s.rng()) + hex16(s.rng());
    return name;
  };

  auto event_body = [&](const State::Series& x, std::uint64_t count) {
    json ev = {{"apiVersion", "events.k8s.io/v1"},
               {"kind", "Event"},
               {"metadata", {{"name", x.event_name}, {"namespace", x.event_namespace}}},
               {"eventTime", format_micro_time(x.event_time)},
               {"reportingController", options_.reporting_controller},
               {"reportingInstance", options_.reporting_instance},
               {"action", x.spec.action},
               {"reason", x.spec.reason},
               {"note", x.spec.note},
               {"type", x.spec.type},
               {"regarding", reference_json(x.spec.regarding)}};
    if (!x.spec.related.name.empty()) ev["related"] = reference_json(x.spec.related);
    if (count >= 2) ev["series"] = {{"count", count}, {"lastObservedTime", format_micro_time(x.last_observed)}};
    return ev;
  };

  auto log_once = [&](const std::string& kind, const std::string& message) {
    if (s.logged.size() >= kMaxLoggedErrors) s.logged.clear();
    if (!s.logged.insert(kind).second) return;
    log("warn", "event recorder: " + message + " (dropped; further errors like this one are not logged)");
  };

  // Real-time backoff, cut short by the stop deadline. false: give up.
  auto backoff_wait = [&](std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    const auto end = std::chrono::steady_clock::now() + d;
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (stopping_ && now >= stop_deadline_) return false;
      if (now >= end) return true;
      cv_.wait_until(lock, stopping_ ? std::min(end, stop_deadline_) : end);
    }
  };

  // One write for the key: create, or series patch (404: create anew), with retries.
  auto write = [&](const std::string& key) {
    auto it = s.series.find(key);
    if (it == s.series.end()) return;
    State::Series& x = it->second;
    const std::uint64_t count = x.count;
    bool create = !x.live;
    bool recreate = false;
    std::chrono::milliseconds backoff = options_.retry_initial;
    for (int attempt = 1;;) {
      std::string verb, path;
      ApiResult<json> r = ApiError{};
      try {
        if (create) {
          if (x.event_name.empty()) x.event_name = new_name(x.spec.regarding.name);
          verb = "POST";
          path = collection_path(kEventsV1, x.event_namespace);
          r = client_.create(path, event_body(x, count));
        } else {
          verb = "PATCH";
          path = object_path(kEventsV1, x.event_namespace, x.event_name);
          // series only: every other field of an events.k8s.io/v1 Event is
          // immutable (ValidateEventUpdate; the note included).
          const json patch = {
              {"series", {{"count", count}, {"lastObservedTime", format_micro_time(x.last_observed)}}}};
          r = client_.patch(path, PatchType::Merge, patch);
        }
      } catch (const std::exception& e) {
        r = ApiError{verb + " " + path + ": " + e.what(), 400, "ClientError", {}};
      }
      if (r) {
        x.live = true;
        x.written = count;
        if (create) {
          ++s.counts.created;
          if (recreate) ++s.counts.recreated;
        } else {
          ++s.counts.series_updates;
        }
        return;
      }
      const ApiError& e = r.failure();
      if (create && e.conflict() && e.reason == "AlreadyExists") {
        // Our Event, by its name: an earlier attempt of this create landed
        // though its answer never came (a timeout). Written, not a new Event
        // and not an error (client-go's recorders: AlreadyExists on a create
        // is not retried, not reported).
        x.live = true;
        x.written = count;
        ++s.counts.created;
        if (recreate) ++s.counts.recreated;
        return;
      }
      if (!create && e.not_found() && !recreate) {
        // The Event was garbage collected (or deleted): a new one carries the series.
        create = true;
        recreate = true;
        x.live = false;
        x.event_name = new_name(x.spec.regarding.name);
        continue;
      }
      if (!e.retriable() || attempt >= options_.max_attempts) {
        ++s.counts.send_errors;
        log_once(verb + " " + std::to_string(e.code) + " " + e.reason + (e.retriable() ? " retried" : ""),
                 e.message + (e.retriable() ? " (after " + std::to_string(attempt) + " attempts)" : ""));
        if (create && !x.live) {
          erase_series(it);  // a later occurrence tries a new Event
        } else {
          x.written = count;
        }
        return;
      }
      ++s.counts.retries;
      ++attempt;
      std::chrono::milliseconds d = backoff;
      if (e.retry_after > std::chrono::seconds::zero())
        d = std::max<std::chrono::milliseconds>(d, e.retry_after);
      d = std::min(d, options_.retry_max);
      backoff = std::min(options_.retry_max, backoff * 2);
      if (!backoff_wait(d)) {
        ++s.counts.send_errors;
        log_once(verb + " stopped", e.message + " (no retry left before stop)");
        if (create && !x.live) {
          erase_series(it);
        } else {
          x.written = count;
        }
        return;
      }
      if (glob_rate > 0) {  // a retry is a write too: charged, as a debt if need be
        s.global.refill(clock_->now(), glob_rate, glob_burst);
        s.global.tokens -= 1.0;
      }
    }
  };

  // The next key to write now, or when to look again.
  auto choose = [&](bool flushing, SteadyTime now, SteadyTime* due) -> std::string {
    *due = SteadyTime::max();
    if (s.pending.empty()) return {};
    if (glob_rate > 0) {
      s.global.refill(now, glob_rate, glob_burst);
      if (s.global.tokens < 1.0) {
        *due = s.global.ready(glob_rate);
        return {};
      }
    }
    std::string chosen;
    std::deque<std::string> rest;
    while (!s.pending.empty()) {
      std::string key = std::move(s.pending.front());
      s.pending.pop_front();
      auto it = s.series.find(key);
      if (it == s.series.end() || !it->second.queued) continue;
      State::Series& x = it->second;
      if (!x.has_pending()) {
        x.queued = false;
        continue;
      }
      if (chosen.empty()) {
        Bucket& b = object_bucket(x.object_key, now);
        if (flushing || obj_rate <= 0 || b.take(now, obj_rate, obj_burst)) {
          x.queued = false;
          chosen = std::move(key);
          continue;
        }
        *due = std::min(*due, b.ready(obj_rate));
      }
      rest.push_back(std::move(key));
    }
    s.pending.swap(rest);
    if (!chosen.empty() && glob_rate > 0) s.global.tokens -= 1.0;
    return chosen;
  };

  auto pending_count = [&] {
    std::uint64_t n = 0;
    for (const auto& key : s.pending) {
      auto it = s.series.find(key);
      if (it != s.series.end() && it->second.queued) n += it->second.count - it->second.written;
    }
    return n;
  };

  auto publish_locked = [&] {
    s.counts.pending = pending_count();
    s.counts.series = s.series.size();
    stats_.created = s.counts.created;
    stats_.recreated = s.counts.recreated;
    stats_.series_updates = s.counts.series_updates;
    stats_.dropped_rate_limited = s.counts.dropped_rate_limited;
    stats_.send_errors = s.counts.send_errors;
    stats_.retries = s.counts.retries;
    stats_.pending = s.counts.pending;
    stats_.series = s.counts.series;
  };

  std::vector<Occurrence> batch;
  batch.reserve(options_.queue_capacity);
  std::unique_lock lock(mu_);
  for (;;) {
    signal_ = false;
    batch.swap(queue_);  // both hold queue_capacity: record() never allocates
    const bool stopping = stopping_;
    const bool flushing = stopping || flush_waiters_ > 0;
    const auto stop_deadline = stop_deadline_;
    std::string queue_full_message;
    if (stats_.dropped_queue_full > s.queue_full_logged &&
        (s.queue_full_logged == 0 || std::chrono::steady_clock::now() - s.queue_full_logged_at >
                                         std::chrono::minutes(1))) {
      queue_full_message = "event recorder: the queue is full (" + std::to_string(options_.queue_capacity) +
                           "): " + std::to_string(stats_.dropped_queue_full) + " occurrences dropped so far";
      s.queue_full_logged = stats_.dropped_queue_full;
      s.queue_full_logged_at = std::chrono::steady_clock::now();
    }
    lock.unlock();

    bool wrote = false;
    SteadyTime due = SteadyTime::max();
    bool out_of_time = false;
    try {
      if (!queue_full_message.empty()) log("warn", queue_full_message);
      for (auto& o : batch) absorb(o);
      batch.clear();
      out_of_time = stopping && std::chrono::steady_clock::now() >= stop_deadline;
      if (!out_of_time) {
        const SteadyTime now = clock_->now();
        prune(now);
        const std::string key = choose(flushing, now, &due);
        if (!key.empty()) {
          write(key);
          wrote = true;
        }
      }
    } catch (const std::exception& e) {
      batch.clear();
      log("error", std::string("event recorder: ") + e.what());
    }

    lock.lock();
    if (out_of_time) {
      s.counts.dropped_rate_limited += pending_count();
      s.pending.clear();
      publish_locked();
      break;
    }
    publish_locked();
    if (wrote || signal_ || !queue_.empty()) continue;
    if (s.counts.pending == 0) {
      ++idle_seq_;
      idle_cv_.notify_all();
      if (stopping) break;
    }
    const SteadyTime now = clock_->now();
    const auto d = due == SteadyTime::max() ? std::chrono::nanoseconds(options_.wait_cap)
                                            : std::chrono::duration_cast<std::chrono::nanoseconds>(due - now);
    wait_locked(lock, d);  // past the stop deadline, the next round ends the loop
  }
  running_ = false;
  idle_cv_.notify_all();
}

}  // namespace ig::kube
