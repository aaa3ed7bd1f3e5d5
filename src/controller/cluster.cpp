#include "controller/cluster.h"

#include "base/quote.h"
#include "controller/object_watch.h"
#include "kube/resources.h"
#include "runtime/metrics.h"

namespace ig::controller {

policy::SandboxAvailability ClusterSandbox::availability() const noexcept {
  return availability_.load(std::memory_order_acquire);
}

std::string ClusterSandbox::describe() const {
  std::lock_guard lock(mu_);
  return reason_;
}

bool ClusterSandbox::update(const SandboxAssessment& a) {
  std::lock_guard lock(mu_);
  const bool was = policy::is_available(availability_.load(std::memory_order_relaxed));
  const bool now = policy::is_available(a.availability);
  const bool changed = was != now || (!now && reason_ != a.reason);
  reason_ = a.reason;
  capable_.store(a.capable_nodes, std::memory_order_relaxed);
  availability_.store(a.availability, std::memory_order_release);
  return changed;
}

const kube::Reflector* FreshSandbox::stale() const noexcept {
  if (stale_after_.count() <= 0) return nullptr;
  for (const kube::Reflector* r : {runtime_classes_, nodes_}) {
    if (r != nullptr && r->since_progress() > stale_after_) return r;
  }
  return nullptr;
}

policy::SandboxAvailability FreshSandbox::availability() const noexcept {
  const auto assessed = sandbox_.availability();
  if (!policy::is_available(assessed)) return assessed;  // nothing to fail closed from
  return stale() != nullptr ? policy::SandboxAvailability::Unavailable : assessed;
}

std::string FreshSandbox::describe() const {
  if (const kube::Reflector* r = stale(); r != nullptr && policy::is_available(sandbox_.availability())) {
    const auto age = std::chrono::duration_cast<std::chrono::seconds>(r->since_progress()).count();
    return "unknown (treated as unavailable): the " + r->name() + " cache has had no list, event or bookmark for " +
           std::to_string(age) + "s (--sandbox-stale-after " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(stale_after_).count()) +
           "s); its last assessment was: " + sandbox_.describe();
  }
  return sandbox_.describe();
}

admission::LookupResult CachedComponents::find(std::string_view ns, std::string_view name) const {
  using Status = admission::LookupResult::Status;
  if (auto cached = store_.find(kube::object_key(ns, name))) {
    // Aliasing: the Component inside the cached record, sharing its lifetime.
    return {Status::Found, std::shared_ptr<const model::Component>(cached, &cached->component), {}};
  }
  return {Status::NotFound, nullptr, {}};
}

admission::LookupResult ClusterComponents::find(std::string_view ns, std::string_view name) const {
  using Status = admission::LookupResult::Status;
  if (auto cached = CachedComponents::find(ns, name); cached.status == Status::Found) return cached;
  // Not cached (yet): one bounded live GET, shared by concurrent misses.
  auto answer = flights_.run(
      kube::object_key(ns, name), timeout_,
      [&]() -> admission::LookupResult {
        try {
          return fetch(ns, name);
        } catch (const std::exception& e) {  // never leave the flight unfinished: its waiters fail closed
          return {Status::Error, nullptr, std::string("Component lookup failed: ") + e.what()};
        }
      },
      [](const admission::LookupResult& r) { return r.status != Status::Error; });
  if (answer) return *std::move(answer);
  // The GET in flight is bounded by the same timeout: this wait ended first.
  return failed(ns, name, "the Kubernetes API did not answer within " + std::to_string(timeout_.count()) +
                              "ms (waiting for the GET of another review)");
}

admission::LookupResult ClusterComponents::fetch(std::string_view ns, std::string_view name) const {
  using Status = admission::LookupResult::Status;
  live_gets_.fetch_add(1, std::memory_order_relaxed);
  auto got = client_.get(kube::object_path(kComponents, ns, name), timeout_);
  if (!got) {
    if (got.failure().not_found()) return {Status::NotFound, nullptr, {}};
    return failed(ns, name, "the Kubernetes API did not answer: " + got.error());
  }
  auto component = model::decode_component(*got, "Component " + quote(name));
  if (!component) return failed(ns, name, component.error());
  return {Status::Found, std::make_shared<const model::Component>(std::move(component).value()), {}};
}

admission::LookupResult ClusterComponents::failed(std::string_view ns, std::string_view name,
                                                  std::string error) const {
  const std::uint64_t total = lookup_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
  const auto now = clock_->now();
  std::uint64_t since_last = 0;  // 0: not reported now
  {
    std::lock_guard lock(log_mu_);
    if (errors_at_last_log_ == 0 || now - last_log_ >= std::chrono::seconds(10)) {
      since_last = total - errors_at_last_log_;
      errors_at_last_log_ = total;
      last_log_ = now;
    }
  }
  if (log_ && since_last > 0) {
    log_("warn", "Component lookups are failing (a cache miss needs a live GET, and the GET failed; "
                 "such pods are denied): " +
                     std::to_string(since_last) + " failed since the last report, " + std::to_string(total) +
                     " in all; the latest: Component " + quote(name) + " in namespace " + quote(ns) + ": " + error);
  }
  return {admission::LookupResult::Status::Error, nullptr, std::move(error)};
}

Cluster::Cluster(kube::Client& client, ClusterOptions options, kube::Client* lookup_client)
    : client_(client),
      options_(std::move(options)),
      components_(decode_component_record,
                  [this](std::string_view key) {
                    if (listener_) listener_->component_changed(key);
                  }),
      runtime_classes_(decode_runtime_class, [this](std::string_view) { recompute_sandbox(); }),
      nodes_([this](const nlohmann::json& o) { return decode_node_fit(o, *projection()); },
             [this](std::string_view) { recompute_sandbox(); }),
      lookup_(components_, lookup_client != nullptr ? *lookup_client : client_, options_.lookup_timeout,
              options_.log) {
  const WatchSettings ws{options_.log, {}, options_.page_size, options_.watch_silence};
  auto reflector = [&](std::string name, const kube::Resource& r, kube::ReflectorSink& sink) {
    return std::make_unique<kube::Reflector>(client_, sink, reflector_options(std::move(name), r, "", ws));
  };
  component_reflector_ = reflector("components", kComponents, components_);
  runtime_class_reflector_ = reflector("runtimeclasses", kube::kRuntimeClasses, runtime_classes_);
  node_reflector_ = reflector("nodes", kube::kNodes, nodes_);
  fresh_sandbox_ = std::make_unique<FreshSandbox>(sandbox_, options_.sandbox_stale_after,
                                                  runtime_class_reflector_.get(), node_reflector_.get());
}

Cluster::~Cluster() { stop(); }

void Cluster::start() {
  component_reflector_->start();
  runtime_class_reflector_->start();  // its first list starts the Node reflector
}

void Cluster::start_nodes() {
  if (nodes_started_ || stopped_) return;  // under recompute_mu_
  nodes_started_ = true;
  node_reflector_->start();
}

std::shared_ptr<const NodeProjection> Cluster::projection() const {
  std::lock_guard lock(projection_mu_);
  return projection_;
}

void Cluster::stop() noexcept {
  {
    std::lock_guard lock(recompute_mu_);  // no Node reflector starts after this
    stopped_ = true;
  }
  component_reflector_->stop();
  runtime_class_reflector_->stop();
  node_reflector_->stop();
}

bool Cluster::settled() const noexcept {
  return synced() && sandbox_settled_.load(std::memory_order_acquire);
}

bool Cluster::synced() const noexcept {
  return components_.synced() && runtime_classes_.synced() && nodes_.synced() &&
         sandbox_assessed_.load(std::memory_order_acquire);
}

void Cluster::recompute_sandbox() {
  // Both reflectors call this; one computation at a time, from whole snapshots.
  std::lock_guard lock(recompute_mu_);
  if (!runtime_classes_.synced()) return;
  std::optional<RuntimeClassFacts> rc;
  if (auto found = runtime_classes_.find(options_.runtime_class)) rc = *found;
  std::vector<NodeFit> nodes;
  bool complete = true;  // not the interim "unavailable" of a scheduling change
  auto current = projection();
  if (rc && !current->same_scheduling(rc)) {
    // Fits made under the old scheduling say nothing of the new one: list again.
    {
      std::lock_guard plock(projection_mu_);
      projection_ = std::make_shared<const NodeProjection>(
          NodeProjection{current->generation + 1, rc->node_selector, rc->tolerations});
    }
    if (nodes_started_ && options_.log) {
      options_.log("info", "RuntimeClass " + quote(options_.runtime_class) +
                               " scheduling changed: listing the Nodes again");
    }
    node_reflector_->relist();
    // Unavailable (fail closed) until every Node is fitted under the new scheduling.
    complete = false;
  }
  start_nodes();
  // No RuntimeClass: unavailable at once (rule 1), with no fits (they stay for its return).
  if (rc && complete) {
    if (!nodes_.synced()) return;
    for (const auto& n : nodes_.snapshot()) {
      if (n->projection != current->generation) return;  // not all fitted under it yet
      nodes.push_back(*n);
    }
  }
  const SandboxAssessment a = assess_sandbox(options_.runtime_class, rc, nodes, options_.shape);
  const bool was = policy::is_available(sandbox_.availability());
  if (sandbox_.update(a) && options_.log) {
    options_.log(policy::is_available(a.availability) ? "info" : "warn", "sandbox " + a.reason);
  }
  sandbox_settled_.store(complete, std::memory_order_release);
  if (complete) sandbox_assessed_.store(true, std::memory_order_release);
  if (listener_ && was != policy::is_available(a.availability)) listener_->sandbox_changed();
}

void Cluster::write_metrics(prometheus::TextWriter& out, std::span<const CacheView> more) const {
  using prometheus::Type;
  runtime::write_single(out, "isolation_gate_sandbox_available", Type::Gauge,
                        "1 when the setec sandbox is available to admission (RuntimeClass present, a capable "
                        "Node, caches not stale).",
                        std::uint64_t{policy::is_available(fresh_sandbox_->availability()) ? 1u : 0u});
  runtime::write_single(out, "isolation_gate_sandbox_capable_nodes", Type::Gauge,
                        "Nodes that can run the setec RuntimeClass now.", std::uint64_t{sandbox_.capable_nodes()});
  runtime::write_single(out, "isolation_gate_component_live_gets_total", Type::Counter,
                        "Live GETs of Components that missed the cache (concurrent misses of one share one).",
                        lookup_.live_gets());
  runtime::write_single(out, "isolation_gate_component_lookups_shared_total", Type::Counter,
                        "Component cache misses answered by another miss's live GET (in flight, or its answer "
                        "remembered for a second) instead of a GET of their own.",
                        lookup_.shared());
  runtime::write_single(out, "isolation_gate_component_lookup_errors_total", Type::Counter,
                        "Component lookups that missed the cache and whose live GET failed (the pod is denied).",
                        lookup_.lookup_errors());

  std::vector<CacheView> caches = {cache_view("components", *component_reflector_, components_),
                                   cache_view("runtimeclasses", *runtime_class_reflector_, runtime_classes_),
                                   cache_view("nodes", *node_reflector_, nodes_)};
  caches.insert(caches.end(), more.begin(), more.end());
  write_cache_metrics(out, caches);
}

void write_cache_metrics(prometheus::TextWriter& out, std::span<const CacheView> caches) {
  using prometheus::Type;
  using Stats = kube::ReflectorStats;
  struct Family {
    std::string_view name;
    Type type;
    prometheus::Help help;
    std::uint64_t (*value)(const CacheView&, const Stats&);
  };
  static constexpr Family kFamilies[] = {
      {"isolation_gate_cache_objects", Type::Gauge, "Objects held by each cache.",
       [](const CacheView& c, const Stats&) -> std::uint64_t { return c.size; }},
      {"isolation_gate_cache_synced", Type::Gauge, "1 once the cache has listed.",
       [](const CacheView& c, const Stats&) -> std::uint64_t { return c.synced ? 1u : 0u; }},
      {"isolation_gate_cache_decode_errors_total", Type::Counter,
       "Objects left out of a cache because they could not be read.",
       [](const CacheView& c, const Stats&) { return c.decode_errors; }},
      {"isolation_gate_reflector_lists_total", Type::Counter, "Complete lists.",
       [](const CacheView&, const Stats& s) { return s.lists; }},
      {"isolation_gate_reflector_silent_watches_total", Type::Counter,
       "Watches closed because no byte (event or bookmark) came for --kube-watch-silence.",
       [](const CacheView&, const Stats& s) { return s.silent_watches; }},
      {"isolation_gate_reflector_watches_total", Type::Counter, "Watch streams opened.",
       [](const CacheView&, const Stats& s) { return s.watches; }},
      {"isolation_gate_reflector_events_total", Type::Counter, "Watch events applied.",
       [](const CacheView&, const Stats& s) { return s.events; }},
      {"isolation_gate_reflector_bookmarks_total", Type::Counter, "Watch bookmarks received.",
       [](const CacheView&, const Stats& s) { return s.bookmarks; }},
      {"isolation_gate_reflector_errors_total", Type::Counter, "Failed calls and broken watch streams.",
       [](const CacheView&, const Stats& s) { return s.errors; }},
  };
  std::vector<Stats> stats(caches.size());
  for (std::size_t i = 0; i < caches.size(); ++i) stats[i] = caches[i].reflector->stats();
  for (const auto& f : kFamilies) {
    out.family(f.name, f.type, f.help);
    for (std::size_t i = 0; i < caches.size(); ++i)
      out.sample(f.name, {{"resource", caches[i].name}}, f.value(caches[i], stats[i]));
  }
  out.family("isolation_gate_cache_staleness_seconds", Type::Gauge,
             "Seconds since the cache's last complete list, watch event or bookmark (since start before "
             "the first list); a healthy watch gets a bookmark about every minute.");
  for (const auto& c : caches) {
    out.sample("isolation_gate_cache_staleness_seconds", {{"resource", c.name}},
               std::chrono::duration<double>(c.reflector->since_progress()).count());
  }
  out.family("isolation_gate_reflector_relists_total", Type::Counter,
             "Lists made again after the first, by cause: expired (410), too_large (504 Too large "
             "resource version), watch_failed, error_event, continue_expired, requested.");
  for (std::size_t i = 0; i < caches.size(); ++i) {
    for (std::size_t c = 0; c < kube::kRelistCauses; ++c) {
      out.sample("isolation_gate_reflector_relists_total",
                 {{"resource", caches[i].name}, {"cause", kube::relist_cause_label(static_cast<kube::RelistCause>(c))}},
                 stats[i].relists[c]);
    }
  }
}

}  // namespace ig::controller
