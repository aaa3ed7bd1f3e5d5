#include "cli/serve_options.h"

#include <iostream>
#include <ranges>
#include <string_view>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/environment.h"

namespace ig::cli {
namespace {

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

int usage_error(const std::string& message) {
  std::cerr << "isolation-gate serve: " << message << " (see isolation-gate serve --help)\n";
  return kExitBadInput;
}

// A number option within [lo, hi] (the help text states the range).
template <typename T, typename Bound>
void add_number(CLI::App& app, const std::string& name, T& target, Bound lo, Bound hi, const char* type,
                const std::string& help) {
  app.add_option(name, target, help)->check(CLI::Range(lo, hi).description(""))->type_name(type);
}

// A text option, shown as `type` in --help.
CLI::Option* add_text(CLI::App& app, const std::string& name, std::string& target, const char* type,
                      const std::string& help) {
  return app.add_option(name, target, help)->type_name(type);
}

std::string show_groups(const std::vector<std::string>& groups) {
  if (groups.empty()) return "(none)";
  std::string out;
  for (const auto& g : groups) out += (out.empty() ? "" : ",") + g;
  return out;
}


}  // namespace

std::optional<int> parse_serve_options(const std::vector<std::string>& args, ServeOptions& o) {
  auto app = make_app("serve", "Runs the admission webhook (HTTPS) and its probe/metrics listener (HTTP).");
  std::string enforcement_admins, trust_admins;  // split into o.gate after parsing
  app->add_flag("--local", o.local,
                "serve without a cluster: Components from --components,\nthe sandbox from --sandbox");
  add_text(*app, "--components", o.components_dir, "DIR",
           "--local: every Component in the *.yaml, *.yml and *.json\nfiles under DIR");
  add_gate_options(*app, o.gate);
  add_text(*app, "--listen", o.listen_text, "HOST:PORT", "HTTPS webhook address")->check(kHostPort);
  add_text(*app, "--metrics-listen", o.metrics_listen_text, "HOST:PORT", "plain-HTTP /healthz /readyz /metrics address")
      ->check(kHostPort);
  add_text(*app, "--tls-cert", o.tls_cert, "FILE",
           "serving certificate (PEM, chain leaf first), reloaded when it\n"
           "changes; without --tls-cert/--tls-key a CA and a certificate\n"
           "for localhost and the Service's names are made");
  add_text(*app, "--tls-key", o.tls_key, "FILE", "the certificate's private key (PEM)");
  add_text(*app, "--ca-out", o.ca_out, "FILE", "write the CA made without --tls-cert (PEM) for clients");
  add_text(*app, "--service-name", o.service, "NAME", "the webhook's Service (names in the made certificate)");
  add_number(*app, "--threads", o.threads, 0u, 999u, "N", "I/O threads of the webhook listener (0: one per core)");
  add_duration_option(*app, "--drain-delay", o.drain_delay,
                      "at SIGTERM: /readyz fails at once, the listeners keep serving\n"
                      "this long (endpoints are removed meanwhile), then requests in\n"
                      "flight drain (10s at most); 0s..60s");
  add_text(*app, "--enforcement-admins", enforcement_admins, "GROUP,...",
           "groups whose members may remove or change a namespace's\n"
           "gibson.zeroroot.ai/isolation=enforced label (comma-separated;\n"
           "the /validate/namespaces webhook refuses everyone else)");
  add_text(*app, "--trust-admins", trust_admins, "GROUP,...",
           "groups whose members may loosen a Component's content trust\n"
           "(untrusted to trusted, omitted, null or empty; comma-separated;\n"
           "default: the enforcement admins)");
  add_duration_option(*app, "--tls-handshake-timeout", o.tls_handshake_timeout,
                      "webhook listener: a connection must finish its TLS handshake\n"
                      "this soon after it is accepted, or it is closed; 100ms..60s");
  add_number(*app, "--max-connections", o.max_connections, std::size_t{1}, std::size_t{1'000'000}, "N",
             "webhook listener: open connections at most; more are closed at once");
  add_number(*app, "--max-connections-per-source", o.max_connections_per_source, std::size_t{1},
             std::size_t{1'000'000}, "N",
             "webhook listener: open connections from one source address at\n"
             "most (the API server is few addresses: keep it high)");
  add_text(*app, "--client-ca", o.client_ca, "FILE",
           "require a client certificate signed by a CA in FILE (PEM) on the\n"
           "webhook listener (the API server's, see docs/operations.md);\n"
           "reloaded when it changes");
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
  add_text(*app, "--kubeconfig", o.kubeconfig, "FILE",
           "cluster mode: a kubeconfig file (else $KUBECONFIG, else the\n"
           "in-cluster service account)");
  add_text(*app, "--context", o.context, "NAME", "cluster mode: the kubeconfig context (else its current one)");
  add_text(*app, "--webhook-config-name", o.webhook_config_name, "NAME",
           "cluster mode: the Mutating/ValidatingWebhookConfigurations\n"
           "whose caBundle self-managed certificates keep");
  add_text(*app, "--tls-secret", o.tls_secret, "NAME",
           "cluster mode: the Secret (in --namespace) holding self-managed\ncertificates");
  add_text(*app, "--webhook-template-configmap", o.webhook_template_configmap, "NAME",
           "cluster mode, self-managed: a ConfigMap (in --namespace) whose keys\n"
           "mutating.yaml and validating.yaml hold the two webhook\n"
           "configurations; the leader creates and updates them from it,\n"
           "caBundle filled, once a replica is ready to answer");
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
  add_text(*app, "--lease-name", o.lease_name, "NAME",
           "cluster mode: the coordination.k8s.io Lease (in --namespace) of\nleader election");
  add_duration_option(*app, "--lease-duration", o.lease_duration,
                      "leader election: how long a Lease holds without renewal");
  add_duration_option(*app, "--renew-deadline", o.renew_deadline,
                      "leader election: a leader that cannot renew for this long stops\nits loops");
  add_duration_option(*app, "--retry-period", o.retry_period, "leader election: how often to try");
  app->add_flag("--evict-drifted", o.evict_drifted,
                "cluster mode: evict pods whose placement is less safe than the\n"
                "gate decides now (through the Eviction API: PDBs hold)");
  add_number(*app, "--evict-rate", o.evict_rate, 0.1, 10000.0, "N", "--evict-drifted: evictions per minute at most");
  add_duration_option(*app, "--drift-eviction-settle", o.drift_eviction_settle,
                      "--evict-drifted: a pod is evicted only once it has stayed drifted\n"
                      "this long (a passing state evicts nothing; 0s: at once)");
  add_number(*app, "--kube-api-qps", o.kube_api_qps, 0.0, 10000.0, "QPS",
             "cluster mode: Kubernetes API requests per second");
  add_number(*app, "--kube-api-burst", o.kube_api_burst, 1, 10000, "N", "cluster mode: Kubernetes API request burst");
  add_number(*app, "--kube-lookup-qps", o.kube_lookup_qps, 0.0, 10000.0, "QPS",
             "cluster mode: live GETs per second of Components that admission\n"
             "misses in the cache (a rate limit of their own: status writes,\n"
             "Events and watches never delay them; concurrent misses of one\n"
             "Component share one GET)");
  add_number(*app, "--kube-lookup-burst", o.kube_lookup_burst, 1, 10000, "N", "cluster mode: burst of those live GETs");
  add_duration_option(*app, "--kube-lookup-timeout", o.kube_lookup_timeout,
                      "cluster mode: the longest a review waits for that live GET (then\n"
                      "it is denied as a lookup error); keep it well inside the webhooks'\n"
                      "timeoutSeconds; 100ms..29s");
  add_number(*app, "--status-workers", o.status_workers, 1, 64, "N",
             "cluster mode, leader: Component status writes in flight at once\n"
             "(all under the --kube-api-qps limit; more help only when the API\n"
             "server's round trip, not the limit, bounds the rate)");
  add_number(*app, "--kube-list-page-size", o.kube_list_page_size, 1, 100000, "N",
             "cluster mode: objects per LIST page of the Component, RuntimeClass\n"
             "and Node caches (each page is one rate-limited request; larger\n"
             "pages make the initial list fit the burst, at the cost of a larger\n"
             "transient response buffer; client-go uses 500)");
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
  // An empty value names nobody (not the default, not the group "").
  auto groups = [](std::string_view text) {
    std::vector<std::string> out;
    for (const auto group : std::views::split(text, ','))
      if (!group.empty()) out.emplace_back(group.begin(), group.end());
    return out;
  };
  if (app->get_option("--enforcement-admins")->count() > 0) o.gate.enforcement_admins = groups(enforcement_admins);
  o.gate.trust_admins =
      app->get_option("--trust-admins")->count() > 0 ? groups(trust_admins) : o.gate.enforcement_admins;

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
  if (o.kube_lookup_timeout < std::chrono::milliseconds(100) || o.kube_lookup_timeout > std::chrono::seconds(29))
    return usage_error("--kube-lookup-timeout must be between 100ms and 29s");
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

}  // namespace ig::cli
