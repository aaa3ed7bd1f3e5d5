// "Log an error once until it changes": first(m) is true when m differs
// from the last message (log it); cleared() hands back the outstanding
// message, if any, and forgets it (log the recovery). Not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ig {

class LogOnce {
 public:
  bool first(std::string_view message) {
    if (outstanding_ && *outstanding_ == message) return false;
    outstanding_.emplace(message);
    return true;
  }
  std::optional<std::string> cleared() { return std::exchange(outstanding_, std::nullopt); }

 private:
  std::optional<std::string> outstanding_;
};

}  // namespace ig
