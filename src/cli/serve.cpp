#include "cli/serve.h"

#include <atomic>

#include "cli/commands.h"
#include "cli/serve_process.h"
#include "config/defaults.h"
#include "config/log.h"
#include "server/https_server.h"
#include "tls/certificates.h"

namespace ig::cli {
namespace {

// Descriptors beyond the webhook's connections (probes, API clients, files).
constexpr std::size_t probe_headroom = 256;

std::string endpoint_text(const boost::asio::ip::tcp::endpoint& e) {
  const auto addr = e.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" + std::to_string(e.port());
}

// One line per guarded change: info when it tightens, else a warning.
void log_guarded_change(const admission::GuardedChangeNotice& n) {
  using admission::Reason;
  const admission::GuardedChange& c = n.change;
  const std::string reason(admission::to_string(n.reason));
  const bool component = c.kind == "Component";
  const std::string what = component ? "component content trust" : "namespace enforcement";
  const std::string object = component ? c.namespace_ + "/" + c.name : c.name;
  if (n.reason == Reason::EnforcementAdded || n.reason == Reason::ContentTrustTightened) {
    config::log_info(what + (component ? " tightened" : " switched on"),
                     {{component ? "component" : "namespace", object},
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

void write_process_metrics(prometheus::TextWriter& out, const server::TransportCounters& webhook,
                           const server::TransportCounters& probes, const admission::AdmissionContext& context,
                           const ModeFacts& facts, const tls::ReloadingTlsContext& serving) {
  using prometheus::Type;
  server::write_transport_metrics(out, {{"webhook", webhook.snapshot()}, {"probes", probes.snapshot()}});
  out.family("isolation_gate_info", Type::Gauge, "Static facts about this process.");
  out.sample("isolation_gate_info",
             {{"mode", facts.mode},
              {"shape", policy::to_string(context.settings.shape.shape)},
              {"runtime_class", context.settings.runtime_class}},
             std::uint64_t{1});
  runtime::write_single(out, "isolation_gate_components", Type::Gauge, "Components known to the catalog.",
                        std::uint64_t{facts.component_count()});
  runtime::write_single(out, "isolation_gate_tls_reloads_total", Type::Counter, "Serving certificate reloads.",
                        serving.reload_count());
  const auto expiry = std::chrono::duration_cast<std::chrono::seconds>(serving.not_after().time_since_epoch());
  runtime::write_single(out, "isolation_gate_tls_certificate_expiry_seconds", Type::Gauge,
                        "Unix time at which the serving certificate expires.", static_cast<double>(expiry.count()));
}

}  // namespace

void log_adapter(std::string_view level, std::string_view msg) { config::log(level, msg); }

config::ShapeFromEnv read_shape() {
  auto shape = config::read_shape_from_env();
  config::log(shape.setting.fell_back ? "warn" : "info", config::describe_shape(shape));
  return shape;
}

std::variant<std::unique_ptr<tls::ReloadingTlsContext>, int> serving_tls(const ServeOptions& o) {
  std::optional<tls::CertificateBundle> made;  // without --tls-cert
  if (o.tls_cert.empty()) {
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
    made = std::move(*chain);
  }
  auto loaded = made ? tls::ReloadingTlsContext::from_pem(made->cert_pem, made->key_pem, log_adapter, o.client_ca)
                     : tls::ReloadingTlsContext::from_files(o.tls_cert, o.tls_key, log_adapter, o.client_ca);
  if (!loaded) {
    config::log_error("cannot load the serving certificate", {{"error", loaded.error()}});
    return made && o.client_ca.empty() ? kExitFailure : kExitBadInput;
  }
  (*loaded)->start_watching();  // the files, or the client CA file if any
  return std::move(*loaded);
}

// Builds the Webhook, the manager's checks and collectors, then the two
// servers (their handlers call them): nothing is set after construction.
int serve_webhook(const ServeOptions& o, const admission::AdmissionContext& context, const ModeFacts& facts,
                  runtime::Manager& manager, tls::ReloadingTlsContext& serving, SteadyClock::time_point started) {
  const sigset_t signals = block_stop_signals();
  auto webhook_counters = std::make_shared<server::TransportCounters>();
  auto probe_counters = std::make_shared<server::TransportCounters>();
  std::atomic<bool> ready{false};

  admission::WebhookOptions options;
  options.on_denial = facts.on_denial;
  options.on_guarded_change = [&facts](const admission::GuardedChangeNotice& n) {
    log_guarded_change(n);
    if (facts.on_guarded_change) facts.on_guarded_change(n);
  };
  admission::Webhook webhook(context, std::move(options));
  runtime::Probes& probe = manager.probes();
  probe.add_readyz_check("serving", [&ready] { return ready.load(std::memory_order_acquire); });
  probe.metrics().add([&webhook](prometheus::TextWriter& out) { webhook.metrics().write(out); });
  probe.metrics().add([&](prometheus::TextWriter& out) {
    write_process_metrics(out, *webhook_counters, *probe_counters, context, facts, serving);
  });

  // The webhook routes only over TLS; probes and metrics over both.
  server::HttpServer https(
      [&webhook, &probe](http::Request&& r) {
        if (auto answer = probe.serve(r)) return std::move(*answer);
        return webhook.serve(std::move(r));
      },
      serving, log_adapter, webhook_counters);
  server::HttpServer probes([&probe](http::Request&& r) { return probe.serve_only(r); }, log_adapter,
                            probe_counters);

  raise_open_files_limit(o.max_connections + probe_headroom);
  auto webhook_endpoint = https.add_listener({.host = o.listen.host,
                                              .port = o.listen.port,
                                              .handshake_timeout = o.tls_handshake_timeout,
                                              .max_connections = o.max_connections,
                                              .max_connections_per_source = o.max_connections_per_source});
  if (!webhook_endpoint) {
    config::log_error("cannot listen", {{"address", o.listen_text}, {"error", webhook_endpoint.error()}});
    return kExitFailure;
  }
  auto probe_endpoint = probes.add_listener(
      {.host = o.metrics_listen.host, .port = o.metrics_listen.port, .tls = false, .body_limit = 64 * 1024});
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

  const int signal_number = wait_for_stop(signals);
  config::log_info("stopping", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"},
                                {"drain_delay_ms", std::to_string(o.drain_delay.count())}});
  // Every response now carries Connection: close (clients reconnect to a
  // replica still in the endpoints), before /readyz fails.
  https.begin_drain();
  ready.store(false, std::memory_order_release);
  if (facts.on_stopping) facts.on_stopping();
  // Keep answering while the replica leaves the endpoints.
  wait_drain_delay(signals, o.drain_delay);
  config::log_info("draining: closing idle connections, finishing requests in flight",
                   {{"grace_ms", "10000"}});
  https.stop(std::chrono::seconds(10));
  probes.stop(std::chrono::seconds(1));
  https.wait();
  probes.wait();
  config::log_info("stopped");
  return kExitAllowed;
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
