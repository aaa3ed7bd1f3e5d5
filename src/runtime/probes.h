// The manager's /healthz, /readyz and /metrics (controller-runtime's health
// probe and metrics endpoints): named checks, and a registry that collectors
// add themselves to.
//
// Contract: checks and collectors are added before the listeners start and
// never removed; serve() may then be called from many threads. serve()
// answers GET and HEAD of the three paths (a query string is ignored) and
// gives nullopt for any other path, so a listener can pass those on:
//   /healthz  200 {"status":"ok"} while every healthz check passes
//   /readyz   200 {"status":"ready"} while every readyz check passes, else
//             503 with a Kubernetes Status naming the first failing check
//   /metrics  the registry's text (Prometheus text format 0.0.4)
// Another method on those paths is 405. A check that throws fails.
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

  void add_healthz_check(std::string name, Check check);
  void add_readyz_check(std::string name, Check check);
  prometheus::Registry& metrics() noexcept { return metrics_; }

  std::optional<http::Response> serve(const http::Request& request) const noexcept;
  // serve(), and 404 for every other path: the plain-HTTP probe listener, so
  // admission is never served without TLS.
  http::Response serve_only(const http::Request& request) const noexcept;
  // The first failing readyz check's name; "" when ready.
  std::string not_ready() const;

 private:
  using Checks = std::vector<std::pair<std::string, Check>>;
  static std::string failing(const Checks& checks);

  Checks healthz_, readyz_;
  prometheus::Registry metrics_;
};

}  // namespace ig::runtime
