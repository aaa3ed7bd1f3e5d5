// Local mode: Components from files, the sandbox from --sandbox.
#include "admission/catalog.h"
#include "cli/commands.h"
#include "cli/serve.h"
#include "cli/serve_process.h"
#include "config/log.h"

namespace ig::cli {

int serve_local(const ServeOptions& o, SteadyClock::time_point started) {
  block_stop_signals();
  const admission::GateSettings settings = gate_settings(o.gate, read_shape());
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
  ModeFacts facts;
  facts.mode = "local";
  facts.component_count = [&catalog] { return catalog->size(); };
  runtime::Manager manager;  // nothing runs: its probes and metrics
  manager.probes().metrics().add([&sandbox](prometheus::TextWriter& out) {
    runtime::write_single(out, "isolation_gate_sandbox_available", prometheus::Type::Gauge,
                          "1 when the setec sandbox is available.",
                          std::uint64_t{policy::is_available(sandbox.availability()) ? 1u : 0u});
  });
  return serve_webhook(o, context, facts, manager, serving, started);
}

}  // namespace ig::cli
