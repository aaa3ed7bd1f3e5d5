// Kubeconfig exec credential plugins (client.authentication.k8s.io v1 and
// v1beta1), run as client-go's plugin/pkg/client/auth/exec runs them
// (docs/operations.md, "Kubeconfig exec plugins").
//
// Contract:
//  - A run: the command (posix_spawnp: a bare name on $PATH) with its args,
//    this process's environment with exec.env over it, and
//    KUBERNETES_EXEC_INFO (`interactive`; `cluster` only with
//    provideClusterInfo). An interactive run (Always, or IfAvailable with a
//    terminal on standard input; Always without one is refused) shares our
//    standard input, standard error and process group; any other gets
//    /dev/null, has its standard error captured (the last 2 KiB quoted in an
//    error) and a process group of its own. No other descriptor is inherited.
//  - Bounded: a run past ExecConfig::timeout is killed (SIGKILL to its
//    process group; to the process alone when interactive) and is an error.
//    At most 1 MiB of standard output is read.
//  - The answer must be an ExecCredential of the configured apiVersion with
//    a token and/or clientCertificateData with clientKeyData (a pair that
//    loads); its expirationTimestamp ends its use.
//  - Errors name the plugin and its kubeconfig user: not found (with
//    installHint), exit code or signal, timed out, a bad ExecCredential.
//  - ExecCredentialSource is thread-safe, one run at a time (callers wait for
//    it). Its answer is used until it expires (none: until a 401); renew()
//    after a 401 runs the plugin again unless the credentials were already
//    replaced. A failed run is not cached.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/config.h"

namespace ig::kube {

inline constexpr std::string_view kExecApiV1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view kExecApiV1beta1 = "client.authentication.k8s.io/v1beta1";

// KUBERNETES_EXEC_INFO's value (one line of JSON). `server` and `ca_pem` go
// into spec.cluster only with provide_cluster_info.
std::string exec_info_json(const ExecConfig& config, bool interactive, std::string_view server,
                           std::string_view ca_pem);

// The plugin's standard output as credentials, checked as client-go does.
Result<Credentials> parse_exec_credential(std::string_view output, std::string_view api_version);


// Whether the run is interactive, or why it cannot run (interactiveMode
// Always without a terminal).
Result<bool> exec_interactive(const ExecConfig& config, bool stdin_is_terminal);

// One run of the plugin: its credentials or why not.
Result<Credentials> run_exec_plugin(const ExecConfig& config, std::string_view server, std::string_view ca_pem,
                                    bool stdin_is_terminal);

class ExecCredentialSource {
 public:
  ExecCredentialSource(ExecConfig config, std::string server, std::string ca_pem, ExecHooks hooks = {});

  // The cached credentials while unexpired, else a new run's.
  Result<std::shared_ptr<const Credentials>> get();

  // After a 401 to a request sent with `used`: a new run unless the cached
  // credentials are no longer `used` (another caller renewed them).
  Result<std::shared_ptr<const Credentials>> renew(const std::shared_ptr<const Credentials>& used);

  // Runs so far (tests).
  std::size_t runs() const;

 private:
  bool expired_locked() const;
  Result<std::shared_ptr<const Credentials>> run_locked();

  const ExecConfig config_;
  const std::string server_, ca_pem_;
  ExecHooks hooks_;
  mutable std::mutex mu_;  // guards the cache and running the plugin
  std::shared_ptr<const Credentials> cached_;
  std::size_t runs_ = 0;
};

}  // namespace ig::kube
