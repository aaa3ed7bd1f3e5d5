// TLS on a TCP socket with OpenSSL reading and writing the file descriptor
// itself, as nginx does; Asio only waits for readiness (async_wait).
//
// Why not boost::asio::ssl::stream (under beast::ssl_stream): its engine
// stages every byte through a memory BIO pair and its own buffers, so the
// ciphertext of a request is copied twice more on the way in and a response
// once more on the way out, and every operation runs the engine's composed
// loop (bench/instructions.py: boost::asio::ssl::detail::engine::perform
// about 53k instructions per typical review, libcrypto's BIO copies 13k).
//
// Contract:
// - DirectStream<Socket> is a Beast/Asio AsyncReadStream and AsyncWriteStream
//   (get_executor, async_read_some, async_write_some with any completion
//   token) plus async_handshake (server side) and async_shutdown.
//   next_layer() is the socket, so beast::get_lowest_layer() finds it, and
//   closing the socket (a deadline, a forced close) is how a pending
//   operation is cancelled.
// - The SSL object is made from the SSL_CTX given (the connection's, taken at
//   accept time from tls::ReloadingTlsContext, which must outlive the
//   stream), in accept state, with read-ahead on (one read(2) takes what the
//   socket has, up to OpenSSL's buffer, not a record's 5-byte header and then
//   its body). The socket is put in non-blocking mode. OpenSSL reads it with
//   recv(2) and writes it with send(2, MSG_NOSIGNAL) through this file's own
//   BIO, so a write to a connection the peer closed fails with EPIPE rather
//   than raising SIGPIPE; the process's signal dispositions are not touched.
// - An operation calls OpenSSL at once; when OpenSSL wants to read or write
//   the socket first (SSL_ERROR_WANT_READ/WANT_WRITE, in either direction:
//   a TLS 1.3 KeyUpdate makes a read write), it waits for readiness and calls
//   again with the same arguments. A completion is never invoked from inside
//   the initiating call (it is posted to the socket's executor).
// - async_read_some reads into the first non-empty buffer only (one SSL_read);
//   buffers of zero bytes complete at once with 0. async_write_some writes a
//   single buffer as it is; a sequence of several is copied into one scratch
//   buffer (up to kGatherLimit bytes) and written by one SSL_write, so
//   Beast's header and body go out as one TLS record, not one each.
// - Errors: the peer's close_notify is boost::asio::error::eof; end of stream
//   without it is boost::asio::ssl::error::stream_truncated (as Asio's
//   stream); a transport error is its errno (system category); a TLS failure
//   is an error of Asio's SSL category carrying OpenSSL's packed error code;
//   a readiness wait that fails (socket closed, operation aborted) is that
//   error. Once the socket is closed no OpenSSL call touches the descriptor
//   (its number may already belong to another connection): every attempt
//   checks is_open() first and fails with bad_descriptor. OpenSSL's error
//   queue is cleared before each call and after each failure.
// - async_shutdown sends close_notify, then waits for the peer's (or its end
//   of stream, or an error: application data after our close_notify is
//   refused by OpenSSL) as Asio's stream does, so unread data does not make
//   the close a reset; the caller bounds it with a deadline.
// - Renegotiation is the context's choice (tls/server_context.h refuses it).
// - One operation at a time per direction, all on the socket's executor
//   (each connection of this server lives on one io_context thread); the
//   stream is neither copyable nor movable (operations hold its address).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/system/error_code.hpp>

namespace ig::tls {

namespace direct_stream_detail {

// What one OpenSSL call's return value means.
enum class Step { Done, WantRead, WantWrite, Failed };

// A new server-side SSL object for `fd` from `ctx` (this file's BIO, read-ahead,
// accept state); null when OpenSSL cannot allocate it.
SSL* new_server_ssl(SSL_CTX* ctx, int fd);

// Maps the return value `rc` of SSL_read_ex/SSL_write_ex/SSL_do_handshake/
// SSL_shutdown (success is rc > 0) to a Step and, for Failed, the error
// (contract above). `saved_errno` is errno right after the call. Clears
// OpenSSL's error queue after a failure.
Step classify(SSL* ssl, int rc, int saved_errno, boost::system::error_code& ec);

// Clears OpenSSL's error queue (before a call whose result is classified).
void clear_errors() noexcept;

}  // namespace direct_stream_detail

template <class Socket>
class DirectStream {
 public:
  using next_layer_type = Socket;
  using lowest_layer_type = typename Socket::lowest_layer_type;
  using executor_type = typename Socket::executor_type;

  // Largest write that is gathered into one SSL_write (a TLS record is at most
  // 16 KiB of plaintext; OpenSSL splits larger writes itself).
  static constexpr std::size_t kGatherLimit = 64 * 1024;

  // Throws std::bad_alloc when OpenSSL cannot make the SSL object.
  DirectStream(Socket&& socket, SSL_CTX* ctx) : socket_(std::move(socket)) {
    boost::system::error_code ignored;
    socket_.non_blocking(true, ignored);
    ssl_ = direct_stream_detail::new_server_ssl(ctx, static_cast<int>(socket_.native_handle()));
    if (ssl_ == nullptr) throw std::bad_alloc();
  }
  ~DirectStream() { SSL_free(ssl_); }
  DirectStream(const DirectStream&) = delete;
  DirectStream& operator=(const DirectStream&) = delete;

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  Socket& next_layer() noexcept { return socket_; }
  const Socket& next_layer() const noexcept { return socket_; }
  lowest_layer_type& lowest_layer() noexcept { return socket_.lowest_layer(); }
  SSL* native_handle() noexcept { return ssl_; }

  // Token: void(boost::system::error_code).
  template <class Token>
  auto async_handshake(Token&& token) {
    return start<false>([](SSL* ssl, std::size_t&) { return SSL_do_handshake(ssl); },
                        std::forward<Token>(token));
  }

  // Token: void(boost::system::error_code).
  template <class Token>
  auto async_shutdown(Token&& token) {
    return start<false>(
        [](SSL* ssl, std::size_t&) {
          int rc = SSL_shutdown(ssl);        // 0: ours is out, the peer's not yet seen
          if (rc == 0) rc = SSL_shutdown(ssl);  // -1 and WANT_READ until it is
          return rc == 0 ? 1 : rc;
        },
        std::forward<Token>(token));
  }

  // Token: void(boost::system::error_code, std::size_t).
  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    boost::asio::mutable_buffer b;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::mutable_buffer part(*it);
      if (part.size() != 0) {
        b = part;
        break;
      }
    }
    return start<true>(
        [b](SSL* ssl, std::size_t& n) {
          return b.size() == 0 ? 1 : SSL_read_ex(ssl, b.data(), b.size(), &n);
        },
        std::forward<Token>(token));
  }

  // Token: void(boost::system::error_code, std::size_t).
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    boost::asio::const_buffer b;
    std::size_t parts = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::const_buffer part(*it);
      if (part.size() == 0) continue;
      if (parts++ == 0) b = part;
    }
    if (parts > 1 && b.size() < kGatherLimit) {  // one record, not one per buffer
      scratch_.clear();
      for (auto it = boost::asio::buffer_sequence_begin(buffers);
           it != boost::asio::buffer_sequence_end(buffers) && scratch_.size() < kGatherLimit; ++it) {
        const boost::asio::const_buffer part(*it);
        const std::size_t take = std::min(part.size(), kGatherLimit - scratch_.size());
        scratch_.append(static_cast<const char*>(part.data()), take);
      }
      b = boost::asio::const_buffer(scratch_.data(), scratch_.size());
    }
    return start<true>(
        [b](SSL* ssl, std::size_t& n) {
          return b.size() == 0 ? 1 : SSL_write_ex(ssl, b.data(), b.size(), &n);
        },
        std::forward<Token>(token));
  }

 private:
  // One operation: `attempt` (int(SSL*, std::size_t& n), OpenSSL's return
  // convention) called now and again after each readiness wait.
  template <class Attempt, bool WithSize>
  struct Op {
    DirectStream* stream;
    Attempt attempt;
    enum class Phase : unsigned char { Start, Waiting, Posted } phase = Phase::Start;
    boost::system::error_code result{};
    std::size_t n = 0;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}) {
      using direct_stream_detail::Step;
      if (phase == Phase::Posted) return complete(self);
      Step step = Step::Failed;
      if (ec) {
        result = ec;  // the readiness wait failed: closed or aborted
      } else if (!stream->socket_.is_open()) {
        result = boost::asio::error::bad_descriptor;
      } else {
        direct_stream_detail::clear_errors();
        n = 0;
        const int rc = attempt(stream->ssl_, n);
        step = rc > 0 ? Step::Done : direct_stream_detail::classify(stream->ssl_, rc, errno, result);
      }
      if (step == Step::WantRead || step == Step::WantWrite) {
        phase = Phase::Waiting;
        stream->socket_.async_wait(
            step == Step::WantRead ? boost::asio::socket_base::wait_read : boost::asio::socket_base::wait_write,
            std::move(self));
        return;
      }
      if (step != Step::Done) n = 0;
      if (phase == Phase::Start) {  // never complete inside the initiating call
        phase = Phase::Posted;
        boost::asio::post(stream->socket_.get_executor(), std::move(self));
        return;
      }
      complete(self);
    }

    template <class Self>
    void complete(Self& self) {
      if constexpr (WithSize) {
        self.complete(result, n);
      } else {
        self.complete(result);
      }
    }
  };

  template <bool WithSize, class Attempt, class Token>
  auto start(Attempt attempt, Token&& token) {
    using Signature = std::conditional_t<WithSize, void(boost::system::error_code, std::size_t),
                                         void(boost::system::error_code)>;
    return boost::asio::async_compose<Token, Signature>(Op<Attempt, WithSize>{this, std::move(attempt)},
                                                        token, socket_);
  }

  Socket socket_;
  SSL* ssl_ = nullptr;
  std::string scratch_;  // gathered writes
};

}  // namespace ig::tls
