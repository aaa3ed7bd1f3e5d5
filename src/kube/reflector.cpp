#include "kube/reflector.h"

#include <malloc.h>

#include <algorithm>

namespace ig::kube {
namespace {

std::string metadata_resource_version(const nlohmann::json& object) {
  if (!object.is_object()) return {};
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  auto rv = meta->find("resourceVersion");
  return rv != meta->end() && rv->is_string() ? rv->get<std::string>() : std::string();
}

// The code of a Status carried by an ERROR event (0 when it has none).
int status_code(const nlohmann::json& status) {
  if (!status.is_object()) return 0;
  auto code = status.find("code");
  return code != status.end() && code->is_number_integer() ? code->get<int>() : 0;
}

std::string status_message(const nlohmann::json& status) {
  if (!status.is_object()) return "an ERROR event without a Status";
  auto m = status.find("message");
  return m != status.end() && m->is_string() ? m->get<std::string>() : status.dump();
}

}  // namespace

Reflector::Reflector(Client& client, ReflectorSink& sink, ReflectorOptions options)
    : client_(client), sink_(sink), options_(std::move(options)) {}

Reflector::~Reflector() { stop(); }

void Reflector::start() {
  stopping_.store(false, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

void Reflector::stop() noexcept {
  stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    if (stream_ != nullptr) stream_->stop();
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Reflector::relist() {
  {
    std::lock_guard lock(mu_);
    relist_.store(true, std::memory_order_release);
    if (stream_ != nullptr) stream_->stop();
  }
  cv_.notify_all();
}

std::string Reflector::resource_version() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

ReflectorStats Reflector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reflector::log(std::string_view level, const std::string& message) const {
  if (options_.log) options_.log(level, options_.name + ": " + message);
}

bool Reflector::wait(std::chrono::milliseconds d) {
  if (stopping()) return false;
  if (options_.wait) return options_.wait(d) && !stopping();
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopping() || relist_requested(); });
  return !stopping();
}

std::chrono::milliseconds Reflector::next_backoff(const ApiError* error) {
  const auto& p = options_.backoff;
  if (backoff_.count() == 0) {
    backoff_ = p.initial;
  } else {
    backoff_ = std::min(p.max, std::chrono::milliseconds(static_cast<long long>(
                                   static_cast<double>(backoff_.count()) * p.factor)));
  }
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
  options.limit = options_.page_size;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  sink_.begin_replace();
  std::string list_rv;
  while (!stopping()) {
    // Cleared per attempt: a relist() after this point lists once more.
    if (options.continue_token.empty()) relist_.store(false, std::memory_order_release);
    // Each item goes into the sink as it is decoded: no page of thousands
    // of parsed objects is held while the cache fills (kube/list_decoder.h).
    auto page = client_.list_each(options_.path, options,
                                  [this](nlohmann::json&& item) { sink_.add_listed(item); });
    if (!page) {
      const ApiError& e = page.failure();
      {
        std::lock_guard lock(mu_);
        ++stats_.errors;
      }
      if (e.gone() && !options.continue_token.empty()) {
        // The continue token expired mid-list: start the list over.
        log("info", "list continue token expired; listing again: " + e.message);
        {
          std::lock_guard lock(mu_);
          ++stats_.relists_gone;
        }
        options.continue_token.clear();
        sink_.begin_replace();
        continue;
      }
      log("warn", "list failed: " + e.message);
      if (!wait(next_backoff(&e))) return false;
      options.continue_token.clear();
      sink_.begin_replace();
      continue;
    }
    if (options.continue_token.empty()) list_rv = page->resource_version;
    if (page->continue_token.empty()) break;
    options.continue_token = page->continue_token;
  }
  if (stopping()) return false;
  {
    // Counted before the sink shows it: whoever sees the store synced sees the list counted.
    std::lock_guard lock(mu_);
    resource_version_ = list_rv;
    ++stats_.lists;
  }
  sink_.end_replace(list_rv);
  synced_.store(true, std::memory_order_release);
  reset_backoff();
  // The pages' bodies (several MiB for thousands of objects) and each item's
  // parsed JSON are freed by now, but glibc keeps freed memory inside its
  // heaps and arenas: give it back, so what stays resident is the cache (a
  // few ms, once per list).
  malloc_trim(0);
  return true;
}

Reflector::Next Reflector::watch_once() {
  if (relist_requested()) return Next::Relist;
  WatchOptions options;
  options.resource_version = resource_version();
  options.allow_bookmarks = true;
  options.timeout = options_.watch_timeout;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  auto opened = client_.watch(options_.path, options);
  if (!opened) {
    const ApiError& e = opened.failure();
    {
      std::lock_guard lock(mu_);
      ++stats_.errors;
    }
    if (e.gone()) {
      log("info", "watch from resourceVersion " + options.resource_version +
                      " is too old; listing again");
      std::lock_guard lock(mu_);
      ++stats_.relists_gone;
      return Next::Relist;
    }
    log("warn", "watch failed: " + e.message);
    return wait(next_backoff(&e)) ? Next::Rewatch : Next::Stop;
  }
  std::unique_ptr<WatchStream> stream = std::move(opened).value();
  {
    std::lock_guard lock(mu_);
    if (stopping()) return Next::Stop;
    if (relist_requested()) return Next::Relist;  // asked before stream_ was set: stream_ not stopped
    stream_ = stream.get();
    ++stats_.watches;
  }
  auto detach = [&] {
    std::lock_guard lock(mu_);
    stream_ = nullptr;
  };
  bool got_event = false;
  while (!stopping()) {
    auto next = stream->next();
    if (relist_requested()) {
      detach();
      if (stopping()) return Next::Stop;
      log("info", "listing again (asked for)");
      return Next::Relist;
    }
    if (!next) {
      detach();
      if (stopping()) return Next::Stop;
      {
        std::lock_guard lock(mu_);
        ++stats_.errors;
      }
      log("info", "watch stream broke: " + next.error());
      // A stream that delivered events was healthy: resume at once.
      if (got_event) {
        reset_backoff();
        return Next::Rewatch;
      }
      return wait(next_backoff(&next.failure())) ? Next::Rewatch : Next::Stop;
    }
    if (!next->has_value()) {  // a clean end, e.g. timeoutSeconds
      detach();
      if (stopping()) return Next::Stop;
      if (got_event) {
        reset_backoff();
        return Next::Rewatch;
      }
      // Closed at once with nothing in it (client-go's "very short watch"):
      // back off rather than spin.
      return wait(next_backoff(nullptr)) ? Next::Rewatch : Next::Stop;
    }
    const WatchEvent& event = **next;
    switch (event.type) {
      case WatchEvent::Type::Added:
      case WatchEvent::Type::Modified:
      case WatchEvent::Type::Deleted: {
        sink_.apply(event.type, event.object);
        const std::string rv = metadata_resource_version(event.object);
        std::lock_guard lock(mu_);
        if (!rv.empty()) resource_version_ = rv;
        ++stats_.events;
        got_event = true;
        break;
      }
      case WatchEvent::Type::Bookmark: {
        const std::string rv = metadata_resource_version(event.object);
        std::lock_guard lock(mu_);
        if (!rv.empty()) resource_version_ = rv;
        ++stats_.bookmarks;
        got_event = true;
        break;
      }
      case WatchEvent::Type::Error: {
        detach();
        const int code = status_code(event.object);
        {
          std::lock_guard lock(mu_);
          ++stats_.errors;
          if (code == 410) ++stats_.relists_gone;
        }
        if (code == 410) {
          log("info", "watch expired (" + status_message(event.object) + "); listing again");
          return Next::Relist;
        }
        log("warn", "watch ERROR event: " + status_message(event.object));
        ApiError e;
        e.code = code;
        return wait(next_backoff(&e)) ? Next::Rewatch : Next::Stop;
      }
    }
    if (got_event) reset_backoff();
  }
  detach();
  return Next::Stop;
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
