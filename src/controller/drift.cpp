#include "controller/drift.h"

#include <algorithm>
#include <tuple>

#include "admission/binding.h"
#include "admission/namespace_guard.h"
#include "admission/pod_rules.h"
#include "base/quote.h"
#include "controller/object_watch.h"
#include "kube/object_meta.h"
#include "kube/resources.h"
#include "model/pod.h"

namespace ig::controller {
namespace {

using nlohmann::json;
using policy::Decision;

// object[key] when it is a string, else "" (also when object is not an object).
std::string string_at(const json& object, std::string_view key) {
  auto f = object.find(key);
  return f != object.end() && f->is_string() ? f->get<std::string>() : std::string();
}

std::string_view drift_phrase(Drift d, policy::Decision decision) {
  if (d == Drift::Elsewhere) return "runs on the sandbox, but the gate now places the Component's pods elsewhere";
  switch (decision) {
    case Decision::Deny: return "runs outside the sandbox, but the gate now denies the Component's pods";
    case Decision::RequireSetec: return "runs outside the sandbox, but the gate now requires the setec sandbox";
    case Decision::AllowInProcess: break;
  }
  return "runs outside the sandbox";
}

// A pass at most every kMinInterval after a change, and every kResync; a
// failed eviction's backoff doubles from kEvictRetry up to kEvictRetryMax.
constexpr std::chrono::milliseconds kMinInterval{200}, kResync{30'000}, kNotReadyPoll{100}, kEvictRetry{10'000},
    kEvictRetryMax{300'000};

// The keys whose value differs between `before` and `after` (or is in one only).
template <typename Map>
void add_changed_keys(const Map& before, const Map& after, std::set<std::string, std::less<>>& changed) {
  for (const auto& [key, value] : after) {
    auto old = before.find(key);
    if (old == before.end() || !(old->second == value)) changed.insert(key);
  }
  for (const auto& [key, value] : before) {
    if (!after.count(key)) changed.insert(key);
  }
}

}  // namespace

Drift classify_drift(Decision decision, bool on_sandbox) noexcept {
  switch (decision) {
    case Decision::RequireSetec: return on_sandbox ? Drift::None : Drift::LessSafe;
    case Decision::AllowInProcess: return on_sandbox ? Drift::Elsewhere : Drift::None;
    case Decision::Deny:
    default: return on_sandbox ? Drift::Elsewhere : Drift::LessSafe;
  }
}

Result<PodPlacement> decode_pod_placement(const json& pod) {
  if (!pod.is_object()) return fail("a pod is not an object");
  const kube::ObjectMeta meta = kube::object_meta(pod);
  if (!meta.present) return fail("a pod without metadata");
  PodPlacement p;
  p.namespace_ = meta.namespace_;
  p.name = meta.name;
  p.uid = meta.uid;
  p.component = meta.label(model::kComponentLabel);
  if (auto spec = pod.find("spec"); spec != pod.end()) p.runtime_class = string_at(*spec, "runtimeClassName");
  p.running = pod_is_running(pod);
  if (p.running) {
    if (auto read = decode_audit_pod(pod)) p.facts = std::move(read.value().facts);
  }
  return p;
}

bool pod_is_running(const json& pod) {
  if (!pod.is_object()) return false;
  const auto status = pod.find("status");
  const std::string phase = status != pod.end() ? string_at(*status, "phase") : std::string();
  return phase != "Succeeded" && phase != "Failed" && !kube::object_meta(pod).deleting;
}

Result<AuditNamespace> decode_audit_namespace(const json& ns) {
  if (!ns.is_object()) return fail("a namespace is not an object");
  const kube::ObjectMeta meta = kube::object_meta(ns);
  if (!meta.present) return fail("a namespace without metadata");
  AuditNamespace n{std::string(meta.name), std::string(meta.uid)};
  if (n.name.empty()) return fail("a namespace without a name");
  return n;
}

Result<AuditPod> decode_audit_pod(const json& pod) {
  if (!pod.is_object()) return fail("a pod is not an object");
  // A listed pod carries no kind or apiVersion: it is a Pod by where it came from.
  model::PodLocation where;
  where.kind = model::ObjectKind::Pod;
  where.pod = &pod;
  auto facts = model::read_pod_facts(pod, where, "pod");
  if (!facts) return fail(facts.error());
  AuditPod p;
  p.uid = kube::object_meta(pod).uid;
  p.facts = std::move(facts).value();
  std::erase_if(p.facts.containers, [](const model::ContainerFacts& c) { return c.ephemeral; });
  std::erase_if(p.facts.privileged_containers,
                [](const std::string& name) { return name.starts_with("ephemeral:"); });
  return p;
}

std::vector<WouldDeny> audit_would_deny(std::span<const std::shared_ptr<const AuditPod>> pods,
                                        const std::set<std::string, std::less<>>& audit_namespaces,
                                        const admission::AdmissionContext& context) {
  std::vector<WouldDeny> out;
  const model::PodLocation where{};  // a Pod, at the root of the object
  for (const auto& pod : pods) {
    if (!pod || !audit_namespaces.count(pod->facts.namespace_)) continue;
    // The one decision site: the answer /mutate/pods would give this pod now.
    admission::PodVerdict v =
        admission::admit_pod(pod->facts, where, pod->facts.namespace_, context, admission::Stage::Mutate);
    if (v.answer.allowed()) continue;
    out.push_back({pod->facts.namespace_, pod->facts.object_name, pod->uid, v.answer.reason,
                   std::move(v.answer.message)});
  }
  std::sort(out.begin(), out.end(), [](const WouldDeny& a, const WouldDeny& b) {
    return std::tie(a.namespace_, a.name) < std::tie(b.namespace_, b.name);
  });
  return out;
}

WouldDenyCounts count_would_deny(std::span<const WouldDeny> found) {
  WouldDenyCounts counts;
  for (const auto& f : found) ++counts[{f.namespace_, std::string(admission::to_string(f.reason))}];
  return counts;
}

DriftAudit::DriftAudit(kube::Client& client, const kube::Store<ComponentRecord>& components,
                       const admission::SandboxView& sandbox, kube::EventRecorder* events,
                       DriftOptions options)
    : client_(client),
      components_(components),
      sandbox_(sandbox),
      events_(events),
      options_(std::move(options)),
      evict_bucket_(options_.evict_per_minute / 60.0, 1, options_.clock->now()),
      pods_(decode_pod_placement, [this](std::string_view) { mark_dirty(); }),
      cached_components_(components),
      audit_context_{options_.gate, cached_components_, sandbox},
      audit_namespaces_(decode_audit_namespace, [this](std::string_view) { mark_dirty(); }),
      audit_pods_(decode_audit_pod, [this](std::string_view) { mark_dirty(); },
                  [this](const json& pod) { return keep_audit_pod(pod); }) {
  runtime::Controller<std::string>::Options c;
  c.name = "drift";
  c.workers = 1;  // one pass at a time, and evictions in between, as one loop
  c.clock = options_.clock;
  c.rate_limit.backoff = BackoffOptions{kEvictRetry, kEvictRetryMax};
  c.reconcile = [this](const std::string& key, const runtime::CancelToken& cancel) { return reconcile(key, cancel); };
  c.initial_keys = [this] {  // a term starts with a pass, which queues the evictions due
    std::lock_guard lock(mu_);
    evict_queued_.clear();
    return std::vector<std::string>{std::string(kPass)};
  };
  c.log = options_.log;
  c.describe = [](const std::string& key) { return key.empty() ? std::string("pass") : "eviction of pod " + key; };
  controller_ = std::make_shared<runtime::Controller<std::string>>(std::move(c));
}

DriftAudit::~DriftAudit() { stop(); }

void DriftAudit::start() {
  std::lock_guard lock(mu_);
  if (!stopping_) return;
  stopping_ = false;
  audited_.store(false, std::memory_order_release);
  const WatchSettings ws{options_.log, {}, 500};
  reflector_ = std::make_unique<kube::Reflector>(
      client_, pods_, reflector_options("pods", kube::kPods, "", ws, {}, std::string(model::kComponentLabel)));
  reflector_->start();
  const std::string audit_label = std::string(admission::kEnforcementLabel) + "=audit";  // audit mode
  namespace_reflector_ = std::make_unique<kube::Reflector>(
      client_, audit_namespaces_, reflector_options("audit_namespaces", kube::kNamespaces, "", ws, {}, audit_label));
  namespace_reflector_->start();
  // Unlabelled pods too; kept only in audit namespaces (keep_audit_pod).
  audit_pod_reflector_ = std::make_unique<kube::Reflector>(client_, audit_pods_,
                                                           reflector_options("audit_pods", kube::kPods, "", ws));
}

void DriftAudit::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    audit_denied_.clear();
    audit_counts_.clear();  // leader only: a replica that does not lead reports none
  }
  if (reflector_) reflector_->stop();
  if (namespace_reflector_) namespace_reflector_->stop();
  stop_audit_pods();
  audited_.store(false, std::memory_order_release);
}

bool DriftAudit::keep_audit_pod(const json& pod) const {
  if (!pod_is_running(pod)) return false;
  const kube::ObjectMeta meta = kube::object_meta(pod);
  std::lock_guard lock(mu_);
  return audit_set_.count(meta.namespace_) > 0;  // the set holds no ""
}

void DriftAudit::stop_audit_pods() noexcept {
  {
    std::lock_guard lock(mu_);
    audit_set_.clear();
  }
  if (!audit_pods_running_.exchange(false, std::memory_order_acq_rel)) return;
  audit_pod_reflector_->stop();
  // Its reflector is stopped: empty the cache (the pods' facts) as a list of nothing would.
  audit_pods_.begin_replace();
  audit_pods_.end_replace("");
}

void DriftAudit::mark_dirty() noexcept {
  try {
    Clock::duration wait{};
    {
      std::lock_guard lock(mu_);
      if (last_pass_) wait = std::max(Clock::duration::zero(), *last_pass_ + kMinInterval - options_.clock->now());
    }
    if (wait > Clock::duration::zero()) {
      controller_->enqueue_after(std::string(kPass), wait);
    } else {
      controller_->enqueue(std::string(kPass));
    }
  } catch (...) {  // out of memory: the next change or resync runs the pass
  }
}

std::size_t DriftAudit::drifted(std::string_view component_key) const {
  std::lock_guard lock(mu_);
  auto it = counts_.find(component_key);
  return it == counts_.end() ? 0 : it->second;
}

UnboundPods DriftAudit::unbound(std::string_view component_key) const {
  std::lock_guard lock(mu_);
  auto it = unbound_.find(component_key);
  return it == unbound_.end() ? UnboundPods{} : it->second;
}

std::vector<CacheView> DriftAudit::cache_views() const {
  std::lock_guard lock(mu_);
  if (stopping_ || !reflector_) return {};
  std::vector<CacheView> out = {cache_view("pods", *reflector_, pods_),
                                cache_view("audit_namespaces", *namespace_reflector_, audit_namespaces_)};
  if (audit_pods_running_.load(std::memory_order_acquire))
    out.push_back(cache_view("audit_pods", *audit_pod_reflector_, audit_pods_));
  return out;
}

Result<runtime::Requeue> DriftAudit::reconcile(const std::string& key, const runtime::CancelToken& cancel) {
  if (key != kPass) return evict(key, cancel);
  const kube::Reflector* pods = nullptr;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return runtime::Requeue{};  // between terms: the next one starts with a pass
    pods = reflector_.get();
  }
  if (cancel.stop_requested()) return runtime::Requeue{};
  // The pod cache must have listed in THIS term: it still holds the last term's pods.
  if (pods->stats().lists == 0 || (options_.inputs_ready && !options_.inputs_ready()))
    return runtime::Requeue{false, kNotReadyPoll};
  pass();
  return runtime::Requeue{false, kResync};
}

void DriftAudit::pass() {
  const auto now = options_.clock->now();
  {
    std::lock_guard lock(mu_);
    last_pass_ = now;  // a change from now on is a pass kMinInterval after this one
  }
  StatusInputs in;
  in.sandbox = sandbox_.availability();
  in.shape = options_.gate.shape.shape;
  std::map<std::string, std::size_t, std::less<>> counts;
  std::map<std::string, DriftedPod> drifted;
  std::map<std::string, UnboundPods, std::less<>> unbound;
  for (const auto& pod : pods_.snapshot()) {
    if (!pod->running || pod->component.empty()) continue;
    const std::string component_key = kube::object_key(pod->namespace_, pod->component);
    auto record = components_.find(component_key);
    if (!record) continue;  // not a known Component: the admission rules' business
    const Decision decision = decision_for(record->component, in);
    const bool on_sandbox = pod->runtime_class == options_.gate.runtime_class;
    const Drift d = classify_drift(decision, on_sandbox);
    if (d == Drift::None && on_sandbox && pod->facts) {  // RequireSetec, in the microVM
      auto phrases = admission::unbound_outside_microvm(*pod->facts, record->component, options_.gate);
      if (!phrases.empty()) {
        UnboundPods& u = unbound[component_key];
        if (u.count++ == 0 || pod->name < u.example_pod) {
          u.example_pod = pod->name;
          u.example_phrase = std::move(phrases.front());
        }
      }
    }
    if (d == Drift::None) continue;
    ++counts[component_key];
    std::string note = "pod " + quote(pod->name) + " " + std::string(drift_phrase(d, decision)) + " (" +
                       std::string(policy::to_string(decision)) + ", RuntimeClass " +
                       (pod->runtime_class.empty() ? std::string("none") : quote(pod->runtime_class)) + ")" +
                       (d == Drift::Elsewhere ? "; it is safe where it is and is not evicted"
                        : options_.evict     ? "; it will be evicted if it still is after the settle time "
                                               "(--drift-eviction-settle " +
                                               std::to_string(options_.evict_settle.count() / 1000) + "s)"
                                             : "; recreate it, or run with --evict-drifted");
    drifted[kube::object_key(pod->namespace_, pod->name)] = {component_key, pod->uid, d, false, std::move(note)};
  }
  std::set<std::string, std::less<>> changed;
  std::vector<DriftedPod> newly;
  std::vector<std::pair<std::string, Clock::duration>> to_evict;  // pod key, time left
  {
    std::lock_guard lock(mu_);
    add_changed_keys(counts_, counts, changed);
    add_changed_keys(unbound_, unbound, changed);
    for (auto& [key, d] : drifted) {
      auto old = drifted_pods_.find(key);
      const bool seen = old != drifted_pods_.end() && old->second.drift == d.drift && old->second.uid == d.uid;
      d.first_seen = seen ? old->second.first_seen : now;
      if (!seen) newly.push_back(d);
    }
    if (options_.evict && !stopping_) {
      // Each pod to evict is a key of its own, queued once per term.
      for (const auto& [key, d] : drifted) {
        if (d.drift != Drift::LessSafe || !evict_queued_.insert(key).second) continue;
        to_evict.emplace_back(key, std::max(Clock::duration::zero(), d.first_seen + options_.evict_settle - now));
      }
    }
    counts_ = std::move(counts);
    unbound_ = std::move(unbound);
    drifted_pods_ = std::move(drifted);
  }
  for (const auto& [key, wait] : to_evict) controller_->enqueue_after(key, wait);
  audited_.store(true, std::memory_order_release);
  for (const auto& d : newly) {
    record_event(d.component_key, "PodDrifted", "Audit", d.note);
    if (options_.log) options_.log("warn", "drift: Component " + d.component_key + ": " + d.note);
  }
  for (const auto& key : changed) {
    if (options_.on_count_change) options_.on_count_change(key);
  }
  audit_pass();
}

void DriftAudit::audit_pass() {
  // Until the Namespace cache has listed this term, the last report stands.
  if (!namespace_reflector_ || namespace_reflector_->stats().lists == 0) return;
  std::set<std::string, std::less<>> names;
  for (const auto& ns : audit_namespaces_.snapshot()) names.insert(ns->name);
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = std::exchange(audit_set_, names) != names;
  }
  if (changed) {  // the cache kept pods by the set published when each arrived: list again
    if (names.empty()) {
      stop_audit_pods();
    } else if (!audit_pods_running_.exchange(true, std::memory_order_acq_rel)) {
      audit_pod_reflector_->start();
    } else {
      audit_pod_reflector_->relist();
    }
  }
  std::vector<WouldDeny> found;
  if (audit_pods_running_.load(std::memory_order_acquire)) {
    // Pods of a namespace that just left audit mode may still be cached:
    // audit_would_deny reads only the namespaces in audit mode now.
    const auto pods = audit_pods_.snapshot();
    found = audit_would_deny(pods, names, audit_context_);
  }
  decltype(audit_denied_) denied;
  std::vector<const WouldDeny*> newly;
  {
    std::lock_guard lock(mu_);
    for (const auto& f : found) {
      const std::string key = kube::object_key(f.namespace_, f.name);
      const auto& why = denied[key] = {f.uid, f.reason};
      if (auto old = audit_denied_.find(key); old == audit_denied_.end() || old->second != why) newly.push_back(&f);
    }
    audit_denied_ = std::move(denied);
    audit_counts_ = count_would_deny(found);
  }
  for (const WouldDeny* f : newly) {
    const std::string note = "pod " + quote(f->name) + " would be denied if namespace " + quote(f->namespace_) +
                             " were enforced (" + std::string(admission::to_string(f->reason)) + "): " + f->message;
    if (options_.log) options_.log("warn", "audit: " + note);
    if (!events_) continue;
    const auto ns = audit_namespaces_.find(f->namespace_);
    events_->record({{"Namespace", "v1", "", f->namespace_, ns ? ns->uid : std::string()},
                     {"Pod", "v1", f->namespace_, f->name, f->uid}, "Warning", "WouldDenyWhenEnforced", "Audit", note});
  }
}

Result<runtime::Requeue> DriftAudit::evict(const std::string& pod_key, const runtime::CancelToken& cancel) {
  std::string uid, component_key;
  {
    std::lock_guard lock(mu_);
    auto d = drifted_pods_.find(pod_key);
    if (stopping_ || !options_.evict || d == drifted_pods_.end() || d->second.drift != Drift::LessSafe ||
        d->second.done) {
      // Not drifted (less safe) any more, done, or gone: a pass that sees it drift queues it again.
      evict_queued_.erase(pod_key);
      return runtime::Requeue{};
    }
    const Clock::time_point now = options_.clock->now();
    const auto at = d->second.first_seen + options_.evict_settle;
    if (now < at) return runtime::Requeue{false, at - now};  // settling
    if (cancel.stop_requested()) return runtime::Requeue{};  // the fence: no eviction after leadership is lost
    if (!evict_bucket_.try_take(now))  // --evict-rate: again at the next token
      return runtime::Requeue{false, std::max<Clock::duration>(evict_bucket_.delay(now), std::chrono::milliseconds(1))};
    uid = d->second.uid;
    component_key = d->second.component_key;
  }
  const auto slash = pod_key.find('/');
  const std::string ns = pod_key.substr(0, slash), name = pod_key.substr(slash + 1);
  json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", name}, {"namespace", ns}}}};
  if (!uid.empty()) eviction["deleteOptions"] = {{"preconditions", {{"uid", uid}}}};
  auto result = client_.create(kube::object_path(kube::kPods, ns, name, "eviction"), eviction, cancel);
  if (result) {
    {
      std::lock_guard lock(mu_);
      ++evicted_;
      forget(pod_key);
    }
    record_event(component_key, "Evicted", "Evict",
                 "evicted pod " + quote(name) +
                     ": its placement was less safe than the gate decides now (--evict-drifted)");
    if (options_.log) options_.log("warn", "evicted drifted pod " + pod_key);
    return runtime::Requeue{};
  }
  if (cancel.stop_requested()) return runtime::Requeue{};  // abandoned: the next leader's pass sees it
  const kube::ApiError& e = result.failure();
  std::lock_guard lock(mu_);
  if (e.not_found()) {
    forget(pod_key);
    return runtime::Requeue{};
  }
  if (e.code == 429) {
    ++eviction_blocked_;
    if (options_.log) options_.log("info", "eviction of " + pod_key + " refused for now (retried): " + e.message);
    return runtime::Requeue{false, e.retry_after.count() > 0 ? Clock::duration(e.retry_after) : kEvictRetry};
  }
  ++eviction_failed_;
  return fail("cannot evict it (retried): " + e.message);
}

void DriftAudit::forget(const std::string& pod_key) {
  if (auto d = drifted_pods_.find(pod_key); d != drifted_pods_.end()) d->second.done = true;
  evict_queued_.erase(pod_key);
}

kube::ObjectReference component_reference(std::string_view ns, std::string_view name, std::string uid) {
  return {std::string(model::kComponentKind), std::string(model::kComponentApiVersion), std::string(ns),
          std::string(name), std::move(uid)};
}

void DriftAudit::record_event(const std::string& component_key, std::string reason, std::string action,
                              std::string note) {
  const auto record = components_.find(component_key);
  if (!events_ || !record) return;
  events_->record({component_reference(record->component.namespace_, record->component.name, record->uid.str()), {},
                   "Warning", std::move(reason), std::move(action), std::move(note)});
}

void DriftAudit::write_metrics(prometheus::TextWriter& out) const {
  using prometheus::Type;
  std::lock_guard lock(mu_);
  out.family("isolation_gate_drifted_pods", Type::Gauge,
             "Running pods placed against the gate's decision now, by Component (leader only).");
  for (const auto& [key, n] : counts_) {
    const auto slash = key.find('/');
    out.sample("isolation_gate_drifted_pods",
               {{"namespace", std::string_view(key).substr(0, slash)},
                {"component", std::string_view(key).substr(slash + 1)}},
               std::uint64_t{n});
  }
  out.family("isolation_gate_audit_pods_would_deny", Type::Gauge,
             "Running pods in audit namespaces that enforcement would deny, by namespace and the denial's "
             "reason (leader only).");
  for (const auto& [key, n] : audit_counts_) {
    out.sample("isolation_gate_audit_pods_would_deny", {{"namespace", key.first}, {"reason", key.second}},
               std::uint64_t{n});
  }
  out.family("isolation_gate_evictions_total", Type::Counter, "Evictions of drifted pods, by result.");
  out.sample("isolation_gate_evictions_total", {{"result", "evicted"}}, evicted_);
  out.sample("isolation_gate_evictions_total", {{"result", "blocked"}}, eviction_blocked_);
  out.sample("isolation_gate_evictions_total", {{"result", "failed"}}, eviction_failed_);
}

}  // namespace ig::controller
