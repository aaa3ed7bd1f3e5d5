#include "kube/watch_decoder.h"

#include <algorithm>

#include "base/json_depth.h"
#include "base/quote.h"

namespace ig::kube {

// In WatchEvent::Type's order.
constexpr std::string_view kEventTypes[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

void WatchDecoder::feed(std::string_view bytes) {
  if (error_ || bytes.empty()) return;
  // Drop what was consumed once it is most of the buffer (amortised linear).
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
}

bool WatchDecoder::has_partial_event() const noexcept {
  return buffer_.find_first_not_of(" \t\r\n", start_) != std::string::npos;
}

Result<std::optional<WatchEvent>> WatchDecoder::next() {
  while (!error_) {
    const std::size_t end = buffer_.find('\n', start_ + scanned_);
    const std::size_t length = (end == std::string::npos ? buffer_.size() : end) - start_;
    if (length > limits_.max_line_bytes) {
      error_ = "watch event " + std::to_string(events_ + 1) + " is longer than " +
               std::to_string(limits_.max_line_bytes) + " bytes";
      break;
    }
    if (end == std::string::npos) {
      scanned_ = length;
      return std::optional<WatchEvent>();
    }
    std::string_view line(buffer_.data() + start_, length);
    start_ = end + 1;
    scanned_ = 0;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto event = decode_line(line);
    if (!event) {
      error_ = event.error();
      break;
    }
    ++events_;
    return event;
  }
  return fail(*error_);
}

Result<std::optional<WatchEvent>> WatchDecoder::decode_line(std::string_view line) {
  const std::string where = "watch event " + std::to_string(events_ + 1);
  if (json_nesting_depth(line, limits_.max_depth) > limits_.max_depth)
    return fail(where + " nests deeper than " + std::to_string(limits_.max_depth) + " levels");
  nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(where + " is not JSON");
  if (!doc.is_object()) return fail(where + " is not a JSON object");
  const auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) return fail(where + " has no string field type");
  const auto& name = type->get_ref<const std::string&>();
  const auto* known = std::find(std::begin(kEventTypes), std::end(kEventTypes), name);
  if (known == std::end(kEventTypes)) return fail(where + " has an unknown type " + quote(name));
  const auto object = doc.find("object");
  if (object == doc.end() || !object->is_object()) return fail(where + " (" + name + ") has no object");
  WatchEvent event;
  event.type = static_cast<WatchEvent::Type>(known - std::begin(kEventTypes));
  event.object = std::move(*object);
  return std::optional<WatchEvent>(std::move(event));
}

}  // namespace ig::kube
