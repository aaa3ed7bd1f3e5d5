// `isolation-gate serve`: the admission webhook over HTTPS plus a plain-HTTP
// listener for probes and metrics. Local mode (--local) needs no cluster:
// Components come from YAML files and the sandbox state from a flag.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>

#include "admission/catalog.h"
#include "admission/webhook.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "config/environment.h"
#include "config/log.h"
#include "server/http_exchange.h"
#include "server/https_server.h"
#include "tls/certificates.h"
#include "tls/server_context.h"

namespace ig::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: isolation-gate serve --local --components DIR --sandbox available|unavailable\n"
    "       [--listen HOST:PORT] [--metrics-listen HOST:PORT]\n"
    "       [--tls-cert FILE --tls-key FILE] [--ca-out FILE]\n"
    "       [--runtime-class NAME] [--namespace NS] [--service-name NAME] [--threads N]\n"
    "  --listen          HTTPS webhook address (default 0.0.0.0:8443)\n"
    "  --metrics-listen  plain-HTTP /healthz /readyz /metrics (default 0.0.0.0:8080)\n"
    "  --tls-cert/--tls-key  serving certificate files, reloaded when they change;\n"
    "                    without them a CA and a certificate for localhost are made\n"
    "  --ca-out FILE     write that CA (PEM) for clients to verify against\n"
    "  The deployment shape comes from GIBSON_UNTRUSTED_EXEC (default setec-only).\n";

int usage_error(const std::string& message) {
  std::cerr << "isolation-gate serve: " << message << "\n" << kUsage;
  return kExitBadInput;
}

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

void log_adapter(std::string_view level, std::string_view msg) { config::log(level, msg); }

std::string gauge(std::string_view name, std::string_view help, std::string_view type,
                  const std::string& labels, double value) {
  std::string out = "# HELP " + std::string(name) + " " + std::string(help) + "\n# TYPE " +
                    std::string(name) + " " + std::string(type) + "\n" + std::string(name);
  if (!labels.empty()) out += "{" + labels + "}";
  char buf[40];
  std::snprintf(buf, sizeof buf, " %.17g\n", value);
  return out + buf;
}

std::string transport_metrics(const server::TransportStats& s) {
  std::string out;
  out += gauge("isolation_gate_connections_accepted_total", "TCP connections accepted.", "counter", "", double(s.connections_accepted));
  out += gauge("isolation_gate_connections_active", "Open connections.", "gauge", "", double(s.connections_active));
  out += gauge("isolation_gate_connections_rejected_total", "Connections closed at once (over the limit).", "counter", "", double(s.connections_rejected));
  out += gauge("isolation_gate_tls_handshake_failures_total", "Failed TLS handshakes.", "counter", "", double(s.tls_handshake_failures));
  out += gauge("isolation_gate_http_requests_total", "Complete HTTP requests handled.", "counter", "", double(s.requests));
  out += gauge("isolation_gate_http_protocol_errors_total", "Malformed or oversized requests answered by the transport.", "counter", "", double(s.request_errors));
  out += gauge("isolation_gate_http_timeouts_total", "Connections closed on a timeout.", "counter", "", double(s.timeouts));
  return out;
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  const auto started = Clock::now();
  FlagSpec spec{{"components", "sandbox", "listen", "metrics-listen", "tls-cert", "tls-key",
                 "ca-out", "runtime-class", "namespace", "service-name", "threads"},
                {"local", "help"}};
  auto flags = parse_flags(args, spec);
  if (flags.has("help")) {
    std::cout << kUsage;
    return kExitAllowed;
  }
  if (!flags.error.empty()) return usage_error(flags.error);
  if (!flags.has("local")) {
    return usage_error(
        "cluster mode (watching RuntimeClasses, Nodes and Components) is not part of this "
        "build yet; run with --local");
  }
  const auto components_dir = flags.get("components");
  if (!components_dir) return usage_error("--local needs --components DIR");
  const std::string sandbox_flag = flags.get_or("sandbox", "unavailable");
  if (sandbox_flag != "available" && sandbox_flag != "unavailable") {
    return usage_error("--sandbox: expected available or unavailable, got \"" + sandbox_flag + "\"");
  }
  const auto listen = parse_host_port(flags.get_or("listen", "0.0.0.0:8443"));
  if (!listen) return usage_error("--listen: expected HOST:PORT");
  const auto metrics_listen = parse_host_port(flags.get_or("metrics-listen", "0.0.0.0:8080"));
  if (!metrics_listen) return usage_error("--metrics-listen: expected HOST:PORT");
  const auto tls_cert = flags.get("tls-cert");
  const auto tls_key = flags.get("tls-key");
  if (tls_cert.has_value() != tls_key.has_value()) return usage_error("--tls-cert and --tls-key go together");
  unsigned threads = 0;
  if (auto t = flags.get("threads")) {
    if (t->empty() || t->size() > 3 || t->find_first_not_of("0123456789") != std::string::npos) {
      return usage_error("--threads: expected a number");
    }
    threads = static_cast<unsigned>(std::stoul(*t));
  }

  const auto shape = config::read_shape_from_env();
  admission::GateSettings settings;
  settings.shape = shape.setting;
  settings.shape_raw = shape.raw;
  settings.runtime_class = flags.get_or("runtime-class", "kata-fc");
  settings.own_namespace = flags.get_or("namespace", "isolation-gate-system");
  const std::string service = flags.get_or("service-name", "isolation-gate");
  if (shape.setting.fell_back) {
    config::log_warn(config::describe_shape(shape));
  } else {
    config::log_info(config::describe_shape(shape));
  }

  auto catalog = admission::StaticCatalog::load_directory(*components_dir, "default");
  if (!catalog) {
    config::log_error("cannot load Components", {{"error", catalog.error()}});
    return kExitBadInput;
  }
  const admission::FixedSandbox sandbox(sandbox_flag == "available"
                                            ? policy::SandboxAvailability::Available
                                            : policy::SandboxAvailability::Unavailable);

  std::string error;
  std::unique_ptr<tls::ReloadingTlsContext> tls_context;
  if (tls_cert) {
    tls_context = tls::ReloadingTlsContext::from_files(*tls_cert, *tls_key, log_adapter, error);
    if (!tls_context) {
      config::log_error("cannot load the serving certificate", {{"error", error}});
      return kExitBadInput;
    }
    tls_context->start_watching();
  } else {
    const std::string ns = settings.own_namespace;
    auto chain = tls::make_serving_chain(
        {"localhost", service, service + "." + ns, service + "." + ns + ".svc",
         service + "." + ns + ".svc.cluster.local"},
        {"127.0.0.1", "::1"}, std::chrono::hours(24 * 365), error);
    if (!chain) {
      config::log_error("cannot make a serving certificate", {{"error", error}});
      return kExitFailure;
    }
    if (auto out = flags.get("ca-out")) {
      if (!tls::write_file_atomically(*out, chain->ca_cert_pem, 0644, error)) {
        config::log_error("cannot write --ca-out", {{"error", error}});
        return kExitFailure;
      }
    }
    tls_context = tls::ReloadingTlsContext::from_pem(chain->cert_pem, chain->key_pem, log_adapter, error);
    if (!tls_context) {
      config::log_error("cannot load the serving certificate", {{"error", error}});
      return kExitFailure;
    }
  }

  admission::Webhook webhook(settings, *catalog, sandbox);
  std::atomic<bool> ready{false};
  webhook.set_readiness([&ready] { return ready.load(std::memory_order_acquire); });

  auto to_webhook = [](server::Request&& r) {
    return admission::WebhookRequest{std::move(r.method), std::move(r.target),
                                     std::move(r.content_type), std::move(r.body)};
  };
  auto to_server = [](admission::WebhookResponse&& r) {
    server::Response out;
    out.status = r.status;
    out.content_type = std::move(r.content_type);
    out.body = std::move(r.body);
    return out;
  };
  // One server, two kinds of listener: the webhook routes only over TLS, the
  // probes and metrics over both.
  server::HttpServer https(
      [&](server::Request&& r) { return to_server(webhook.serve(to_webhook(std::move(r)))); },
      *tls_context, log_adapter);
  server::HttpServer probes(
      [&](server::Request&& r) { return to_server(webhook.serve_probes(to_webhook(std::move(r)))); },
      log_adapter);

  webhook.set_extra_metrics([&] {
    std::string out = transport_metrics(https.stats());
    out += gauge("isolation_gate_info", "Static facts about this process.", "gauge",
                 "mode=\"local\",shape=\"" + std::string(policy::to_string(settings.shape.shape)) +
                     "\",runtime_class=\"" + settings.runtime_class + "\"",
                 1);
    out += gauge("isolation_gate_sandbox_available", "1 when the setec sandbox is available.",
                 "gauge", "", sandbox.describe() == "available" ? 1 : 0);
    out += gauge("isolation_gate_components", "Components known to the catalog.", "gauge", "",
                 double(catalog->size()));
    out += gauge("isolation_gate_tls_reloads_total", "Serving certificate reloads.", "counter",
                 "", double(tls_context->reload_count()));
    out += gauge("isolation_gate_tls_certificate_expiry_seconds",
                 "Unix time at which the serving certificate expires.", "gauge", "",
                 double(std::chrono::duration_cast<std::chrono::seconds>(
                            tls_context->not_after().time_since_epoch())
                            .count()));
    return out;
  });

  server::ListenerOptions webhook_options;
  webhook_options.host = listen->host;
  webhook_options.port = listen->port;
  webhook_options.tls = true;
  auto webhook_endpoint = https.add_listener(webhook_options, error);
  if (!webhook_endpoint) {
    config::log_error("cannot listen", {{"address", flags.get_or("listen", "0.0.0.0:8443")}, {"error", error}});
    return kExitFailure;
  }
  server::ListenerOptions probe_options;
  probe_options.host = metrics_listen->host;
  probe_options.port = metrics_listen->port;
  probe_options.tls = false;
  probe_options.body_limit = 64 * 1024;
  auto probe_endpoint = probes.add_listener(probe_options, error);
  if (!probe_endpoint) {
    config::log_error("cannot listen", {{"address", flags.get_or("metrics-listen", "0.0.0.0:8080")}, {"error", error}});
    return kExitFailure;
  }

  // Signals are taken by this thread only: block them before threads start.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  https.start(threads);
  probes.start(1);
  ready.store(true, std::memory_order_release);
  const auto startup_ms =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count() / 1000.0;
  auto endpoint_text = [](const boost::asio::ip::tcp::endpoint& e) {
    const auto addr = e.address();
    return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" + std::to_string(e.port());
  };
  config::log_info("serving",
                   {{"webhook", endpoint_text(*webhook_endpoint)},
                    {"metrics", endpoint_text(*probe_endpoint)},
                    {"mode", "local"},
                    {"sandbox", sandbox.describe()},
                    {"components", std::to_string(catalog->size())},
                    {"runtime_class", settings.runtime_class},
                    {"startup_ms", std::to_string(startup_ms)}});

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  config::log_info("stopping", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"}});
  ready.store(false, std::memory_order_release);
  https.stop(std::chrono::seconds(10));
  probes.stop(std::chrono::seconds(1));
  https.wait();
  probes.wait();
  config::log_info("stopped");
  return kExitAllowed;
}

}  // namespace ig::cli
