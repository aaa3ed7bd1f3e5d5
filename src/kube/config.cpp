#include "kube/config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

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

Result<void> check_server(const std::string& server) {
  constexpr std::string_view kScheme = "https://";
  if (server.compare(0, kScheme.size(), kScheme) != 0)
    return fail("server " + quote(server) + " is not an https:// URL");
  const std::string_view rest = std::string_view(server).substr(kScheme.size());
  if (rest.empty() || rest.front() == '/' || rest.front() == ':')
    return fail("server " + quote(server) + " names no host");
  if (rest.find_first_of("?# \t\r\n") != std::string_view::npos)
    return fail("server " + quote(server) + " has a query, a fragment or white space");
  return {};
}

std::string without_trailing_slash(std::string s) {
  while (s.size() > std::string_view("https://x").size() && s.back() == '/') s.pop_back();
  return s;
}

// --- kubeconfig ------------------------------------------------------------

class Kubeconfig {
 public:
  Kubeconfig(std::string path) : path_(std::move(path)) {
    const std::filesystem::path p(path_);
    dir_ = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  }

  Result<ClusterConfig> load(std::string_view context_flag);

 private:
  Error err(const std::string& message) const { return fail("kubeconfig " + path_ + ": " + message); }
  std::string resolve(const std::string& file) const {
    if (file.empty() || std::filesystem::path(file).is_absolute()) return file;
    return (std::filesystem::path(dir_) / file).string();
  }

  Result<void> check_duplicate_keys(const YAML::Node& root) const;
  // The entry named `name` of the list `list` ("clusters", "users", "contexts"),
  // its `inner` map ("cluster", "user", "context").
  Result<YAML::Node> find_named(const YAML::Node& root, const char* list, const char* inner,
                                const std::string& name) const;
  // A string field: "" when absent or null; an error when not a scalar.
  Result<std::string> string_field(const YAML::Node& map, const char* key, const std::string& where) const;
  // PEM from `key-data` (base64) or `key` (a file, relative to the kubeconfig).
  Result<std::string> pem_field(const YAML::Node& map, const char* file_key, const char* data_key,
                                const std::string& where) const;

  // users[].user.exec, checked as client-go's clientcmd validation does.
  Result<ExecConfig> exec_field(const YAML::Node& exec, const std::string& where) const;

  std::string path_;
  std::string dir_;
};

Result<ExecConfig> Kubeconfig::exec_field(const YAML::Node& exec, const std::string& uwhere) const {
  const std::string where = uwhere + ": field exec";
  if (!exec.IsMap()) return err(where + " must be a map");
  ExecConfig out;
  out.where = "kubeconfig " + path_ + ": " + uwhere;
  auto command = string_field(exec, "command", where);
  if (!command) return command.failure();
  if (command->empty()) return err(where + ": command must be set");
  out.command = *command;
  // client-go resolves a command holding a path separator against the
  // kubeconfig's directory; a bare name is looked up on $PATH.
  if (out.command.find('/') != std::string::npos)
    out.command = std::filesystem::path(resolve(out.command)).lexically_normal().string();
  auto version = string_field(exec, "apiVersion", where);
  if (!version) return version.failure();
  if (version->empty())
    return err(where + ": apiVersion must be set (" + std::string(kExecApiV1) + " or " +
               std::string(kExecApiV1beta1) + ")");
  out.api_version = *version;
  if (out.api_version != kExecApiV1 && out.api_version != kExecApiV1beta1)
    return err(where + ": apiVersion " + quote(out.api_version) + " is not supported (" + std::string(kExecApiV1) +
               " or " + std::string(kExecApiV1beta1) + ")");
  if (const YAML::Node args = exec["args"]; args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) return err(where + ": args must be a list of strings");
    for (const YAML::Node& a : args) {
      if (!a.IsScalar()) return err(where + ": args must be a list of strings");
      out.args.push_back(a.Scalar());
    }
  }
  if (const YAML::Node env = exec["env"]; env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) return err(where + ": env must be a list of {name, value}");
    for (const YAML::Node& e : env) {
      if (!e.IsMap()) return err(where + ": env must be a list of {name, value}");
      auto name = string_field(e, "name", where + ": env");
      if (!name) return name.failure();
      auto value = string_field(e, "value", where + ": env");
      if (!value) return value.failure();
      if (name->empty()) return err(where + ": an env entry has no name");
      if (name->find('=') != std::string::npos || name->find('\0') != std::string::npos)
        return err(where + ": env name " + quote(*name) + " holds '='");
      out.env.emplace_back(*name, *value);
    }
  }
  auto hint = string_field(exec, "installHint", where);
  if (!hint) return hint.failure();
  out.install_hint = *hint;
  if (const YAML::Node p = exec["provideClusterInfo"]; p.IsDefined() && !p.IsNull()) {
    try {
      out.provide_cluster_info = p.as<bool>();
    } catch (const YAML::Exception&) {
      return err(where + ": provideClusterInfo must be true or false");
    }
  }
  auto mode = string_field(exec, "interactiveMode", where);
  if (!mode) return mode.failure();
  const std::string m = *mode;
  if (m.empty()) {
    // v1beta1 defaults it (clientcmd's SetDefaults_ExecConfig); v1 requires it.
    if (out.api_version == kExecApiV1)
      return err(where + ": interactiveMode must be set for " + std::string(kExecApiV1) +
                 " (Never, IfAvailable or Always)");
    out.interactive = ExecConfig::Interactive::IfAvailable;
  } else if (m == "Never") {
    out.interactive = ExecConfig::Interactive::Never;
  } else if (m == "IfAvailable") {
    out.interactive = ExecConfig::Interactive::IfAvailable;
  } else if (m == "Always") {
    out.interactive = ExecConfig::Interactive::Always;
  } else {
    return err(where + ": interactiveMode " + quote(m) + " is not Never, IfAvailable or Always");
  }
  return out;
}

Result<std::string> Kubeconfig::string_field(const YAML::Node& map, const char* key, const std::string& where) const {
  const YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return std::string();
  if (!v.IsScalar()) return err(where + ": field " + key + " must be a string");
  return v.Scalar();
}

Result<void> Kubeconfig::check_duplicate_keys(const YAML::Node& root) const {
  struct Item {
    YAML::Node node;
    std::string where;
  };
  std::vector<Item> stack{{root, "the top level"}};
  std::size_t visited = 0;
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    if (++visited > kMaxYamlNodes) return err("more than " + std::to_string(kMaxYamlNodes) + " YAML nodes (aliases?)");
    if (item.node.IsMap()) {
      std::set<std::string> seen;
      for (auto it = item.node.begin(); it != item.node.end(); ++it) {
        const YAML::Node key = it->first;
        std::string name = key.IsScalar() ? key.Scalar() : std::string("<non-scalar key>");
        if (key.IsScalar() && !seen.insert(name).second) {
          return err("duplicate key " + quote(name) + " in " + item.where + " (line " +
                     std::to_string(key.Mark().line + 1) + ")");
        }
        stack.push_back({it->second, item.where == "the top level" ? name : item.where + "." + name});
      }
    } else if (item.node.IsSequence()) {
      std::size_t i = 0;
      for (auto it = item.node.begin(); it != item.node.end(); ++it, ++i)
        stack.push_back({*it, item.where + "[" + std::to_string(i) + "]"});
    }
  }
  return {};
}

Result<YAML::Node> Kubeconfig::find_named(const YAML::Node& root, const char* list, const char* inner,
                                          const std::string& name) const {
  const YAML::Node entries = root[list];
  if (entries.IsDefined() && !entries.IsNull() && !entries.IsSequence())
    return err(std::string("field ") + list + " must be a list");
  std::optional<YAML::Node> found;
  if (entries.IsDefined() && entries.IsSequence()) {
    for (const YAML::Node& entry : entries) {
      if (!entry.IsMap()) return err(std::string("an entry of ") + list + " is not a map");
      auto n = string_field(entry, "name", std::string("an entry of ") + list);
      if (!n) return n.failure();
      if (*n != name) continue;
      if (found) return err(std::string(list) + ": two entries are named " + quote(name));
      found = entry;
    }
  }
  const std::string singular = std::string(inner);
  if (!found) return err(singular + " " + quote(name) + " not found in " + list);
  const YAML::Node body = (*found)[inner];
  if (!body.IsDefined() || body.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!body.IsMap()) return err(singular + " " + quote(name) + ": field " + inner + " must be a map");
  return body;
}

Result<std::string> Kubeconfig::pem_field(const YAML::Node& map, const char* file_key,
                                          const char* data_key, const std::string& where) const {
  auto data = string_field(map, data_key, where);
  if (!data) return data.failure();
  if (!data->empty()) {
    auto decoded = decode_base64(*data, "kubeconfig " + path_ + ": " + where + ": field " + data_key);
    if (!decoded) return decoded.failure();
    return std::move(*decoded);
  }
  auto file = string_field(map, file_key, where);
  if (!file) return file.failure();
  if (file->empty()) return std::string();
  auto text = tls::read_small_file(resolve(*file), kMaxPemBytes);
  if (!text) return err(where + ": field " + file_key + ": " + text.error());
  return std::move(*text);
}

Result<ClusterConfig> Kubeconfig::load(std::string_view context_flag) {
  auto text = tls::read_small_file(path_, kMaxKubeconfigBytes);
  if (!text) return fail("kubeconfig: " + text.error());
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return err("not YAML: line " + std::to_string(e.mark.line + 1) + ": " + one_line(e.msg));
  }
  if (!root.IsMap()) return err("not a kubeconfig (the top level is not a map)");
  if (auto dup = check_duplicate_keys(root); !dup) return dup.failure();

  // The context.
  std::string context_name(context_flag);
  if (context_name.empty()) {
    auto current = string_field(root, "current-context", "the top level");
    if (!current) return current.failure();
    if (current->empty())
      return err("no current-context is set and no --context was given");
    context_name = *current;
  }
  auto context = find_named(root, "contexts", "context", context_name);
  if (!context) return context.failure();
  const std::string cwhere = "context " + quote(context_name);
  auto cluster_name = string_field(*context, "cluster", cwhere);
  if (!cluster_name) return cluster_name.failure();
  if (cluster_name->empty()) return err(cwhere + " names no cluster");
  auto user_name = string_field(*context, "user", cwhere);
  if (!user_name) return user_name.failure();
  if (user_name->empty())
    return err(cwhere + " names no user (an anonymous client is not supported)");
  auto ns = string_field(*context, "namespace", cwhere);
  if (!ns) return ns.failure();

  ClusterConfig out;
  out.namespace_name = *ns;
  out.source = "kubeconfig " + path_ + ", context " + quote(context_name);

  // The cluster.
  auto cluster = find_named(root, "clusters", "cluster", *cluster_name);
  if (!cluster) return cluster.failure();
  const std::string kwhere = "cluster " + quote(*cluster_name);
  for (const char* unsupported : {"proxy-url", "tls-server-name"}) {
    auto v = string_field(*cluster, unsupported, kwhere);
    if (!v) return v.failure();
    if (!v->empty())
      return err(kwhere + ": field " + unsupported + " is not supported" +
                 (std::string_view(unsupported) == "proxy-url"
                      ? " (the client connects to the server directly)"
                      : " (the server certificate must name the server's host)"));
  }
  if (const YAML::Node insecure = (*cluster)["insecure-skip-tls-verify"];
      insecure.IsDefined() && !insecure.IsNull()) {
    bool skip = true;
    try {
      skip = insecure.as<bool>();
    } catch (const YAML::Exception&) {
      return err(kwhere + ": field insecure-skip-tls-verify must be true or false");
    }
    if (skip)
      return err(kwhere + ": field insecure-skip-tls-verify: true is not supported "
                          "(the client verifies the server against the cluster CA)");
  }
  auto server = string_field(*cluster, "server", kwhere);
  if (!server) return server.failure();
  if (server->empty()) return err(kwhere + ": field server is missing");
  if (auto ok = check_server(*server); !ok) return err(kwhere + ": field " + ok.error());
  out.server = without_trailing_slash(*server);
  auto ca = pem_field(*cluster, "certificate-authority", "certificate-authority-data", kwhere);
  if (!ca) return ca.failure();
  if (ca->empty())
    return err(kwhere + ": neither certificate-authority nor certificate-authority-data is set "
                        "(the client trusts only the cluster CA)");
  if (auto ok = check_ca_bundle(*ca, "kubeconfig " + path_ + ": " + kwhere + ": CA"); !ok)
    return ok.failure();
  out.ca_pem = std::move(*ca);

  // The user.
  auto user = find_named(root, "users", "user", *user_name);
  if (!user) return user.failure();
  const std::string uwhere = "user " + quote(*user_name);
  struct Unsupported {
    const char* field;
    const char* why;
  };
  static constexpr Unsupported kUnsupportedUser[] = {
      {"auth-provider", "auth providers are not supported; use token, tokenFile or a client certificate"},
      {"username", "basic authentication is not supported; use token, tokenFile or a client certificate"},
      {"password", "basic authentication is not supported; use token, tokenFile or a client certificate"},
      {"as", "impersonation is not supported"},
      {"as-uid", "impersonation is not supported"},
      {"as-groups", "impersonation is not supported"},
      {"as-user-extra", "impersonation is not supported"},
  };
  for (const Unsupported& u : kUnsupportedUser) {
    const YAML::Node v = (*user)[u.field];
    if (!v.IsDefined() || v.IsNull()) continue;
    if (v.IsScalar() && v.Scalar().empty()) continue;
    if ((v.IsSequence() || v.IsMap()) && v.size() == 0) continue;
    return err(uwhere + ": field " + u.field + " is not supported (" + u.why + ")");
  }
  if (const YAML::Node exec = (*user)["exec"];
      exec.IsDefined() && !exec.IsNull() && !(exec.IsScalar() && exec.Scalar().empty()) &&
      !(exec.IsMap() && exec.size() == 0)) {
    auto e = exec_field(exec, uwhere);
    if (!e) return e.failure();
    out.exec = std::move(*e);
  }
  auto token = string_field(*user, "token", uwhere);
  if (!token) return token.failure();
  auto token_file = string_field(*user, "tokenFile", uwhere);
  if (!token_file) return token_file.failure();
  if (!token_file->empty()) {
    out.token_file = resolve(*token_file);
    if (auto t = read_token(out.token_file); !t) return err(uwhere + ": field tokenFile: " + t.error());
  } else if (!token->empty()) {
    out.bearer_token = trim(*token);
  }
  auto cert = pem_field(*user, "client-certificate", "client-certificate-data", uwhere);
  if (!cert) return cert.failure();
  auto key = pem_field(*user, "client-key", "client-key-data", uwhere);
  if (!key) return key.failure();
  if (cert->empty() != key->empty())
    return err(uwhere + (cert->empty() ? ": client-key is set without client-certificate"
                                       : ": client-certificate is set without client-key"));
  if (!cert->empty()) {
    if (auto ok = check_client_pair(*cert, *key, "kubeconfig " + path_ + ": " + uwhere); !ok)
      return ok.failure();
    out.client_cert_pem = std::move(*cert);
    out.client_key_pem = std::move(*key);
  }
  if (out.exec && (!out.bearer_token.empty() || !out.token_file.empty() || !out.client_cert_pem.empty()))
    return err(uwhere + ": field exec is set beside " +
               (!out.client_cert_pem.empty() ? std::string("a client certificate") : std::string("a token")) +
               " (client-go would ignore the plugin); keep one");
  if (!out.exec && out.bearer_token.empty() && out.token_file.empty() && out.client_cert_pem.empty())
    return err(uwhere + " has no credentials (token, tokenFile, client-certificate/client-key or exec); "
                        "an anonymous client is not supported");
  return out;
}

}  // namespace

InClusterEnv process_env() {
  InClusterEnv env;
  env.service_host = env_or_empty("KUBERNETES_SERVICE_HOST");
  env.service_port = env_or_empty("KUBERNETES_SERVICE_PORT");
  env.kubeconfig = env_or_empty("KUBECONFIG");
  env.exec_timeout = env_or_empty("ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT");
  return env;
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
  return Kubeconfig(path).load(context);
}

namespace {

// $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT onto a kubeconfig's exec plugin.
Result<ClusterConfig> with_exec_timeout(Result<ClusterConfig> c, const InClusterEnv& env) {
  if (!c || !c->exec || env.exec_timeout.empty()) return c;
  auto d = config::parse_duration(env.exec_timeout);
  if (!d) return fail("$ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT: " + d.error());
  if (d->count() <= 0) return fail("$ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT must be more than 0");
  c->exec->timeout = *d;
  return c;
}

}  // namespace

Result<ClusterConfig> load_cluster_config(const std::string& kubeconfig_flag,
                                          std::string_view context_flag, const InClusterEnv& env) {
  if (!kubeconfig_flag.empty()) {
    auto c = kubeconfig_config(kubeconfig_flag, context_flag);
    if (!c) return fail("--kubeconfig: " + c.error());
    return with_exec_timeout(std::move(c), env);
  }
  if (!env.kubeconfig.empty()) {
    std::vector<std::string> paths;
    std::string_view rest = env.kubeconfig;
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      std::string_view one = rest.substr(0, colon);
      if (!one.empty()) paths.emplace_back(one);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
    if (!paths.empty()) {
      auto c = kubeconfig_config(paths.front(), context_flag);
      if (!c) return fail("$KUBECONFIG: " + c.error());
      if (paths.size() > 1)
        c->source += " (the first of " + std::to_string(paths.size()) +
                     " paths in $KUBECONFIG; the others are not merged)";
      return with_exec_timeout(std::move(c), env);
    }
  }
  if (!context_flag.empty())
    return fail("--context " + quote(context_flag) +
                " needs a kubeconfig (--kubeconfig or $KUBECONFIG); none was given");
  auto c = in_cluster_config(env);
  if (!c) return fail("no --kubeconfig and no $KUBECONFIG, so tried " + c.error());
  return c;
}

// --- TokenSource -----------------------------------------------------------

TokenSource::TokenSource(const ClusterConfig& config, std::shared_ptr<Clock> clock, ExecHooks exec_hooks)
    : file_(config.exec ? std::string() : config.token_file),
      cert_pem_(config.client_cert_pem),
      key_pem_(config.client_key_pem),
      clock_(std::move(clock)) {
  if (config.exec) {
    exec_hooks.clock = clock_;
    exec_ = std::make_shared<ExecCredentialSource>(*config.exec, config.server, config.ca_pem, std::move(exec_hooks));
  } else if (file_.empty()) {
    token_ = config.bearer_token;
    have_token_ = true;
    publish_locked();
  }
}

TokenSource::~TokenSource() = default;

void TokenSource::publish_locked() {
  auto c = std::make_shared<Credentials>();
  c->token = token_;
  c->client_cert_pem = cert_pem_;
  c->client_key_pem = key_pem_;
  current_ = std::move(c);
}

Result<std::shared_ptr<const Credentials>> TokenSource::credentials() {
  if (exec_) return exec_->get();
  std::lock_guard lock(mu_);
  if (!file_.empty() && (!have_token_ || clock_->now() - last_check_ >= kTokenRecheck)) {
    auto r = reread_locked(false);
    if (!r && !have_token_) return r.failure();
  }
  return current_;
}

Result<std::string> TokenSource::token() {
  auto c = credentials();
  if (!c) return c.failure();
  return (*c)->token;
}

Result<bool> TokenSource::refresh() {
  if (exec_) return false;
  std::lock_guard lock(mu_);
  if (file_.empty()) return false;
  return reread_locked(true);
}

Result<std::shared_ptr<const Credentials>> TokenSource::renew_after_unauthorized(
    const std::shared_ptr<const Credentials>& used) {
  if (exec_) {
    auto fresh = exec_->renew(used);
    if (!fresh) return fresh.failure();
    const Credentials& n = **fresh;
    if (used && n.token == used->token && n.client_cert_pem == used->client_cert_pem &&
        n.client_key_pem == used->client_key_pem)
      return std::shared_ptr<const Credentials>();
    return fresh;
  }
  std::lock_guard lock(mu_);
  if (file_.empty()) return std::shared_ptr<const Credentials>();
  if (current_ != used) return current_;  // re-read already by another caller
  auto changed = reread_locked(true);
  if (!changed) return changed.failure();
  if (!*changed) return std::shared_ptr<const Credentials>();
  return current_;
}

Result<bool> TokenSource::reread_locked(bool force) {
  last_check_ = clock_->now();
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    // Kept: the last good token (the kubelet swaps the file atomically, but a
    // missing file must not end a working client).
    return fail("token file " + file_ + ": " + std::strerror(errno));
  }
  FileStamp stamp;
  stamp.dev = static_cast<unsigned long long>(st.st_dev);
  stamp.ino = static_cast<unsigned long long>(st.st_ino);
  stamp.size = static_cast<long long>(st.st_size);
  stamp.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  if (!force && have_token_ && stamp == stamp_) return false;
  auto t = read_token(file_);
  if (!t) return t.failure();
  const bool changed = !have_token_ || *t != token_;
  token_ = std::move(*t);
  stamp_ = stamp;
  have_token_ = true;
  if (changed || !current_) publish_locked();
  return changed;
}

}  // namespace ig::kube
