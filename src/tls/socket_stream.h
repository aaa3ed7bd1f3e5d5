// TLS on a TCP socket with OpenSSL reading and writing the file descriptor
// itself (SSL_set_fd), as nginx does; Asio only waits for readiness.
//
// Why not boost::asio::ssl::stream: its engine stages every byte through
// memory BIOs and its own 17 KB buffers, so a request body is copied twice
// more on the way in (socket -> engine buffer -> BIO -> plaintext) and a
// response once more on the way out, and each operation runs the engine's
// composed loop. bench/counts.py measured 4.1 bytes copied per body byte for
// a 200 KB pod through the Asio stream against nginx's 1.0 (docs/benchmarks.md).
//
// Contract:
// - SocketStream<Socket> is a Beast/Asio AsyncReadStream and AsyncWriteStream
//   (async_read_some, async_write_some with any completion token) plus
//   async_handshake (server side) and async_shutdown; next_layer() is the
//   socket, so beast::get_lowest_layer() finds it.
// - The socket is put in non-blocking mode. An operation tries the SSL call
//   at once; when OpenSSL wants to read or write the socket first, it waits
//   for readiness (Socket::async_wait) and tries again. A completion is never
//   invoked from inside the initiating call (it is posted).
// - Errors: a clean close_notify from the peer is net::error::eof; a
//   transport error is its errno; a TLS failure is an error of Asio's SSL
//   category (boost::asio::error::get_ssl_category) carrying OpenSSL's code;
//   a wait that fails (socket closed, operation aborted) is that error.
//   Once the socket is closed no SSL call touches the descriptor again (its
//   number may already belong to another connection): every attempt checks
//   is_open() first and fails with bad_descriptor.
// - async_shutdown sends close_notify and completes without waiting for the
//   peer's (the connection is closed next; HTTP needs no more).
// - Single-buffer reads and writes go to SSL_read/SSL_write directly; a
//   gather write of several buffers is written as one SSL_write (so one TLS
//   record) by copying them into a scratch buffer first.
// - OpenSSL writes with write(2), which raises SIGPIPE on a connection the
//   peer has closed: constructing a SocketStream sets SIGPIPE to ignored for
//   the process (once; the write then fails with EPIPE), as nginx does.
// - One operation of each direction at a time, all on the socket's executor
//   (one io_context thread per connection in this server).
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/system/error_code.hpp>

namespace ig::tls {

namespace socket_stream_detail {

// What one SSL call's return value means: done (n bytes), wait for the
// socket, or an error.
enum class Step { Done, WantRead, WantWrite, Failed };

// Maps SSL_get_error() after a call that returned `rc` (SSL_read/SSL_write's
// length or <= 0; SSL_do_handshake/SSL_shutdown's status) to a Step and, for
// Failed, the error. Clears OpenSSL's error queue.
Step classify(SSL* ssl, int rc, boost::system::error_code& ec);

// Sets SIGPIPE to ignored, the first time it is called.
void ignore_sigpipe() noexcept;

}  // namespace socket_stream_detail

template <class Socket>
class SocketStream {
 public:
  using next_layer_type = Socket;
  using lowest_layer_type = typename Socket::lowest_layer_type;
  using executor_type = typename Socket::executor_type;

  // Throws std::bad_alloc when SSL_new fails. ctx must outlive the stream.
  SocketStream(Socket&& socket, SSL_CTX* ctx) : socket_(std::move(socket)), ssl_(SSL_new(ctx)) {
    if (ssl_ == nullptr) throw std::bad_alloc();
    socket_stream_detail::ignore_sigpipe();
    boost::system::error_code ignored;
    socket_.non_blocking(true, ignored);
    SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle()));
    SSL_set_accept_state(ssl_);
    SSL_set_mode(ssl_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // Read what the socket has (up to OpenSSL's buffer), not a record's
    // 5-byte header and then its body: one read(2) per record instead of two.
    SSL_set_read_ahead(ssl_, 1);
  }
  ~SocketStream() { SSL_free(ssl_); }
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  Socket& next_layer() noexcept { return socket_; }
  const Socket& next_layer() const noexcept { return socket_; }
  lowest_layer_type& lowest_layer() noexcept { return socket_.lowest_layer(); }
  SSL* native_handle() noexcept { return ssl_; }

  template <class Token>
  auto async_handshake(Token&& token) {
    return start<void(boost::system::error_code)>(
        [](SSL* ssl, std::size_t& n) {
          n = 0;
          return SSL_do_handshake(ssl);
        },
        std::forward<Token>(token));
  }

  template <class Token>
  auto async_shutdown(Token&& token) {
    return start<void(boost::system::error_code)>(
        [](SSL* ssl, std::size_t& n) {
          n = 0;
          const int rc = SSL_shutdown(ssl);
          return rc == 0 ? 1 : rc;  // 0: ours is sent, the peer's not awaited
        },
        std::forward<Token>(token));
  }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    boost::asio::mutable_buffer b;
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
         ++it) {
      if (boost::asio::mutable_buffer(*it).size() != 0) {
        b = *it;
        break;
      }
    }
    return start<void(boost::system::error_code, std::size_t)>(
        [b](SSL* ssl, std::size_t& n) { return b.size() == 0 ? 1 : SSL_read_ex(ssl, b.data(), b.size(), &n); },
        std::forward<Token>(token));
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    boost::asio::const_buffer b;
    std::size_t count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
         ++it) {
      if (boost::asio::const_buffer(*it).size() == 0) continue;
      if (count++ == 0) b = *it;
    }
    if (count > 1) {  // one record, not one per buffer
      scratch_.clear();
      for (auto it = boost::asio::buffer_sequence_begin(buffers);
           it != boost::asio::buffer_sequence_end(buffers) && scratch_.size() < kGatherLimit; ++it) {
        const boost::asio::const_buffer part(*it);
        scratch_.append(static_cast<const char*>(part.data()),
                        std::min(part.size(), kGatherLimit - scratch_.size()));
      }
      b = boost::asio::const_buffer(scratch_.data(), scratch_.size());
    }
    return start<void(boost::system::error_code, std::size_t)>(
        [b](SSL* ssl, std::size_t& n) { return b.size() == 0 ? 1 : SSL_write_ex(ssl, b.data(), b.size(), &n); },
        std::forward<Token>(token));
  }

 private:
  static constexpr std::size_t kGatherLimit = 64 * 1024;

  // One operation: `attempt` (int(SSL*, size_t& n), OpenSSL's return
  // convention) tried now and after each readiness wait.
  template <class Attempt, bool WithSize>
  struct Op {
    SocketStream* stream;
    Attempt attempt;
    bool started = false;
    bool finished = false;  // the result below is ready: complete on re-entry
    boost::system::error_code result_ec{};
    std::size_t result_n = 0;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}) {
      using socket_stream_detail::Step;
      if (finished) return complete(self);
      const bool initiating = !started;
      started = true;
      std::size_t n = 0;
      Step step = Step::Failed;
      if (ec) {
        // The readiness wait failed: closed or aborted.
      } else if (!stream->socket_.is_open()) {
        ec = boost::asio::error::bad_descriptor;
      } else {
        ERR_clear_error();
        step = socket_stream_detail::classify(stream->ssl_, attempt(stream->ssl_, n), ec);
      }
      if (step == Step::WantRead || step == Step::WantWrite) {
        stream->socket_.async_wait(step == Step::WantRead ? Socket::wait_read : Socket::wait_write,
                                   std::move(self));
        return;
      }
      finished = true;
      result_ec = ec;
      result_n = step == Step::Done ? n : 0;
      if (initiating) {
        boost::asio::post(stream->socket_.get_executor(), std::move(self));
        return;
      }
      complete(self);
    }

    template <class Self>
    void complete(Self& self) {
      if constexpr (WithSize) {
        self.complete(result_ec, result_n);
      } else {
        self.complete(result_ec);
      }
    }
  };

  template <class Signature, class Attempt, class Token>
  auto start(Attempt attempt, Token&& token) {
    constexpr bool with_size = !std::is_same_v<Signature, void(boost::system::error_code)>;
    return boost::asio::async_compose<Token, Signature>(Op<Attempt, with_size>{this, std::move(attempt)}, token,
                                                        socket_);
  }

  Socket socket_;
  SSL* ssl_;
  std::string scratch_;  // gather writes
};

}  // namespace ig::tls
