// The webhook's HTTP(S) listener: Boost.Beast over Boost.Asio.
//
// Contract:
// - One HttpServer owns one io_context per I/O thread (start()/run() with N
//   threads: N io_contexts, each run by exactly one thread, like one event
//   loop per nginx worker). The acceptors live on the first io_context; each
//   accepted connection is handed round-robin to the next io_context and is
//   served there until it closes.
//   It serves any number of listeners (add_listener), each plain HTTP or TLS;
//   a TLS listener needs the ReloadingTlsContext given at construction and each
//   accepted connection takes tls.current() once, at accept time (so a reload
//   never disturbs open connections). TLS runs in OpenSSL on the socket's
//   descriptor (tls::DirectStream, tls/direct_stream.h), Asio only waiting for
//   readiness; Beast reads and writes through it.
// - Each request is read with the listener's limits and timeouts, then passed
//   to the Handler on an I/O thread (see base/http_exchange.h). HTTP/1.0 and 1.1,
//   keep-alive, pipelining (sequentially), Expect: 100-continue. A response
//   to HEAD carries GET's headers (Content-Length included) and no content;
//   204 and 304 responses carry neither content nor Content-Length.
// - Protocol errors never reach the Handler and never throw out of an I/O
//   thread; the connection is answered with a JSON error and closed:
//     body over body_limit            -> 413 {"error":"request body exceeds N bytes"}
//     header over header_limit        -> 431
//     malformed request / chunk size  -> 400
//     Handler throws                  -> 500 (the connection stays usable)
//   Timeouts: TLS handshake (handshake_timeout, from accept), request header
//   (header_timeout), request body and each response write (body_timeout),
//   wait for the next request on a keep-alive connection (idle_timeout). A
//   timed-out connection is closed.
// - Every response carries "Server: isolation-gate", the Response's
//   Content-Type and its extra headers.
// - Connection caps, per listener: a connection accepted while
//   max_connections are open on the listener, or while
//   max_connections_per_source are open from its source address, is closed
//   at once (before any TLS), and counted in connections_rejected (reason
//   "total") or connections_rejected_per_source (reason "per_source").
// - begin_drain(): from then on every response carries Connection: close and
//   its connection is closed once the response is written. Nothing else
//   changes: new connections are still accepted and served (their endpoint is
//   being removed, clients may still come), and a keep-alive connection that
//   is idle stays open, since a request may be on its way on it (closing it
//   would race with that request). Thread-safe, idempotent, returns at once.
// - stop(grace): begin_drain(), stops accepting, closes idle keep-alive
//   connections (the one unavoidable race: a client that sends on an idle
//   connection at that moment sees it closed without an answer), lets
//   connections busy with a request (reading it, handling it, writing the
//   answer) finish it, answered with Connection: close, until `grace` has
//   passed, then closes whatever is left and joins the threads.
//   Thread-safe and idempotent; called from an I/O thread (a Handler), it only
//   initiates the stop.
// - stats() is a consistent-enough snapshot of relaxed atomic counters
//   (TransportCounters, the server's own or given at construction). Every
//   counter comes from one table (IG_TRANSPORT_COUNTERS below), which
//   generates the storage, the TransportStats fields and the metric names and
//   help; write_transport_metrics() exports every one of them.
// - Listener setup reports failure as an ig::Result error (base/result.h)
//   naming the address; nothing here throws out of the public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "base/http_exchange.h"
#include "base/prometheus.h"
#include "base/result.h"

namespace ig::tls {
class ReloadingTlsContext;
}

namespace ig::server {

using http::Handler;
using http::Request;
using http::Response;

struct ListenerOptions {
  // IP literal or a resolvable name ("localhost"). "::" is dual-stack
  // (IPV6_V6ONLY off), and binds 0.0.0.0 on a host without IPv6.
  std::string host = "0.0.0.0";
  uint16_t port = 8443;           // 0 = any free port (see the returned endpoint)
  bool tls = true;
  std::size_t body_limit = 3 * 1024 * 1024;
  std::size_t header_limit = 16 * 1024;
  // TLS only: from accept to the end of the handshake. Short, so that
  // connections that never speak TLS cannot hold a connection slot for long.
  std::chrono::milliseconds handshake_timeout{3000};
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{10};
  std::chrono::seconds idle_timeout{60};
  std::size_t max_connections = 4096;
  // Open connections from one source address (IPv4 and its v4-mapped IPv6
  // form are one source). Below max_connections so that one address cannot
  // take every slot, and high because the API server is few addresses.
  std::size_t max_connections_per_source = 2048;
};

// The transport's counters, one row each:
//   X(TransportStats field, prometheus Type, metric name, label name or "", label value, help)
// Rows of one metric name are adjacent (checked at compile time); a row with a
// label is one series of that metric. connections_active is the only gauge.
#define IG_TRANSPORT_COUNTERS(X)                                                                  \
  X(connections_accepted, Counter, "isolation_gate_connections_accepted_total", "", "",           \
    "TCP connections accepted.")                                                                  \
  X(connections_active, Gauge, "isolation_gate_connections_active", "", "", "Open connections.")  \
  X(connections_rejected, Counter, "isolation_gate_connections_rejected_total", "reason",       \
    "total",                                                                                      \
    "Connections closed at once, by reason: total (max_connections open on the listener), "       \
    "per_source (max_connections_per_source open from that address).")                            \
  X(connections_rejected_per_source, Counter, "isolation_gate_connections_rejected_total",        \
    "reason", "per_source", "")                                                                   \
  X(tls_handshake_failures, Counter, "isolation_gate_tls_handshake_failures_total", "", "",       \
    "Failed TLS handshakes (timeouts included).")                                                 \
  X(tls_handshake_timeouts, Counter, "isolation_gate_tls_handshake_timeouts_total", "", "",       \
    "Connections closed because the TLS handshake did not finish within the handshake timeout.")  \
  X(requests, Counter, "isolation_gate_http_requests_total", "", "",                              \
    "Complete HTTP requests handled.")                                                            \
  X(request_errors, Counter, "isolation_gate_http_protocol_errors_total", "", "",                 \
    "Malformed or oversized requests answered by the transport (400, 413, 431).")                 \
  X(handler_exceptions, Counter, "isolation_gate_http_handler_exceptions_total", "", "",          \
    "Requests whose handler threw (answered 500).")                                               \
  X(timeouts, Counter, "isolation_gate_http_timeouts_total", "", "",                              \
    "Connections closed on a timeout (handshake, header, body, write or idle).")                  \
  X(responses_1xx, Counter, "isolation_gate_http_responses_total", "code", "1xx",                 \
    "HTTP responses written, by status class (1xx: 100 Continue).")                               \
  X(responses_2xx, Counter, "isolation_gate_http_responses_total", "code", "2xx", "")             \
  X(responses_3xx, Counter, "isolation_gate_http_responses_total", "code", "3xx", "")             \
  X(responses_4xx, Counter, "isolation_gate_http_responses_total", "code", "4xx", "")             \
  X(responses_5xx, Counter, "isolation_gate_http_responses_total", "code", "5xx", "")             \
  X(bytes_in, Counter, "isolation_gate_http_received_bytes_total", "", "",                        \
    "HTTP bytes read (after TLS decryption).")                                                    \
  X(bytes_out, Counter, "isolation_gate_http_sent_bytes_total", "", "",                           \
    "HTTP bytes written (before TLS encryption).")

// A snapshot of one server's counters (HttpServer::stats()).
struct TransportStats {
#define IG_TRANSPORT_STATS_FIELD(field, type, name, label, value, help) std::uint64_t field = 0;
  IG_TRANSPORT_COUNTERS(IG_TRANSPORT_STATS_FIELD)
#undef IG_TRANSPORT_STATS_FIELD
};

// The live counters of one server: one relaxed atomic per row. A server makes
// its own unless given one at construction; giving it lets whoever exports
// the counters (the webhook's /metrics) hold them before the server exists.
struct TransportCounters {
#define IG_TRANSPORT_ATOMIC(field, type, name, label, value, help) std::atomic<std::uint64_t> field{0};
  IG_TRANSPORT_COUNTERS(IG_TRANSPORT_ATOMIC)
#undef IG_TRANSPORT_ATOMIC

  TransportStats snapshot() const noexcept;
};

// One server's snapshot and the `listener` label its series carry
// ("webhook", "probes").
struct LabeledTransportStats {
  std::string_view listener;
  TransportStats stats;
};

// Writes every transport counter of every listener given: each metric's
// HELP/TYPE once, then one series per listener (and per labelled row).
void write_transport_metrics(prometheus::TextWriter& out,
                             std::initializer_list<LabeledTransportStats> listeners);

// level is one of "debug", "info", "warn", "error".
using LogFn = std::function<void(std::string_view level, std::string_view msg)>;

class HttpServer {
 public:
  // Plain-HTTP only server (add_listener with tls=true fails). `counters`:
  // where to count (null: the server's own).
  explicit HttpServer(Handler handler, LogFn log = {},
                      std::shared_ptr<TransportCounters> counters = nullptr);
  // `tls` must outlive the server.
  HttpServer(Handler handler, tls::ReloadingTlsContext& tls, LogFn log = {},
             std::shared_ptr<TransportCounters> counters = nullptr);
  ~HttpServer();  // stop(0s) and join
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting (connections are served once threads run).
  // Returns the bound endpoint (its port is the real one for port 0), or an
  // error naming HOST:PORT. Allowed before or after start(); not after stop().
  Result<boost::asio::ip::tcp::endpoint> add_listener(const ListenerOptions& options);

  // Starts `threads` I/O threads (0 = hardware_concurrency) and returns.
  void start(unsigned threads = 0);
  // start(threads), then blocks until the server has stopped.
  void run(unsigned threads = 0);
  // Every response from now on closes its connection; see the contract.
  void begin_drain();
  // Graceful stop; see the contract above.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Blocks until the I/O threads have exited.
  void wait();

  TransportStats stats() const;

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
