#include "kube/api.h"

#include <cstdio>
#include <ctime>

namespace ig::kube {
namespace {

// Path segments are Kubernetes names (DNS labels/subdomains); anything else
// is percent-encoded so a hostile name cannot add a segment or a query, and
// "." / ".." cannot climb the path.
std::string escape_segment(std::string_view s) {
  if (s == "." || s == "..") return s == "." ? "%2E" : "%2E%2E";
  return percent_encode(s);
}

const std::string* status_string_member(const nlohmann::json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

}  // namespace

bool status_rv_too_large(const nlohmann::json& status) {
  if (!status.is_object()) return false;
  constexpr std::string_view kText = "Too large resource version";
  auto details = status.find("details");
  if (details != status.end() && details->is_object()) {
    auto causes = details->find("causes");
    if (causes != details->end() && causes->is_array()) {
      for (const auto& c : *causes) {
        const std::string* reason = status_string_member(c, "reason");
        if (reason && *reason == "ResourceVersionTooLarge") return true;
        const std::string* message = status_string_member(c, "message");
        if (message && *message == kText) return true;
      }
    }
  }
  auto code = status.find("code");
  const bool timeout = code != status.end() && code->is_number_integer() && code->get<int>() == 504;
  const std::string* message = status_string_member(status, "message");
  return timeout && message && message->find(kText) != std::string::npos;
}

ApiError error_from_status(std::string_view what, const nlohmann::json& status) {
  ApiError e;
  if (status.is_object()) {
    auto code = status.find("code");
    if (code != status.end() && code->is_number_integer()) e.code = code->get<int>();
    if (const std::string* r = status_string_member(status, "reason")) e.reason = r->substr(0, 64);
    auto details = status.find("details");
    if (details != status.end() && details->is_object()) {
      auto ra = details->find("retryAfterSeconds");
      if (ra != details->end() && ra->is_number_integer() && ra->get<long long>() > 0 &&
          ra->get<long long>() < 86400)
        e.retry_after = std::chrono::seconds(ra->get<long long>());
    }
  }
  e.rv_too_large = status_rv_too_large(status);
  e.message = std::string(what) + ": " + std::to_string(e.code);
  if (!e.reason.empty()) e.message += " " + e.reason;
  const std::string* m = status_string_member(status, "message");
  if (m && *m != e.reason) e.message += ": " + m->substr(0, 512);
  if (!status.is_object()) e.message += ": not a Status";
  return e;
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string collection_path(const Resource& r, std::string_view ns) {
  std::string out = r.group.empty() ? std::string("/api/") : "/apis/" + std::string(r.group) + "/";
  out.append(r.version);
  if (r.namespaced && !ns.empty()) out.append("/namespaces/").append(escape_segment(ns));
  out.append("/").append(r.plural);
  return out;
}

std::string object_path(const Resource& r, std::string_view ns, std::string_view name,
                        std::string_view subresource) {
  std::string out = collection_path(r, ns);
  out.append("/").append(escape_segment(name));
  if (!subresource.empty()) out.append("/").append(escape_segment(subresource));
  return out;
}

std::string format_micro_time(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
  long long secs = us / 1'000'000;
  long long frac = us % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    secs -= 1;
  }
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

}  // namespace ig::kube
