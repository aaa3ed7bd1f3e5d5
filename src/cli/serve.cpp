// `isolation-gate serve`: the admission webhook over HTTPS plus a plain-HTTP
// listener for probes and metrics. Local mode (--local) needs no cluster:
// Components come from YAML files and the sandbox state from a flag.
//
// Two halves: parse_serve_options() turns the flags into a validated
// ServeOptions; a mode builds its Component lookup and sandbox view and hands
// them to serve_webhook(), which builds everything else in dependency order
// (counters, TLS, the Webhook, the servers) and runs until SIGTERM/SIGINT.
// serve_local() reads Components from files and the sandbox from a flag;
// serve_cluster() builds both from the API server's caches
// (docs/architecture.md, "Where cluster mode plugs in").
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <variant>

#ifndef IG_VERSION
#error "IG_VERSION must be defined by the build (CMake's project version)"
#endif

#include "admission/catalog.h"
#include "admission/webhook.h"
#include "base/prometheus.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/gate_options.h"
#include "config/defaults.h"
#include "config/environment.h"
#include "config/log.h"
#include "controller/certificates.h"
#include "controller/cluster.h"
#include "controller/event_writer.h"
#include "controller/operator.h"
#include "kube/config.h"
#include "kube/event_recorder.h"
#include "kube/http_client.h"
#include "kube/leader_election.h"
#include "server/http_exchange.h"
#include "server/https_server.h"
#include "tls/certificates.h"
#include "tls/server_context.h"

namespace ig::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// "HOST:PORT", "[v6]:PORT" or ":PORT" (all interfaces).
std::optional<HostPort> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const unsigned long value = std::stoul(port);
  if (value > 65535) return std::nullopt;
  return HostPort{host, static_cast<std::uint16_t>(value)};
}

const CLI::Validator kHostPort(
    [](std::string& text) { return parse_host_port(text) ? std::string() : "expected HOST:PORT"; }, "");

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
  std::string enforcement_admins_text;  // --enforcement-admins, split into gate.enforcement_admins
  std::string trust_admins_text;        // --trust-admins, split into gate.trust_admins
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
  std::size_t kube_list_page_size = 5000;
  std::chrono::milliseconds kube_watch_silence{150'000};
  std::chrono::milliseconds kube_request_timeout{30'000};
  std::chrono::milliseconds sandbox_stale_after{300'000};
};

int usage_error(const std::string& message) {
  std::cerr << "isolation-gate serve: " << message << " (see isolation-gate serve --help)\n";
  return kExitBadInput;
}

// Parses and checks the flags; nullopt when `o` is ready to serve, otherwise
// the exit code (help printed, or a bad flag reported).
std::optional<int> parse_serve_options(const std::vector<std::string>& args, ServeOptions& o) {
  auto app = make_app("serve", "Runs the admission webhook (HTTPS) and its probe/metrics listener (HTTP).");
  app->add_flag("--local", o.local,
                "serve without a cluster: Components from --components,\nthe sandbox from --sandbox");
  app->add_option("--components", o.components_dir,
                  "--local: every Component in the *.yaml, *.yml and *.json\nfiles under DIR")
      ->type_name("DIR");
  add_gate_options(*app, o.gate);
  app->add_option("--listen", o.listen_text, "HTTPS webhook address")->check(kHostPort)->type_name("HOST:PORT");
  app->add_option("--metrics-listen", o.metrics_listen_text, "plain-HTTP /healthz /readyz /metrics address")
      ->check(kHostPort)
      ->type_name("HOST:PORT");
  app->add_option("--tls-cert", o.tls_cert,
                  "serving certificate (PEM, chain leaf first), reloaded when it\n"
                  "changes; without --tls-cert/--tls-key a CA and a certificate\n"
                  "for localhost and the Service's names are made")
      ->type_name("FILE");
  app->add_option("--tls-key", o.tls_key, "the certificate's private key (PEM)")->type_name("FILE");
  app->add_option("--ca-out", o.ca_out, "write the CA made without --tls-cert (PEM) for clients")
      ->type_name("FILE");
  app->add_option("--service-name", o.service, "the webhook's Service (names in the made certificate)")
      ->type_name("NAME");
  app->add_option("--threads", o.threads, "I/O threads of the webhook listener (0: one per core)")
      ->check(CLI::Range(0u, 999u).description(""))
      ->type_name("N");
  add_duration_option(*app, "--drain-delay", o.drain_delay,
                      "at SIGTERM: /readyz fails at once, the listeners keep serving\n"
                      "this long (endpoints are removed meanwhile), then requests in\n"
                      "flight drain (10s at most); 0s..60s");
  app->add_option("--enforcement-admins", o.enforcement_admins_text,
                  "groups whose members may remove or change a namespace's\n"
                  "gibson.zeroroot.ai/isolation=enforced label (comma-separated;\n"
                  "the /validate/namespaces webhook refuses everyone else)")
      ->type_name("GROUP,...");
  app->add_option("--trust-admins", o.trust_admins_text,
                  "groups whose members may loosen a Component's content trust\n"
                  "(untrusted to trusted, omitted, null or empty; comma-separated;\n"
                  "default: the enforcement admins)")
      ->type_name("GROUP,...");
  add_duration_option(*app, "--tls-handshake-timeout", o.tls_handshake_timeout,
                      "webhook listener: a connection must finish its TLS handshake\n"
                      "this soon after it is accepted, or it is closed; 100ms..60s");
  app->add_option("--max-connections", o.max_connections,
                  "webhook listener: open connections at most; more are closed at once")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000}).description(""))
      ->type_name("N");
  app->add_option("--max-connections-per-source", o.max_connections_per_source,
                  "webhook listener: open connections from one source address at\n"
                  "most (the API server is few addresses: keep it high)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000}).description(""))
      ->type_name("N");
  app->add_option("--client-ca", o.client_ca,
                  "require a client certificate signed by a CA in FILE (PEM) on the\n"
                  "webhook listener (the API server's, see docs/operations.md);\n"
                  "reloaded when it changes")
      ->type_name("FILE");
  add_enum_option(*app, "--log-level", o.log_level,
                  EnumWords<config::LogLevel>{{"debug", config::LogLevel::Debug},
                                              {"info", config::LogLevel::Info},
                                              {"warn", config::LogLevel::Warn},
                                              {"error", config::LogLevel::Error}},
                  "the least severe log lines written");
  app->add_flag("--check-config", o.check_config,
                "check the flags and the environment as serve would, print the\n"
                "settings and exit: 0 if serve would start with them, 2 if not\n"
                "(reads no file, contacts no cluster)");
  // Cluster mode (without --local).
  app->add_option("--kubeconfig", o.kubeconfig,
                  "cluster mode: a kubeconfig file (else $KUBECONFIG, else the\n"
                  "in-cluster service account)")
      ->type_name("FILE");
  app->add_option("--context", o.context, "cluster mode: the kubeconfig context (else its current one)")
      ->type_name("NAME");
  app->add_option("--webhook-config-name", o.webhook_config_name,
                  "cluster mode: the Mutating/ValidatingWebhookConfigurations\n"
                  "whose caBundle self-managed certificates keep")
      ->type_name("NAME");
  app->add_option("--tls-secret", o.tls_secret,
                  "cluster mode: the Secret (in --namespace) holding self-managed\ncertificates")
      ->type_name("NAME");
  app->add_option("--webhook-template-configmap", o.webhook_template_configmap,
                  "cluster mode, self-managed: a ConfigMap (in --namespace) whose keys\n"
                  "mutating.yaml and validating.yaml hold the two webhook\n"
                  "configurations; the leader creates and updates them from it,\n"
                  "caBundle filled, once a replica is ready to answer")
      ->type_name("NAME");
  add_enum_option(*app, "--cert-mode", o.cert_mode,
                  EnumWords<ServeOptions::CertMode>{{"self-managed", ServeOptions::CertMode::SelfManaged},
                                                    {"files", ServeOptions::CertMode::Files}},
                  "cluster mode: self-managed = the leader keeps a CA and a serving\n"
                  "certificate in --tls-secret and the caBundle of the webhook\n"
                  "configurations; files = --tls-cert/--tls-key, reloaded as they\n"
                  "change (cert-manager)");
  add_duration_option(*app, "--cert-validity", o.cert_validity,
                      "self-managed: the serving certificate's lifetime (renewed at 2/3)");
  add_duration_option(*app, "--ca-validity", o.ca_validity,
                      "self-managed: the CA's lifetime (rotated at 2/3, with overlap)");
  app->add_option("--lease-name", o.lease_name,
                  "cluster mode: the coordination.k8s.io Lease (in --namespace) of\nleader election")
      ->type_name("NAME");
  add_duration_option(*app, "--lease-duration", o.lease_duration,
                      "leader election: how long a Lease holds without renewal");
  add_duration_option(*app, "--renew-deadline", o.renew_deadline,
                      "leader election: a leader that cannot renew for this long stops\nits loops");
  add_duration_option(*app, "--retry-period", o.retry_period, "leader election: how often to try");
  app->add_flag("--evict-drifted", o.evict_drifted,
                "cluster mode: evict pods whose placement is less safe than the\n"
                "gate decides now (through the Eviction API: PDBs hold)");
  app->add_option("--evict-rate", o.evict_rate, "--evict-drifted: evictions per minute at most")
      ->check(CLI::Range(0.1, 10000.0).description(""))
      ->type_name("N");
  add_duration_option(*app, "--drift-eviction-settle", o.drift_eviction_settle,
                      "--evict-drifted: a pod is evicted only once it has stayed drifted\n"
                      "this long (a passing state evicts nothing; 0s: at once)");
  app->add_option("--kube-api-qps", o.kube_api_qps, "cluster mode: Kubernetes API requests per second")
      ->check(CLI::Range(0.0, 10000.0).description(""))
      ->type_name("QPS");
  app->add_option("--kube-api-burst", o.kube_api_burst, "cluster mode: Kubernetes API request burst")
      ->check(CLI::Range(1, 10000).description(""))
      ->type_name("N");
  app->add_option("--kube-lookup-qps", o.kube_lookup_qps,
                  "cluster mode: live GETs per second of Components that admission\n"
                  "misses in the cache (a rate limit of their own: status writes,\n"
                  "Events and watches never delay them; concurrent misses of one\n"
                  "Component share one GET)")
      ->check(CLI::Range(0.0, 10000.0).description(""))
      ->type_name("QPS");
  app->add_option("--kube-lookup-burst", o.kube_lookup_burst, "cluster mode: burst of those live GETs")
      ->check(CLI::Range(1, 10000).description(""))
      ->type_name("N");
  app->add_option("--status-workers", o.status_workers,
                  "cluster mode, leader: Component status writes in flight at once\n"
                  "(all under the --kube-api-qps limit; more help only when the API\n"
                  "server's round trip, not the limit, bounds the rate)")
      ->check(CLI::Range(1, 64).description(""))
      ->type_name("N");
  app->add_option("--kube-list-page-size", o.kube_list_page_size,
                  "cluster mode: objects per LIST page of the Component, RuntimeClass\n"
                  "and Node caches (each page is one rate-limited request; larger\n"
                  "pages make the initial list fit the burst, at the cost of a larger\n"
                  "transient response buffer; client-go uses 500)")
      ->check(CLI::Range(1, 100000).description(""))
      ->type_name("N");
  add_duration_option(*app, "--kube-request-timeout", o.kube_request_timeout,
                      "cluster mode: the longest a LIST, CREATE or PATCH of the caches,\n"
                      "status, Events and evictions may wait for its answer (then it is\n"
                      "retried: an Event create that landed meanwhile is not doubled);\n"
                      "1s..10m");
  add_duration_option(*app, "--kube-watch-silence", o.kube_watch_silence,
                      "cluster mode: a cache's watch that delivers no byte for this long\n"
                      "is closed and reopened (the API server sends a bookmark about\n"
                      "every minute; 0s: never)");
  add_duration_option(*app, "--sandbox-stale-after", o.sandbox_stale_after,
                      "cluster mode: when the RuntimeClass or Node cache has had no list,\n"
                      "event or bookmark for this long, admission treats the sandbox as\n"
                      "unavailable (fail closed; 0s: never)");
  app->footer("The deployment shape comes from GIBSON_UNTRUSTED_EXEC (default setec-only).");
  if (auto exit_code = parse(*app, args)) return exit_code;
  o.namespace_given = app->get_option("--namespace")->count() > 0;
  // Split by hand: an empty value names nobody (not the default, not the group "").
  auto groups = [](std::string_view rest) {
    std::vector<std::string> out;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view group = rest.substr(0, comma);
      if (!group.empty()) out.emplace_back(group);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return out;
  };
  if (app->get_option("--enforcement-admins")->count() > 0) o.gate.enforcement_admins = groups(o.enforcement_admins_text);
  o.gate.trust_admins = app->get_option("--trust-admins")->count() > 0 ? groups(o.trust_admins_text)
                                                                       : o.gate.enforcement_admins;

  if (o.local && o.components_dir.empty()) return usage_error("--local needs --components DIR");
  if (!o.local) {
    if (!o.components_dir.empty()) return usage_error("--components is for --local; a cluster has its own");
    if (o.cert_mode == ServeOptions::CertMode::SelfManaged && !o.tls_cert.empty()) {
      return usage_error("--tls-cert and --tls-key are for --cert-mode files; self-managed keeps its own");
    }
    if (o.cert_mode == ServeOptions::CertMode::Files && o.tls_cert.empty()) {
      return usage_error("--cert-mode files needs --tls-cert and --tls-key");
    }
    if (!(o.lease_duration > o.renew_deadline && o.renew_deadline.count() > 1.2 * o.retry_period.count() &&
          o.retry_period.count() > 0)) {
      return usage_error("leader election needs --lease-duration > --renew-deadline > 1.2 x --retry-period > 0");
    }
    if (o.cert_mode == ServeOptions::CertMode::SelfManaged &&
        (o.cert_validity < std::chrono::seconds(3) || o.ca_validity < o.cert_validity)) {
      return usage_error("--cert-validity must be at least 3s and --ca-validity at least --cert-validity");
    }
  }
  if (!o.webhook_template_configmap.empty() && (o.local || o.cert_mode != ServeOptions::CertMode::SelfManaged)) {
    return usage_error("--webhook-template-configmap is for cluster mode with --cert-mode self-managed");
  }
  if (o.drain_delay > std::chrono::seconds(60)) return usage_error("--drain-delay must be at most 60s");
  if (o.kube_request_timeout < std::chrono::seconds(1) || o.kube_request_timeout > std::chrono::minutes(10))
    return usage_error("--kube-request-timeout must be between 1s and 10m");
  if (o.sandbox_stale_after.count() > 0 && o.kube_watch_silence.count() > 0 &&
      o.sandbox_stale_after <= o.kube_watch_silence)
    return usage_error("--sandbox-stale-after must be longer than --kube-watch-silence (or 0s)");
  if (o.tls_handshake_timeout < std::chrono::milliseconds(100) || o.tls_handshake_timeout > std::chrono::seconds(60))
    return usage_error("--tls-handshake-timeout must be between 100ms and 60s");
  if (o.max_connections_per_source > o.max_connections)
    return usage_error("--max-connections-per-source must be at most --max-connections");
  if (o.tls_cert.empty() != o.tls_key.empty()) return usage_error("--tls-cert and --tls-key go together");
  o.listen = *parse_host_port(o.listen_text);  // checked by kHostPort
  o.metrics_listen = *parse_host_port(o.metrics_listen_text);
  return std::nullopt;
}

void log_adapter(std::string_view level, std::string_view msg) { config::log(level, msg); }

// The serving TLS context: the --tls-cert/--tls-key files (watched), or a
// fresh chain for localhost and the Service, its CA written to --ca-out. On
// failure: logged, and the exit code.
std::variant<std::unique_ptr<tls::ReloadingTlsContext>, int> serving_tls(const ServeOptions& o) {
  if (!o.tls_cert.empty()) {
    auto loaded = tls::ReloadingTlsContext::from_files(o.tls_cert, o.tls_key, log_adapter, o.client_ca);
    if (!loaded) {
      config::log_error("cannot load the serving certificate", {{"error", loaded.error()}});
      return kExitBadInput;
    }
    (*loaded)->start_watching();
    return std::move(*loaded);
  }
  std::vector<std::string> names = {"localhost"};
  for (auto& name : config::service_dns_names(o.service, o.gate.own_namespace)) names.push_back(std::move(name));
  auto chain = tls::make_serving_chain(names, {"127.0.0.1", "::1"}, std::chrono::hours(24 * 365));
  if (!chain) {
    config::log_error("cannot make a serving certificate", {{"error", chain.error()}});
    return kExitFailure;
  }
  if (!o.ca_out.empty()) {
    if (auto written = tls::write_file_atomically(o.ca_out, chain->ca_cert_pem, 0644); !written) {
      config::log_error("cannot write --ca-out", {{"error", written.error()}});
      return kExitFailure;
    }
  }
  auto loaded = tls::ReloadingTlsContext::from_pem(chain->cert_pem, chain->key_pem, log_adapter, o.client_ca);
  if (!loaded) {
    config::log_error("cannot load the serving certificate", {{"error", loaded.error()}});
    return o.client_ca.empty() ? kExitFailure : kExitBadInput;
  }
  (*loaded)->start_watching();  // the client CA file, if any
  return std::move(*loaded);
}

// What a mode gives serve_webhook() beyond the admission context: its name
// (the `mode` label and log field), how many Components it knows, and
// optionally its own readiness (cluster mode: caches synced) and metrics
// (cluster mode: caches, sandbox facts).
struct ModeFacts {
  std::string_view mode;
  std::function<std::size_t()> component_count;
  std::function<bool()> ready;                                // empty: ready once serving
  std::function<void(prometheus::TextWriter&)> extra_metrics;  // empty: none
  std::function<void(const admission::DenialNotice&)> on_denial;  // empty: none (Events)
  // After the log line serve_webhook writes for every guarded change; empty: none (Events).
  std::function<void(const admission::GuardedChangeNotice&)> on_guarded_change;
  std::function<void()> on_stopping;  // at SIGTERM/SIGINT, before the listeners drain
  std::function<void()> on_serving;   // once both listeners accept
};

admission::WebhookRequest to_webhook(server::Request&& r) {
  return admission::WebhookRequest{std::move(r.method), std::move(r.target), std::move(r.content_type),
                                   std::move(r.body)};
}

server::Response to_server(admission::WebhookResponse&& r) {
  server::Response out;
  out.status = r.status;
  out.content_type = std::move(r.content_type);
  out.body = std::move(r.body);
  return out;
}

// Descriptors beyond the webhook's connections: the probe listener's, the API
// clients', files, the log.
constexpr std::size_t probe_headroom = 256;
// How often serve_webhook's signal loop returns malloc's free pages (tune_malloc).
constexpr time_t kMallocTrimSeconds = 60;

// Every accepted connection is a descriptor: at the soft RLIMIT_NOFILE accept()
// fails (EMFILE) and nobody is served, so raise the soft limit to the hard one
// (as the Go runtime does) and say so when even that is below what the
// connection caps allow.
void raise_open_files_limit(std::size_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = before;
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < wanted) {
    config::log_warn("the open files limit is below what --max-connections allows; beyond it accept() fails",
                     {{"limit", std::to_string(lim.rlim_cur)}, {"wanted", std::to_string(wanted)}});
  } else if (before != lim.rlim_cur) {
    config::log_debug("raised the open files limit",
                      {{"from", std::to_string(before)}, {"to", std::to_string(lim.rlim_cur)}});
  }
}

std::string endpoint_text(const boost::asio::ip::tcp::endpoint& e) {
  const auto addr = e.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" + std::to_string(e.port());
}

// Serves `context` until SIGTERM/SIGINT. Builds, in this order, so that
// nothing is set after construction: the transport counters and the TLS
// context, the Webhook (its metrics read them), the two servers (their
// handlers call the Webhook).
// Signals are taken by serve_webhook's thread only: every mode blocks them
// first thing, before any thread starts (caches, certificate watchers); a
// signal during start-up waits.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // logged and ignored: it must not kill the webhook silently
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// One line per guarded change: a warning when enforcement goes off or trust
// is loosened (or either was refused), info when it tightens. Never blocks
// for long (stderr).
void log_guarded_change(const admission::GuardedChangeNotice& n) {
  using admission::Reason;
  const admission::GuardedChange& c = n.change;
  const std::string reason(admission::to_string(n.reason));
  const bool component = c.kind == "Component";
  const std::string what = component ? "component content trust" : "namespace enforcement";
  const std::string object = component ? c.namespace_ + "/" + c.name : c.name;
  if (n.reason == Reason::EnforcementAdded || n.reason == Reason::ContentTrustTightened) {
    config::log_info(what + (component ? " tightened" : " switched on"),
                     {{c.kind == "Component" ? "component" : "namespace", object},
                      {"user", c.username},
                      {"before", c.before},
                      {"after", c.after},
                      {"reason", reason}});
    return;
  }
  const bool refused = n.reason == Reason::EnforcementChangeRefused || n.reason == Reason::ContentTrustChangeRefused;
  config::log_warn(what + (refused ? " change refused" : component ? " loosened" : " switched off"),
                   {{component ? "component" : "namespace", object},
                    {"user", c.username},
                    {"admin_group", c.admin_group},
                    {"before", c.before},
                    {"after", c.removed ? std::string("(removed)") : c.after},
                    {"reason", reason}});
}

int serve_webhook(const ServeOptions& o, const admission::AdmissionContext& context, const ModeFacts& facts,
                  tls::ReloadingTlsContext& serving, SteadyClock::time_point started) {
  sigset_t signals = block_stop_signals();
  auto webhook_counters = std::make_shared<server::TransportCounters>();
  auto probe_counters = std::make_shared<server::TransportCounters>();
  tls::ReloadingTlsContext* const tls_context = &serving;
  std::atomic<bool> ready{false};

  admission::WebhookOptions options;
  options.ready = [&ready, &facts] {
    return ready.load(std::memory_order_acquire) && (!facts.ready || facts.ready());
  };
  options.extra_metrics = [&](prometheus::TextWriter& out) {
    using prometheus::Type;
    server::write_transport_metrics(
        out, {{"webhook", webhook_counters->snapshot()}, {"probes", probe_counters->snapshot()}});
    out.family("isolation_gate_info", Type::Gauge, "Static facts about this process.");
    out.sample("isolation_gate_info",
               {{"mode", facts.mode},
                {"shape", policy::to_string(context.settings.shape.shape)},
                {"runtime_class", context.settings.runtime_class}},
               std::uint64_t{1});
    if (!facts.extra_metrics) {  // a mode with metrics of its own writes the sandbox's
      out.family("isolation_gate_sandbox_available", Type::Gauge, "1 when the setec sandbox is available.");
      out.sample("isolation_gate_sandbox_available", {},
                 std::uint64_t{policy::is_available(context.sandbox.availability()) ? 1u : 0u});
    }
    out.family("isolation_gate_components", Type::Gauge, "Components known to the catalog.");
    out.sample("isolation_gate_components", {}, std::uint64_t{facts.component_count()});
    out.family("isolation_gate_tls_reloads_total", Type::Counter, "Serving certificate reloads.");
    out.sample("isolation_gate_tls_reloads_total", {}, tls_context->reload_count());
    out.family("isolation_gate_tls_certificate_expiry_seconds", Type::Gauge,
               "Unix time at which the serving certificate expires.");
    out.sample("isolation_gate_tls_certificate_expiry_seconds", {},
               static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                       tls_context->not_after().time_since_epoch())
                                       .count()));
    if (facts.extra_metrics) facts.extra_metrics(out);
  };
  options.on_denial = facts.on_denial;
  options.on_guarded_change = [&facts](const admission::GuardedChangeNotice& n) {
    log_guarded_change(n);
    if (facts.on_guarded_change) facts.on_guarded_change(n);
  };
  admission::Webhook webhook(context, std::move(options));

  // The webhook routes only over TLS; probes and metrics over both.
  server::HttpServer https(
      [&webhook](server::Request&& r) { return to_server(webhook.serve(to_webhook(std::move(r)))); },
      *tls_context, log_adapter, webhook_counters);
  server::HttpServer probes(
      [&webhook](server::Request&& r) { return to_server(webhook.serve_probes(to_webhook(std::move(r)))); },
      log_adapter, probe_counters);

  server::ListenerOptions webhook_listener;
  webhook_listener.host = o.listen.host;
  webhook_listener.port = o.listen.port;
  webhook_listener.tls = true;
  webhook_listener.handshake_timeout = o.tls_handshake_timeout;
  webhook_listener.max_connections = o.max_connections;
  webhook_listener.max_connections_per_source = o.max_connections_per_source;
  raise_open_files_limit(o.max_connections + probe_headroom);
  auto webhook_endpoint = https.add_listener(webhook_listener);
  if (!webhook_endpoint) {
    config::log_error("cannot listen", {{"address", o.listen_text}, {"error", webhook_endpoint.error()}});
    return kExitFailure;
  }
  server::ListenerOptions probe_listener;
  probe_listener.host = o.metrics_listen.host;
  probe_listener.port = o.metrics_listen.port;
  probe_listener.tls = false;
  probe_listener.body_limit = 64 * 1024;
  auto probe_endpoint = probes.add_listener(probe_listener);
  if (!probe_endpoint) {
    config::log_error("cannot listen", {{"address", o.metrics_listen_text}, {"error", probe_endpoint.error()}});
    return kExitFailure;
  }

  https.start(o.threads);
  probes.start(1);
  ready.store(true, std::memory_order_release);
  if (facts.on_serving) facts.on_serving();
  const auto startup_ms =
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - started).count() / 1000.0;
  config::log_info("serving", {{"webhook", endpoint_text(*webhook_endpoint)},
                               {"metrics", endpoint_text(*probe_endpoint)},
                               {"mode", facts.mode},
                               {"sandbox", context.sandbox.describe()},
                               {"components", std::to_string(facts.component_count())},
                               {"runtime_class", context.settings.runtime_class},
                               {"startup_ms", std::to_string(startup_ms)}});

  int signal_number = 0;
  for (;;) {
    // Between signals, once a minute, hand the pages malloc holds free back
    // to the kernel (see tune_malloc below).
    timespec trim_interval{};
    trim_interval.tv_sec = kMallocTrimSeconds;
    siginfo_t info{};
    signal_number = sigtimedwait(&signals, &info, &trim_interval);
    if (signal_number < 0) {
      if (errno == EAGAIN) malloc_trim(0);
      continue;  // the interval passed (EAGAIN), or EINTR
    }
    if (signal_number != SIGHUP) break;
    // Certificates reload on their own (files watched, the Secret watched);
    // there is nothing else to reload.
    config::log_info("SIGHUP ignored: certificates reload by themselves when they change");
  }
  config::log_info("stopping", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"},
                                {"drain_delay_ms", std::to_string(o.drain_delay.count())}});
  // From now on every webhook response carries Connection: close: clients
  // reconnect, and reach a replica that is still in the endpoints. Idle
  // keep-alive connections stay open until the delay is over (a request may
  // be on its way on them). Before readiness fails, so that whoever sees
  // /readyz fail gets Connection: close from then on.
  https.begin_drain();
  ready.store(false, std::memory_order_release);
  if (facts.on_stopping) facts.on_stopping();
  // Keep answering while the endpoints controller and the API server notice
  // the replica is not ready; a second signal ends the delay.
  const auto drain_until = SteadyClock::now() + o.drain_delay;
  for (auto left = o.drain_delay; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - SteadyClock::now())) {
    timespec delay{};
    delay.tv_sec = static_cast<time_t>(left.count() / 1000);
    delay.tv_nsec = static_cast<long>((left.count() % 1000) * 1'000'000);
    siginfo_t info{};
    const int got = sigtimedwait(&signals, &info, &delay);
    if (got < 0 && errno == EINTR) continue;
    if (got == SIGHUP) continue;
    break;  // the delay is over, or SIGTERM/SIGINT again
  }
  config::log_info("draining: closing idle connections, finishing requests in flight",
                   {{"grace_ms", "10000"}});
  https.stop(std::chrono::seconds(10));
  probes.stop(std::chrono::seconds(1));
  https.wait();
  probes.wait();
  config::log_info("stopped");
  return kExitAllowed;
}

// Local mode: Components from files, the sandbox from --sandbox.
int serve_local(const ServeOptions& o, SteadyClock::time_point started) {
  block_stop_signals();
  const auto shape = config::read_shape_from_env();
  if (shape.setting.fell_back) {
    config::log_warn(config::describe_shape(shape));
  } else {
    config::log_info(config::describe_shape(shape));
  }
  const admission::GateSettings settings = gate_settings(o.gate, shape);
  auto catalog = admission::StaticCatalog::load_directory(o.components_dir, "default");
  if (!catalog) {
    config::log_error("cannot load Components", {{"error", catalog.error()}});
    return kExitBadInput;
  }
  const admission::FixedSandbox sandbox = fixed_sandbox(o.gate);
  const admission::AdmissionContext context{settings, *catalog, sandbox};
  auto tls_or_exit = serving_tls(o);
  if (auto* exit_code = std::get_if<int>(&tls_or_exit)) return *exit_code;
  auto& serving = *std::get<std::unique_ptr<tls::ReloadingTlsContext>>(tls_or_exit);
  return serve_webhook(o, context, ModeFacts{"local", [&catalog] { return catalog->size(); }, {}, {}, {}, {}, {}, {}},
                       serving, started);
}

void write_event_metrics(prometheus::TextWriter& out, const kube::EventRecorderStats& s) {
  using prometheus::Type;
  out.family("isolation_gate_events_total", Type::Counter,
             "Event occurrences by what became of them: created (a new Event), series (a repeat "
             "written into its Event's series), dropped_queue_full, dropped_rate_limited, failed.");
  const std::pair<std::string_view, std::uint64_t> rows[] = {
      {"recorded", s.recorded},
      {"created", s.created},
      {"series", s.series_updates},
      {"dropped_queue_full", s.dropped_queue_full},
      {"dropped_rate_limited", s.dropped_rate_limited},
      {"dropped_invalid", s.dropped_invalid},
      {"failed", s.send_errors},
  };
  for (const auto& [result, n] : rows) out.sample("isolation_gate_events_total", {{"result", result}}, n);
  out.family("isolation_gate_events_pending", Type::Gauge,
             "Repeats waiting for a rate-limit token (they are written into the series later).");
  out.sample("isolation_gate_events_pending", {}, s.pending);
}

void write_election_metrics(prometheus::TextWriter& out, const kube::LeaderElectionStats& s) {
  using prometheus::Type;
  out.family("isolation_gate_leader_transitions_total", Type::Counter,
             "Changes of the Lease's holder this replica observed.");
  out.sample("isolation_gate_leader_transitions_total", {}, s.transitions_observed);
  out.family("isolation_gate_leader_acquisitions_total", Type::Counter, "Times this replica became leader.");
  out.sample("isolation_gate_leader_acquisitions_total", {}, s.acquisitions);
  out.family("isolation_gate_leader_lost_total", Type::Counter,
             "Times this replica stopped leading because it could not renew in time.");
  out.sample("isolation_gate_leader_lost_total", {}, s.lost);
  out.family("isolation_gate_leader_renew_failures_total", Type::Counter, "Lease renewals that failed.");
  out.sample("isolation_gate_leader_renew_failures_total", {}, s.renew_failures);
}

// Cluster mode: Components, RuntimeClasses and Nodes from the API server's
// caches on every replica; ready once they have synced and the serving
// certificate is loaded. The leader (a Lease) runs the writing loops: status,
// drift and eviction (controller::Operator) and, self-managed, certificates.
// Every replica records Events for its own denials.
int serve_cluster(ServeOptions o, SteadyClock::time_point started) {
  block_stop_signals();
  const auto shape = config::read_shape_from_env();
  if (shape.setting.fell_back) {
    config::log_warn(config::describe_shape(shape));
  } else {
    config::log_info(config::describe_shape(shape));
  }
  auto cluster_config = kube::load_cluster_config(o.kubeconfig, o.context, kube::process_env());
  if (!cluster_config) {
    config::log_error("cannot configure the Kubernetes API client", {{"error", cluster_config.error()}});
    return kExitBadInput;
  }
  if (!o.namespace_given && !cluster_config->namespace_name.empty()) {
    o.gate.own_namespace = cluster_config->namespace_name;
  }
  // Two clients, two rate limits: the caches and the loops that write much
  // (status, Events, evictions) never starve the Lease renewals and the
  // certificate loop.
  // One credential source for both: a token file is followed once, an exec
  // plugin runs once per rotation.
  auto tokens = std::make_shared<kube::TokenSource>(*cluster_config);
  kube::HttpClientOptions client_options;
  client_options.tokens = tokens;
  client_options.qps = o.kube_api_qps;
  client_options.burst = o.kube_api_burst;
  client_options.request_timeout = o.kube_request_timeout;
  auto client = kube::HttpClient::make(*cluster_config, IG_VERSION, client_options);
  // Admission's live GETs: their own rate limit, so a storm of status
  // writes or Events never makes a review wait past its deadline.
  kube::HttpClientOptions lookup_options;
  lookup_options.tokens = tokens;
  lookup_options.qps = o.kube_lookup_qps;
  lookup_options.burst = o.kube_lookup_burst;
  auto lookup = kube::HttpClient::make(*cluster_config, IG_VERSION, lookup_options);
  kube::HttpClientOptions control_options;
  control_options.tokens = tokens;
  control_options.request_timeout = o.renew_deadline;
  auto control = kube::HttpClient::make(*cluster_config, IG_VERSION, control_options);
  if (!client || !control || !lookup) {
    config::log_error("cannot make the Kubernetes API client",
                      {{"error", !client ? client.error() : !control ? control.error() : lookup.error()}});
    return kExitBadInput;
  }
  const admission::GateSettings settings = gate_settings(o.gate, shape);
  const char* pod_name = std::getenv("POD_NAME");
  const std::string identity = kube::make_holder_identity(pod_name ? pod_name : "");

  controller::ClusterOptions cluster_options;
  cluster_options.runtime_class = settings.runtime_class;
  cluster_options.shape = settings.shape.shape;
  cluster_options.log = log_adapter;
  cluster_options.page_size = o.kube_list_page_size;
  cluster_options.watch_silence = o.kube_watch_silence;
  cluster_options.sandbox_stale_after = o.sandbox_stale_after;
  controller::Cluster cluster(**client, cluster_options, lookup->get());

  kube::EventRecorderOptions event_options;
  event_options.reporting_controller = "isolation-gate";
  event_options.reporting_instance = identity;
  event_options.log = log_adapter;
  controller::EventWriter events(**client, event_options);

  controller::OperatorOptions operator_options;
  operator_options.evict = o.evict_drifted;
  operator_options.evict_per_minute = o.evict_rate;
  operator_options.drift.evict_settle = o.drift_eviction_settle;
  operator_options.status.workers = o.status_workers;
  operator_options.log = log_adapter;
  operator_options.gate = settings;
  controller::Operator op(**client, cluster, &events, std::move(operator_options));

  // The serving certificate: the files (cert-manager), or self-managed: a
  // throwaway one until the Secret's is loaded (not ready until then).
  auto tls_or_exit = serving_tls(o);
  if (auto* exit_code = std::get_if<int>(&tls_or_exit)) return *exit_code;
  auto& serving = *std::get<std::unique_ptr<tls::ReloadingTlsContext>>(tls_or_exit);
  std::unique_ptr<controller::SelfManagedCertificates> certs;
  // Set once the listeners accept and never unset: with the caches synced
  // and the Secret's certificate served, this replica can answer.
  std::atomic<bool> serving_started{false};
  if (o.cert_mode == ServeOptions::CertMode::SelfManaged) {
    controller::CertificateOptions c;
    c.ns = settings.own_namespace;
    c.secret_name = o.tls_secret;
    c.webhook_config_name = o.webhook_config_name;
    c.service_name = o.service;
    c.cert_validity = std::chrono::duration_cast<std::chrono::seconds>(o.cert_validity);
    c.ca_validity = std::chrono::duration_cast<std::chrono::seconds>(o.ca_validity);
    c.request_timeout = o.renew_deadline;
    c.webhook_template_configmap = o.webhook_template_configmap;
    c.replica_ready = [&serving_started, &cluster, &certs] {
      return serving_started.load(std::memory_order_acquire) && cluster.synced() && certs->loaded();
    };
    c.log = log_adapter;
    certs = std::make_unique<controller::SelfManagedCertificates>(**control, serving, std::move(c));
  }

  kube::LeaderElectionConfig election;
  election.namespace_name = settings.own_namespace;
  election.lease_name = o.lease_name;
  election.identity = identity;
  election.lease_duration = o.lease_duration;
  election.renew_deadline = o.renew_deadline;
  election.retry_period = o.retry_period;
  election.log = log_adapter;
  kube::LeaderCallbacks callbacks;
  callbacks.on_started_leading = [&op, &certs] {
    op.start_leading();
    if (certs) certs->start_leading();
  };
  callbacks.on_stopped_leading = [&op, &certs] {
    if (certs) certs->stop_leading();
    op.stop_leading();
  };
  callbacks.on_new_leader = [](std::string_view holder) {
    config::log_info("the Lease has a new holder", {{"holder", std::string(holder)}});
  };
  auto elector = kube::LeaderElector::make(**control, std::move(election), std::move(callbacks));
  if (!elector) {
    config::log_error("cannot run leader election", {{"error", elector.error()}});
    return kExitBadInput;
  }

  config::log_info("watching the Kubernetes API",
                   {{"server", cluster_config->server},
                    {"namespace", settings.own_namespace},
                    {"runtime_class", settings.runtime_class},
                    {"identity", identity},
                    {"cert_mode", o.cert_mode == ServeOptions::CertMode::SelfManaged ? "self-managed" : "files"}});
  cluster.start();
  events.start();
  if (certs) certs->start();
  (*elector)->start();
  const admission::AdmissionContext context{settings, cluster.components(), cluster.admission_sandbox()};
  ModeFacts facts;
  facts.mode = "cluster";
  facts.component_count = [&cluster] { return cluster.component_count(); };
  facts.ready = [&cluster, &certs] { return cluster.synced() && (!certs || certs->loaded()); };
  facts.extra_metrics = [&](prometheus::TextWriter& out) {
    const std::vector<controller::CacheView> more = op.caches();
    cluster.write_metrics(out, more);
    op.write_metrics(out);
    write_election_metrics(out, (*elector)->stats());
    write_event_metrics(out, events.stats());
    if (certs) certs->write_metrics(out);
  };
  facts.on_denial = [&op](const admission::DenialNotice& d) { op.record_denial(d); };
  facts.on_guarded_change = [&op](const admission::GuardedChangeNotice& n) { op.record_guarded_change(n); };
  // SIGTERM: stop leading and release the Lease first, so a successor takes
  // over within a retry period while this replica drains.
  facts.on_stopping = [&elector] { (*elector)->stop(); };
  facts.on_serving = [&serving_started] { serving_started.store(true, std::memory_order_release); };
  const int code = serve_webhook(o, context, facts, serving, started);
  (*elector)->stop();
  events.stop();
  if (certs) certs->stop();
  op.stop_leading();
  cluster.stop();
  return code;
}

std::string show_groups(const std::vector<std::string>& groups) {
  if (groups.empty()) return "(none)";
  std::string out;
  for (const auto& g : groups) out += (out.empty() ? "" : ",") + g;
  return out;
}

// --check-config: what serve would run with, on stdout.
int check_config(const ServeOptions& o) {
  const auto shape = config::read_shape_from_env();
  std::cout << "configuration ok\n"
            << "  mode: " << (o.local ? "local" : "cluster") << "\n"
            << "  " << config::describe_shape(shape) << "\n"
            << "  listen: " << o.listen_text << ", metrics: " << o.metrics_listen_text << "\n"
            << "  drain delay: " << o.drain_delay.count() << "ms\n"
            << "  enforcement admins: " << show_groups(o.gate.enforcement_admins) << "\n"
            << "  trust admins: " << show_groups(o.gate.trust_admins) << "\n"
            << "  tls handshake timeout: " << o.tls_handshake_timeout.count() << "ms, max connections: "
            << o.max_connections << " (" << o.max_connections_per_source << " per source address)\n"
            << "  client certificates: " << (o.client_ca.empty() ? "not required" : "required, CA " + o.client_ca)
            << "\n";
  if (!o.local) {
    std::cout << "  cert mode: " << (o.cert_mode == ServeOptions::CertMode::SelfManaged ? "self-managed" : "files")
              << "\n"
              << "  webhook configurations: " << o.webhook_config_name
              << (o.webhook_template_configmap.empty() ? " (caBundle kept)"
                                                       : " (applied from ConfigMap " + o.webhook_template_configmap +
                                                             ")")
              << "\n";
  }
  return kExitAllowed;
}

}  // namespace

// glibc gives each thread that allocates an arena of its own (up to 8 per
// core) and keeps what is freed there: under the soak (docs/security.md,
// "Soak") RSS grew 8-12 % over 25 minutes with a flat live heap. So serve
// caps the arenas, but at the I/O threads plus two (the main thread's arena
// and one for the rest), not lower: with two arenas the I/O threads shared
// one and contended on its lock, which cost 2.4x the CPU per review
// (docs/decisions/0002-malloc-arenas.md). What the arenas keep free goes back
// to the kernel once a minute (malloc_trim, from serve_webhook's signal
// loop). MALLOC_ARENA_MAX, when set, wins.
//
// And the mmap and trim thresholds are fixed at 4 MiB (above the 3 MiB body
// limit): by default a body over 128 KiB was mmapped and unmapped per request,
// and an arena's top was trimmed back (madvise) after each large review, so
// a 200 KB pod took 10-26 page faults per request and its CPU was bimodal,
// 470-720 us, against about 335 us with the thresholds fixed
// (docs/decisions/0003-malloc-thresholds.md). The minute's malloc_trim still returns
// what is free. MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_, when set, win.
constexpr int kMallocThresholdBytes = 4 << 20;

void tune_malloc(unsigned io_threads) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, kMallocThresholdBytes);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, kMallocThresholdBytes);
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  if (io_threads == 0) io_threads = std::max(1u, std::thread::hardware_concurrency());
  mallopt(M_ARENA_MAX, static_cast<int>(io_threads + 2));
}

int run_serve(const std::vector<std::string>& args) {
  const auto started = SteadyClock::now();
  ServeOptions options;
  if (auto exit_code = parse_serve_options(args, options)) return *exit_code;
  tune_malloc(options.threads);
  config::set_min_log_level(options.log_level);
  if (options.check_config) return check_config(options);
  if (options.local) return serve_local(options, started);
  return serve_cluster(std::move(options), started);
}

}  // namespace ig::cli
