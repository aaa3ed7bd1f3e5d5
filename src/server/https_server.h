// The webhook's HTTP(S) listener: Boost.Beast over Boost.Asio.
//
// Contract:
// - One HttpServer owns one io_context per I/O thread (start()/run() with N
//   threads: N io_contexts, each run by exactly one thread, like one event
//   loop per nginx worker). The acceptors live on the first io_context; each
//   accepted connection is handed round-robin to the next io_context and is
//   served there until it closes. io_context() returns the first one.
//   It serves any number of listeners (add_listener), each plain HTTP or TLS;
//   a TLS listener needs the ReloadingTlsContext given at construction and each
//   accepted connection takes tls.current() once, at accept time (so a reload
//   never disturbs open connections).
// - Each request is read with the listener's limits and timeouts, then passed
//   to the Handler on an I/O thread (see http_exchange.h). HTTP/1.0 and 1.1,
//   keep-alive, pipelining (sequentially), Expect: 100-continue. A response
//   to HEAD carries GET's headers (Content-Length included) and no content;
//   204 and 304 responses carry neither content nor Content-Length.
// - Protocol errors never reach the Handler and never throw out of an I/O
//   thread; the connection is answered with a JSON error and closed:
//     body over body_limit            -> 413 {"error":"request body exceeds N bytes"}
//     header over header_limit        -> 431
//     malformed request / chunk size  -> 400
//     Handler throws                  -> 500 (the connection stays usable)
//   Timeouts: TLS handshake and request header (header_timeout), request body
//   and each response write (body_timeout), wait for the next request on a
//   keep-alive connection (idle_timeout). A timed-out connection is closed.
// - Every response carries "Server: isolation-gate", the Response's
//   Content-Type and its extra headers.
// - Connections beyond max_connections (per listener) are accepted and closed
//   at once, and counted in connections_rejected.
// - stop(grace): stops accepting, closes idle keep-alive connections, lets
//   requests in flight finish (their responses carry Connection: close) until
//   `grace` has passed, then closes whatever is left and joins the threads.
//   Thread-safe and idempotent; called from an I/O thread (a Handler), it only
//   initiates the stop.
// - stats() is a consistent-enough snapshot of relaxed atomic counters.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "server/http_exchange.h"

namespace ig::tls {
class ReloadingTlsContext;
}

namespace ig::server {

struct ListenerOptions {
  std::string host = "0.0.0.0";  // IP literal or a resolvable name ("localhost")
  uint16_t port = 8443;           // 0 = any free port (see the returned endpoint)
  bool tls = true;
  std::size_t body_limit = 3 * 1024 * 1024;
  std::size_t header_limit = 16 * 1024;
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{10};
  std::chrono::seconds idle_timeout{60};
  std::size_t max_connections = 4096;
};

struct TransportStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_active = 0;
  std::uint64_t connections_rejected = 0;  // over max_connections
  std::uint64_t tls_handshake_failures = 0;
  std::uint64_t requests = 0;              // complete requests passed to the Handler
  std::uint64_t request_errors = 0;        // 400/413/431 answered by the transport
  std::uint64_t handler_exceptions = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t responses_1xx = 0;  // 100 Continue
  std::uint64_t responses_2xx = 0;
  std::uint64_t responses_3xx = 0;
  std::uint64_t responses_4xx = 0;
  std::uint64_t responses_5xx = 0;
  std::uint64_t bytes_in = 0;   // HTTP bytes (after TLS decryption)
  std::uint64_t bytes_out = 0;  // HTTP bytes (before TLS encryption)
};

// level is one of "debug", "info", "warn", "error".
using LogFn = std::function<void(std::string_view level, std::string_view msg)>;

class HttpServer {
 public:
  // Plain-HTTP only server (add_listener with tls=true fails).
  explicit HttpServer(Handler handler, LogFn log = {});
  // `tls` must outlive the server.
  HttpServer(Handler handler, tls::ReloadingTlsContext& tls, LogFn log = {});
  ~HttpServer();  // stop(0s) and join
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting (connections are served once threads run).
  // Returns the bound endpoint (its port is the real one for port 0), or
  // nullopt and `error`. Allowed before or after start(); not after stop().
  std::optional<boost::asio::ip::tcp::endpoint> add_listener(const ListenerOptions& options,
                                                             std::string& error);

  // Starts `threads` I/O threads (0 = hardware_concurrency) and returns.
  void start(unsigned threads = 0);
  // start(threads), then blocks until the server has stopped.
  void run(unsigned threads = 0);
  // Graceful stop; see the contract above.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Blocks until the I/O threads have exited.
  void wait();

  TransportStats stats() const;
  // The first io_context (the acceptors' one; also one of the I/O loops).
  // Connections are spread over all io_contexts, so do not assume that a
  // connection's handlers run on this one.
  boost::asio::io_context& io_context();

  struct State;     // shared with connections (implementation detail)
  struct Listener;  // one bound acceptor (implementation detail)

 private:
  void stop_sequence(std::chrono::milliseconds grace);

  std::shared_ptr<State> state_;
  std::unique_ptr<boost::asio::io_context> ioc_;  // the first one; reset last in ~HttpServer
  std::mutex mu_;  // guards the members below
  // The other io_contexts (threads 2..N), created by start().
  std::vector<std::unique_ptr<boost::asio::io_context>> more_iocs_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::vector<std::thread> threads_;
  std::thread stopper_;
  bool started_ = false;
  bool stop_requested_ = false;
  std::mutex join_mu_;  // serialises wait()
};

}  // namespace ig::server
