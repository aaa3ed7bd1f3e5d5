// The one per-key exponential backoff (client-go's
// ItemExponentialFailureRateLimiter): the n-th failure of a key in a row (n
// from 0) waits base * 2^n, at most `max`; forget(key) starts it over.
// Not thread-safe (the owner locks it); keys are kept until forgotten.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <unordered_map>

namespace ig {

struct BackoffOptions {
  std::chrono::milliseconds base{5};
  std::chrono::milliseconds max{1'000'000};
};

template <typename Key, typename Hash = std::hash<Key>>
class ItemBackoff {
 public:
  using duration = std::chrono::steady_clock::duration;

  explicit ItemBackoff(BackoffOptions options = {}) : options_(options) {}

  // The wait before the key's next retry; counts one more failure.
  duration next(const Key& key) {
    const std::uint32_t exp = failures_[key]++;
    const duration base = options_.base, max = options_.max;
    if (base <= duration::zero()) return duration::zero();
    // base * 2^exp without overflow: stop doubling once past max.
    duration d = base;
    for (std::uint32_t i = 0; i < exp && d < max; ++i) d *= 2;
    return d < max ? d : max;
  }

  void forget(const Key& key) { failures_.erase(key); }

  // Failures counted since the key was last forgotten.
  std::uint32_t failures(const Key& key) const {
    auto it = failures_.find(key);
    return it == failures_.end() ? 0 : it->second;
  }

 private:
  BackoffOptions options_;
  std::unordered_map<Key, std::uint32_t, Hash> failures_;
};

}  // namespace ig
