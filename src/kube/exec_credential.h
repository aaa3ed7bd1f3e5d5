// Kubeconfig exec credential plugins (client.authentication.k8s.io v1 and
// v1beta1), as client-go's plugin/pkg/client/auth/exec runs them: EKS's
// `aws eks get-token`, GKE's `gke-gcloud-auth-plugin`, AKS's `kubelogin`,
// OIDC helpers.
//
// Contract:
//  - A run: the command (posix_spawnp: a bare name is looked up on this
//    process's $PATH) with its args; the environment is this process's, then
//    exec.env over it, then KUBERNETES_EXEC_INFO: an ExecCredential of the
//    configured apiVersion whose spec holds `interactive` and, only with
//    provideClusterInfo, `cluster` (server, certificate-authority-data).
//  - interactiveMode: Never: not interactive; IfAvailable: interactive when
//    standard input is a terminal; Always: refused (no run) unless standard
//    input is a terminal. An interactive run gets our standard input and
//    standard error and stays in our process group (it may prompt on the
//    terminal); otherwise its standard input is /dev/null, its standard error
//    is captured (the last 2 KiB are quoted in an error) and it runs in a
//    process group of its own. No other descriptor of ours is inherited.
//  - Bounded: a run that has not exited within ExecConfig::timeout is killed
//    (SIGKILL to its process group; to the process alone when interactive)
//    and is an error. At most 1 MiB of standard output is read.
//  - The answer must be an ExecCredential of the configured apiVersion with a
//    status holding a token and/or clientCertificateData with clientKeyData
//    (both or neither; the pair must load); expirationTimestamp (RFC 3339),
//    when given, ends the credentials' use.
//  - Errors are values naming the plugin and its kubeconfig user: not found
//    (with installHint), exit code or signal (with the end of its standard
//    error), timed out, output that is not a valid ExecCredential.
//  - ExecCredentialSource is thread-safe; one run at a time: callers that
//    need credentials while a run is under way wait for its result. The
//    answer is used until its expirationTimestamp (none: until a 401), as
//    client-go does; after a 401, renew() runs the plugin again unless the
//    credentials were already replaced. A failed run is an error to its
//    callers and is not cached: the next call runs the plugin again.
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
