#include "tls/server_context.h"

#include <sys/stat.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/ssl.h>

#include <utility>

#include "tls/certificates.h"

namespace ig::tls {
namespace {

namespace ssl = boost::asio::ssl;

constexpr std::size_t kMaxPemBytes = 1 << 20;

// TLS 1.2 suites: ECDHE + AEAD only (TLS 1.3 suites are OpenSSL's defaults,
// which are all AEAD).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr unsigned char kSessionIdContext[] = "isolation-gate";

std::string describe(const boost::system::error_code& ec) {
  const std::string queue = openssl_error_queue();
  return queue.empty() ? ec.message() : ec.message() + "; " + queue;
}

// Client authentication: a store of exactly the CAs in `pem`, their names
// sent as the acceptable ones, a client certificate required.
Result<void> require_client_certificates(SSL_CTX* raw, std::string_view pem) {
  X509_STORE* store = X509_STORE_new();
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  if (store == nullptr || names == nullptr) {
    X509_STORE_free(store);
    sk_X509_NAME_pop_free(names, X509_NAME_free);
    return fail("allocating the client CA store");
  }
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int count = 0;
  bool ok = bio != nullptr;
  while (ok) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    ok = X509_STORE_add_cert(store, cert) == 1;
    X509_NAME* name = ok ? X509_NAME_dup(X509_get_subject_name(cert)) : nullptr;
    ok = ok && name != nullptr && sk_X509_NAME_push(names, name) > 0;
    if (!ok) X509_NAME_free(name);
    X509_free(cert);
    ++count;
  }
  BIO_free(bio);
  ERR_clear_error();  // the end of the PEM stream leaves "no start line"
  if (!ok || count == 0) {
    X509_STORE_free(store);
    sk_X509_NAME_pop_free(names, X509_NAME_free);
    return fail(count == 0 ? "the client CA file holds no PEM certificate" : "loading the client CA");
  }
  SSL_CTX_set_cert_store(raw, store);          // takes ownership
  SSL_CTX_set_client_CA_list(raw, names);      // takes ownership
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(raw, 4);
  return {};
}

}  // namespace

Result<std::shared_ptr<ssl::context>> make_server_context(std::string_view cert_pem,
                                                          std::string_view key_pem,
                                                          std::string_view client_ca_pem) {
  ERR_clear_error();
  std::shared_ptr<ssl::context> ctx;
  try {
    ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  } catch (const std::exception& e) {
    return fail(std::string("creating TLS context: ") + e.what());
  }
  SSL_CTX* raw = ctx->native_handle();

  if (SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(raw, 0) != 1) {
    return fail("setting TLS protocol versions: " + openssl_error_queue());
  }
  SSL_CTX_set_options(raw, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_SSLv3 |
                               SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1);
  if (SSL_CTX_set_cipher_list(raw, kTls12Ciphers) != 1) {
    return fail("setting TLS 1.2 ciphers: " + openssl_error_queue());
  }
  // ECDH group selection is automatic in OpenSSL 3; restrict it to modern curves.
  if (SSL_CTX_set1_groups_list(raw, "X25519:P-256:P-384") != 1) {
    return fail("setting ECDHE groups: " + openssl_error_queue());
  }
  // Resumption: a server-side cache for TLS 1.2 session ids, tickets (on by
  // default) for both versions.
  SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(raw, 20000);
  SSL_CTX_set_timeout(raw, 2 * 60 * 60);
  SSL_CTX_set_session_id_context(raw, kSessionIdContext, sizeof kSessionIdContext - 1);
  SSL_CTX_set_mode(raw, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

  boost::system::error_code ec;
  ctx->use_certificate_chain(boost::asio::buffer(cert_pem.data(), cert_pem.size()), ec);
  if (ec) {
    return fail("loading certificate (PEM chain, leaf first): " + describe(ec));
  }
  // Parse the key ourselves so that "unreadable" and "does not match" are
  // distinct errors (SSL_CTX_use_PrivateKey reports both alike).
  EVP_PKEY* key = nullptr;
  if (BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()))) {
    key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
  }
  if (key == nullptr) {
    return fail("loading private key (PEM): " + openssl_error_queue());
  }
  const bool matches = X509_check_private_key(SSL_CTX_get0_certificate(raw), key) == 1;
  ERR_clear_error();
  const bool used = matches && SSL_CTX_use_PrivateKey(raw, key) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    return fail("the private key does not match the certificate");
  }
  if (!used) {
    return fail("loading private key: " + openssl_error_queue());
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    return fail("the private key does not match the certificate: " + openssl_error_queue());
  }
  if (!client_ca_pem.empty()) {
    if (auto required = require_client_certificates(raw, client_ca_pem); !required)
      return fail(required.error());
  }
  ERR_clear_error();
  return ctx;
}

ReloadingTlsContext::ReloadingTlsContext(std::string cert_path, std::string key_path,
                                         std::string client_ca_path, LogFn log)
    : cert_path_(std::move(cert_path)),
      key_path_(std::move(key_path)),
      client_ca_path_(std::move(client_ca_path)),
      log_(std::move(log)) {}

ReloadingTlsContext::~ReloadingTlsContext() { stop_watching(); }

Result<std::unique_ptr<ReloadingTlsContext>> ReloadingTlsContext::from_files(std::string cert_path,
                                                                             std::string key_path,
                                                                             LogFn log,
                                                                             std::string client_ca_path) {
  std::unique_ptr<ReloadingTlsContext> self(new ReloadingTlsContext(
      std::move(cert_path), std::move(key_path), std::move(client_ca_path), std::move(log)));
  {
    std::lock_guard poll_lock(self->poll_mu_);
    self->seen_cert_ = stat_file(self->cert_path_);
    self->seen_key_ = stat_file(self->key_path_);
    if (!self->client_ca_path_.empty()) self->seen_ca_ = stat_file(self->client_ca_path_);
    auto cert = read_small_file(self->cert_path_, kMaxPemBytes);
    if (!cert) return fail(cert.error());
    auto key = read_small_file(self->key_path_, kMaxPemBytes);
    if (!key) return fail(key.error());
    std::string ca;
    if (!self->client_ca_path_.empty()) {
      auto read = read_small_file(self->client_ca_path_, kMaxPemBytes);
      if (!read) return fail(read.error());
      ca = std::move(*read);
    }
    if (auto installed = self->install(*cert, *key, ca); !installed) {
      std::string files = self->cert_path_ + " / " + self->key_path_;
      if (!self->client_ca_path_.empty()) files += " / " + self->client_ca_path_;
      return fail(files + ": " + installed.error());
    }
  }
  return self;
}

Result<std::unique_ptr<ReloadingTlsContext>> ReloadingTlsContext::from_pem(std::string_view cert_pem,
                                                                           std::string_view key_pem,
                                                                           LogFn log,
                                                                           std::string client_ca_path) {
  std::unique_ptr<ReloadingTlsContext> self(
      new ReloadingTlsContext({}, {}, std::move(client_ca_path), std::move(log)));
  std::lock_guard poll_lock(self->poll_mu_);
  std::string ca;
  if (!self->client_ca_path_.empty()) {
    self->seen_ca_ = stat_file(self->client_ca_path_);
    auto read = read_small_file(self->client_ca_path_, kMaxPemBytes);
    if (!read) return fail(read.error());
    ca = std::move(*read);
  }
  if (auto installed = self->install(cert_pem, key_pem, ca); !installed) {
    if (self->client_ca_path_.empty()) return fail(installed.error());
    return fail(self->client_ca_path_ + ": " + installed.error());
  }
  return self;
}

std::shared_ptr<ssl::context> ReloadingTlsContext::current() const {
  std::lock_guard lock(mu_);
  return ctx_;
}

std::chrono::system_clock::time_point ReloadingTlsContext::not_after() const {
  std::lock_guard lock(mu_);
  return not_after_;
}

std::string ReloadingTlsContext::certificate_pem() const {
  std::lock_guard lock(mu_);
  return cert_pem_;
}

Result<void> ReloadingTlsContext::install(std::string_view cert_pem, std::string_view key_pem,
                                          std::string_view client_ca_pem) {
  if (!client_ca_path_.empty() && client_ca_pem.empty())
    return fail("the client CA file is empty");  // never serve without client authentication
  auto ctx = make_server_context(cert_pem, key_pem, client_ca_pem);
  if (!ctx) return fail(ctx.error());
  std::string pem(cert_pem);
  auto not_after = certificate_not_after(pem);
  if (!not_after) return fail(not_after.error());
  std::lock_guard lock(mu_);
  ctx_ = std::move(*ctx);
  not_after_ = *not_after;
  cert_pem_ = std::move(pem);
  key_pem_ = std::string(key_pem);
  client_ca_pem_ = std::string(client_ca_pem);
  return {};
}

void ReloadingTlsContext::log(std::string_view level, const std::string& msg) const {
  if (log_) log_(level, msg);
}

ReloadingTlsContext::FileState ReloadingTlsContext::stat_file(const std::string& path) {
  FileState s;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = static_cast<unsigned long long>(st.st_size);
  s.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return s;
}

bool ReloadingTlsContext::poll_for_changes() {
  if (!watches_files()) return false;
  std::lock_guard poll_lock(poll_mu_);
  const FileState cert_state = cert_path_.empty() ? FileState{} : stat_file(cert_path_);
  const FileState key_state = cert_path_.empty() ? FileState{} : stat_file(key_path_);
  const FileState ca_state = client_ca_path_.empty() ? FileState{} : stat_file(client_ca_path_);
  if (cert_state == seen_cert_ && key_state == seen_key_ && ca_state == seen_ca_) return false;
  // Remember this state whether or not it loads: a broken set is reported
  // once, and retried as soon as any file changes again.
  seen_cert_ = cert_state;
  seen_key_ = key_state;
  seen_ca_ = ca_state;
  auto loaded = [this]() -> Result<void> {
    std::string cert, key, ca;
    if (cert_path_.empty()) {  // in-memory serving certificate: keep it
      std::lock_guard lock(mu_);
      cert = cert_pem_;
      key = key_pem_;
    } else {
      auto c = read_small_file(cert_path_, kMaxPemBytes);
      if (!c) return fail(c.error());
      auto k = read_small_file(key_path_, kMaxPemBytes);
      if (!k) return fail(k.error());
      cert = std::move(*c);
      key = std::move(*k);
    }
    if (!client_ca_path_.empty()) {
      auto a = read_small_file(client_ca_path_, kMaxPemBytes);
      if (!a) return fail(a.error());
      ca = std::move(*a);
    }
    return install(cert, key, ca);
  }();
  std::string files = cert_path_.empty() ? std::string() : cert_path_ + " / " + key_path_;
  if (!client_ca_path_.empty()) files += (files.empty() ? "" : " / ") + client_ca_path_;
  if (!loaded) {
    log("error", "TLS reload failed, keeping the current certificate and client CA: " + files + ": " +
                     loaded.error());
    return false;
  }
  // The states were taken before reading: a file that changed while we read it
  // differs from them at the next poll and is loaded again.
  const auto n = reloads_.fetch_add(1, std::memory_order_relaxed) + 1;
  log("info", "TLS reloaded from " + files + " (reload " + std::to_string(n) + ")");
  return true;
}

Result<void> ReloadingTlsContext::replace_pem(std::string_view cert_pem, std::string_view key_pem) {
  std::lock_guard poll_lock(poll_mu_);
  std::string ca;
  {
    std::lock_guard lock(mu_);
    ca = client_ca_pem_;
  }
  if (auto installed = install(cert_pem, key_pem, ca); !installed) {
    log("error", "TLS certificate replacement rejected, keeping the current certificate: " +
                     installed.error());
    return installed;
  }
  const auto n = reloads_.fetch_add(1, std::memory_order_relaxed) + 1;
  log("info", "TLS certificate replaced (reload " + std::to_string(n) + ")");
  return {};
}

void ReloadingTlsContext::start_watching(std::chrono::milliseconds interval) {
  if (!watches_files()) return;
  std::lock_guard lock(watch_mu_);
  if (watcher_.joinable()) return;
  stop_ = false;
  watcher_ = std::thread([this, interval] { watch_loop(interval); });
}

void ReloadingTlsContext::stop_watching() {
  std::thread t;
  {
    std::lock_guard lock(watch_mu_);
    stop_ = true;
    t = std::move(watcher_);
  }
  watch_cv_.notify_all();
  if (t.joinable()) t.join();
}

void ReloadingTlsContext::watch_loop(std::chrono::milliseconds interval) {
  std::unique_lock lock(watch_mu_);
  while (!stop_) {
    if (watch_cv_.wait_for(lock, interval, [this] { return stop_; })) break;
    lock.unlock();
    try {
      poll_for_changes();
    } catch (const std::exception& e) {  // allocation failure: keep watching
      log("error", std::string("TLS certificate poll failed: ") + e.what());
    }
    lock.lock();
  }
}

}  // namespace ig::tls
