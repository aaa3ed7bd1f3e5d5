#include "kube/config.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/one_line.h"
#include "base/quote.h"
#include "config/duration.h"
#include "kube/exec_credential.h"
#include "kube/tls_material.h"
#include "tls/certificates.h"

namespace ig::kube {
namespace {

constexpr std::size_t kMaxKubeconfigBytes = 4u << 20;
constexpr std::size_t kMaxPemBytes = 1u << 20;
constexpr std::size_t kMaxTokenBytes = 64u << 10;
constexpr std::size_t kMaxYamlNodes = 100000;  // aliases can multiply a walk
constexpr auto kTokenRecheck = std::chrono::seconds(1);

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

// The token in `path`, trimmed; an error when unreadable or empty.
Result<std::string> read_token(const std::string& path) {
  auto text = tls::read_small_file(path, kMaxTokenBytes);
  if (!text) return fail("token file: " + text.error());
  std::string token = trim(*text);
  if (token.empty()) return fail("token file " + path + " is empty");
  if (token.find_first_of("\r\n") != std::string::npos)
    return fail("token file " + path + " holds more than one line");
  return token;
}

// --- kubeconfig ------------------------------------------------------------

// What makes a kubeconfig unusable (without its "kubeconfig PATH: "): thrown
// by the readers below, kubeconfig_config()'s error.
struct KubeconfigInvalid {
  std::string message;
};

[[noreturn]] void invalid(std::string message) { throw KubeconfigInvalid{std::move(message)}; }

// Throws the error of `r`, a Result, if it has one.
template <typename R>
void check(const R& r) {
  if (!r) invalid(r.error());
}

// A string field: "" when absent or null; thrown when not a scalar.
std::string string_field(const YAML::Node& map, const char* key, const std::string& where) {
  const YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return std::string();
  if (!v.IsScalar()) invalid(where + ": field " + key + " must be a string");
  return v.Scalar();
}

// A boolean field: false when absent or null; thrown ("`what` must be true or false") when not a boolean.
bool bool_field(const YAML::Node& map, const char* key, const std::string& what) {
  const YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return false;
  try {
    return v.as<bool>();
  } catch (const YAML::Exception&) {
    invalid(what + " must be true or false");
  }
}

// Anything but absent, null, "", [] or {}.
bool is_set(const YAML::Node& v) {
  if (!v.IsDefined() || v.IsNull()) return false;
  return v.IsScalar() ? !v.Scalar().empty() : v.size() > 0;
}

// An https:// URL with a host, no query, fragment or white space.
void check_server(const std::string& server, const std::string& where) {
  constexpr std::string_view kScheme = "https://";
  if (server.empty()) invalid(where + ": field server is missing");
  const std::string what = where + ": field server " + quote(server);
  if (server.compare(0, kScheme.size(), kScheme) != 0) invalid(what + " is not an https:// URL");
  const std::string_view rest = std::string_view(server).substr(kScheme.size());
  if (rest.empty() || rest.front() == '/' || rest.front() == ':') invalid(what + " names no host");
  if (rest.find_first_of("?# \t\r\n") != std::string_view::npos)
    invalid(what + " has a query, a fragment or white space");
}

void check_duplicate_keys(const YAML::Node& root) {
  std::vector<std::pair<YAML::Node, std::string>> stack{{root, "the top level"}};  // a node, where it is
  std::size_t visited = 0;
  while (!stack.empty()) {
    auto [node, where] = std::move(stack.back());
    stack.pop_back();
    if (++visited > kMaxYamlNodes) invalid("more than " + std::to_string(kMaxYamlNodes) + " YAML nodes (aliases?)");
    if (node.IsMap()) {
      std::set<std::string> seen;
      for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node key = it->first;
        std::string name = key.IsScalar() ? key.Scalar() : std::string("<non-scalar key>");
        if (key.IsScalar() && !seen.insert(name).second) {
          invalid("duplicate key " + quote(name) + " in " + where + " (line " +
                  std::to_string(key.Mark().line + 1) + ")");
        }
        stack.push_back({it->second, where == "the top level" ? name : where + "." + name});
      }
    } else if (node.IsSequence()) {
      std::size_t i = 0;
      for (auto it = node.begin(); it != node.end(); ++it, ++i)
        stack.push_back({*it, where + "[" + std::to_string(i) + "]"});
    }
  }
}

// The entry named `name` of the list `list` ("clusters", "users", "contexts"),
// its `inner` map ("cluster", "user", "context").
YAML::Node find_named(const YAML::Node& root, const char* list, const char* inner, const std::string& name) {
  const YAML::Node entries = root[list];
  if (entries.IsDefined() && !entries.IsNull() && !entries.IsSequence())
    invalid(std::string("field ") + list + " must be a list");
  std::optional<YAML::Node> found;
  if (entries.IsDefined() && entries.IsSequence()) {
    for (const YAML::Node& entry : entries) {
      if (!entry.IsMap()) invalid(std::string("an entry of ") + list + " is not a map");
      if (string_field(entry, "name", std::string("an entry of ") + list) != name) continue;
      if (found) invalid(std::string(list) + ": two entries are named " + quote(name));
      found = entry;
    }
  }
  if (!found) invalid(std::string(inner) + " " + quote(name) + " not found in " + list);
  const YAML::Node body = (*found)[inner];
  if (!body.IsDefined() || body.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!body.IsMap()) invalid(std::string(inner) + " " + quote(name) + ": field " + inner + " must be a map");
  return body;
}

// `file` (not empty) against the absolute directory of the kubeconfig at
// `path` (as client-go), unless absolute: "./x" stays a path, never a bare name.
std::string resolve(const std::string& path, const std::string& file) {
  std::error_code ignored;  // no working directory: relative to the kubeconfig's path as given
  return (std::filesystem::absolute(path, ignored).parent_path() / file).string();
}

// users[].user.exec of the kubeconfig at `path`, checked as client-go's clientcmd validation does.
ExecConfig exec_field(const YAML::Node& exec, const std::string& uwhere, const std::string& path) {
  const std::string where = uwhere + ": field exec";
  if (!exec.IsMap()) invalid(where + " must be a map");
  ExecConfig out;
  out.where = "kubeconfig " + path + ": " + uwhere;
  out.command = string_field(exec, "command", where);
  if (out.command.empty()) invalid(where + ": command must be set");
  // client-go resolves a command holding a path separator against the
  // kubeconfig's directory; a bare name is looked up on $PATH.
  if (out.command.find('/') != std::string::npos)
    out.command = std::filesystem::path(resolve(path, out.command)).lexically_normal().string();
  const std::string versions = " (" + std::string(kExecApiV1) + " or " + std::string(kExecApiV1beta1) + ")";
  out.api_version = string_field(exec, "apiVersion", where);
  if (out.api_version.empty()) invalid(where + ": apiVersion must be set" + versions);
  if (out.api_version != kExecApiV1 && out.api_version != kExecApiV1beta1)
    invalid(where + ": apiVersion " + quote(out.api_version) + " is not supported" + versions);
  if (const YAML::Node args = exec["args"]; args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) invalid(where + ": args must be a list of strings");
    for (const YAML::Node& a : args) {
      if (!a.IsScalar()) invalid(where + ": args must be a list of strings");
      out.args.push_back(a.Scalar());
    }
  }
  if (const YAML::Node env = exec["env"]; env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) invalid(where + ": env must be a list of {name, value}");
    for (const YAML::Node& e : env) {
      if (!e.IsMap()) invalid(where + ": env must be a list of {name, value}");
      std::string name = string_field(e, "name", where + ": env");
      std::string value = string_field(e, "value", where + ": env");
      if (name.empty()) invalid(where + ": an env entry has no name");
      if (name.find('=') != std::string::npos || name.find('\0') != std::string::npos)
        invalid(where + ": env name " + quote(name) + " holds '='");
      out.env.emplace_back(std::move(name), std::move(value));
    }
  }
  out.install_hint = string_field(exec, "installHint", where);
  out.provide_cluster_info = bool_field(exec, "provideClusterInfo", where + ": provideClusterInfo");
  const std::string mode = string_field(exec, "interactiveMode", where);
  // v1beta1 defaults it (clientcmd's SetDefaults_ExecConfig); v1 requires it.
  if (mode.empty() && out.api_version == kExecApiV1)
    invalid(where + ": interactiveMode must be set for " + std::string(kExecApiV1) + " (Never, IfAvailable or Always)");
  using enum ExecConfig::Interactive;
  static constexpr std::pair<std::string_view, ExecConfig::Interactive> kModes[] = {
      {"", IfAvailable}, {"Never", Never}, {"IfAvailable", IfAvailable}, {"Always", Always}};
  const auto* m = std::find_if(std::begin(kModes), std::end(kModes), [&](const auto& k) { return k.first == mode; });
  if (m == std::end(kModes))
    invalid(where + ": interactiveMode " + quote(mode) + " is not Never, IfAvailable or Always");
  out.interactive = m->second;
  return out;
}

// PEM from `key-data` (base64) or `key` (a file, relative to the kubeconfig at `path`).
std::string pem_field(const YAML::Node& map, const char* file_key, const char* data_key, const std::string& where,
                      const std::string& path) {
  if (const std::string data = string_field(map, data_key, where); !data.empty()) {
    auto decoded = decode_base64(data, where + ": field " + data_key);
    check(decoded);
    return std::move(*decoded);
  }
  const std::string file = string_field(map, file_key, where);
  if (file.empty()) return std::string();
  auto text = tls::read_small_file(resolve(path, file), kMaxPemBytes);
  if (!text) invalid(where + ": field " + file_key + ": " + text.error());
  return std::move(*text);
}

// The kubeconfig at `path`, its content `text`; throws KubeconfigInvalid.
ClusterConfig load_kubeconfig(const std::string& path, const std::string& text, std::string_view context_flag) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    invalid("not YAML: line " + std::to_string(e.mark.line + 1) + ": " + one_line(e.msg));
  }
  if (!root.IsMap()) invalid("not a kubeconfig (the top level is not a map)");
  check_duplicate_keys(root);

  // The context.
  std::string context_name(context_flag);
  if (context_name.empty()) context_name = string_field(root, "current-context", "the top level");
  if (context_name.empty()) invalid("no current-context is set and no --context was given");
  const YAML::Node context = find_named(root, "contexts", "context", context_name);
  const std::string cwhere = "context " + quote(context_name);
  const std::string cluster_name = string_field(context, "cluster", cwhere);
  if (cluster_name.empty()) invalid(cwhere + " names no cluster");
  const std::string user_name = string_field(context, "user", cwhere);
  if (user_name.empty()) invalid(cwhere + " names no user (an anonymous client is not supported)");

  ClusterConfig out;
  out.namespace_name = string_field(context, "namespace", cwhere);
  out.source = "kubeconfig " + path + ", context " + quote(context_name);

  // The cluster.
  const YAML::Node cluster = find_named(root, "clusters", "cluster", cluster_name);
  const std::string kwhere = "cluster " + quote(cluster_name);
  static constexpr std::pair<const char*, const char*> kUnsupportedCluster[] = {  // field, why
      {"proxy-url", "the client connects to the server directly"},
      {"tls-server-name", "the server certificate must name the server's host"},
  };
  for (const auto& [field, why] : kUnsupportedCluster) {
    if (!string_field(cluster, field, kwhere).empty())
      invalid(kwhere + ": field " + field + " is not supported (" + why + ")");
  }
  if (bool_field(cluster, "insecure-skip-tls-verify", kwhere + ": field insecure-skip-tls-verify"))
    invalid(kwhere + ": field insecure-skip-tls-verify: true is not supported "
                     "(the client verifies the server against the cluster CA)");
  out.server = string_field(cluster, "server", kwhere);
  check_server(out.server, kwhere);
  while (out.server.size() > std::string_view("https://x").size() && out.server.back() == '/') out.server.pop_back();
  out.ca_pem = pem_field(cluster, "certificate-authority", "certificate-authority-data", kwhere, path);
  if (out.ca_pem.empty())
    invalid(kwhere + ": neither certificate-authority nor certificate-authority-data is set "
                     "(the client trusts only the cluster CA)");
  check(check_ca_bundle(out.ca_pem, kwhere + ": CA"));

  // The user.
  const YAML::Node user = find_named(root, "users", "user", user_name);
  const std::string uwhere = "user " + quote(user_name);
  static constexpr std::pair<const char*, const char*> kUnsupportedUser[] = {
      {"auth-provider", "auth providers are not supported; use token, tokenFile or a client certificate"},
      {"username", "basic authentication is not supported; use token, tokenFile or a client certificate"},
      {"password", "basic authentication is not supported; use token, tokenFile or a client certificate"},
      {"as", "impersonation is not supported"},
      {"as-uid", "impersonation is not supported"},
      {"as-groups", "impersonation is not supported"},
      {"as-user-extra", "impersonation is not supported"},
  };
  for (const auto& [field, why] : kUnsupportedUser) {
    if (is_set(user[field])) invalid(uwhere + ": field " + field + " is not supported (" + why + ")");
  }
  // (An empty list is set: it is no map.)
  if (const YAML::Node exec = user["exec"]; is_set(exec) || (exec.IsDefined() && exec.IsSequence()))
    out.exec = exec_field(exec, uwhere, path);
  const std::string token = string_field(user, "token", uwhere);
  const std::string token_file = string_field(user, "tokenFile", uwhere);
  if (!token_file.empty()) {
    out.token_file = resolve(path, token_file);
    if (auto t = read_token(out.token_file); !t) invalid(uwhere + ": field tokenFile: " + t.error());
  } else {
    out.bearer_token = trim(token);
  }
  out.client_cert_pem = pem_field(user, "client-certificate", "client-certificate-data", uwhere, path);
  out.client_key_pem = pem_field(user, "client-key", "client-key-data", uwhere, path);
  if (out.client_cert_pem.empty() != out.client_key_pem.empty())
    invalid(uwhere + (out.client_cert_pem.empty() ? ": client-key is set without client-certificate"
                                                   : ": client-certificate is set without client-key"));
  if (!out.client_cert_pem.empty()) check(check_client_pair(out.client_cert_pem, out.client_key_pem, uwhere));
  if (out.exec && (!out.bearer_token.empty() || !out.token_file.empty() || !out.client_cert_pem.empty()))
    invalid(uwhere + ": field exec is set beside " +
            (!out.client_cert_pem.empty() ? std::string("a client certificate") : std::string("a token")) +
            " (client-go would ignore the plugin); keep one");
  if (!out.exec && out.bearer_token.empty() && out.token_file.empty() && out.client_cert_pem.empty())
    invalid(uwhere + " has no credentials (token, tokenFile, client-certificate/client-key or exec); "
                     "an anonymous client is not supported");
  return out;
}

}  // namespace

InClusterEnv process_env() {
  return {.service_host = env_or_empty("KUBERNETES_SERVICE_HOST"),
          .service_port = env_or_empty("KUBERNETES_SERVICE_PORT"),
          .kubeconfig = env_or_empty("KUBECONFIG"),
          .exec_timeout = env_or_empty("ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT")};
}

Result<ClusterConfig> in_cluster_config(const InClusterEnv& env) {
  const std::string prefix = "in-cluster config: ";
  if (env.service_host.empty() || env.service_port.empty())
    return fail(prefix + "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set "
                         "(not running in a pod?)");
  const std::string& port = env.service_port;
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535)
    return fail(prefix + "KUBERNETES_SERVICE_PORT " + quote(port) + " is not a port number");
  std::string host = env.service_host;
  if (host.find_first_of("/?#@ \t\r\n") != std::string::npos)
    return fail(prefix + "KUBERNETES_SERVICE_HOST " + quote(host) + " is not a host");
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";

  ClusterConfig out;
  out.server = "https://" + host + ":" + port;
  out.source = "in-cluster";
  auto ca = tls::read_small_file(env.ca_path, kMaxPemBytes);
  if (!ca) return fail(prefix + "CA: " + ca.error());
  if (auto ok = check_ca_bundle(*ca, prefix + env.ca_path); !ok) return ok.failure();
  out.ca_pem = std::move(*ca);
  if (auto t = read_token(env.token_path); !t) return fail(prefix + t.error());
  out.token_file = env.token_path;
  struct stat st {};
  if (::stat(env.namespace_path.c_str(), &st) == 0) {
    auto ns = tls::read_small_file(env.namespace_path, 4096);
    if (!ns) return fail(prefix + "namespace: " + ns.error());
    out.namespace_name = trim(*ns);
  } else if (errno != ENOENT) {
    return fail(prefix + "namespace: " + env.namespace_path + ": " + std::strerror(errno));
  }
  return out;
}

Result<ClusterConfig> kubeconfig_config(const std::string& path, std::string_view context) {
  auto text = tls::read_small_file(path, kMaxKubeconfigBytes);
  if (!text) return fail("kubeconfig: " + text.error());
  try {
    return load_kubeconfig(path, *text, context);
  } catch (const KubeconfigInvalid& e) {
    return fail("kubeconfig " + path + ": " + e.message);
  }
}

Result<ClusterConfig> load_cluster_config(const std::string& kubeconfig_flag,
                                          std::string_view context_flag, const InClusterEnv& env) {
  std::vector<std::string> paths;  // of $KUBECONFIG, but empty ones
  // (Not std::views::split: clang-14, the fuzz build's compiler, cannot build libstdc++ 12's <ranges>.)
  for (std::size_t from = 0; from < env.kubeconfig.size();) {
    const std::size_t colon = std::min(env.kubeconfig.find(':', from), env.kubeconfig.size());
    if (colon > from) paths.push_back(env.kubeconfig.substr(from, colon - from));
    from = colon + 1;
  }
  if (kubeconfig_flag.empty() && paths.empty()) {
    if (!context_flag.empty())
      return fail("--context " + quote(context_flag) +
                  " needs a kubeconfig (--kubeconfig or $KUBECONFIG); none was given");
    auto c = in_cluster_config(env);
    if (!c) return fail("no --kubeconfig and no $KUBECONFIG, so tried " + c.error());
    return c;
  }
  const bool flag = !kubeconfig_flag.empty();
  auto c = kubeconfig_config(flag ? kubeconfig_flag : paths.front(), context_flag);
  if (!c) return fail((flag ? "--kubeconfig: " : "$KUBECONFIG: ") + c.error());
  if (!flag && paths.size() > 1)
    c->source += " (the first of " + std::to_string(paths.size()) +
                 " paths in $KUBECONFIG; the others are not merged)";
  if (c->exec && !env.exec_timeout.empty()) {  // $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT onto its plugin
    auto d = config::parse_duration(env.exec_timeout);
    if (!d) return fail("$ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT: " + d.error());
    if (d->count() <= 0) return fail("$ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT must be more than 0");
    c->exec->timeout = *d;
  }
  return c;
}

// --- TokenSource -----------------------------------------------------------

TokenSource::TokenSource(const ClusterConfig& config, std::shared_ptr<Clock> clock)
    : config_(config), clock_(std::move(clock)) {
  if (config_.exec) {
    config_.token_file.clear();
  } else if (config_.token_file.empty()) {
    publish_locked(config_.bearer_token);
  }
}

void TokenSource::publish_locked(std::string token) {
  current_ = std::make_shared<const Credentials>(
      Credentials{std::move(token), config_.client_cert_pem, config_.client_key_pem, {}});
}

bool TokenSource::expired_locked() const {
  return current_ && current_->expires && clock_->wall() >= *current_->expires;
}

Result<std::shared_ptr<const Credentials>> TokenSource::credentials() {
  std::lock_guard lock(mu_);
  if (config_.exec && (!current_ || expired_locked())) {
    if (auto ran = run_plugin_locked(); !ran) return ran.failure();
  } else if (!config_.token_file.empty() && (!current_ || clock_->now() - last_check_ >= kTokenRecheck)) {
    auto r = reread_locked(false);
    if (!r && !current_) return r.failure();
  }
  return current_;
}

Result<std::shared_ptr<const Credentials>> TokenSource::renew_after_unauthorized(
    const std::shared_ptr<const Credentials>& used) {
  std::lock_guard lock(mu_);
  if (!config_.exec && config_.token_file.empty()) return std::shared_ptr<const Credentials>();  // a fixed token
  if (current_ && current_ != used && !expired_locked()) return current_;  // renewed by another caller
  if (auto renewed = config_.exec ? run_plugin_locked() : reread_locked(true); !renewed) return renewed.failure();
  const Credentials& n = *current_;
  if (used && n.token == used->token && n.client_cert_pem == used->client_cert_pem &&
      n.client_key_pem == used->client_key_pem)
    return std::shared_ptr<const Credentials>();
  return current_;
}

Result<void> TokenSource::run_plugin_locked() {
  auto creds = run_exec_plugin(*config_.exec, config_.server, config_.ca_pem, ::isatty(STDIN_FILENO) == 1);
  if (!creds) return creds.failure();
  current_ = std::make_shared<const Credentials>(std::move(*creds));
  return {};
}

Result<void> TokenSource::reread_locked(bool force) {
  last_check_ = clock_->now();
  struct stat st {};
  if (::stat(config_.token_file.c_str(), &st) != 0) {
    // Kept: the last good token (the kubelet swaps the file atomically, but a
    // missing file must not end a working client).
    return fail("token file " + config_.token_file + ": " + std::strerror(errno));
  }
  const FileStamp stamp{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
  if (!force && current_ && stamp == stamp_) return {};
  auto t = read_token(config_.token_file);
  if (!t) return t.failure();
  stamp_ = stamp;
  if (!current_ || *t != current_->token) publish_locked(std::move(*t));
  return {};
}

}  // namespace ig::kube
