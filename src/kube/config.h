// Where the Kubernetes API is and how to authenticate to it: in-cluster (the
// service account) or a kubeconfig file, with a fixed token, a rotating token
// file, a client certificate or an exec credential plugin.
//
// Contract:
//  - Everything is loaded and checked at start (an exec plugin runs at the
//    first request); nothing throws; a failure is one line naming the source
//    and field.
//  - Anything the client would not honour is a start-up error, never a silent
//    anonymous or unverified client (auth-provider, basic auth,
//    impersonation, proxy-url, tls-server-name, insecure-skip-tls-verify,
//    exec beside other credentials, duplicate keys or names). The cluster CA
//    is required; the server is an https:// URL without a trailing '/'.
//  - Relative paths are relative to the kubeconfig's directory; a `-data`
//    field wins over its file field, tokenFile over token (client-go's rules).
//  - TokenSource is thread-safe. A token file is re-read when it changes
//    (checked at most once a second, at once after a 401), keeping the last
//    good token on a failed read. An exec plugin runs once at a time (callers
//    wait); its answer is kept until it expires or a 401, a failure never.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ig::kube {

// users[].user.exec of a kubeconfig (client-go's clientcmdapi.ExecConfig).
struct ExecConfig {
  enum class Interactive { Never, IfAvailable, Always };
  std::string command;            // a path (relative ones resolved at load) or a name looked up on $PATH
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to (over) this process's environment
  std::string api_version;        // client.authentication.k8s.io/v1 or .../v1beta1
  std::string install_hint;       // shown when the command is not found
  bool provide_cluster_info = false;  // KUBERNETES_EXEC_INFO's spec.cluster
  Interactive interactive = Interactive::IfAvailable;
  std::chrono::milliseconds timeout{60000};  // one run, then killed ($ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT)
  std::string where;              // for messages: "kubeconfig PATH: user \"NAME\""
};

struct ClusterConfig {
  std::string server;           // "https://10.0.0.1:443", no trailing '/'
  std::string ca_pem;           // the cluster CA bundle, PEM (required)
  std::string bearer_token;     // a static token ("" when none or when token_file is set)
  std::string token_file;       // a token file re-read as it rotates ("" when none)
  std::string client_cert_pem;  // client certificate (chain), PEM ("" when none)
  std::string client_key_pem;   // its key, PEM ("" when none)
  std::optional<ExecConfig> exec;  // a credential plugin (then no token, token_file or client pair)
  std::string namespace_name;   // the service account's / context's namespace ("" unknown)
  std::string source;           // where this came from, for logs: "in-cluster", "kubeconfig PATH, context NAME"
};

// The process environment configuration reads, and the service account's paths.
struct InClusterEnv {
  std::string service_host;  // $KUBERNETES_SERVICE_HOST
  std::string service_port;  // $KUBERNETES_SERVICE_PORT
  std::string kubeconfig;    // $KUBECONFIG (load_cluster_config only)
  std::string exec_timeout;  // $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT (load_cluster_config only)
  std::string token_path = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_path = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

InClusterEnv process_env();

// The service account: https://HOST:PORT, ca.crt, the token file and the
// namespace file ("" when absent).
Result<ClusterConfig> in_cluster_config(const InClusterEnv& env);

// A kubeconfig file: `context`, or its current-context when empty.
Result<ClusterConfig> kubeconfig_config(const std::string& path, std::string_view context = {});

// --kubeconfig, else the first path of $KUBECONFIG (not merged), else
// in-cluster; a --context without a kubeconfig is an error.
Result<ClusterConfig> load_cluster_config(const std::string& kubeconfig_flag,
                                          std::string_view context_flag, const InClusterEnv& env);

// What a request authenticates with; a new value whenever it changed.
struct Credentials {
  std::string token;            // "" when none
  std::string client_cert_pem;  // "" when none
  std::string client_key_pem;
  std::optional<std::chrono::system_clock::time_point> expires;  // as an exec plugin said (wall clock)
};

class TokenSource {
 public:
  // `clock`: the token file's recheck interval and the plugin's expiry. A
  // plugin may be interactive when standard input is a terminal.
  explicit TokenSource(const ClusterConfig& config, std::shared_ptr<Clock> clock = Clock::steady());

  // The credentials to send now (may run the exec plugin: callers wait).
  Result<std::shared_ptr<const Credentials>> credentials();

  // After a 401 to a request sent with `used`: the file re-read, or the
  // plugin run again, unless another caller already renewed `used`. The
  // renewed credentials, or nullptr when they are the same as `used`.
  Result<std::shared_ptr<const Credentials>> renew_after_unauthorized(const std::shared_ptr<const Credentials>& used);

 private:
  // The token file's device, inode, size and mtime (ns).
  using FileStamp = std::tuple<unsigned long long, unsigned long long, long long, long long>;
  Result<void> reread_locked(bool force);
  Result<void> run_plugin_locked();
  bool expired_locked() const;
  void publish_locked(std::string token);

  ClusterConfig config_;  // token_file: "" with an exec plugin
  std::shared_ptr<Clock> clock_;
  std::mutex mu_;  // guards what follows, and a plugin run
  std::shared_ptr<const Credentials> current_;  // null until the token file was read
  FileStamp stamp_;
  Clock::time_point last_check_{};
};

}  // namespace ig::kube
