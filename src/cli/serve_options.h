// `serve`'s flags. parse_serve_options() declares, parses and checks them
// into a ServeOptions (listen and metrics_listen parsed from their texts):
// nullopt when ready to serve, else the exit code (--help: 0; a bad flag,
// reported on stderr: kExitBadInput). check_config() prints what serve would
// run with (--check-config).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/gate_options.h"
#include "config/defaults.h"
#include "config/log.h"
#include "kube/rate_limiter.h"

namespace ig::cli {

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

struct ServeOptions {
  bool local = false;
  std::string components_dir;  // --local: required
  GateOptions gate;
  std::string listen_text = std::string(config::kDefaultListen);
  std::string metrics_listen_text = std::string(config::kDefaultMetricsListen);
  HostPort listen, metrics_listen;  // parsed from the two above
  std::string tls_cert, tls_key;    // both or neither
  std::string ca_out;
  std::string service = std::string(config::kDefaultServiceName);
  unsigned threads = 0;  // 0: one per core
  bool check_config = false;  // --check-config: validate, print, exit
  std::chrono::milliseconds drain_delay{5'000};
  // Transport (server/https_server.h, ListenerOptions).
  std::chrono::milliseconds tls_handshake_timeout{3'000};
  std::size_t max_connections = 4096;
  std::size_t max_connections_per_source = 2048;
  std::string client_ca;  // empty: no client authentication
  config::LogLevel log_level = config::LogLevel::Info;

  // Cluster mode.
  enum class CertMode { SelfManaged, Files };
  bool namespace_given = false;  // else the service account's namespace
  std::string kubeconfig, context;
  std::string webhook_config_name = std::string(config::kDefaultServiceName);
  std::string tls_secret = std::string(config::kDefaultServiceName) + "-tls";
  std::string webhook_template_configmap;  // self-managed: the leader applies the configurations from it
  CertMode cert_mode = CertMode::SelfManaged;
  std::string lease_name = std::string(config::kDefaultServiceName) + "-leader";
  std::chrono::milliseconds lease_duration{15'000}, renew_deadline{10'000}, retry_period{2'000};
  bool evict_drifted = false;
  double evict_rate = 10;  // per minute
  std::chrono::milliseconds drift_eviction_settle{60'000};
  std::chrono::milliseconds cert_validity{std::chrono::hours(24 * 365)};
  std::chrono::milliseconds ca_validity{std::chrono::hours(24 * 365 * 10)};
  double kube_api_qps = kube::RateLimiter::kDefaultQps;
  std::size_t status_workers = 1;
  int kube_api_burst = kube::RateLimiter::kDefaultBurst;
  // Admission's live Component GETs: a budget of their own (collapsed per
  // Component, so a few distinct new Components at once at most).
  double kube_lookup_qps = 10;
  int kube_lookup_burst = 20;
  std::chrono::milliseconds kube_lookup_timeout{2'000};  // well inside the webhook's timeoutSeconds
  std::size_t kube_list_page_size = 5000;
  std::chrono::milliseconds kube_watch_silence{150'000};
  std::chrono::milliseconds kube_request_timeout{30'000};
  std::chrono::milliseconds sandbox_stale_after{300'000};
};

std::optional<int> parse_serve_options(const std::vector<std::string>& args, ServeOptions& o);
int check_config(const ServeOptions& o);

}  // namespace ig::cli
