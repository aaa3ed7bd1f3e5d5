#include "tls/direct_stream.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <climits>
#include <cstdint>

#include <openssl/bio.h>
#include <openssl/err.h>

#include <boost/asio/ssl/error.hpp>

namespace ig::tls::direct_stream_detail {
namespace {

int fd_of(BIO* b) { return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))); }

bool retriable(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

// The socket BIO, with send(MSG_NOSIGNAL) for writes (OpenSSL's own uses
// write(2), which raises SIGPIPE on a connection the peer has closed).
int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::send(fd_of(b), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && retriable(errno)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::recv(fd_of(b), data, static_cast<std::size_t>(len), 0);
  if (n < 0 && retriable(errno)) BIO_set_retry_read(b);
  if (n == 0 && len > 0) BIO_set_flags(b, BIO_FLAGS_IN_EOF);  // OpenSSL asks BIO_eof() then
  return static_cast<int>(n);
}

int bio_puts(BIO* b, const char* s) {
  std::size_t len = 0;
  while (s[len] != '\0') ++len;
  return bio_write(b, s, static_cast<int>(std::min<std::size_t>(len, INT_MAX)));
}

long bio_ctrl(BIO* b, int cmd, long, void* ptr) {
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;  // nothing is buffered here
    case BIO_CTRL_EOF: return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    case BIO_C_GET_FD:
      if (ptr != nullptr) *static_cast<int*>(ptr) = fd_of(b);
      return fd_of(b);
    default: return 0;
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 0);
  BIO_set_data(b, nullptr);
  return 1;
}

int bio_destroy(BIO*) { return 1; }  // the descriptor belongs to the Asio socket

BIO_METHOD* make_method() {
  BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                               "isolation-gate socket");
  if (m == nullptr) return nullptr;
  if (BIO_meth_set_write(m, bio_write) != 1 || BIO_meth_set_read(m, bio_read) != 1 ||
      BIO_meth_set_puts(m, bio_puts) != 1 || BIO_meth_set_ctrl(m, bio_ctrl) != 1 ||
      BIO_meth_set_create(m, bio_create) != 1 || BIO_meth_set_destroy(m, bio_destroy) != 1) {
    BIO_meth_free(m);
    return nullptr;
  }
  return m;
}

}  // namespace

SSL* new_server_ssl(SSL_CTX* ctx, int fd) {
  static BIO_METHOD* const method = make_method();  // once; lives as long as the process
  if (method == nullptr) return nullptr;
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return nullptr;
  BIO* bio = BIO_new(method);
  if (bio == nullptr) {
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);  // one BIO both ways: SSL_free frees it once
  SSL_set_accept_state(ssl);
  SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_read_ahead(ssl, 1);
  return ssl;
}

Step classify(SSL* ssl, int rc, int saved_errno, boost::system::error_code& ec) {
  if (rc > 0) return Step::Done;
  Step step = Step::Failed;
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ: step = Step::WantRead; break;
    case SSL_ERROR_WANT_WRITE: step = Step::WantWrite; break;
    case SSL_ERROR_ZERO_RETURN: ec = boost::asio::error::eof; break;  // the peer's close_notify
    case SSL_ERROR_SYSCALL: {
      const unsigned long e = ERR_peek_error();
      if (e != 0) {
        ec = boost::system::error_code(static_cast<int>(e), boost::asio::error::get_ssl_category());
      } else if (saved_errno != 0 && !retriable(saved_errno)) {
        ec = boost::system::error_code(saved_errno, boost::system::system_category());
      } else {
        ec = boost::asio::ssl::error::stream_truncated;
      }
      break;
    }
    case SSL_ERROR_SSL: {
      const unsigned long e = ERR_peek_error();
      if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        ec = boost::asio::ssl::error::stream_truncated;  // closed without close_notify
      } else {
        ec = boost::system::error_code(static_cast<int>(e), boost::asio::error::get_ssl_category());
      }
      break;
    }
    default: {
      const unsigned long e = ERR_peek_error();
      ec = boost::system::error_code(e != 0 ? static_cast<int>(e) : SSL_ERROR_SSL,
                                     boost::asio::error::get_ssl_category());
    }
  }
  if (step == Step::Failed && !ec) ec = boost::asio::error::fault;  // never "failed" without an error
  ERR_clear_error();
  return step;
}

void clear_errors() noexcept { ERR_clear_error(); }

}  // namespace ig::tls::direct_stream_detail
