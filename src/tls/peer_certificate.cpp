#include "tls/peer_certificate.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace ig::tls {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// The verify callback keeps the leaf the server presented, and accepts
// (nothing is trusted or refused here).
int keep_leaf(int, X509_STORE_CTX* store) {
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
  SSL* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* out = static_cast<std::string*>(SSL_get_app_data(ssl));
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  if (out == nullptr || cert == nullptr || !out->empty()) return 1;
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (bio && PEM_write_bio_X509(bio.get(), cert) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    if (n > 0) out->assign(data, static_cast<std::size_t>(n));
  }
  return 1;
}

}  // namespace

Result<std::string> fetch_peer_certificate(const std::string& host, std::uint16_t port,
                                           const std::string& server_name, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return fail(where + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);

  Fd sock;
  sock.fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sock.fd < 0) return fail(where + ": socket: " + std::strerror(errno));
  if (::connect(sock.fd, found->ai_addr, found->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return fail(where + ": connect: " + std::strerror(errno));
    if (!wait_ready(sock.fd, POLLOUT, deadline)) return fail(where + ": connect: timed out");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail(where + ": connect: " + std::strerror(err));
  }

  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return fail(where + ": SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, keep_leaf);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  if (!ssl) return fail(where + ": SSL_new failed");
  std::string leaf;
  SSL_set_app_data(ssl.get(), &leaf);
  SSL_set_tlsext_host_name(ssl.get(), server_name.c_str());
  SSL_set_fd(ssl.get(), sock.fd);
  std::string failure;
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl.get());
    if (rc == 1) break;
    const int e = SSL_get_error(ssl.get(), rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      if (wait_ready(sock.fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) continue;
      failure = "handshake: timed out";
      break;
    }
    char text[256] = "";
    ERR_error_string_n(ERR_peek_last_error(), text, sizeof text);
    failure = std::string("handshake: ") + (text[0] ? text : "failed");
    break;
  }
  SSL_set_app_data(ssl.get(), nullptr);
  if (!leaf.empty()) {
    if (failure.empty()) SSL_shutdown(ssl.get());  // best effort: a close_notify, not waited for
    return leaf;
  }
  return fail(where + ": " + (failure.empty() ? std::string("no certificate presented") : failure));
}

}  // namespace ig::tls
