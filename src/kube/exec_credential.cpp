#include "kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/json_text.h"
#include "base/one_line.h"
#include "base/quote.h"
#include "base/rfc3339.h"
#include "config/duration.h"
#include "kube/tls_material.h"

extern char** environ;

namespace ig::kube {
namespace {

constexpr std::size_t kMaxOutputBytes = 1u << 20;
constexpr std::size_t kStderrTail = 2048;

// "credential plugin \"aws\" (kubeconfig P: user \"u\")"
std::string plugin_name(const ExecConfig& c) {
  std::string s = "credential plugin " + quote(c.command);
  if (!c.where.empty()) s += " (" + c.where + ")";
  return s;
}

// The tail of the plugin's standard error, one line, for an error message.
std::string stderr_suffix(std::string_view tail) {
  const auto end = tail.find_last_not_of("\n\r ");
  if (end == std::string_view::npos) return "";
  return "; its standard error ends: " + one_line(tail.substr(0, end + 1));
}

struct RunOutput {
  std::string out;
  std::string err_tail;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Spawns and reaps the plugin, which must exit 0. The error names the plugin.
Result<RunOutput> spawn_and_wait(const ExecConfig& config, const std::vector<std::string>& env,
                                 bool interactive) {
  const std::string name = plugin_name(config);
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || (!interactive && ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
    const int e = errno;
    for (int& fd : out_pipe) close_fd(fd);  // (a failed pipe2 leaves them -1)
    return fail(name + ": pipe: " + std::strerror(e));
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  if (!interactive) {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  }
  // Nothing else of ours (listening sockets, connections, files).
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (!interactive) flags |= POSIX_SPAWN_SETPGROUP;  // its own group: killed whole on a timeout
  posix_spawnattr_setflags(&attr, flags);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // serve blocks SIGTERM/SIGINT in its threads
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(config.command.c_str()));
  for (const std::string& a : config.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  const bool has_slash = config.command.find('/') != std::string::npos;
  // (posix_spawnp runs a command holding a '/' as the path it is, as posix_spawn does.)
  const int rc = ::posix_spawnp(&pid, config.command.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  if (rc != 0) {
    close_fd(out_pipe[0]);
    close_fd(err_pipe[0]);
    if (rc != ENOENT && rc != EACCES && rc != ENOEXEC) return fail(name + ": cannot start it: " + std::strerror(rc));
    std::string msg = name + ": executable " + quote(config.command);
    msg += rc != ENOENT ? std::string(": ") + std::strerror(rc) : has_slash ? " not found" : " not found on $PATH";
    if (!config.install_hint.empty()) msg += "; install hint: " + one_line(config.install_hint);
    return fail(msg);
  }

  const auto deadline = std::chrono::steady_clock::now() + config.timeout;
  RunOutput result;
  bool too_much = false, timed_out = false;
  char buf[16384];
  while (out_pipe[0] >= 0 || err_pipe[0] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    timed_out = left.count() <= 0;
    if (timed_out) break;
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};  // a closed (-1) one is skipped
    // (Interrupted: no revents, so nothing is read this round.)
    if (::poll(fds, 2, static_cast<int>(std::min<long long>(left.count() + 1, 1000))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        close_fd(i == 0 ? out_pipe[0] : err_pipe[0]);
        continue;
      }
      std::string& to = i == 0 ? result.out : result.err_tail;
      to.append(buf, static_cast<std::size_t>(got));
      if (i == 1 && to.size() > kStderrTail) to.erase(0, to.size() - kStderrTail);
    }
    too_much = result.out.size() > kMaxOutputBytes;
    if (too_much) break;
  }
  close_fd(out_pipe[0]);
  close_fd(err_pipe[0]);

  // Its output is complete (or abandoned): reap it by the deadline.
  int status = 0;  // waitpid's
  pid_t reaped = 0;  // waitpid's answer: the pid, 0 while it runs, -1 on an error (then killed)
  while (!timed_out && !too_much && (reaped = ::waitpid(pid, &status, WNOHANG)) == 0) {
    timed_out = std::chrono::steady_clock::now() >= deadline;
    if (!timed_out) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (reaped != pid) {
    ::kill(interactive ? pid : -pid, SIGKILL);  // else the whole group: a shell's children too
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (timed_out)
    return fail(name + " did not finish within " + config::format_duration(config.timeout) + "; it was killed" +
                (interactive ? "" : " (its process group)") +
                " ($ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT sets this bound)" + stderr_suffix(result.err_tail));
  if (too_much)
    return fail(name + " wrote more than " + std::to_string(kMaxOutputBytes) + " bytes; it was killed");
  if (WIFSIGNALED(status))
    return fail(name + " was killed by signal " + std::to_string(WTERMSIG(status)) + stderr_suffix(result.err_tail));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail(name + " failed with exit code " + std::to_string(WEXITSTATUS(status)) +
                stderr_suffix(result.err_tail));
  return result;
}

// The plugin's standard output as credentials, checked as client-go does.
Result<Credentials> parse_exec_credential(std::string_view output, std::string_view api_version) {
  const nlohmann::json doc = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return fail("its output is not a JSON object");
  std::string error;  // the first member read that is not a string
  auto string_member = [&error](const nlohmann::json& obj, const char* key) {
    const auto it = obj.find(key);
    if (it != obj.end() && it->is_string()) return it->get<std::string>();
    if (it != obj.end() && !it->is_null() && error.empty()) error = std::string("field ") + key + " is not a string";
    return std::string();
  };
  const std::string version = string_member(doc, "apiVersion"), kind = string_member(doc, "kind");
  if (!error.empty()) return fail("its output: " + error);
  if (kind != "ExecCredential")
    return fail("its output is not an ExecCredential (kind " + quote(kind) + ")");
  if (version != api_version)
    return fail("it is configured for apiVersion " + std::string(api_version) + " but answered " +
                quote(version));
  auto status = doc.find("status");
  if (status == doc.end() || status->is_null()) return fail("its ExecCredential has no status");
  if (!status->is_object()) return fail("its ExecCredential's status is not an object");
  Credentials c{string_member(*status, "token"), string_member(*status, "clientCertificateData"),
                string_member(*status, "clientKeyData"), {}};
  const std::string expiration = string_member(*status, "expirationTimestamp");
  if (!error.empty()) return fail("its ExecCredential's status: " + error);
  if (c.token.empty() && c.client_cert_pem.empty() && c.client_key_pem.empty())
    return fail("its ExecCredential holds neither a token nor a client certificate and key");
  if (c.client_cert_pem.empty() != c.client_key_pem.empty())
    return fail(c.client_cert_pem.empty() ? "its ExecCredential holds clientKeyData without clientCertificateData"
                                          : "its ExecCredential holds clientCertificateData without clientKeyData");
  if (c.token.find_first_of("\r\n") != std::string::npos)
    return fail("its ExecCredential's token holds a line break");
  if (!c.client_cert_pem.empty()) {
    if (auto ok = check_client_pair(c.client_cert_pem, c.client_key_pem, "its client certificate"); !ok)
      return ok.failure();
  }
  if (!expiration.empty()) {
    auto t = parse_rfc3339(expiration);
    if (!t) return fail("its ExecCredential's expirationTimestamp " + quote(expiration) + " is not an RFC 3339 time");
    c.expires = *t;
  }
  return c;
}

}  // namespace

Result<Credentials> run_exec_plugin(const ExecConfig& config, std::string_view server, std::string_view ca_pem,
                                    bool stdin_is_terminal) {
  if (config.interactive == ExecConfig::Interactive::Always && !stdin_is_terminal)
    return fail(plugin_name(config) + " has interactiveMode Always but standard input is not a terminal; not run");
  const bool interactive = stdin_is_terminal && config.interactive != ExecConfig::Interactive::Never;
  // This process's environment, exec.env over it, KUBERNETES_EXEC_INFO over both.
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) vars[std::string(entry.substr(0, eq))] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : config.env) vars[k] = v;
  nlohmann::json spec = {{"interactive", interactive}};  // KUBERNETES_EXEC_INFO's
  if (config.provide_cluster_info) {
    std::string ca;
    json_text::append_base64(ca, ca_pem);
    spec["cluster"] = {{"server", std::string(server)}};
    if (!ca.empty()) spec["cluster"]["certificate-authority-data"] = std::move(ca);
  }
  const nlohmann::json info = {{"kind", "ExecCredential"}, {"apiVersion", config.api_version}, {"spec", spec}};
  vars["KUBERNETES_EXEC_INFO"] = info.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::vector<std::string> env;
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);

  auto run = spawn_and_wait(config, env, interactive);
  if (!run) return run.failure();
  auto creds = parse_exec_credential(run->out, config.api_version);
  if (!creds) return fail(plugin_name(config) + ": " + creds.error() + stderr_suffix(run->err_tail));
  return creds;
}

}  // namespace ig::kube
