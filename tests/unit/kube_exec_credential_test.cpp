// Kubeconfig exec credential plugins (kube/exec_credential.h): the exec
// field of a kubeconfig, and runs of a fake plugin (a shell script this test
// writes): the ExecCredential answer (v1 and v1beta1), KUBERNETES_EXEC_INFO,
// args and env, caching until expirationTimestamp (on a fake wall clock),
// renewal after a 401, one run for many callers, failures, a plugin that
// hangs (bounded), interactiveMode Always without a terminal; and the API
// client through a plugin against the test API server (a revoked token: 401,
// the plugin again, the request again).
#include "kube/exec_credential.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "apiserver_test_support.h"
#include "kube/config.h"
#include "kube/http_client.h"
#include "tls/certificates.h"

namespace ig::kube {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using json = nlohmann::json;

const tls::CertificateBundle& exec_bundle() {
  static const tls::CertificateBundle kBundle = [] {
    auto b = tls::make_serving_chain({"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
    if (!b) throw std::runtime_error(b.error());
    return *b;
  }();
  return kBundle;
}

std::string slurp(const std::string& path) { return test_support::read_whole_file(path); }

// The token credentials() gives now, or its error.
Result<std::string> token_of(TokenSource& tokens) {
  auto c = tokens.credentials();
  if (!c) return c.failure();
  return (*c)->token;
}

// The fake plugin: counts its runs in $DIR/count, records its
// KUBERNETES_EXEC_INFO, args and $PLUGIN_VAR, and answers token "tok-N"
// (apiVersion from $DIR/api, expirationTimestamp from $DIR/expiry when that
// file exists); $DIR/mode: fail, hang, slow, badjson, cert.
constexpr const char* kPlugin = R"SH(#!/bin/sh
d="$(dirname "$0")"
n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$d/count"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$d/info.$n"
printf '%s\n' "$@" > "$d/args"
printf '%s %s' "$PLUGIN_VAR" "$IG_EXEC_TEST_INHERITED" > "$d/envvar"
mode="$(cat "$d/mode" 2>/dev/null)"
case "$mode" in
  fail) echo "boom: the identity provider said no" >&2; exit 1 ;;
  hang) echo "waiting for ever" >&2; sleep 300 & echo $! > "$d/child"; wait; exit 0 ;;
  slow) sleep 0.3 ;;
  badjson) echo "this is not json"; exit 0 ;;
  cert) cat "$d/cert.json"; exit 0 ;;
esac
api="$(cat "$d/api" 2>/dev/null || echo client.authentication.k8s.io/v1)"
if [ -f "$d/expiry" ]; then
  printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s","expirationTimestamp":"%s"}}\n' "$api" "$n" "$(cat "$d/expiry")"
else
  printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s"}}\n' "$api" "$n"
fi
)SH";

class ExecCredentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kube_exec_credential_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    plugin_ = write("plugin.sh", kPlugin);
    ::chmod(plugin_.c_str(), 0755);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = fs::path(dir_) / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p.string();
  }
  int runs() {
    const std::string c = slurp(dir_ + "/count");
    return c.empty() ? 0 : std::stoi(c);
  }

  ExecConfig exec(std::string api = std::string(kExecApiV1)) {
    ExecConfig e;
    e.command = plugin_;
    e.args = {"get-token", "--cluster", "c 1"};
    e.env = {{"PLUGIN_VAR", "from-kubeconfig"}};
    e.api_version = std::move(api);
    e.interactive = ExecConfig::Interactive::Never;
    e.where = "kubeconfig K: user \"u\"";
    e.timeout = 20s;
    write("api", e.api_version);
    return e;
  }
  ClusterConfig cluster(ExecConfig e) {
    ClusterConfig c;
    c.server = "https://127.0.0.1:6443";
    c.ca_pem = exec_bundle().ca_cert_pem;
    c.exec = std::move(e);
    return c;
  }

  // One run whose standard output is `output`.
  Result<Credentials> answer(const std::string& output, std::string_view api = kExecApiV1) {
    ExecConfig e = exec(std::string(api));
    write("mode", "cert");
    write("cert.json", output);
    return run_exec_plugin(e, "", "", false);
  }
  // Its error, without the plugin's name before it.
  std::string refusal(const std::string& output, std::string_view api) {
    auto c = answer(output, api);
    if (c) return "(no error)";
    const std::string name = "credential plugin \"" + plugin_ + "\" (kubeconfig K: user \"u\"): ";
    return c.error().rfind(name, 0) == 0 ? c.error().substr(name.size()) : c.error();
  }

  // Kubeconfig parsing.
  std::string kubeconfig(const std::string& user) {
    return "current-context: ctx\nclusters:\n- name: c\n  cluster:\n    server: https://api.example:6443\n"
           "    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n" +
           user + "contexts:\n- name: ctx\n  context: {cluster: c, user: u}\n";
  }
  Result<ClusterConfig> load(const std::string& user) {
    write("ca.crt", exec_bundle().ca_cert_pem);
    return kubeconfig_config(write("config", kubeconfig(user)));
  }
  std::string error_of(const std::string& user) {
    auto c = load(user);
    return c ? std::string("(no error)") : c.error();
  }

  std::string dir_, plugin_;
};

// --- the kubeconfig's exec field --------------------------------------------------

TEST_F(ExecCredentialTest, KubeconfigExecV1) {
  auto c = load(
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: bin/get-token\n"
      "      args: [eks, get-token, --cluster-name, prod]\n"
      "      env:\n      - {name: AWS_PROFILE, value: admin}\n      - {name: EMPTY}\n"
      "      installHint: brew install aws\n      provideClusterInfo: true\n      interactiveMode: Never\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->exec);
  EXPECT_EQ(c->exec->command, dir_ + "/bin/get-token");  // relative to the kubeconfig
  EXPECT_EQ(c->exec->args, (std::vector<std::string>{"eks", "get-token", "--cluster-name", "prod"}));
  ASSERT_EQ(c->exec->env.size(), 2u);
  EXPECT_EQ(c->exec->env[0], (std::pair<std::string, std::string>{"AWS_PROFILE", "admin"}));
  EXPECT_EQ(c->exec->env[1], (std::pair<std::string, std::string>{"EMPTY", ""}));
  EXPECT_EQ(c->exec->api_version, kExecApiV1);
  EXPECT_EQ(c->exec->install_hint, "brew install aws");
  EXPECT_TRUE(c->exec->provide_cluster_info);
  EXPECT_EQ(c->exec->interactive, ExecConfig::Interactive::Never);
  EXPECT_EQ(c->exec->timeout, 60s);  // the default bound
  EXPECT_EQ(c->exec->where, "kubeconfig " + dir_ + "/config: user \"u\"");
  EXPECT_TRUE(c->bearer_token.empty());
  EXPECT_TRUE(c->token_file.empty());
}

TEST_F(ExecCredentialTest, ACommandBesideAKubeconfigNamedWithoutADirectoryStaysAPath) {
  ASSERT_TRUE(load("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: ./get-token\n"));
  const auto cwd = fs::current_path();
  fs::current_path(dir_);
  auto c = load_cluster_config("config", "", InClusterEnv{});
  fs::current_path(cwd);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exec->command, dir_ + "/get-token");  // not "get-token", looked up on $PATH
}

TEST_F(ExecCredentialTest, KubeconfigExecV1beta1Defaults) {
  auto c = load("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exec->command, "aws");  // a bare name: looked up on $PATH when it runs
  EXPECT_EQ(c->exec->interactive, ExecConfig::Interactive::IfAvailable);
  EXPECT_FALSE(c->exec->provide_cluster_info);
  EXPECT_TRUE(c->exec->args.empty());
}

TEST_F(ExecCredentialTest, KubeconfigExecTimeoutFromTheEnvironment) {
  ASSERT_TRUE(load("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n"));
  InClusterEnv env;
  env.exec_timeout = "2m";
  auto c = load_cluster_config(dir_ + "/config", "", env);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exec->timeout, 120s);
  env.exec_timeout = "soon";
  c = load_cluster_config(dir_ + "/config", "", env);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("$ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT"), std::string::npos) << c.error();
}

TEST_F(ExecCredentialTest, KubeconfigExecErrors) {
  const std::string p = "kubeconfig " + dir_ + "/config: user \"u\": ";
  const std::string v1 = "      apiVersion: client.authentication.k8s.io/v1\n";
  EXPECT_EQ(error_of("    exec:\n" + v1 + "      interactiveMode: Never\n"), p + "field exec: command must be set");
  EXPECT_EQ(error_of("    exec:\n      command: aws\n"),
            p + "field exec: apiVersion must be set (client.authentication.k8s.io/v1 or "
                "client.authentication.k8s.io/v1beta1)");
  EXPECT_EQ(error_of("    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1alpha1\n"),
            p + "field exec: apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported "
                "(client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1)");
  EXPECT_EQ(error_of("    exec:\n      command: aws\n" + v1),
            p + "field exec: interactiveMode must be set for client.authentication.k8s.io/v1 (Never, IfAvailable "
                "or Always)");
  EXPECT_EQ(error_of("    exec:\n      command: aws\n" + v1 + "      interactiveMode: Sometimes\n"),
            p + "field exec: interactiveMode \"Sometimes\" is not Never, IfAvailable or Always");
  EXPECT_EQ(error_of("    exec:\n      command: aws\n" + v1 + "      interactiveMode: Never\n      env: [{value: x}]\n"),
            p + "field exec: an env entry has no name");
  EXPECT_EQ(error_of("    exec:\n      command: aws\n" + v1 + "      interactiveMode: Never\n      args: {a: b}\n"),
            p + "field exec: args must be a list of strings");
  EXPECT_EQ(error_of("    exec: aws\n"), p + "field exec must be a map");
  EXPECT_EQ(error_of("    token: t\n    exec:\n      command: aws\n" + v1 + "      interactiveMode: Never\n"),
            p + "field exec is set beside a token (client-go would ignore the plugin); keep one");
}

// --- the answer ---------------------------------------------------------------------

TEST_F(ExecCredentialTest, AnswerWithATokenV1AndV1beta1) {
  for (std::string_view api : {kExecApiV1, kExecApiV1beta1}) {
    const std::string out = R"({"apiVersion":")" + std::string(api) +
                            R"(","kind":"ExecCredential","status":{"token":"abc","expirationTimestamp":"2026-12-05T10:42:00Z"}})";
    auto c = answer(out, api);
    ASSERT_TRUE(c) << c.error();
    EXPECT_EQ(c->token, "abc");
    ASSERT_TRUE(c->expires);
    EXPECT_EQ(std::chrono::system_clock::to_time_t(*c->expires), 1796467320);
    EXPECT_TRUE(c->client_cert_pem.empty());
  }
  // No expirationTimestamp: used until a 401.
  auto c = answer(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}})");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->expires);
}

TEST_F(ExecCredentialTest, AnswerWithAClientCertificate) {
  const json doc = {{"apiVersion", kExecApiV1},
                    {"kind", "ExecCredential"},
                    {"status", {{"clientCertificateData", exec_bundle().cert_pem}, {"clientKeyData", exec_bundle().key_pem}}}};
  auto c = answer(doc.dump());
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->client_cert_pem, exec_bundle().cert_pem);
  EXPECT_EQ(c->client_key_pem, exec_bundle().key_pem);
  EXPECT_TRUE(c->token.empty());
}

TEST_F(ExecCredentialTest, AnswerRefusals) {
  auto error = [this](const std::string& out, std::string_view api = kExecApiV1) { return refusal(out, api); };
  const std::string head = R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential")";
  EXPECT_EQ(error("nope"), "its output is not a JSON object");
  EXPECT_EQ(error(head + R"(,"status":{"token":"t"}})", kExecApiV1beta1),
            "it is configured for apiVersion client.authentication.k8s.io/v1beta1 but answered "
            "\"client.authentication.k8s.io/v1\"");
  EXPECT_EQ(error(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Status","status":{"token":"t"}})"),
            "its output is not an ExecCredential (kind \"Status\")");
  EXPECT_EQ(error(head + "}"), "its ExecCredential has no status");
  EXPECT_EQ(error(head + R"(,"status":{}})"), "its ExecCredential holds neither a token nor a client certificate and key");
  EXPECT_EQ(error(head + R"(,"status":{"clientCertificateData":"x"}})"),
            "its ExecCredential holds clientCertificateData without clientKeyData");
  EXPECT_EQ(error(head + R"(,"status":{"clientKeyData":"x"}})"),
            "its ExecCredential holds clientKeyData without clientCertificateData");
  EXPECT_EQ(error(head + R"(,"status":{"token":5}})"), "its ExecCredential's status: field token is not a string");
  EXPECT_EQ(error(head + R"(,"status":{"token":"t","expirationTimestamp":"tomorrow"}})"),
            "its ExecCredential's expirationTimestamp \"tomorrow\" is not an RFC 3339 time");
  EXPECT_EQ(error(head + R"(,"status":{"clientCertificateData":"x","clientKeyData":"y"}})").rfind("its client certificate", 0),
            0u);
}


TEST_F(ExecCredentialTest, ExecInfo) {
  ExecConfig e = exec(std::string(kExecApiV1beta1));
  ASSERT_TRUE(run_exec_plugin(e, "https://h:1", "PEM", false));
  json info = json::parse(slurp(dir_ + "/info.1"));
  EXPECT_EQ(info, json::parse(R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1",
                                  "spec":{"interactive":false}})"));
  e.provide_cluster_info = true;
  e.interactive = ExecConfig::Interactive::IfAvailable;
  ASSERT_TRUE(run_exec_plugin(e, "https://h:1", "PEM", true));  // on a terminal: interactive
  info = json::parse(slurp(dir_ + "/info.2"));
  EXPECT_EQ(info["spec"], json::parse(R"({"interactive":true,"cluster":{"server":"https://h:1",
                                          "certificate-authority-data":"UEVN"}})"));
}

// --- runs ---------------------------------------------------------------------------

TEST_F(ExecCredentialTest, RunPassesArgsEnvAndExecInfo) {
  ExecConfig e = exec();
  e.provide_cluster_info = true;
  ::setenv("IG_EXEC_TEST_INHERITED", "yes", 1);   // this process's environment is passed on
  ::setenv("PLUGIN_VAR", "from-the-process", 1);  // exec.env wins over it
  auto c = run_exec_plugin(e, "https://127.0.0.1:6443", "CA", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->token, "tok-1");
  EXPECT_EQ(slurp(dir_ + "/args"), "get-token\n--cluster\nc 1\n");
  ::unsetenv("IG_EXEC_TEST_INHERITED");
  ::unsetenv("PLUGIN_VAR");
  EXPECT_EQ(slurp(dir_ + "/envvar"), "from-kubeconfig yes");
  const json info = json::parse(slurp(dir_ + "/info.1"));
  EXPECT_EQ(info["apiVersion"], kExecApiV1);
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://127.0.0.1:6443");
  EXPECT_EQ(info["spec"]["cluster"]["certificate-authority-data"], "Q0E=");
}

TEST_F(ExecCredentialTest, CachedUntilExpiryThenRunAgain) {
  auto clock = std::make_shared<FakeClock>(FakeClock::kStart,
                                           std::chrono::system_clock::from_time_t(1796467000));  // 2026-12-05T10:36:40Z
  write("expiry", "2026-12-05T10:42:00Z");
  TokenSource tokens(cluster(exec()), clock);
  EXPECT_EQ(*token_of(tokens), "tok-1");
  EXPECT_EQ(*token_of(tokens), "tok-1");
  clock->advance(5min);  // 10:41:40, still before expiry
  EXPECT_EQ(*token_of(tokens), "tok-1");
  EXPECT_EQ(runs(), 1);
  clock->advance(20s);  // 10:42:00, expired
  EXPECT_EQ(*token_of(tokens), "tok-2");
  EXPECT_EQ(runs(), 2);
}

TEST_F(ExecCredentialTest, RenewAfterUnauthorizedRunsOnceForStaleCredentials) {
  TokenSource tokens(cluster(exec()));
  auto first = tokens.credentials();
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ((*first)->token, "tok-1");
  auto renewed = tokens.renew_after_unauthorized(*first);
  ASSERT_TRUE(renewed) << renewed.error();
  ASSERT_TRUE(*renewed);
  EXPECT_EQ((*renewed)->token, "tok-2");
  // Another request that was sent with tok-1 gets the already renewed ones: no run.
  auto again = tokens.renew_after_unauthorized(*first);
  ASSERT_TRUE(again && *again);
  EXPECT_EQ((*again)->token, "tok-2");
  EXPECT_EQ(runs(), 2);
  EXPECT_EQ(*token_of(tokens), "tok-2");
}

TEST_F(ExecCredentialTest, ConcurrentCallersShareOneRun) {
  write("mode", "slow");
  TokenSource tokens(cluster(exec()));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto t = token_of(tokens);
      if (t && *t == "tok-1") ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCredentialTest, FailingPluginNamesItselfItsExitCodeAndStderr) {
  write("mode", "fail");
  TokenSource tokens(cluster(exec()));
  auto t = token_of(tokens);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "credential plugin \"" + plugin_ +
                           "\" (kubeconfig K: user \"u\") failed with exit code 1; its standard error ends: boom: the "
                           "identity provider said no");
  // Not cached: the next call runs it again.
  fs::remove(dir_ + "/mode");
  EXPECT_EQ(*token_of(tokens), "tok-2");
}

TEST_F(ExecCredentialTest, MissingPluginShowsTheInstallHint) {
  ExecConfig e = exec();
  e.command = "ig-no-such-credential-plugin";
  e.install_hint = "apt-get install\nthe-plugin";
  auto c = run_exec_plugin(e, "", "", false);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(),
            "credential plugin \"ig-no-such-credential-plugin\" (kubeconfig K: user \"u\"): executable "
            "\"ig-no-such-credential-plugin\" not found on $PATH; install hint: apt-get install\\nthe-plugin");
}

TEST_F(ExecCredentialTest, BadOutputIsNamed) {
  write("mode", "badjson");
  auto c = run_exec_plugin(exec(), "", "", false);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), "credential plugin \"" + plugin_ + "\" (kubeconfig K: user \"u\"): its output is not a JSON object");
  fs::remove(dir_ + "/mode");
  ExecConfig e = exec(std::string(kExecApiV1));
  write("api", std::string(kExecApiV1beta1));  // answers v1beta1 to a v1 request
  c = run_exec_plugin(e, "", "", false);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("configured for apiVersion client.authentication.k8s.io/v1 but answered "
                           "\"client.authentication.k8s.io/v1beta1\""),
            std::string::npos)
      << c.error();
}

TEST_F(ExecCredentialTest, HangingPluginIsKilledWithItsProcessGroup) {
  write("mode", "hang");
  ExecConfig e = exec();
  e.timeout = 500ms;
  auto c = run_exec_plugin(e, "", "", false);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), "credential plugin \"" + plugin_ +
                           "\" (kubeconfig K: user \"u\") did not finish within 500ms; it was killed (its process "
                           "group) ($ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT sets this bound); its standard error ends: "
                           "waiting for ever");
  // Its child (sleep 300, holding the output pipe) was killed too: gone or a zombie, within a bound.
  const std::string child = slurp(dir_ + "/child");
  ASSERT_FALSE(child.empty());
  const std::string stat = "/proc/" + std::to_string(std::stoi(child)) + "/stat";
  bool dead = false;
  for (int i = 0; i < 500 && !dead; ++i) {
    const std::string s = slurp(stat);
    dead = s.empty() || s.find(") Z") != std::string::npos;
    if (!dead) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(dead) << slurp(stat);
}

TEST_F(ExecCredentialTest, InteractiveAlwaysNeedsATerminal) {
  ExecConfig e = exec();
  e.interactive = ExecConfig::Interactive::Always;
  auto t = run_exec_plugin(e, "", "", /*stdin_is_terminal=*/false);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "credential plugin \"" + plugin_ +
                           "\" (kubeconfig K: user \"u\") has interactiveMode Always but standard input is not a "
                           "terminal; not run");
  EXPECT_EQ(runs(), 0);
  // Always on a terminal: interactive; IfAvailable without a terminal: not interactive; Never: never.
  auto interactive = [&](ExecConfig::Interactive mode, bool terminal) {
    e.interactive = mode;
    if (auto c = run_exec_plugin(e, "", "", terminal); !c) return "(failed: " + c.error() + ")";
    return json::parse(slurp(dir_ + "/info." + std::to_string(runs())))["spec"]["interactive"].dump();
  };
  EXPECT_EQ(interactive(ExecConfig::Interactive::Always, true), "true");
  EXPECT_EQ(interactive(ExecConfig::Interactive::IfAvailable, false), "false");
  EXPECT_EQ(interactive(ExecConfig::Interactive::IfAvailable, true), "true");
  EXPECT_EQ(interactive(ExecConfig::Interactive::Never, true), "false");
}

TEST_F(ExecCredentialTest, ClientCertificateFromThePlugin) {
  write("mode", "cert");
  const json doc = {{"apiVersion", kExecApiV1},
                    {"kind", "ExecCredential"},
                    {"status", {{"clientCertificateData", exec_bundle().cert_pem}, {"clientKeyData", exec_bundle().key_pem}}}};
  write("cert.json", doc.dump());
  TokenSource tokens(cluster(exec()));
  auto c = tokens.credentials();
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ((*c)->client_cert_pem, exec_bundle().cert_pem);
  EXPECT_EQ((*c)->token, "");
}

// --- the API client through a plugin -------------------------------------------------

TEST_F(ExecCredentialTest, ApiClientRerunsThePluginAfterA401AndRetries) {
  const std::string server_dir = dir_ + "/server";
  fs::create_directories(server_dir);
  const std::string token_file = write("server-token", "not-a-plugin-token\n");
  std::string error;
  auto server = test_support::FakeApiServer::start(server_dir, exec_bundle().cert_pem, exec_bundle().key_pem,
                                                   token_file, &error);
  ASSERT_NE(server, nullptr) << error;
  server->control("set_tokens", {{"tokens", {"tok-1"}}});
  ClusterConfig config = cluster(exec());
  config.server = server->url();
  HttpClientOptions o;
  o.request_timeout = 20s;
  auto client = HttpClient::make(config, "0.1.0", o);
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->get("/api/v1/namespaces", 20s);
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(runs(), 1);
  // tok-1 revoked, tok-2 accepted: a 401, the plugin again, the request again.
  server->control("set_tokens", {{"tokens", {"tok-2"}}});
  got = (*client)->get("/api/v1/namespaces", 20s);
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(runs(), 2);
  // The plugin's new token is refused too: the 401 stands (one renewal per request).
  server->control("set_tokens", {{"tokens", {"tok-9"}}});
  got = (*client)->get("/api/v1/namespaces", 20s);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.failure().code, 401);
  EXPECT_EQ(runs(), 3);
  // A failing plugin is named in the 401's error.
  write("mode", "fail");
  got = (*client)->get("/api/v1/namespaces", 20s);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.failure().code, 401);
  EXPECT_NE(got.error().find("renewing the credentials failed: credential plugin"), std::string::npos)
      << got.error();
}

}  // namespace
}  // namespace ig::kube
