#include "runtime/probes.h"

#include <string_view>

namespace ig::runtime {

void Probes::add_readyz_check(std::string name, Check check) { readyz_.emplace_back(std::move(name), std::move(check)); }

std::string Probes::not_ready() const {
  for (const auto& [name, check] : readyz_) {
    bool ok = false;
    try {
      ok = check();
    } catch (...) {
    }
    if (!ok) return name;
  }
  return {};
}

std::optional<http::Response> Probes::serve(const http::Request& request) const noexcept {
  try {
    std::string_view path = request.target;
    path = path.substr(0, path.find('?'));
    const bool healthz = path == "/healthz", readyz = path == "/readyz", metrics = path == "/metrics";
    if (!healthz && !readyz && !metrics) return std::nullopt;
    if (request.method != "GET" && request.method != "HEAD") return http::status_failure(405, "MethodNotAllowed", "use GET");
    if (healthz) return http::Response{200, "application/json", R"({"status":"ok"})"};
    if (readyz) {
      if (const std::string name = not_ready(); !name.empty())
        return http::status_failure(503, "ServiceUnavailable", "not ready: " + name);
      return http::Response{200, "application/json", R"({"status":"ready"})"};
    }
    std::string text;
    text.reserve(8192);
    prometheus::TextWriter out(text);
    metrics_.write(out);
    return http::Response{200, "text/plain; version=0.0.4; charset=utf-8", std::move(text)};
  } catch (...) {
    return http::status_failure(500, "InternalError", "internal error");
  }
}

http::Response Probes::serve_only(const http::Request& request) const noexcept {
  if (auto answer = serve(request)) return std::move(*answer);
  return http::status_failure(404, "NotFound", "no such endpoint");
}

}  // namespace ig::runtime
