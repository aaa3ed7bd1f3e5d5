#include "tls/socket_stream.h"

#include <signal.h>

#include <cerrno>
#include <mutex>

namespace ig::tls::socket_stream_detail {

Step classify(SSL* ssl, int rc, boost::system::error_code& ec) {
  if (rc > 0) return Step::Done;
  const int saved_errno = errno;
  const int why = SSL_get_error(ssl, rc);
  Step step = Step::Failed;
  switch (why) {
    case SSL_ERROR_WANT_READ: step = Step::WantRead; break;
    case SSL_ERROR_WANT_WRITE: step = Step::WantWrite; break;
    case SSL_ERROR_ZERO_RETURN: ec = boost::asio::error::eof; break;  // the peer's close_notify
    case SSL_ERROR_SYSCALL: {
      const unsigned long e = ERR_peek_error();
      if (e != 0) {
        ec = boost::system::error_code(static_cast<int>(e), boost::asio::error::get_ssl_category());
      } else if (saved_errno != 0) {
        ec = boost::system::error_code(saved_errno, boost::system::system_category());
      } else {
        ec = boost::asio::error::eof;  // closed without close_notify
      }
      break;
    }
    default: {
      const unsigned long e = ERR_peek_error();
      ec = boost::system::error_code(e != 0 ? static_cast<int>(e) : why, boost::asio::error::get_ssl_category());
    }
  }
  ERR_clear_error();
  return step;
}

void ignore_sigpipe() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
}

}  // namespace ig::tls::socket_stream_detail
