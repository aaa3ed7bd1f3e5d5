#include "kube/event_recorder.h"

#include <algorithm>
#include <cstdio>
#include <list>
#include <random>
#include <unordered_map>
#include <utility>

#include "base/quote.h"
#include "base/token_bucket.h"
#include "kube/resources.h"

namespace ig::kube {
namespace {

using nlohmann::json;

constexpr char kSep = '\x1f';  // never in a Kubernetes name, kind, reason or action
// A key's Event is forgotten after this long without an occurrence.
constexpr std::chrono::minutes kSeriesWindow{30};

bool dns_label_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 subdomain, as metadata.name of an Event must be: labels of [a-z0-9-]
// that begin and end with [a-z0-9], joined by '.'.
bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253 || !dns_label_char(s.front()) || !dns_label_char(s.back())) return false;
  for (std::size_t i = 1; i + 1 < s.size(); ++i) {
    const bool ok = s[i] == '.' ? dns_label_char(s[i - 1]) && dns_label_char(s[i + 1])
                                : s[i] == '-' || dns_label_char(s[i]);
    if (!ok) return false;
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

std::string reference_key(const ObjectReference& r) {
  std::string k;
  k.append(r.kind).append(1, kSep).append(r.namespace_).append(1, kSep).append(r.name).append(1, kSep).append(r.uid);
  return k;
}

}  // namespace

bool valid_event(const EventSpec& s) {
  return !s.regarding.name.empty() && !s.reason.empty() && !s.action.empty() && s.reason.size() <= kMaxEventField &&
         s.action.size() <= kMaxEventField && (s.type == "Normal" || s.type == "Warning");
}

std::string event_key(const EventSpec& s) {
  std::string key = reference_key(s.regarding);
  key.append(1, kSep).append(s.type).append(1, kSep).append(s.reason).append(1, kSep).append(s.action);
  if (!s.related.name.empty()) key.append(1, kSep).append(reference_key(s.related));
  return key;
}

struct EventCorrelator::State {
  // A key's Event: what the server shows (written) and what it should (count).
  struct Series {
    EventSpec spec;                  // the latest occurrence's note
    std::string event_namespace;
    std::string event_name;          // of the live Event, or of the one being created
    wall_time event_time{}, last_observed{};
    time_point last_seen{};
    std::uint64_t count = 0;         // occurrences observed
    std::uint64_t written = 0;       // occurrences the Event shows (or given up)
    std::uint64_t unseen = 0;        // observed since next() last looked
    int failures = 0;                // of the write under way
    bool live = false;               // the Event exists
    bool under_way = false;          // a retry or a re-create: no new token
    bool recreating = false;         // the live Event answered 404
    std::list<std::string>::iterator lru;
  };
  struct ObjectBucket {
    TokenBucket bucket;
    std::list<std::string>::iterator lru;
  };

  EventRecorderOptions options;
  std::unordered_map<std::string, Series> series;
  std::list<std::string> lru;  // front: most recently seen
  std::unordered_map<std::string, ObjectBucket> buckets;
  std::list<std::string> bucket_lru;
  TokenBucket global;
  std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t queued = 0, created = 0, recreated = 0, series_updates = 0, dropped = 0;

  State(const EventRecorderOptions& o, time_point start) : options(o), global(o.global_qps, o.global_burst, start) {}

  // Forgets a key; returns its occurrences no Event shows.
  std::uint64_t erase(std::unordered_map<std::string, Series>::iterator it) {
    const std::uint64_t unwritten = it->second.count - it->second.written;
    queued -= it->second.unseen;
    lru.erase(it->second.lru);
    series.erase(it);
    return unwritten;
  }

  TokenBucket& bucket(const std::string& object_key, time_point now) {
    if (auto it = buckets.find(object_key); it != buckets.end()) {
      bucket_lru.splice(bucket_lru.begin(), bucket_lru, it->second.lru);
      return it->second.bucket;
    }
    while (buckets.size() >= options.max_series && !bucket_lru.empty()) {
      buckets.erase(bucket_lru.back());
      bucket_lru.pop_back();
    }
    const double refill_s = std::chrono::duration<double>(options.object_refill).count();
    bucket_lru.push_front(object_key);
    ObjectBucket b{TokenBucket(refill_s > 0 ? 1.0 / refill_s : 0.0, options.object_burst, now), bucket_lru.begin()};
    return buckets.emplace(object_key, std::move(b)).first->second.bucket;
  }

  std::string new_name(const std::string& object_name) {
    std::string name = object_name + "." + hex16(rng());
    if (!is_dns_subdomain(name)) name = hex16(rng()) + hex16(rng());
    return name;
  }

  json event_body(const Series& x) const {
    json ev = {{"apiVersion", "events.k8s.io/v1"},
               {"kind", "Event"},
               {"metadata", {{"name", x.event_name}, {"namespace", x.event_namespace}}},
               {"eventTime", format_micro_time(x.event_time)},
               {"reportingController", options.reporting_controller},
               {"reportingInstance", options.reporting_instance},
               {"action", x.spec.action},
               {"reason", x.spec.reason},
               {"note", x.spec.note},
               {"type", x.spec.type},
               {"regarding", reference_json(x.spec.regarding)}};
    if (!x.spec.related.name.empty()) ev["related"] = reference_json(x.spec.related);
    if (x.count >= 2) ev["series"] = series_json(x);
    return ev;
  }

  static json series_json(const Series& x) {
    return {{"count", x.count}, {"lastObservedTime", format_micro_time(x.last_observed)}};
  }
};

EventCorrelator::EventCorrelator(const EventRecorderOptions& options, time_point start)
    : s_(std::make_unique<State>(options, start)) {
  EventRecorderOptions& o = s_->options;
  o.reporting_instance = cut_utf8(o.reporting_instance, kMaxEventField);
  o.max_series = std::max<std::size_t>(1, o.max_series);
}

EventCorrelator::~EventCorrelator() = default;

std::string EventCorrelator::observe(EventSpec spec, time_point now, wall_time wall) {
  State& s = *s_;
  std::string key = event_key(spec);
  spec.note = cut_utf8(spec.note, kMaxEventNote);

  // Keys idle past the window whose Event shows every occurrence are forgotten (oldest first).
  auto stale = [&](const State::Series& x) { return x.count == x.written && now - x.last_seen > kSeriesWindow; };
  while (!s.lru.empty() && stale(s.series.at(s.lru.back()))) s.erase(s.series.find(s.lru.back()));
  auto it = s.series.find(key);
  if (it != s.series.end() && stale(it->second)) {
    s.erase(it);
    it = s.series.end();
  }
  if (it == s.series.end()) {
    while (s.series.size() >= s.options.max_series && !s.lru.empty()) s.dropped += s.erase(s.series.find(s.lru.back()));
    State::Series x;
    x.event_namespace = spec.regarding.namespace_.empty() ? "default" : spec.regarding.namespace_;
    x.event_time = wall;
    s.lru.push_front(key);
    x.lru = s.lru.begin();
    it = s.series.emplace(key, std::move(x)).first;
  } else {
    s.lru.splice(s.lru.begin(), s.lru, it->second.lru);
  }
  State::Series& x = it->second;
  x.spec = std::move(spec);
  x.last_observed = wall;
  x.last_seen = now;
  ++x.count;
  ++x.unseen;
  ++s.queued;
  return key;
}

EventWrite EventCorrelator::next(const std::string& key, time_point now, bool flushing) {
  State& s = *s_;
  EventWrite w;
  auto it = s.series.find(key);
  if (it == s.series.end()) return w;
  State::Series& x = it->second;
  s.queued -= x.unseen;
  x.unseen = 0;
  if (x.count == x.written) return w;
  if (x.under_way) {
    s.global.reserve(now);  // a debt, paid back by time
  } else {
    TokenBucket* object = flushing ? nullptr : &s.bucket(reference_key(x.spec.regarding), now);
    w.wait = std::max(object ? object->delay(now) : Clock::duration::zero(), s.global.delay(now));
    if (w.wait > Clock::duration::zero()) {
      w.verb = EventWrite::Verb::Wait;
      return w;
    }
    if (object) object->try_take(now);
    s.global.try_take(now);
  }
  w.count = x.count;
  if (x.live) {
    w.verb = EventWrite::Verb::Patch;
    w.path = object_path(kEventsV1, x.event_namespace, x.event_name);
    w.body = {{"series", State::series_json(x)}};
  } else {
    if (x.event_name.empty()) x.event_name = s.new_name(x.spec.regarding.name);
    w.verb = EventWrite::Verb::Create;
    w.path = collection_path(kEventsV1, x.event_namespace);
    w.body = s.event_body(x);
  }
  return w;
}

void EventCorrelator::done(const std::string& key, const EventWrite& write, Outcome outcome) {
  State& s = *s_;
  auto it = s.series.find(key);
  if (it == s.series.end()) return;
  State::Series& x = it->second;
  const bool create = write.verb == EventWrite::Verb::Create;
  switch (outcome) {
    case Outcome::Written:
      if (create) {
        ++s.created;
        if (x.recreating) ++s.recreated;
      } else {
        ++s.series_updates;
      }
      x.live = true;
      x.written = std::max(x.written, write.count);
      break;
    case Outcome::Gone:
      x.live = false;
      x.recreating = true;
      x.event_name.clear();
      x.under_way = true;
      return;
    case Outcome::Retry:
      ++x.failures;
      x.under_way = true;
      return;
    case Outcome::Failed:
      if (create && !x.live) {
        s.erase(it);  // a later occurrence tries a new Event
        return;
      }
      x.written = std::max(x.written, write.count);
      break;
  }
  x.failures = 0;
  x.under_way = x.recreating = false;
}

int EventCorrelator::failed_attempts(const std::string& key) const {
  auto it = s_->series.find(key);
  return it == s_->series.end() ? 0 : it->second.failures;
}

std::vector<std::string> EventCorrelator::pending_keys() const {
  std::vector<std::string> keys;
  for (const auto& [key, x] : s_->series)
    if (x.count > x.written) keys.push_back(key);
  return keys;
}

std::uint64_t EventCorrelator::queued() const { return s_->queued; }

std::uint64_t EventCorrelator::pending() const {
  std::uint64_t n = 0;
  for (const auto& [_, x] : s_->series) n += x.count - x.written;
  return n;
}

std::uint64_t EventCorrelator::drop_pending() {
  std::uint64_t n = 0;
  for (auto& [_, x] : s_->series) {
    n += x.count - x.written;
    x.written = x.count;
    x.unseen = 0;
  }
  s_->queued = 0;
  return n;
}

void EventCorrelator::add_stats(EventRecorderStats& out) const {
  out.created = s_->created;
  out.recreated = s_->recreated;
  out.series_updates = s_->series_updates;
  out.dropped_rate_limited += s_->dropped;
  out.pending = pending();
  out.series = s_->series.size();
}

}  // namespace ig::kube
