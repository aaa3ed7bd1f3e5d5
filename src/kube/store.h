// An informer-style cache of one resource type: the reflector (kube/
// reflector.h) fills it; readers on any thread find objects by key.
//
// Contract:
//  - Objects are reduced when they arrive: `decode` turns the API's JSON into
//    a small immutable T holding only what the product reads (so 100,000
//    Components fit in a few tens of MiB), or an error (the object is then
//    left out and counted; a later good version replaces it).
//  - find() and snapshot() are thread-safe and never block on the network; a
//    found value is a shared_ptr to an immutable T, valid after later changes.
//  - synced() turns true after the first complete list and stays true.
//  - on_change (given at construction) runs on the reflector's thread after
//    every applied change, with the object's key, and after a relist with ""
//    (anything may have changed); never under the store's lock.
//  - Keys are "NAMESPACE/NAME", or "NAME" for cluster-scoped objects.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/api.h"

namespace ig::kube {

// What a reflector writes into. Implemented by Store<T>.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A full list: begin, each item, end with the list's resourceVersion. The
  // items of a list replace everything the sink held.
  virtual void begin_replace() = 0;
  virtual void add_listed(const nlohmann::json& object) = 0;
  virtual void end_replace(const std::string& resource_version) = 0;
  // One watch event (ADDED, MODIFIED or DELETED).
  virtual void apply(WatchEvent::Type type, const nlohmann::json& object) = 0;
};

// "NAMESPACE/NAME" or "NAME" from an object's metadata; "" when it has no name.
std::string object_key(const nlohmann::json& object);
std::string object_key(std::string_view ns, std::string_view name);

template <typename T>
class Store final : public ReflectorSink {
 public:
  using Decode = std::function<Result<T>(const nlohmann::json&)>;
  using OnChange = std::function<void(std::string_view key)>;  // "": a relist

  explicit Store(Decode decode, OnChange on_change = {})
      : decode_(std::move(decode)), on_change_(std::move(on_change)) {}

  std::shared_ptr<const T> find(std::string_view key) const {
    std::shared_lock lock(mu_);
    auto it = objects_.find(std::string(key));
    return it == objects_.end() ? nullptr : it->second;
  }
  std::vector<std::shared_ptr<const T>> snapshot() const {
    std::shared_lock lock(mu_);
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(objects_.size());
    for (const auto& [k, v] : objects_) out.push_back(v);
    return out;
  }
  std::size_t size() const {
    std::shared_lock lock(mu_);
    return objects_.size();
  }
  bool synced() const noexcept { return synced_.load(std::memory_order_acquire); }
  std::uint64_t decode_errors() const noexcept { return decode_errors_.load(std::memory_order_relaxed); }
  std::string last_decode_error() const {
    std::shared_lock lock(mu_);
    return last_error_;
  }

  void begin_replace() override { pending_.clear(); }
  void add_listed(const nlohmann::json& object) override {
    auto key = object_key(object);
    if (key.empty()) return note_error("an object without metadata.name");
    auto value = decode_(object);
    if (!value) return note_error(key + ": " + value.error());
    pending_[std::move(key)] = std::make_shared<const T>(std::move(value).value());
  }
  void end_replace(const std::string&) override {
    {
      std::unique_lock lock(mu_);
      objects_.swap(pending_);
    }
    decltype(pending_)().swap(pending_);  // the old entries and their buckets (clear() keeps the buckets)
    synced_.store(true, std::memory_order_release);
    if (on_change_) on_change_({});
  }
  void apply(WatchEvent::Type type, const nlohmann::json& object) override {
    auto key = object_key(object);
    if (key.empty()) return note_error("an event for an object without metadata.name");
    if (type == WatchEvent::Type::Deleted) {
      std::unique_lock lock(mu_);
      objects_.erase(key);
    } else {
      auto value = decode_(object);
      if (!value) {
        // A version we cannot read must not keep serving the previous one.
        {
          std::unique_lock lock(mu_);
          objects_.erase(key);
        }
        note_error(key + ": " + value.error());
      } else {
        auto shared = std::make_shared<const T>(std::move(value).value());
        std::unique_lock lock(mu_);
        objects_[key] = std::move(shared);
      }
    }
    if (on_change_) on_change_(key);
  }

 private:
  void note_error(std::string message) {
    decode_errors_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(mu_);
    last_error_ = std::move(message);
  }

  Decode decode_;
  OnChange on_change_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const T>> objects_;
  std::unordered_map<std::string, std::shared_ptr<const T>> pending_;  // reflector thread only
  std::atomic<bool> synced_{false};
  std::atomic<std::uint64_t> decode_errors_{0};
  std::string last_error_;
};

}  // namespace ig::kube
