// Cluster configuration (kube/config.h): in-cluster from a temporary
// service-account directory, kubeconfig variants and every refusal, and the
// token source following a rotating token file (on a fake clock).
#include "kube/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "kube/tls_material.h"
#include "tls/certificates.h"

namespace ig::kube {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) | static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

const tls::CertificateBundle& bundle() {
  static const tls::CertificateBundle kBundle = [] {
    auto b = tls::make_serving_chain({"localhost"}, {"127.0.0.1"}, std::chrono::hours(24));
    if (!b) throw std::runtime_error(b.error());
    return *b;
  }();
  return kBundle;
}

class KubeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kube_config_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = fs::path(dir_) / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p.string();
  }

  // A kubeconfig with one context "ctx" -> cluster "c", user "u".
  std::string kubeconfig(const std::string& cluster_extra, const std::string& user_extra,
                         const std::string& context_extra = "", const std::string& top = "") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n" + top +
           "clusters:\n- name: c\n  cluster:\n    server: https://api.example:6443/\n" + cluster_extra +
           "users:\n- name: u\n  user:\n" + user_extra +
           "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n" + context_extra;
  }
  std::string ca_data() const { return "    certificate-authority-data: " + base64(bundle().ca_cert_pem) + "\n"; }
  std::string token() const { return "    token: abc\n"; }

  Result<ClusterConfig> load(const std::string& text, std::string_view context = {}) {
    return kubeconfig_config(write("config", text), context);
  }
  std::string error_of(const std::string& text, std::string_view context = {}) {
    auto c = load(text, context);
    if (c) return "(no error)";
    return c.error();
  }

  std::string dir_;
};

// --- in-cluster ---------------------------------------------------------------

TEST_F(KubeConfigTest, InCluster) {
  InClusterEnv env;
  env.service_host = "10.96.0.1";
  env.service_port = "443";
  env.token_path = write("sa/token", "tok-1\n");
  env.ca_path = write("sa/ca.crt", bundle().ca_cert_pem);
  env.namespace_path = write("sa/namespace", "isolation-gate-system");
  auto c = in_cluster_config(env);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->ca_pem, bundle().ca_cert_pem);
  EXPECT_EQ(c->token_file, env.token_path);
  EXPECT_EQ(c->bearer_token, "");
  EXPECT_EQ(c->namespace_name, "isolation-gate-system");
  EXPECT_EQ(c->source, "in-cluster");
  TokenSource tokens(*c);
  auto t = tokens.credentials();
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ((*t)->token, "tok-1");
}

TEST_F(KubeConfigTest, InClusterIpv6AndNoNamespaceFile) {
  InClusterEnv env;
  env.service_host = "fd00::1";
  env.service_port = "6443";
  env.token_path = write("sa/token", "t");
  env.ca_path = write("sa/ca.crt", bundle().ca_cert_pem);
  env.namespace_path = dir_ + "/sa/absent";
  auto c = in_cluster_config(env);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "https://[fd00::1]:6443");
  EXPECT_EQ(c->namespace_name, "");
}

TEST_F(KubeConfigTest, InClusterErrors) {
  InClusterEnv env;
  env.token_path = write("sa/token", "t");
  env.ca_path = write("sa/ca.crt", bundle().ca_cert_pem);
  auto c = in_cluster_config(env);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set"),
            std::string::npos);
  env.service_host = "10.0.0.1";
  env.service_port = "http";
  c = in_cluster_config(env);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find(R"(KUBERNETES_SERVICE_PORT "http" is not a port number)"), std::string::npos);
  env.service_port = "443";
  env.token_path = write("sa/empty", "\n");
  c = in_cluster_config(env);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("is empty"), std::string::npos) << c.error();
  env.token_path = dir_ + "/nope";
  c = in_cluster_config(env);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find(dir_ + "/nope"), std::string::npos) << c.error();
  env.token_path = write("sa/token", "t");
  env.ca_path = write("sa/bad.crt", "not a certificate");
  c = in_cluster_config(env);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("no PEM CERTIFICATE"), std::string::npos) << c.error();
}

// --- kubeconfig -------------------------------------------------------------

TEST_F(KubeConfigTest, KubeconfigWithDataFields) {
  const std::string text = kubeconfig(ca_data(), token(), "    namespace: team-a\n");
  auto c = load(text);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "https://api.example:6443");  // trailing '/' dropped
  EXPECT_EQ(c->ca_pem, bundle().ca_cert_pem);
  EXPECT_EQ(c->bearer_token, "abc");
  EXPECT_EQ(c->namespace_name, "team-a");
  EXPECT_EQ(c->source, "kubeconfig " + dir_ + "/config, context \"ctx\"");
}

TEST_F(KubeConfigTest, KubeconfigRelativeFilesAndClientCertificate) {
  write("certs/ca.pem", bundle().ca_cert_pem);
  write("certs/client.pem", bundle().cert_pem);
  write("certs/client.key", bundle().key_pem);
  write("certs/token", "file-token\n");
  const std::string text = kubeconfig("    certificate-authority: certs/ca.pem\n",
                                      "    client-certificate: certs/client.pem\n"
                                      "    client-key: certs/client.key\n"
                                      "    token: ignored\n"
                                      "    tokenFile: certs/token\n");
  auto c = load(text);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->ca_pem, bundle().ca_cert_pem);
  EXPECT_EQ(c->client_cert_pem, bundle().cert_pem);
  EXPECT_EQ(c->client_key_pem, bundle().key_pem);
  EXPECT_EQ(c->token_file, dir_ + "/certs/token");  // tokenFile wins over token
  EXPECT_EQ(c->bearer_token, "");
}

TEST_F(KubeConfigTest, KubeconfigClientCertificateData) {
  const std::string text = kubeconfig(ca_data(),
                                      "    client-certificate-data: " + base64(bundle().cert_pem) + "\n" +
                                          "    client-key-data: " + base64(bundle().key_pem) + "\n");
  auto c = load(text);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->client_cert_pem, bundle().cert_pem);
  EXPECT_EQ(c->bearer_token, "");
}

TEST_F(KubeConfigTest, KubeconfigMismatchedClientKey) {
  auto other = tls::make_serving_chain({"other"}, {}, std::chrono::hours(1));
  ASSERT_TRUE(other);
  const std::string text = kubeconfig(ca_data(),
                                      "    client-certificate-data: " + base64(bundle().cert_pem) + "\n" +
                                          "    client-key-data: " + base64(other->key_pem) + "\n");
  EXPECT_NE(error_of(text).find("client key does not match the client certificate"), std::string::npos)
      << error_of(text);
  EXPECT_NE(error_of(kubeconfig(ca_data(), "    client-certificate-data: " + base64(bundle().cert_pem) + "\n"))
                .find("client-certificate is set without client-key"),
            std::string::npos);
}

TEST_F(KubeConfigTest, KubeconfigContexts) {
  const std::string text =
      "current-context: one\n"
      "clusters:\n"
      "- name: c1\n  cluster:\n    server: https://one.example\n" + ca_data() +
      "- name: c2\n  cluster:\n    server: https://two.example:8443\n" + ca_data() +
      "users:\n- name: u\n  user:\n    token: t\n"
      "contexts:\n"
      "- name: one\n  context: {cluster: c1, user: u}\n"
      "- name: two\n  context: {cluster: c2, user: u, namespace: ns2}\n";
  auto c = load(text);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "https://one.example");
  c = load(text, "two");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "https://two.example:8443");
  EXPECT_EQ(c->namespace_name, "ns2");
  EXPECT_EQ(error_of(text, "three"),
            "kubeconfig " + dir_ + "/config: context \"three\" not found in contexts");
}

TEST_F(KubeConfigTest, KubeconfigUnsupportedFieldsAreNamed) {
  const std::string p = "kubeconfig " + dir_ + "/config: ";
  struct Case {
    std::string cluster_extra, user_extra, want;
  };
  const std::string cred = "use token, tokenFile or a client certificate";
  const Case cases[] = {
      {ca_data(), "    auth-provider:\n      name: gcp\n",
       "user \"u\": field auth-provider is not supported (auth providers are not supported; " + cred + ")"},
      {ca_data(), "    username: admin\n    password: x\n",
       "user \"u\": field username is not supported (basic authentication is not supported; " + cred + ")"},
      {ca_data(), "    password: x\n    token: t\n",
       "user \"u\": field password is not supported (basic authentication is not supported; " + cred + ")"},
      {ca_data(), "    token: t\n    as: someone\n", "user \"u\": field as is not supported (impersonation is not supported)"},
      {ca_data(), "    token: t\n    as-groups: [g]\n",
       "user \"u\": field as-groups is not supported (impersonation is not supported)"},
      {ca_data() + "    proxy-url: http://proxy:3128\n", token(),
       "cluster \"c\": field proxy-url is not supported (the client connects to the server directly)"},
      {ca_data() + "    tls-server-name: other\n", token(),
       "cluster \"c\": field tls-server-name is not supported (the server certificate must name the "
       "server's host)"},
      {ca_data() + "    insecure-skip-tls-verify: true\n", token(),
       "cluster \"c\": field insecure-skip-tls-verify: true is not supported (the client verifies the "
       "server against the cluster CA)"},
      {"", token(),
       "cluster \"c\": neither certificate-authority nor certificate-authority-data is set (the client "
       "trusts only the cluster CA)"},
      {ca_data(), "    {}\n", "(see below)"},
  };
  for (const Case& c : cases) {
    if (c.want == "(see below)") continue;
    EXPECT_EQ(error_of(kubeconfig(c.cluster_extra, c.user_extra)), p + c.want);
  }
  // No credentials at all: never an anonymous client.
  EXPECT_EQ(error_of(kubeconfig(ca_data(), "")),
            p + "user \"u\" has no credentials (token, tokenFile, client-certificate/client-key or exec); an "
                "anonymous client is not supported");
  // Empty or false values of unsupported fields are fine.
  EXPECT_TRUE(load(kubeconfig(ca_data() + "    insecure-skip-tls-verify: false\n    proxy-url: \"\"\n",
                              "    token: t\n    exec: null\n    as-groups: []\n")));
}

TEST_F(KubeConfigTest, KubeconfigServerAndStructureErrors) {
  const std::string p = "kubeconfig " + dir_ + "/config: ";
  auto with_server = [&](const std::string& server) {
    return "current-context: ctx\nclusters:\n- name: c\n  cluster:\n" + server + ca_data() +
           "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u}\n";
  };
  EXPECT_EQ(error_of(with_server("")), p + "cluster \"c\": field server is missing");
  EXPECT_EQ(error_of(with_server("    server: http://api:8080\n")),
            p + "cluster \"c\": field server \"http://api:8080\" is not an https:// URL");
  EXPECT_EQ(error_of(with_server("    server: https://\n")),
            p + "cluster \"c\": field server \"https://\" names no host");
  EXPECT_EQ(error_of("clusters: []\n"), p + "no current-context is set and no --context was given");
  EXPECT_EQ(error_of("current-context: x\n"), p + "context \"x\" not found in contexts");
  EXPECT_EQ(error_of("current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n"),
            p + "context \"x\" names no cluster");
  EXPECT_EQ(error_of("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"),
            p + "context \"x\" names no user (an anonymous client is not supported)");
  EXPECT_EQ(error_of("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"),
            p + "cluster \"c\" not found in clusters");
  EXPECT_EQ(error_of(kubeconfig(ca_data(), token()) + "- name: ctx\n  context: {cluster: c, user: u}\n"),
            p + "contexts: two entries are named \"ctx\"");
  EXPECT_EQ(error_of("- a list\n"), p + "not a kubeconfig (the top level is not a map)");
  EXPECT_EQ(error_of("a: [unclosed\n").rfind(p + "not YAML: line ", 0), 0u) << error_of("a: [unclosed\n");
  EXPECT_EQ(error_of(kubeconfig("    certificate-authority-data: '!!notbase64'\n", token())),
            p + "cluster \"c\": field certificate-authority-data: not base64");
  EXPECT_EQ(error_of(kubeconfig("    certificate-authority: missing.pem\n", token()))
                .rfind(p + "cluster \"c\": field certificate-authority: opening " + dir_ + "/missing.pem", 0),
            0u);
  EXPECT_EQ(error_of(kubeconfig(ca_data(), "    token: [1]\n")), p + "user \"u\": field token must be a string");
  EXPECT_EQ(kubeconfig_config(dir_ + "/absent").error().rfind("kubeconfig: opening " + dir_ + "/absent", 0), 0u);
}

TEST_F(KubeConfigTest, KubeconfigDuplicateKeys) {
  const std::string p = "kubeconfig " + dir_ + "/config: ";
  // At the top level.
  EXPECT_EQ(error_of(kubeconfig(ca_data(), token(), "", "current-context: other\n")),
            p + "duplicate key \"current-context\" in the top level (line 4)");
  // Deep inside: a second server for the same cluster.
  EXPECT_EQ(error_of(kubeconfig(ca_data() + "    server: https://evil.example\n", token())),
            p + "duplicate key \"server\" in clusters[0].cluster (line 9)");
  EXPECT_EQ(error_of(kubeconfig(ca_data(), "    token: a\n    token: b\n")),
            p + "duplicate key \"token\" in users[0].user (line 13)");
}

TEST_F(KubeConfigTest, KubeconfigAliasBombIsBounded) {
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'k'; ++c) {
    text += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) text += std::string(i ? ", *" : "*") + prev;
    text += "]\n";
    prev = c;
  }
  EXPECT_EQ(error_of(text), "kubeconfig " + dir_ + "/config: more than 100000 YAML nodes (aliases?)");
}

// --- choosing the source ------------------------------------------------------

TEST_F(KubeConfigTest, LoadChoosesFlagThenEnvThenInCluster) {
  const std::string a = write("a", kubeconfig(ca_data(), token()));
  const std::string b = write("b", "not: [a kubeconfig");
  InClusterEnv env;
  env.kubeconfig = b + ":" + a;
  auto c = load_cluster_config(a, "", env);  // the flag wins over $KUBECONFIG
  ASSERT_TRUE(c) << c.error();
  c = load_cluster_config("", "", env);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().rfind("$KUBECONFIG: kubeconfig " + b + ": not YAML", 0), 0u) << c.error();
  env.kubeconfig = ":" + a + ":" + b;
  c = load_cluster_config("", "", env);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->source,
            "kubeconfig " + a + ", context \"ctx\" (the first of 2 paths in $KUBECONFIG; the others are not merged)");
  c = load_cluster_config(b, "", env);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().rfind("--kubeconfig: kubeconfig " + b, 0), 0u) << c.error();
  env.kubeconfig.clear();
  c = load_cluster_config("", "", env);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().rfind("no --kubeconfig and no $KUBECONFIG, so tried in-cluster config: ", 0), 0u)
      << c.error();
  c = load_cluster_config("", "ctx", env);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), "--context \"ctx\" needs a kubeconfig (--kubeconfig or $KUBECONFIG); none was given");
}

// --- the token source ---------------------------------------------------------

// The token credentials() gives now, or its error.
std::string token_of(TokenSource& tokens) {
  auto c = tokens.credentials();
  return c ? (*c)->token : "(error: " + c.error() + ")";
}

TEST_F(KubeConfigTest, TokenFileRotationIsPickedUp) {
  ClusterConfig config;
  config.token_file = write("token", "one\n");
  auto clock = std::make_shared<FakeClock>();
  TokenSource tokens(config, clock);
  EXPECT_EQ(token_of(tokens), "one");
  // Rotated (the kubelet writes a new file and swaps it in): within the same
  // second the cached value is still used; after a second the new one.
  const std::string fresh = write("token.new", "two-longer\n");
  fs::rename(fresh, config.token_file);
  EXPECT_EQ(token_of(tokens), "one");
  clock->advance(1s);
  EXPECT_EQ(token_of(tokens), "two-longer");
  // After a 401 the file is re-read at once, even within the second.
  write("token", "three-xyz!\n");
  auto renewed = tokens.renew_after_unauthorized(*tokens.credentials());
  ASSERT_TRUE(renewed);
  ASSERT_TRUE(*renewed);
  EXPECT_EQ((*renewed)->token, "three-xyz!");
  EXPECT_EQ(token_of(tokens), "three-xyz!");
  renewed = tokens.renew_after_unauthorized(*tokens.credentials());
  ASSERT_TRUE(renewed);
  EXPECT_FALSE(*renewed);  // unchanged
  // A file that disappears keeps the last good token.
  fs::remove(config.token_file);
  clock->advance(5s);
  EXPECT_EQ(token_of(tokens), "three-xyz!");
  EXPECT_FALSE(tokens.renew_after_unauthorized(*tokens.credentials()));
  write("token", "four\n");
  clock->advance(1s);
  EXPECT_EQ(token_of(tokens), "four");
}

TEST_F(KubeConfigTest, FixedToken) {
  ClusterConfig config;
  config.bearer_token = "static";
  TokenSource tokens(config);
  EXPECT_EQ(token_of(tokens), "static");
  auto r = tokens.renew_after_unauthorized(*tokens.credentials());
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);  // nothing to renew
}

// --- PEM and base64 -----------------------------------------------------------

TEST(KubeTlsMaterial, Base64) {
  EXPECT_EQ(*decode_base64("aGVsbG8=", "f"), "hello");
  EXPECT_EQ(*decode_base64("aGVs\nbG8", "f"), "hello");
  EXPECT_EQ(*decode_base64("", "f"), "");
  EXPECT_EQ(decode_base64("aGVsbG8=x", "f").error(), "f: not base64");
  EXPECT_EQ(decode_base64("a", "f").error(), "f: not base64 (truncated)");
  EXPECT_EQ(decode_base64("aGVsbG8===", "f").error(), "f: not base64 (truncated)");
}

TEST(KubeTlsMaterial, CaBundleOfSeveralCertificates) {
  auto other = tls::make_serving_chain({"other"}, {}, std::chrono::hours(1));
  ASSERT_TRUE(other);
  auto n = check_ca_bundle(bundle().ca_cert_pem + "\n" + other->ca_cert_pem, "ca");
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(check_ca_bundle("", "ca").error(), "ca: no PEM CERTIFICATE found");
  std::string broken = bundle().ca_cert_pem;
  broken[broken.size() / 2] = '*';
  EXPECT_EQ(check_ca_bundle(broken, "ca").error().rfind("ca: certificate 1 does not parse", 0), 0u);
}

TEST(KubeTlsMaterial, TheSameCaTwiceInABundleIsHarmless) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  auto added = add_ca_bundle(store.get(), bundle().ca_cert_pem + bundle().ca_cert_pem, "ca");
  EXPECT_TRUE(added) << added.error();
}

}  // namespace
}  // namespace ig::kube
