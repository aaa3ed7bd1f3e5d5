// libFuzzer target: the watch-stream decoder (kube::WatchDecoder).
//
// Input: byte 0 = N (mod 16) split bytes follow; each gives a chunk length
// (1..256, used in turn, cycling); the rest is the stream. The stream is fed
// twice: once in one piece, once in the fuzzer's chunks with next() drained
// after every feed (as the reflector does). Small limits (line 512 bytes,
// depth 16) so the limit paths are reached.
//
// Invariants, checked here and abort() on a breach:
//  - no crash, no hang;
//  - differential: the same events (type and object) in the same order, the
//    same final error (text included), the same has_partial_event();
//  - an error is final: next() returns it again;
//  - every event's type is one of the five and its object an object.
// Build and run: scripts/fuzz.sh [seconds] [watch_decoder_fuzz]
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kube/watch_decoder.h"

namespace {

struct Outcome {
  std::vector<std::pair<int, std::string>> events;  // type, object dump
  std::optional<std::string> error;
};

const ig::kube::WatchDecoderLimits kLimits{512, 16};

// Drains `d` into `out`; false once an error ended the stream.
bool drain(ig::kube::WatchDecoder& d, Outcome& out) {
  if (out.error) return false;
  for (;;) {
    auto r = d.next();
    if (!r) {
      out.error = r.error();
      auto again = d.next();
      IG_FUZZ_CHECK(!again && again.error() == *out.error, "an error is not final", *out.error);
      return false;
    }
    if (!r->has_value()) return true;
    const auto& ev = **r;
    IG_FUZZ_CHECK(ev.object.is_object(), "event object is not an object", ev.object.dump());
    IG_FUZZ_CHECK(ev.type <= ig::kube::WatchEvent::Type::Error, "unknown event type", "");
    out.events.emplace_back(static_cast<int>(ev.type), ev.object.dump(-1, ' ', false,
                                                                       nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t n = data[0] % 16;
  if (size < 1 + n) return 0;
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i < n; ++i) cuts.push_back(std::size_t(data[1 + i]) + 1);
  if (cuts.empty()) cuts.push_back(1);  // byte at a time
  const std::string_view stream(reinterpret_cast<const char*>(data + 1 + n), size - 1 - n);

  ig::kube::WatchDecoder whole(kLimits);
  Outcome a;
  whole.feed(stream);
  drain(whole, a);

  ig::kube::WatchDecoder split(kLimits);
  Outcome b;
  std::size_t pos = 0, k = 0;
  while (pos < stream.size()) {
    const std::size_t len = std::min(cuts[k++ % cuts.size()], stream.size() - pos);
    split.feed(stream.substr(pos, len));
    pos += len;
    if (!drain(split, b)) break;
  }
  drain(split, b);

  IG_FUZZ_CHECK(a.events.size() == b.events.size(), "split changes the number of events",
                std::to_string(a.events.size()) + " vs " + std::to_string(b.events.size()));
  for (std::size_t i = 0; i < a.events.size(); ++i)
    IG_FUZZ_CHECK(a.events[i] == b.events[i], "split changes an event", a.events[i].second + "\n" + b.events[i].second);
  IG_FUZZ_CHECK(a.error == b.error, "split changes the error", a.error.value_or("(none)") + "\n" + b.error.value_or("(none)"));
  if (!a.error) {
    IG_FUZZ_CHECK(whole.has_partial_event() == split.has_partial_event(), "split changes has_partial_event", "");
    IG_FUZZ_CHECK(whole.events() == a.events.size(), "events() miscounts", "");
  }
  return 0;
}
