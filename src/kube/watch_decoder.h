// The incremental decoder of a WATCH response body: newline-delimited JSON
// events ({"type":"ADDED","object":{...}}), fed as the bytes arrive, in
// whatever pieces the network delivers them.
//
// Contract:
//  - feed() takes any split: an event across several chunks and TCP reads,
//    several events in one chunk, one byte at a time; the events come out of
//    next() the same, in order, whatever the split. Linear in the bytes fed
//    (a line is scanned for its newline once).
//  - A line ends at '\n'; a '\r' before it is dropped; blank (or white-space
//    only) lines are skipped.
//  - Before nlohmann parses a line, its nesting depth is checked with
//    ig::json_nesting_depth (base/json_depth.h) against max_depth.
//  - Errors (one line, naming the event's number in the stream): a line longer
//    than max_line_bytes (detected as soon as the buffered partial line passes
//    it, without waiting for its newline), nesting deeper than max_depth, not
//    JSON, not a JSON object, `type` missing or not one of ADDED, MODIFIED,
//    DELETED, BOOKMARK, ERROR, `object` missing or not an object. An error is
//    final: every later next() returns it again (the stream cannot be
//    resynchronised safely; the caller re-lists or re-watches).
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

  // Bytes of an unfinished event are buffered (the stream ending now would
  // cut an event).
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

// "ADDED" -> Type::Added, ...; nullopt for anything else.
std::optional<WatchEvent::Type> parse_watch_event_type(std::string_view type) noexcept;
// Type::Added -> "ADDED", ...
std::string_view to_string(WatchEvent::Type type) noexcept;

}  // namespace ig::kube
