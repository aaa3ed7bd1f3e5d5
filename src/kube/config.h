// Where the Kubernetes API is and how to authenticate to it: in-cluster (the
// service account) or a kubeconfig file, and the bearer token source that
// follows a rotating token file.
//
// Contract:
//  - Everything is loaded and checked at start: the CA and client
//    certificate/key are read into memory as PEM and parsed once; a token file
//    must be readable and non-empty. Nothing throws; every failure is one line
//    naming the source and field ("kubeconfig /home/me/.kube/config: user
//    \"alice\": field exec (credential plugins) is not supported; ...").
//  - TLS trusts only the cluster CA (no system roots), so a CA is required.
//  - The server is an https:// URL; it is kept without a trailing '/'.
//  - Anything the client would not honour is a start-up error, never a silent
//    anonymous or unverified client: user exec, auth-provider,
//    username/password, impersonation (as, as-groups, as-uid, as-user-extra);
//    cluster proxy-url, tls-server-name, insecure-skip-tls-verify: true.
//  - Duplicate keys anywhere in the kubeconfig YAML, and two clusters, users or
//    contexts of the same name, are errors (yaml-cpp keeps duplicates and
//    answers with the first; the API server's client would take the last).
//  - Relative paths in a kubeconfig (certificate-authority,
//    client-certificate, client-key, tokenFile) are relative to the
//    kubeconfig's directory, as client-go resolves them. A `-data` field wins
//    over its file field; tokenFile wins over token (client-go's rules).
//  - TokenSource is thread-safe. A token file is re-read when it changes
//    (device, inode, size or mtime, checked at most once a second, or at once
//    through refresh() after a 401), so service-account token rotation never
//    breaks a long watch. A failed re-read keeps the last good token.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ig::kube {

struct ClusterConfig {
  std::string server;           // "https://10.0.0.1:443", no trailing '/'
  std::string ca_pem;           // the cluster CA bundle, PEM (required)
  std::string bearer_token;     // a static token ("" when none or when token_file is set)
  std::string token_file;       // a token file re-read as it rotates ("" when none)
  std::string client_cert_pem;  // client certificate (chain), PEM ("" when none)
  std::string client_key_pem;   // its key, PEM ("" when none)
  std::string namespace_name;   // the service account's / context's namespace ("" unknown)
  std::string source;           // where this came from, for logs: "in-cluster", "kubeconfig PATH, context NAME"
};

// The process environment in-cluster configuration reads; the defaults are
// the paths the kubelet mounts the service account at.
struct InClusterEnv {
  std::string service_host;  // $KUBERNETES_SERVICE_HOST
  std::string service_port;  // $KUBERNETES_SERVICE_PORT
  std::string kubeconfig;    // $KUBECONFIG (load_cluster_config only)
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

// The bearer token to send, following a rotating token file.
class TokenSource {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // From the config's token_file (followed) or bearer_token (fixed). `clock`
  // (for tests) defaults to steady_clock::now.
  explicit TokenSource(const ClusterConfig& config, Clock clock = {});

  // The token to send now ("" when the config has none). Re-checks the file at
  // most once a second and re-reads it when it changed.
  Result<std::string> token();

  // Re-reads the file now (after a 401). True when the token changed; false
  // for a fixed token or an unchanged file.
  Result<bool> refresh();

  bool follows_file() const noexcept { return !file_.empty(); }

 private:
  struct FileStamp {
    unsigned long long dev = 0, ino = 0;
    long long size = -1, mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  Result<bool> reread_locked(bool force);

  const std::string file_;
  Clock clock_;
  std::mutex mu_;
  std::string token_;
  FileStamp stamp_;
  bool have_token_ = false;
  std::chrono::steady_clock::time_point last_check_{};
};

}  // namespace ig::kube
