// The incremental decoder of a WATCH body: newline-delimited JSON events,
// fed in whatever pieces the network delivers.
//
// Contract:
//  - Any split of the bytes gives the same events, in order; linear in the
//    bytes fed. '\r' before '\n' is dropped; blank lines are skipped.
//  - Errors (one line, naming the event's number): a line longer than
//    max_line_bytes (found before its newline comes), nesting deeper than
//    max_depth (checked before parsing), not a JSON object, an unknown
//    `type`, `object` not an object. An error is final: every later next()
//    returns it again.
//  - Not thread-safe; one decoder per stream.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/api.h"

namespace ig::kube {

struct WatchDecoderLimits {
  std::size_t max_line_bytes = 16u << 20;  // one event; Kubernetes objects are at most ~1.5 MiB in etcd
  std::size_t max_depth = 128;             // Kubernetes objects are ~15 deep
};

class WatchDecoder {
 public:
  explicit WatchDecoder(WatchDecoderLimits limits = {}) : limits_(limits) {}

  // Appends bytes of the stream.
  void feed(std::string_view bytes);

  // The next complete event; nullopt when no complete line is buffered yet.
  Result<std::optional<WatchEvent>> next();

  // Bytes of an unfinished event are buffered.
  bool has_partial_event() const noexcept;

  // Events returned so far.
  std::size_t events() const noexcept { return events_; }

 private:
  Result<std::optional<WatchEvent>> decode_line(std::string_view line);

  WatchDecoderLimits limits_;
  std::string buffer_;
  std::size_t start_ = 0;    // first byte not yet consumed
  std::size_t scanned_ = 0;  // bytes from start_ known to hold no '\n'
  std::size_t events_ = 0;
  std::optional<std::string> error_;
};

}  // namespace ig::kube
