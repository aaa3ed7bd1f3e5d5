#include "kube/api.h"

#include <cctype>
#include <cstdio>
#include <ctime>

#include "base/one_line.h"
#include "base/quote.h"

namespace ig::kube {
namespace {

// Path segments are Kubernetes names (DNS labels/subdomains); anything else
// is percent-encoded so a hostile name cannot add a segment or a query, and
// "." / ".." cannot climb the path.
std::string escape_segment(std::string_view s) {
  if (s == "." || s == "..") return s == "." ? "%2E" : "%2E%2E";
  return percent_encode(s);
}

using json = nlohmann::json;

// o[key] when `o` is an object and the member satisfies `is`; else null.
const json* status_member(const json& o, const char* key, bool (json::*is)() const noexcept) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it != o.end() && ((*it).*is)() ? &*it : nullptr;
}

const std::string* status_string(const json& o, const char* key) {
  const json* m = status_member(o, key, &json::is_string);
  return m ? &m->get_ref<const std::string&>() : nullptr;
}

// A Status with cause ResourceVersionTooLarge, or a 504 saying "Too large resource version".
bool status_rv_too_large(const json& status) {
  constexpr std::string_view kText = "Too large resource version";
  const json* details = status_member(status, "details", &json::is_object);
  if (const json* causes = details ? status_member(*details, "causes", &json::is_array) : nullptr) {
    for (const auto& c : *causes) {
      const std::string* reason = status_string(c, "reason");
      const std::string* message = status_string(c, "message");
      if ((reason && *reason == "ResourceVersionTooLarge") || (message && *message == kText)) return true;
    }
  }
  const json* code = status_member(status, "code", &json::is_number_integer);
  const std::string* message = status_string(status, "message");
  return code && code->get<int>() == 504 && message && message->find(kText) != std::string::npos;
}

}  // namespace

ApiError error_from_status(std::string_view what, const json& status) {
  ApiError e;
  if (const json* code = status_member(status, "code", &json::is_number_integer)) e.code = code->get<int>();
  if (const std::string* r = status_string(status, "reason")) e.reason = cut_utf8(one_line(*r), 64);
  const json* details = status_member(status, "details", &json::is_object);
  const json* ra = details ? status_member(*details, "retryAfterSeconds", &json::is_number_integer) : nullptr;
  if (ra && ra->get<long long>() > 0 && ra->get<long long>() < 86400)
    e.retry_after = std::chrono::seconds(ra->get<long long>());
  e.rv_too_large = status_rv_too_large(status);
  e.message = std::string(what) + ": " + std::to_string(e.code);
  if (!e.reason.empty()) e.message += " " + e.reason;
  const std::string* m = status_string(status, "message");
  const std::string message = m ? cut_utf8(one_line(*m), 512) : std::string();
  if (!message.empty() && message != e.reason) e.message += ": " + message;
  if (!status.is_object()) e.message += ": not a Status";
  return e;
}

ApiResult<ListPage> Client::list(std::string_view path, const ListOptions& options) {
  nlohmann::json items = nlohmann::json::array();
  auto page = list_each(path, options, [&items](nlohmann::json&& item) { items.push_back(std::move(item)); });
  if (page) page->items = std::move(items);
  return page;
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {  // (the C locale's)
      out.push_back(static_cast<char>(c));
    } else {
      out.append({'%', kHex[c >> 4], kHex[c & 15]});
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
  const auto secs = floor<seconds>(t);
  const long long frac = duration_cast<microseconds>(t - secs).count();
  const std::time_t tt = system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

}  // namespace ig::kube
