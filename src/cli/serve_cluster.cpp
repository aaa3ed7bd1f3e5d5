// Cluster mode: build the pieces, add them to the manager, run. Every replica
// serves from the caches; the leader runs the writing loops.
#include <atomic>
#include <cstdlib>

#ifndef IG_VERSION
#error "IG_VERSION must be defined by the build (CMake's project version)"
#endif

#include "cli/commands.h"
#include "cli/serve.h"
#include "cli/serve_process.h"
#include "config/log.h"
#include "controller/certificates.h"
#include "controller/cluster.h"
#include "controller/operator.h"
#include "kube/config.h"
#include "controller/event_writer.h"
#include "kube/event_recorder.h"
#include "kube/http_client.h"
#include "kube/leader_election.h"
#include "runtime/manager.h"
#include "runtime/service.h"

namespace ig::cli {

int serve_cluster(ServeOptions o, SteadyClock::time_point started) {
  block_stop_signals();
  const auto shape = read_shape();
  auto cluster_config = kube::load_cluster_config(o.kubeconfig, o.context, kube::process_env());
  if (!cluster_config) {
    config::log_error("cannot configure the Kubernetes API client", {{"error", cluster_config.error()}});
    return kExitBadInput;
  }
  if (!o.namespace_given && !cluster_config->namespace_name.empty()) {
    o.gate.own_namespace = cluster_config->namespace_name;
  }
  // Three clients, three rate limits, one credential source: the caches and
  // the writing loops (status, Events, evictions) never starve admission's
  // live GETs, nor the Lease renewals and the certificate loop.
  auto tokens = std::make_shared<kube::TokenSource>(*cluster_config);
  auto make_client = [&](double qps, int burst, std::chrono::milliseconds request_timeout) {
    return kube::HttpClient::make(*cluster_config, IG_VERSION,
                                  {.qps = qps, .burst = burst, .request_timeout = request_timeout, .tokens = tokens});
  };
  auto client = make_client(o.kube_api_qps, o.kube_api_burst, o.kube_request_timeout);
  auto lookup = make_client(o.kube_lookup_qps, o.kube_lookup_burst, kube::HttpClientOptions{}.request_timeout);
  auto control = make_client(kube::RateLimiter::kDefaultQps, kube::RateLimiter::kDefaultBurst, o.renew_deadline);
  if (!client || !control || !lookup) {
    config::log_error("cannot make the Kubernetes API client",
                      {{"error", !client ? client.error() : !control ? control.error() : lookup.error()}});
    return kExitBadInput;
  }
  const admission::GateSettings settings = gate_settings(o.gate, shape);
  const char* pod_name = std::getenv("POD_NAME");
  const std::string identity = kube::make_holder_identity(pod_name ? pod_name : "");

  controller::Cluster cluster(**client,
                              {.runtime_class = settings.runtime_class,
                               .shape = settings.shape.shape,
                               .lookup_timeout = o.kube_lookup_timeout,
                               .page_size = o.kube_list_page_size,
                               .watch_silence = o.kube_watch_silence,
                               .sandbox_stale_after = o.sandbox_stale_after,
                               .log = log_adapter},
                              lookup->get());
  controller::EventWriter events(
      **client, {.reporting_controller = "isolation-gate", .reporting_instance = identity, .log = log_adapter});
  controller::OperatorOptions operator_options;
  operator_options.drift.evict = o.evict_drifted;
  operator_options.drift.evict_per_minute = o.evict_rate;
  operator_options.drift.evict_settle = o.drift_eviction_settle;
  operator_options.drift.gate = settings;
  operator_options.status.workers = o.status_workers;
  operator_options.log = log_adapter;
  controller::Operator op(**client, cluster, &events, std::move(operator_options));

  // Self-managed: a throwaway certificate until the Secret's is loaded.
  auto tls_or_exit = serving_tls(o);
  if (auto* exit_code = std::get_if<int>(&tls_or_exit)) return *exit_code;
  auto& serving = *std::get<std::unique_ptr<tls::ReloadingTlsContext>>(tls_or_exit);
  std::unique_ptr<controller::SelfManagedCertificates> certs;
  // Set once the listeners accept, never unset.
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

  // The manager runs every piece (declared after them: stopped before they go).
  runtime::ManagerOptions manager_options;
  manager_options.log = log_adapter;
  runtime::Manager manager(std::move(manager_options));
  manager.add(std::make_shared<runtime::Service>("caches", [&cluster] { cluster.start(); },
                                                 [&cluster] { cluster.stop(); }),
              /*needs_leader=*/false);
  manager.add(events.runnable(), /*needs_leader=*/false);
  op.add_to(manager);
  if (certs) certs->add_to(manager);
  runtime::Probes& probes = manager.probes();
  probes.add_readyz_check("caches", [&cluster] { return cluster.synced(); });
  if (certs) probes.add_readyz_check("certificate", [&certs] { return certs->loaded(); });

  kube::LeaderElectionConfig election{.namespace_name = settings.own_namespace,
                                      .lease_name = o.lease_name,
                                      .identity = identity,
                                      .lease_duration = o.lease_duration,
                                      .renew_deadline = o.renew_deadline,
                                      .retry_period = o.retry_period,
                                      .log = log_adapter};
  kube::LeaderCallbacks callbacks = manager.leader_callbacks();
  callbacks.on_new_leader = [](std::string_view holder) {
    config::log_info("the Lease has a new holder", {{"holder", std::string(holder)}});
  };
  auto elector = kube::LeaderElector::make(**control, election, std::move(callbacks));
  if (!elector) {
    config::log_error("cannot run leader election", {{"error", elector.error()}});
    return kExitBadInput;
  }

  auto& metrics = probes.metrics();
  metrics.add([&](prometheus::TextWriter& out) { cluster.write_metrics(out, op.caches()); });
  metrics.add([&op](prometheus::TextWriter& out) { op.write_metrics(out); });
  metrics.add([&elector](prometheus::TextWriter& out) { (*elector)->write_metrics(out); });
  metrics.add([&events](prometheus::TextWriter& out) { events.write_metrics(out); });
  if (certs) metrics.add([&certs](prometheus::TextWriter& out) { certs->write_metrics(out); });

  config::log_info("watching the Kubernetes API",
                   {{"server", cluster_config->server},
                    {"namespace", settings.own_namespace},
                    {"runtime_class", settings.runtime_class},
                    {"identity", identity},
                    {"cert_mode", o.cert_mode == ServeOptions::CertMode::SelfManaged ? "self-managed" : "files"}});
  if (auto started_runnables = manager.start(); !started_runnables) {
    config::log_error("cannot start", {{"error", started_runnables.error()}});
    return kExitFailure;
  }
  (*elector)->start();
  const admission::AdmissionContext context{settings, cluster.components(), cluster.admission_sandbox()};
  ModeFacts facts;
  facts.mode = "cluster";
  facts.component_count = [&cluster] { return cluster.component_count(); };
  facts.on_denial = [&op](const admission::DenialNotice& d) { op.record_denial(d); };
  facts.on_guarded_change = [&op](const admission::GuardedChangeNotice& n) { op.record_guarded_change(n); };
  // SIGTERM: release the Lease first, so a successor takes over while this replica drains.
  facts.on_stopping = [&elector] { (*elector)->stop(); };
  facts.on_serving = [&serving_started] { serving_started.store(true, std::memory_order_release); };
  const int code = serve_webhook(o, context, facts, manager, serving, started);
  (*elector)->stop();
  events.stop();  // a last flush while the writer still runs
  manager.stop();
  return code;
}

}  // namespace ig::cli
