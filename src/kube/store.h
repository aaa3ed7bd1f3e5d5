// An informer-style cache of one resource type, filled by a reflector.
//
// Contract:
//  - `decode` reduces each object to a small immutable T, or an error (the
//    object is left out and counted). `keep` (optional) chooses the objects
//    held at all: a refused one is not decoded, and an event that makes a
//    held object refused removes it (Reflector::relist() re-applies a
//    changed `keep` to all).
//  - find(), snapshot() are thread-safe and never block on the network; a
//    found value stays valid after later changes.
//  - synced() turns true after the first complete list and stays true.
//  - on_change runs on the reflector's thread after each applied change
//    with its key, after a relist with "", never under the store's lock.
//  - Keys are "NAMESPACE/NAME", or "NAME" for cluster-scoped objects.
#pragma once

#include <atomic>
#include <exception>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/api.h"

namespace ig::kube {

// What a reflector writes into: a list (begin, items, end), or one watch
// event (ADDED, MODIFIED or DELETED).
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  virtual void begin_replace() = 0;
  virtual void add_listed(const nlohmann::json& object) = 0;
  virtual void end_replace(const std::string& resource_version) = 0;
  virtual void apply(WatchEvent::Type type, const nlohmann::json& object) = 0;
};

// "NAMESPACE/NAME" or "NAME" from an object's metadata; "" when it has no name.
std::string object_key(const nlohmann::json& object);
std::string object_key(std::string_view ns, std::string_view name);

// A T that carries its own namespace and name is stored without a copy of
// its key: specialise KeyParts<T> with kCarried = true and
// static std::pair<std::string_view, std::string_view> of(const T&).
template <typename T>
struct KeyParts {
  static constexpr bool kCarried = false;
};

namespace detail {

// FNV-1a over the bytes of "NAMESPACE/NAME" (or "NAME"), from the whole key or its parts.
struct KeyHash {
  static constexpr std::uint64_t kBasis = 14695981039346656037ull, kPrime = 1099511628211ull;
  static std::uint64_t add(std::uint64_t h, std::string_view s) noexcept {
    for (unsigned char c : s) h = (h ^ c) * kPrime;
    return h;
  }
  static std::size_t of(std::string_view key) noexcept { return add(kBasis, key); }
  static std::size_t of(std::string_view ns, std::string_view name) noexcept {
    std::uint64_t h = kBasis;
    if (!ns.empty()) h = add(add(h, ns), "/");
    return add(h, name);
  }
};

inline bool key_is(std::string_view key, std::string_view ns, std::string_view name) noexcept {
  if (ns.empty()) return key == name;
  return key.size() == ns.size() + 1 + name.size() && key.substr(0, ns.size()) == ns &&
         key[ns.size()] == '/' && key.substr(ns.size() + 1) == name;
}

// Objects by key, the key beside the value.
template <typename T>
class KeyedIndex {
 public:
  using Ptr = std::shared_ptr<const T>;
  Ptr find(std::string_view key) const {
    auto it = map_.find(std::string(key));
    return it == map_.end() ? nullptr : it->second;
  }
  void put(std::string key, Ptr value) { map_[std::move(key)] = std::move(value); }
  void erase(const std::string& key) { map_.erase(key); }
  template <typename F>
  void each(F f) const {
    for (const auto& [k, v] : map_) f(v);
  }
  std::size_t size() const noexcept { return map_.size(); }
  void swap(KeyedIndex& o) noexcept { map_.swap(o.map_); }

 private:
  std::unordered_map<std::string, Ptr> map_;
};

// Objects whose key is read from the value (KeyParts<T>): no key copy.
template <typename T>
class CarriedIndex {
 public:
  using Ptr = std::shared_ptr<const T>;
  Ptr find(std::string_view key) const {
    auto it = set_.find(key);
    return it == set_.end() ? nullptr : *it;
  }
  void put(const std::string& key, Ptr value) {
    erase(key);
    set_.insert(std::move(value));
  }
  void erase(const std::string& key) {
    // (erase by a heterogeneous key is C++23)
    if (auto it = set_.find(std::string_view(key)); it != set_.end()) set_.erase(it);
  }
  template <typename F>
  void each(F f) const {
    for (const auto& v : set_) f(v);
  }
  std::size_t size() const noexcept { return set_.size(); }
  void swap(CarriedIndex& o) noexcept { set_.swap(o.set_); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const noexcept { return KeyHash::of(key); }
    std::size_t operator()(const Ptr& v) const noexcept {
      auto [ns, name] = KeyParts<T>::of(*v);
      return KeyHash::of(ns, name);
    }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(const Ptr& a, const Ptr& b) const noexcept {
      auto [ans, aname] = KeyParts<T>::of(*a);
      auto [bns, bname] = KeyParts<T>::of(*b);
      return ans == bns && aname == bname;
    }
    bool operator()(std::string_view key, const Ptr& v) const noexcept {
      auto [ns, name] = KeyParts<T>::of(*v);
      return key_is(key, ns, name);
    }
    bool operator()(const Ptr& v, std::string_view key) const noexcept { return (*this)(key, v); }
  };
  std::unordered_set<Ptr, Hash, Eq> set_;
};

}  // namespace detail

template <typename T>
class Store final : public ReflectorSink {
 public:
  using Decode = std::function<Result<T>(const nlohmann::json&)>;
  using OnChange = std::function<void(std::string_view key)>;  // "": a relist
  using Keep = std::function<bool(const nlohmann::json&)>;     // empty: every object

  explicit Store(Decode decode, OnChange on_change = {}, Keep keep = {})
      : decode_(std::move(decode)), on_change_(std::move(on_change)), keep_(std::move(keep)) {}

  std::shared_ptr<const T> find(std::string_view key) const {
    std::shared_lock lock(mu_);
    return objects_.find(key);
  }
  std::vector<std::shared_ptr<const T>> snapshot() const {
    std::shared_lock lock(mu_);
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(objects_.size());
    objects_.each([&](const std::shared_ptr<const T>& v) { out.push_back(v); });
    return out;
  }
  std::size_t size() const {
    std::shared_lock lock(mu_);
    return objects_.size();
  }
  bool synced() const noexcept { return synced_.load(std::memory_order_acquire); }
  std::uint64_t decode_errors() const noexcept { return decode_errors_.load(std::memory_order_relaxed); }

  void begin_replace() override { Index().swap(pending_); }
  void add_listed(const nlohmann::json& object) override {
    auto key = object_key(object);
    if (key.empty()) return count_error();
    if (keep_ && !keep_(object)) return;
    if (auto value = decode(object)) pending_.put(std::move(key), std::move(value));
  }
  void end_replace(const std::string&) override {
    {
      std::unique_lock lock(mu_);
      objects_.swap(pending_);
    }
    Index().swap(pending_);  // the old entries and their buckets (clear() would keep the buckets)
    synced_.store(true, std::memory_order_release);
    if (on_change_) on_change_({});
  }
  void apply(WatchEvent::Type type, const nlohmann::json& object) override {
    auto key = object_key(object);
    if (key.empty()) return count_error();
    // A version we cannot read must not keep serving the previous one.
    auto value = type == WatchEvent::Type::Deleted || (keep_ && !keep_(object)) ? nullptr : decode(object);
    {
      std::unique_lock lock(mu_);
      if (value) {
        objects_.put(key, std::move(value));
      } else {
        objects_.erase(key);
      }
    }
    if (on_change_) on_change_(key);
  }

 private:
  // decode_ into a shared value, or nullptr counted as an error; a throw is an
  // error: a decoder's bug is one object left out, never a dead reflector.
  std::shared_ptr<const T> decode(const nlohmann::json& object) {
    try {
      if (auto value = decode_(object)) return std::make_shared<const T>(std::move(value).value());
    } catch (const std::exception&) {
    }
    count_error();
    return nullptr;
  }
  void count_error() noexcept { decode_errors_.fetch_add(1, std::memory_order_relaxed); }

  Decode decode_;
  OnChange on_change_;
  Keep keep_;
  mutable std::shared_mutex mu_;
  using Index = std::conditional_t<KeyParts<T>::kCarried, detail::CarriedIndex<T>, detail::KeyedIndex<T>>;
  Index objects_;
  Index pending_;  // reflector thread only
  std::atomic<bool> synced_{false};
  std::atomic<std::uint64_t> decode_errors_{0};
};

}  // namespace ig::kube
