// Server TLS contexts and their hot reload (tls/server_context.h).
#include "tls/server_context.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tls/certificates.h"

namespace ig::tls {
namespace {

using namespace std::chrono_literals;

// The error of a failed Result ("" when it succeeded), for assertions.
template <typename T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? std::string() : r.error();
}

CertificateBundle chain(std::chrono::seconds validity = std::chrono::hours(24)) {
  auto b = make_serving_chain({"isolation-gate.isolation-gate-system.svc"}, {"127.0.0.1"}, validity);
  EXPECT_TRUE(b) << error_of(b);
  return b ? *b : CertificateBundle{};
}

struct Logs {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> lines;
  LogFn fn() {
    return [this](std::string_view level, std::string_view msg) {
      std::lock_guard lock(mu);
      lines.emplace_back(level, msg);
    };
  }
  std::size_t count(const std::string& level) {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const auto& l : lines) n += l.first == level;
    return n;
  }
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ig-tlsctx-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write(const std::string& path, const std::string& data) {
  auto written = write_file_atomically(path, data, 0600);
  ASSERT_TRUE(written) << error_of(written);
}

TEST(TlsServerContext, BuildsHardenedContext) {
  const auto b = chain();
  auto ctx = make_server_context(b.cert_pem, b.key_pem);
  ASSERT_TRUE(ctx) << error_of(ctx);
  SSL_CTX* raw = (*ctx)->native_handle();
  EXPECT_EQ(SSL_CTX_get_min_proto_version(raw), TLS1_2_VERSION);
  const auto opts = SSL_CTX_get_options(raw);
  EXPECT_TRUE(opts & SSL_OP_NO_COMPRESSION);
  EXPECT_TRUE(opts & SSL_OP_NO_RENEGOTIATION);
  EXPECT_FALSE(opts & SSL_OP_NO_TICKET);
  EXPECT_EQ(SSL_CTX_get_session_cache_mode(raw) & SSL_SESS_CACHE_SERVER, SSL_SESS_CACHE_SERVER);
  // Only ECDHE AEAD suites for TLS 1.2.
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(raw);
  ASSERT_NE(ciphers, nullptr);
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
    if (std::string_view(SSL_CIPHER_get_name(c)).substr(0, 4) == "TLS_") continue;  // TLS 1.3
    EXPECT_EQ(SSL_CIPHER_get_kx_nid(c), NID_kx_ecdhe) << SSL_CIPHER_get_name(c);
    EXPECT_TRUE(SSL_CIPHER_is_aead(c)) << SSL_CIPHER_get_name(c);
  }
}

TEST(TlsServerContext, MismatchedKeyIsAClearError) {
  const auto a = chain(), b = chain();
  auto mismatched = make_server_context(a.cert_pem, b.key_pem);
  EXPECT_FALSE(mismatched);
  EXPECT_NE(error_of(mismatched).find("does not match"), std::string::npos) << error_of(mismatched);
  auto bad_cert = make_server_context("garbage", a.key_pem);
  EXPECT_FALSE(bad_cert);
  EXPECT_NE(error_of(bad_cert).find("certificate"), std::string::npos) << error_of(bad_cert);
  auto bad_key = make_server_context(a.cert_pem, "garbage");
  EXPECT_FALSE(bad_key);
  EXPECT_NE(error_of(bad_key).find("private key"), std::string::npos) << error_of(bad_key);
  // A chain (leaf + CA) is accepted.
  auto with_chain = make_server_context(a.cert_pem + a.ca_cert_pem, a.key_pem);
  EXPECT_TRUE(with_chain) << error_of(with_chain);
}

TEST(TlsReloadingContext, ReloadsOnlyCompleteMatchingPairs) {
  TempDir dir;
  const auto a = chain(), b = chain(std::chrono::hours(48));
  write(dir.file("tls.crt"), a.cert_pem);
  write(dir.file("tls.key"), a.key_pem);
  Logs logs;
  auto loaded = ReloadingTlsContext::from_files(dir.file("tls.crt"), dir.file("tls.key"), logs.fn());
  ASSERT_TRUE(loaded) << error_of(loaded);
  const auto& reloading = *loaded;
  const auto first = reloading->current();
  ASSERT_TRUE(first);
  EXPECT_EQ(reloading->reload_count(), 0u);
  EXPECT_FALSE(reloading->poll_for_changes());  // nothing changed
  EXPECT_EQ(reloading->current(), first);

  // Half of a rotation: new certificate, old key -> keep the old context, log once.
  write(dir.file("tls.crt"), b.cert_pem);
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_EQ(reloading->current(), first);
  EXPECT_EQ(logs.count("error"), 1u);
  EXPECT_EQ(reloading->certificate_pem(), a.cert_pem);

  // The key arrives -> swap.
  write(dir.file("tls.key"), b.key_pem);
  EXPECT_TRUE(reloading->poll_for_changes());
  EXPECT_NE(reloading->current(), first);
  EXPECT_EQ(reloading->reload_count(), 1u);
  EXPECT_EQ(reloading->certificate_pem(), b.cert_pem);
  EXPECT_EQ(logs.count("info"), 1u);
  EXPECT_GT(reloading->not_after(), std::chrono::system_clock::now() + 47h);

  // A truncated (half-written) certificate is refused.
  const auto second = reloading->current();
  write(dir.file("tls.crt"), a.cert_pem.substr(0, a.cert_pem.size() / 2));
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_EQ(reloading->current(), second);
  // A missing file is refused too.
  std::filesystem::remove(dir.file("tls.key"));
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_EQ(reloading->current(), second);
  EXPECT_EQ(reloading->reload_count(), 1u);
}

TEST(TlsReloadingContext, InitialLoadErrors) {
  TempDir dir;
  auto missing = ReloadingTlsContext::from_files(dir.file("none.crt"), dir.file("none.key"), {});
  EXPECT_FALSE(missing);
  EXPECT_NE(error_of(missing).find("none.crt"), std::string::npos) << error_of(missing);
  const auto a = chain(), b = chain();
  write(dir.file("tls.crt"), a.cert_pem);
  write(dir.file("tls.key"), b.key_pem);
  auto mismatched = ReloadingTlsContext::from_files(dir.file("tls.crt"), dir.file("tls.key"), {});
  EXPECT_FALSE(mismatched);
  EXPECT_NE(error_of(mismatched).find("does not match"), std::string::npos) << error_of(mismatched);
}

TEST(TlsReloadingContext, WatcherPicksUpChanges) {
  TempDir dir;
  const auto a = chain(), b = chain();
  write(dir.file("tls.crt"), a.cert_pem);
  write(dir.file("tls.key"), a.key_pem);
  auto loaded = ReloadingTlsContext::from_files(dir.file("tls.crt"), dir.file("tls.key"), {});
  ASSERT_TRUE(loaded) << error_of(loaded);
  const auto& reloading = *loaded;
  reloading->start_watching(10ms);
  reloading->start_watching(10ms);  // idempotent
  write(dir.file("tls.key"), b.key_pem);
  write(dir.file("tls.crt"), b.cert_pem);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (reloading->certificate_pem() != b.cert_pem && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(reloading->certificate_pem(), b.cert_pem);
  reloading->stop_watching();
  reloading->stop_watching();
}

TEST(TlsReloadingContext, InMemoryReplace) {
  const auto a = chain(), b = chain();
  Logs logs;
  auto loaded = ReloadingTlsContext::from_pem(a.cert_pem, a.key_pem, logs.fn());
  ASSERT_TRUE(loaded) << error_of(loaded);
  const auto& reloading = *loaded;
  const auto first = reloading->current();
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_FALSE(reloading->replace_pem(b.cert_pem, a.key_pem));
  EXPECT_EQ(reloading->current(), first);
  EXPECT_EQ(logs.count("error"), 1u);
  auto replaced = reloading->replace_pem(b.cert_pem, b.key_pem);
  EXPECT_TRUE(replaced) << error_of(replaced);
  EXPECT_NE(reloading->current(), first);
  EXPECT_EQ(reloading->reload_count(), 1u);
  reloading->start_watching();  // no-op for in-memory
}

TEST(TlsServerContext, ClientCaRequiresAPeerCertificate) {
  const auto b = chain(), client_ca = chain();
  auto without = make_server_context(b.cert_pem, b.key_pem);
  ASSERT_TRUE(without) << error_of(without);
  EXPECT_EQ(SSL_CTX_get_verify_mode((*without)->native_handle()), SSL_VERIFY_NONE);
  auto with = make_server_context(b.cert_pem, b.key_pem, client_ca.ca_cert_pem + b.ca_cert_pem);
  ASSERT_TRUE(with) << error_of(with);
  SSL_CTX* raw = (*with)->native_handle();
  EXPECT_EQ(SSL_CTX_get_verify_mode(raw), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
  // Both CAs are named as acceptable to the client.
  ASSERT_NE(SSL_CTX_get_client_CA_list(raw), nullptr);
  EXPECT_EQ(sk_X509_NAME_num(SSL_CTX_get_client_CA_list(raw)), 2);
  for (const char* bad : {"garbage", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}) {
    auto refused = make_server_context(b.cert_pem, b.key_pem, bad);
    EXPECT_FALSE(refused) << bad;
  }
  EXPECT_NE(error_of(make_server_context(b.cert_pem, b.key_pem, "garbage")).find("no PEM certificate"),
            std::string::npos);
}

TEST(TlsReloadingContext, ClientCaFileIsWatchedForInMemoryCertificates) {
  TempDir dir;
  const auto serving = chain(), ca_a = chain(), ca_b = chain();
  write(dir.file("client-ca.crt"), ca_a.ca_cert_pem);
  Logs logs;
  auto loaded = ReloadingTlsContext::from_pem(serving.cert_pem, serving.key_pem, logs.fn(),
                                              dir.file("client-ca.crt"));
  ASSERT_TRUE(loaded) << error_of(loaded);
  const auto& reloading = *loaded;
  const auto first = reloading->current();
  EXPECT_FALSE(reloading->poll_for_changes());
  write(dir.file("client-ca.crt"), ca_b.ca_cert_pem);
  EXPECT_TRUE(reloading->poll_for_changes());
  EXPECT_NE(reloading->current(), first);
  EXPECT_EQ(reloading->certificate_pem(), serving.cert_pem);  // the serving certificate is kept
  EXPECT_EQ(SSL_CTX_get_verify_mode(reloading->current()->native_handle()),
            SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
  // A broken or empty file keeps the current context, and says so once.
  const auto second = reloading->current();
  write(dir.file("client-ca.crt"), "");
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_FALSE(reloading->poll_for_changes());
  EXPECT_EQ(reloading->current(), second);
  EXPECT_EQ(logs.count("error"), 1u);
  // replace_pem keeps requiring client certificates.
  const auto next = chain();
  ASSERT_TRUE(reloading->replace_pem(next.cert_pem, next.key_pem));
  EXPECT_EQ(SSL_CTX_get_verify_mode(reloading->current()->native_handle()),
            SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
}

TEST(TlsReloadingContext, MissingOrEmptyClientCaFileIsAnError) {
  TempDir dir;
  const auto serving = chain();
  auto missing = ReloadingTlsContext::from_pem(serving.cert_pem, serving.key_pem, {}, dir.file("none.crt"));
  EXPECT_FALSE(missing);
  write(dir.file("empty.crt"), "");
  auto empty = ReloadingTlsContext::from_pem(serving.cert_pem, serving.key_pem, {}, dir.file("empty.crt"));
  EXPECT_FALSE(empty);
  EXPECT_NE(error_of(empty).find("empty.crt"), std::string::npos) << error_of(empty);
}

}  // namespace
}  // namespace ig::tls
