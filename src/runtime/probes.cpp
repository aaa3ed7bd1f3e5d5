#include "runtime/probes.h"

#include <string_view>

namespace ig::runtime {
namespace {

// A Kubernetes Status body; `message` is one of ours (no JSON escaping needed
// beyond what a check's name could hold: names are identifiers).
http::Response status(unsigned code, std::string_view reason, std::string_view message) {
  std::string body = R"({"apiVersion":"v1","code":)" + std::to_string(code) + R"(,"kind":"Status","message":")";
  body.append(message);
  body += R"(","reason":")";
  body.append(reason);
  body += R"(","status":"Failure"})";
  return {code, "application/json", std::move(body)};
}

}  // namespace

void Probes::add_healthz_check(std::string name, Check check) { healthz_.emplace_back(std::move(name), std::move(check)); }

void Probes::add_readyz_check(std::string name, Check check) { readyz_.emplace_back(std::move(name), std::move(check)); }

std::string Probes::failing(const Checks& checks) {
  for (const auto& [name, check] : checks) {
    bool ok = false;
    try {
      ok = check();
    } catch (...) {
    }
    if (!ok) return name;
  }
  return {};
}

std::string Probes::not_ready() const { return failing(readyz_); }

std::optional<http::Response> Probes::serve(const http::Request& request) const noexcept {
  try {
    std::string_view path = request.target;
    path = path.substr(0, path.find('?'));
    const bool healthz = path == "/healthz", readyz = path == "/readyz", metrics = path == "/metrics";
    if (!healthz && !readyz && !metrics) return std::nullopt;
    if (request.method != "GET" && request.method != "HEAD") return status(405, "MethodNotAllowed", "use GET");
    if (healthz) {
      if (const std::string name = failing(healthz_); !name.empty())
        return status(500, "InternalError", "not healthy: " + name);
      return http::Response{200, "application/json", R"({"status":"ok"})"};
    }
    if (readyz) {
      if (const std::string name = failing(readyz_); !name.empty())
        return status(503, "ServiceUnavailable", "not ready: " + name);
      return http::Response{200, "application/json", R"({"status":"ready"})"};
    }
    std::string text;
    text.reserve(8192);
    prometheus::TextWriter out(text);
    metrics_.write(out);
    return http::Response{200, "text/plain; version=0.0.4; charset=utf-8", std::move(text)};
  } catch (...) {
    return status(500, "InternalError", "internal error");
  }
}

http::Response Probes::serve_only(const http::Request& request) const noexcept {
  if (auto answer = serve(request)) return std::move(*answer);
  return status(404, "NotFound", "no such endpoint");
}

}  // namespace ig::runtime
