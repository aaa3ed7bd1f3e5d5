#include "kube/reflector.h"

#include <malloc.h>

#include <algorithm>

#include "kube/object_meta.h"

namespace ig::kube {

std::string_view relist_cause_label(RelistCause c) noexcept {
  static constexpr std::string_view kLabels[kRelistCauses] = {"expired",     "too_large",        "watch_failed",
                                                              "error_event", "continue_expired", "requested"};
  return kLabels[static_cast<std::size_t>(c)];
}

Reflector::Reflector(Client& client, ReflectorSink& sink, ReflectorOptions options)
    : client_(client), sink_(sink), options_(std::move(options)) {
  progressed();
}

void Reflector::progressed() noexcept {
  last_progress_.store(options_.clock->now().time_since_epoch().count(), std::memory_order_relaxed);
}

Clock::duration Reflector::since_progress() const noexcept {
  const Clock::time_point last{Clock::duration(last_progress_.load(std::memory_order_relaxed))};
  return std::max(options_.clock->now() - last, Clock::duration::zero());
}

void Reflector::count_relist(RelistCause cause) {
  std::lock_guard lock(mu_);
  ++stats_.relists[static_cast<std::size_t>(cause)];
}

void Reflector::count(std::uint64_t ReflectorStats::*counter) {
  std::lock_guard lock(mu_);
  ++(stats_.*counter);
}

Reflector::~Reflector() { stop(); }

void Reflector::start() {
  stopping_.store(false, std::memory_order_release);
  progressed();
  thread_ = std::thread([this] { run(); });
}

void Reflector::stop() noexcept {
  interrupt(stopping_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Reflector::relist() { interrupt(relist_); }

void Reflector::interrupt(std::atomic<bool>& flag) noexcept {
  {
    std::lock_guard lock(mu_);
    flag.store(true, std::memory_order_release);
    if (stream_ != nullptr) stream_->stop();
  }
  cv_.notify_all();
}

ReflectorStats Reflector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reflector::log(std::string_view level, const std::string& message) const {
  if (options_.log) options_.log(level, options_.name + ": " + message);
}

bool Reflector::wait(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  const auto deadline = options_.clock->now() + d;
  while (!stopping() && !relist_requested() && options_.clock->now() < deadline)
    options_.clock->wait_until(lock, cv_, deadline);
  return !stopping();
}

std::chrono::milliseconds Reflector::next_backoff(const ApiError* error) {
  const auto& p = options_.backoff;
  backoff_ = backoff_.count() == 0 ? p.initial : std::min(p.max, backoff_ * 2);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto d = std::chrono::milliseconds(static_cast<long long>(
      static_cast<double>(backoff_.count()) * (1.0 + p.jitter * unit(rng_))));
  d = std::min(d, p.max);
  if (error != nullptr && error->retry_after.count() > 0) {
    d = std::max<std::chrono::milliseconds>(d, error->retry_after);
  }
  return d;
}

bool Reflector::list_all() {
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  // Paginated only from etcd: "" (quorum) and "0" (the watch cache ignores
  // the limit for "0"); any other resourceVersion unpaginated, so the watch
  // cache serves it (a limit would send it to etcd).
  auto choose = [&](std::string rv) {
    options.resource_version = std::move(rv);
    const bool paged = options.resource_version.empty() || options.resource_version == "0";
    options.limit = paged ? options_.page_size : 0;
    options.continue_token.clear();
  };
  choose(rv_unavailable_ ? "" : resource_version_.empty() ? "0" : resource_version_);
  sink_.begin_replace();
  std::string list_rv;
  while (!stopping()) {
    // Cleared per attempt: a relist() after this point lists once more.
    if (options.continue_token.empty()) relist_.store(false, std::memory_order_release);
    auto page = client_.list_each(options_.path, options,
                                  [this](nlohmann::json&& item) { sink_.add_listed(item); });
    if (!page) {
      const ApiError& e = page.failure();
      count(&ReflectorStats::errors);
      sink_.begin_replace();
      if (e.gone() && !options.continue_token.empty()) {
        // The continue token expired mid-list (compaction while we paged):
        // the whole list once more, unpaginated, at the same resourceVersion.
        log("info", "list continue token expired; listing again unpaginated: " + e.message);
        count_relist(RelistCause::ContinueExpired);
        options.continue_token.clear();
        options.limit = 0;
        continue;
      }
      if (!options.resource_version.empty()) {
        // The resourceVersion may be unavailable (410, too large), or the
        // watch cache is what fails: fall back to a quorum read.
        rv_unavailable_ = true;
        const bool rv_problem = e.gone() || e.rv_too_large;
        log(rv_problem ? "info" : "warn", "list at resourceVersion \"" + options.resource_version +
                                              "\" failed; listing from etcd (resourceVersion \"\"): " + e.message);
        choose("");
        if (rv_problem) continue;  // at once, as client-go does
      } else {
        log("warn", "list failed: " + e.message);
        choose("");
      }
      if (!wait(next_backoff(&e))) return false;
      continue;
    }
    if (options.continue_token.empty()) list_rv = page->resource_version;
    if (page->continue_token.empty()) break;
    options.continue_token = page->continue_token;
  }
  if (stopping()) return false;
  rv_unavailable_ = false;
  resource_version_ = list_rv;
  // Counted before the sink shows it: whoever sees the store synced sees the list counted.
  count(&ReflectorStats::lists);
  sink_.end_replace(list_rv);
  progressed();
  // glibc keeps the list's freed memory in its arenas: give it back, so what
  // stays resident is the cache.
  malloc_trim(0);
  return true;
}

Reflector::Next Reflector::watch_once() {
  auto requested = [this] {
    count_relist(RelistCause::Requested);
    return Next::Relist;
  };
  if (relist_requested()) return requested();
  WatchOptions options;
  options.resource_version = resource_version_;
  options.allow_bookmarks = true;
  {
    // [watch_timeout, 2 * watch_timeout): replicas do not all reconnect at once.
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const double base = static_cast<double>(options_.watch_timeout.count());
    options.timeout = std::chrono::seconds(static_cast<long long>(base * (1.0 + unit(rng_))));
  }
  options.silence = options_.watch_silence;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  // What a failed watch leads to (its opening or an ERROR event), client-go's rule.
  auto after_failure = [&](const ApiError& e, std::string_view what) {
    if (stopping()) return Next::Stop;  // a failure caused by stop() is no relist
    count(&ReflectorStats::errors);
    if (e.code == 429 || e.refused) {
      // Busy or restarting: the cache is still current; watch again.
      log("info", std::string(what) + " (watching again after the backoff): " + e.message);
      return wait(next_backoff(&e)) ? Next::Rewatch : Next::Stop;
    }
    if (e.gone()) {
      rv_unavailable_ = true;
      count_relist(RelistCause::Expired);
      log("info", std::string(what) + ": resourceVersion " + options.resource_version +
                      " is too old; listing again: " + e.message);
      return Next::Relist;
    }
    RelistCause cause = what == "watch failed" ? RelistCause::WatchFailed : RelistCause::ErrorEvent;
    if (e.rv_too_large) {
      rv_unavailable_ = true;
      cause = RelistCause::TooLarge;
    }
    count_relist(cause);
    log("warn", std::string(what) + " (listing again after the backoff): " + e.message);
    return wait(next_backoff(&e)) ? Next::Relist : Next::Stop;
  };
  auto opened = client_.watch(options_.path, options);
  if (!opened) return after_failure(opened.failure(), "watch failed");
  std::unique_ptr<WatchStream> stream = std::move(opened).value();
  {
    std::lock_guard lock(mu_);
    if (!stopping() && !relist_requested()) {  // a relist() asked before stream_ was set did not stop it
      stream_ = stream.get();
      ++stats_.watches;
    }
  }
  bool got_event = false;
  ApiResult<std::optional<WatchEvent>> next = std::optional<WatchEvent>();
  while (stream_ != nullptr && !stopping()) {
    next = stream->next();
    if (relist_requested() || !next || !next->has_value() || (*next)->type == WatchEvent::Type::Error) break;
    const WatchEvent& event = **next;
    const bool bookmark = event.type == WatchEvent::Type::Bookmark;
    if (!bookmark) sink_.apply(event.type, event.object);
    if (auto rv = object_meta(event.object).resource_version; !rv.empty()) resource_version_ = rv;
    count(bookmark ? &ReflectorStats::bookmarks : &ReflectorStats::events);
    progressed();
    got_event = true;
    backoff_ = {};
  }
  {
    std::lock_guard lock(mu_);
    stream_ = nullptr;
  }
  if (stopping()) return Next::Stop;
  if (relist_requested()) {
    log("info", "listing again (asked for)");
    return requested();
  }
  if (!next || !next->has_value()) {  // a broken stream, or a clean end (e.g. timeoutSeconds)
    const ApiError* broke = next ? nullptr : &next.failure();
    if (broke != nullptr) {
      count(&ReflectorStats::errors);
      if (broke->silent) count(&ReflectorStats::silent_watches);
      log(broke->silent ? "warn" : "info", "watch stream broke: " + broke->message);
    }
    // A stream that delivered events was healthy, and a silent one has
    // already waited: resume at once. One closed at once with nothing in it
    // (client-go's "very short watch") backs off rather than spin.
    if (got_event || (broke != nullptr && broke->silent)) {
      backoff_ = {};
      return Next::Rewatch;
    }
    return wait(next_backoff(broke)) ? Next::Rewatch : Next::Stop;
  }
  return after_failure(error_from_status("WATCH " + options_.path + " ERROR event", (*next)->object),
                       "watch ERROR event");
}

void Reflector::run() {
  while (!stopping()) {
    if (!list_all()) return;
    Next next = Next::Rewatch;
    while (next == Next::Rewatch && !stopping()) next = watch_once();
    if (next == Next::Stop) return;
  }
}

}  // namespace ig::kube
