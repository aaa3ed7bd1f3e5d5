// `isolation-gate serve`'s two modes: each builds its Component lookup,
// sandbox view and metrics and hands them to serve_webhook(), which serves
// until SIGTERM/SIGINT. Every mode calls block_stop_signals() before it
// starts a thread; each returns the process's exit code.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>
#include <variant>

#include "admission/context.h"
#include "admission/webhook.h"
#include "base/prometheus.h"
#include "cli/serve_options.h"
#include "config/environment.h"
#include "runtime/manager.h"
#include "tls/server_context.h"

namespace ig::cli {

using SteadyClock = std::chrono::steady_clock;

// What a mode gives serve_webhook() besides the admission context and the
// manager (to whose probes it added its checks and collectors first).
struct ModeFacts {
  std::string_view mode;  // the `mode` label and log field
  std::function<std::size_t()> component_count;
  std::function<void(const admission::DenialNotice&)> on_denial;  // empty: none (Events)
  // After the log line serve_webhook writes for every guarded change; empty: none (Events).
  std::function<void(const admission::GuardedChangeNotice&)> on_guarded_change;
  std::function<void()> on_stopping;  // at SIGTERM/SIGINT, before the listeners drain
  std::function<void()> on_serving;   // once both listeners accept
};

void log_adapter(std::string_view level, std::string_view msg);
// GIBSON_UNTRUSTED_EXEC's shape, logged (a warning when it fell back).
config::ShapeFromEnv read_shape();

// The --tls-cert/--tls-key files (watched), or a fresh chain for localhost
// and the Service (its CA written to --ca-out); on failure, logged: the exit code.
std::variant<std::unique_ptr<tls::ReloadingTlsContext>, int> serving_tls(const ServeOptions& o);

int serve_webhook(const ServeOptions& o, const admission::AdmissionContext& context, const ModeFacts& facts,
                  runtime::Manager& manager, tls::ReloadingTlsContext& serving, SteadyClock::time_point started);

int serve_local(const ServeOptions& o, SteadyClock::time_point started);
int serve_cluster(ServeOptions o, SteadyClock::time_point started);

}  // namespace ig::cli
