// The manager's /healthz, /readyz and /metrics: named readiness checks and a
// metrics registry, added before the listeners start. serve() answers GET and
// HEAD of the three paths (405 for other methods; /healthz 200 while the
// process answers; 503 naming the first failing readyz check, a check that
// throws fails) and gives nullopt for any other path.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/http_exchange.h"
#include "base/prometheus.h"

namespace ig::runtime {

class Probes {
 public:
  using Check = std::function<bool()>;

  void add_readyz_check(std::string name, Check check);
  prometheus::Registry& metrics() noexcept { return metrics_; }

  std::optional<http::Response> serve(const http::Request& request) const noexcept;
  // serve(), and 404 for every other path: the plain-HTTP probe listener, so
  // admission is never served without TLS.
  http::Response serve_only(const http::Request& request) const noexcept;
 private:
  // The first failing readyz check's name; "" when ready.
  std::string not_ready() const;

  std::vector<std::pair<std::string, Check>> readyz_;
  prometheus::Registry metrics_;
};

}  // namespace ig::runtime
