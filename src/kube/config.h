// Where the Kubernetes API is and how to authenticate to it: in-cluster (the
// service account) or a kubeconfig file, and the credential source (a fixed
// token, a rotating token file, a client certificate, or a kubeconfig exec
// credential plugin: kube/exec_credential.h).
//
// Contract:
//  - Everything is loaded and checked at start (PEM read and parsed once, a
//    token file readable and non-empty). Nothing throws; every failure is one
//    line naming the source and field ("kubeconfig /home/me/.kube/config:
//    user \"alice\": field auth-provider is not supported (...)").
//  - TLS trusts only the cluster CA (required); the server is an https://
//    URL, kept without a trailing '/'.
//  - Anything the client would not honour is a start-up error, never a silent
//    anonymous or unverified client: auth-provider, username/password,
//    impersonation, proxy-url, tls-server-name, insecure-skip-tls-verify:
//    true, an exec plugin beside a token, tokenFile or client certificate.
//  - users[].user.exec is checked as client-go's clientcmd does (command and
//    apiVersion required, env names non-empty, interactiveMode Never,
//    IfAvailable or Always: required for v1, IfAvailable by default for
//    v1beta1); a command holding a '/' is relative to the kubeconfig's
//    directory. The plugin runs on the first request, not at load.
//  - Duplicate YAML keys, and two clusters, users or contexts of one name, are
//    errors (yaml-cpp would take the first, client-go the last).
//  - Relative paths are relative to the kubeconfig's directory; a `-data`
//    field wins over its file field, tokenFile over token (client-go's rules).
//  - TokenSource is thread-safe. A token file is re-read when it changes
//    (checked at most once a second, or at once through refresh() after a
//    401), keeping the last good token on a failed read. An exec plugin's
//    credentials are cached until their expirationTimestamp, renewed after a
//    401; $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT bounds one run
//    (kExecPluginTimeout, 60 s, when unset).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace ig::kube {

// One run of an exec credential plugin is killed (its process group) after
// this long unless $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT says otherwise.
inline constexpr std::chrono::milliseconds kExecPluginTimeout{60000};

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
  std::chrono::milliseconds timeout = kExecPluginTimeout;  // one run, then killed
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

// The process environment in-cluster configuration reads; the defaults are
// the paths the kubelet mounts the service account at.
struct InClusterEnv {
  std::string service_host;  // $KUBERNETES_SERVICE_HOST
  std::string service_port;  // $KUBERNETES_SERVICE_PORT
  std::string kubeconfig;    // $KUBECONFIG (load_cluster_config only)
  std::string exec_timeout;  // $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT (load_cluster_config only)
  std::string token_path = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_path = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// $KUBERNETES_SERVICE_HOST, $KUBERNETES_SERVICE_PORT and $KUBECONFIG of this
// process, with the default service-account paths.
InClusterEnv process_env();

// The service account: https://HOST:PORT (an IPv6 HOST in brackets), ca.crt,
// the token file (re-read as it rotates) and the namespace file (optional:
// "" when absent).
Result<ClusterConfig> in_cluster_config(const InClusterEnv& env);

// A kubeconfig file: `context`, or its current-context when empty.
Result<ClusterConfig> kubeconfig_config(const std::string& path, std::string_view context = {});

// --kubeconfig when given, else the first path of $KUBECONFIG (a colon list is
// not merged: only its first non-empty entry is read, and `source` says so),
// else in-cluster. A --context without a kubeconfig is an error. The error
// names the source that was tried.
Result<ClusterConfig> load_cluster_config(const std::string& kubeconfig_flag,
                                          std::string_view context_flag, const InClusterEnv& env);

// What a request authenticates with: a bearer token, a client certificate,
// or both. One value per rotation: a new value (a new pointer) whenever the
// token file or the plugin's answer changed.
struct Credentials {
  std::string token;            // "" when none
  std::string client_cert_pem;  // "" when none
  std::string client_key_pem;
  // exec plugins: when the plugin said these expire (wall clock)
  std::optional<std::chrono::system_clock::time_point> expires;
};

class ExecCredentialSource;

// Test hooks of an exec credential plugin's runs.
struct ExecHooks {
  std::function<std::chrono::system_clock::time_point()> wall_clock;  // default: system_clock::now
  std::function<bool()> stdin_is_terminal;                            // default: isatty(0)
};

// The credentials to send: a fixed token, a rotating token file (followed),
// a fixed client certificate, or an exec credential plugin's answer.
class TokenSource {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // From the config's exec plugin, token_file (followed) or bearer_token
  // (fixed), with its client pair. `clock` (for tests) defaults to
  // steady_clock::now.
  explicit TokenSource(const ClusterConfig& config, Clock clock = {}, ExecHooks exec_hooks = {});
  ~TokenSource();

  // The credentials to send now. Re-checks a token file at most once a
  // second; runs the exec plugin when it has no unexpired answer (one run at
  // a time: concurrent callers wait for it).
  Result<std::shared_ptr<const Credentials>> credentials();

  // The token to send now ("" when the config has none).
  Result<std::string> token();

  // Re-reads the file now (after a 401). True when the token changed; false
  // for a fixed token or an unchanged file.
  Result<bool> refresh();

  // After a 401 to a request sent with `used`: the token file re-read, or the
  // plugin run again unless another caller already replaced `used`. The
  // credentials to send the request again with; nullptr when they are the
  // same as `used` (sending again would not help).
  Result<std::shared_ptr<const Credentials>> renew_after_unauthorized(const std::shared_ptr<const Credentials>& used);

  bool follows_file() const noexcept { return !file_.empty(); }
  bool runs_plugin() const noexcept { return exec_ != nullptr; }

 private:
  struct FileStamp {
    unsigned long long dev = 0, ino = 0;
    long long size = -1, mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  Result<bool> reread_locked(bool force);
  void publish_locked();

  const std::string file_;
  const std::string cert_pem_, key_pem_;
  Clock clock_;
  std::shared_ptr<ExecCredentialSource> exec_;
  std::mutex mu_;
  std::string token_;
  std::shared_ptr<const Credentials> current_;
  FileStamp stamp_;
  bool have_token_ = false;
  std::chrono::steady_clock::time_point last_check_{};
};

}  // namespace ig::kube
