#include "server/https_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <iterator>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/json_text.h"
#include "tls/direct_stream.h"
#include "tls/server_context.h"

namespace ig::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

constexpr std::string_view kServerName = "isolation-gate";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::chrono::seconds kMaxCloseWait{3};
constexpr std::chrono::milliseconds kDrainSilence{500};

struct CounterRow {
  prometheus::Type type;
  std::string_view name;
  std::string_view label;  // "" for none
  std::string_view value;
  prometheus::Help help;  // one line, checked at compile time
  std::uint64_t TransportStats::*field;
};

constexpr CounterRow kCounterRows[] = {
#define IG_TRANSPORT_ROW(field, type, name, label, value, help) \
  {prometheus::Type::type, name, label, value, help, &TransportStats::field},
    IG_TRANSPORT_COUNTERS(IG_TRANSPORT_ROW)
#undef IG_TRANSPORT_ROW
};

// A metric's rows are adjacent (its HELP/TYPE is written once, at the first),
// and the first carries the help.
constexpr bool rows_grouped() {
  constexpr std::size_t n = std::size(kCounterRows);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && kCounterRows[i].name == kCounterRows[i - 1].name) continue;
    if (kCounterRows[i].help.empty()) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (kCounterRows[j].name == kCounterRows[i].name) return false;
  }
  return true;
}
static_assert(rows_grouped(), "IG_TRANSPORT_COUNTERS: keep a metric's rows adjacent, help on the first");

void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}

// {"error":"<message>"}, the message escaped as every JSON string the gate writes.
std::string json_error(std::string_view message) {
  std::string out = R"({"error":)";
  json_text::append_string(out, message);
  out += "}";
  return out;
}

// Header names/values from the Handler must not smuggle CR/LF, and framing
// headers belong to the transport.
bool acceptable_extra_header(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (const char c : name)
    if (c <= ' ' || c == ':' || c == 127) return false;
  for (const char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return !beast::iequals(name, "content-length") && !beast::iequals(name, "transfer-encoding") &&
         !beast::iequals(name, "connection");
}

bool is_http_category(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void graceful_close() = 0;  // thread-safe: posts to the connection's io_context
  virtual void force_close() = 0;     // thread-safe: posts to the connection's io_context
};

// Each connection lives on one io_context run by one thread, so its handlers
// never run concurrently and need no strand; the concrete executor type also
// spares the any_io_executor indirection on every operation.
using IoExecutor = net::io_context::executor_type;
using ConnSocket = tcp::socket::rebind_executor<IoExecutor>::other;
using ConnTimer = net::basic_waitable_timer<std::chrono::steady_clock,
                                            net::wait_traits<std::chrono::steady_clock>, IoExecutor>;

}  // namespace

struct HttpServer::State {
  Handler handler;
  LogFn log;
  tls::ReloadingTlsContext* tls = nullptr;
  std::shared_ptr<TransportCounters> counters;  // never null
  std::atomic<bool> closing{false};   // begin_drain(): responses carry Connection: close
  std::atomic<bool> draining{false};  // stop(): no new connections, idle ones closed

  // The I/O loops that accepted connections are handed to, round-robin. Set
  // by start() before any I/O thread runs and not changed while they run;
  // read only on the first io_context's thread (where the acceptors live).
  std::vector<net::io_context*> loops;
  std::size_t next_loop = 0;

  IoExecutor next_executor(net::io_context& fallback) {
    if (loops.empty()) return fallback.get_executor();
    net::io_context* ioc = loops[next_loop % loops.size()];
    next_loop = (next_loop + 1) % loops.size();
    return ioc->get_executor();
  }

  std::mutex mu;  // guards sessions
  std::condition_variable cv;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions;

  void emit(std::string_view level, std::string_view msg) const noexcept {
    if (!log) return;
    try {
      log(level, msg);
    } catch (...) {
    }
  }

  void add_session(const std::shared_ptr<SessionBase>& s) {
    std::lock_guard lock(mu);
    sessions.emplace(s.get(), s);
  }
  void remove_session(SessionBase* s) noexcept {
    std::lock_guard lock(mu);
    sessions.erase(s);
    if (sessions.empty()) cv.notify_all();
  }
  std::vector<std::shared_ptr<SessionBase>> live_sessions() {
    std::vector<std::shared_ptr<SessionBase>> out;
    std::lock_guard lock(mu);
    out.reserve(sessions.size());
    for (auto& [_, weak] : sessions)
      if (auto s = weak.lock()) out.push_back(std::move(s));
    return out;
  }
  // True when no connection is left.
  bool wait_empty_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mu);
    return cv.wait_until(lock, deadline, [this] { return sessions.empty(); });
  }
};

struct HttpServer::Listener : std::enable_shared_from_this<Listener> {
  Listener(net::io_context& ioc, std::shared_ptr<State> st, ListenerOptions opts)
      : ioc(ioc),
        state(std::move(st)),
        options(std::move(opts)),
        acceptor(std::in_place, ioc.get_executor()),
        retry_timer(std::in_place, ioc.get_executor()) {}

  // The accepted socket is created on the next I/O loop's io_context.
  void do_accept() {
    acceptor->async_accept(state->next_executor(ioc),
                          [self = shared_from_this()](beast::error_code ec, ConnSocket socket) {
                            self->on_accept(ec, std::move(socket));
                          });
  }

  void on_accept(beast::error_code ec, ConnSocket socket);

  void close() {
    net::post(ioc.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor->close(ignored);
      self->retry_timer->cancel();
    });
  }

  net::io_context& ioc;
  const std::shared_ptr<State> state;
  const ListenerOptions options;
  // On the first io_context. Reset by ~HttpServer before it destroys that
  // io_context (a pending accept holds a socket of another io_context, and
  // connections on other io_contexts hold their Listener).
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> retry_timer;
  std::atomic<std::size_t> active{0};

  // Open connections per source address (16 bytes, IPv4 as v4-mapped IPv6).
  // Taken on the acceptor's thread, released by a connection's destructor on
  // its own I/O thread: hence the mutex (once per connection, not per request).
  using SourceKey = net::ip::address_v6::bytes_type;
  struct SourceHash {
    std::size_t operator()(const SourceKey& k) const noexcept {
      std::size_t h = 1469598103934665603ull;
      for (unsigned char c : k) h = (h ^ c) * 1099511628211ull;
      return h;
    }
  };
  std::mutex sources_mu;
  std::unordered_map<SourceKey, std::size_t, SourceHash> sources;

  static SourceKey source_key(const net::ip::address& a) {
    if (a.is_v4()) return net::ip::make_address_v6(net::ip::v4_mapped, a.to_v4()).to_bytes();
    return a.to_v6().to_bytes();
  }
  // False (nothing taken) when the source is at its cap.
  bool take_source(const SourceKey& k) {
    std::lock_guard lock(sources_mu);
    auto& n = sources[k];
    if (n >= options.max_connections_per_source) {
      if (n == 0) sources.erase(k);
      return false;
    }
    ++n;
    return true;
  }
  void release_source(const SourceKey& k) noexcept {
    std::lock_guard lock(sources_mu);
    auto it = sources.find(k);
    if (it == sources.end()) return;
    if (--it->second == 0) sources.erase(it);
  }
};

namespace {

using State = HttpServer::State;
using Listener = HttpServer::Listener;

// The request body: a std::string that the bytes are appended to, reserved
// from Content-Length (which the parser has checked against the body limit).
// Beast's string_body resizes before it copies, so every body was zero-filled
// first: a memset of the whole body per request (8.3k instructions of the
// typical review's 360k, bench/instructions.py).
struct RequestBody {
  using value_type = std::string;

  static std::uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    explicit reader(http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size()) {
        ec = http::error::buffer_overflow;
        return;
      }
      body_.reserve(static_cast<std::size_t>(*length));
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      const std::size_t extra = beast::buffer_bytes(buffers);
      if (extra > body_.max_size() - body_.size()) {
        ec = http::error::buffer_overflow;
        return 0;
      }
      ec = {};
      for (const auto b : beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
      }
      return extra;
    }

    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

template <bool Tls>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Tls>> {
 public:
  // TLS: OpenSSL on the socket's descriptor (tls/direct_stream.h).
  using Stream = std::conditional_t<Tls, tls::DirectStream<ConnSocket>, ConnSocket>;

  // The connection holds one slot of `source` (Listener::take_source), given
  // back by the destructor.
  Session(ConnSocket&& socket, std::shared_ptr<Listener> listener,
          std::shared_ptr<ssl::context> ctx, const Listener::SourceKey& source)
      : listener_(std::move(listener)),
        source_(source),
        state_(*listener_->state),
        opts_(listener_->options),
        ctx_(std::move(ctx)),
        stream_(make_stream(std::move(socket), ctx_.get())),
        timer_(beast::get_lowest_layer(stream_).get_executor()) {
    bump(state_.counters->connections_active);
    listener_->active.fetch_add(1, std::memory_order_relaxed);
  }

  ~Session() override {
    bump(state_.counters->connections_active, static_cast<std::uint64_t>(-1));
    listener_->active.fetch_sub(1, std::memory_order_relaxed);
    listener_->release_source(source_);
    state_.remove_session(this);
  }

  void start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->on_start(); });
  }

  void graceful_close() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->idle_) self->close_now();
    });
  }

  void force_close() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->close_now(); });
  }

 private:
  static Stream make_stream(ConnSocket&& socket, ssl::context* ctx) {
    if constexpr (Tls) {
      return Stream(std::move(socket), ctx->native_handle());
    } else {
      (void)ctx;
      return Stream(std::move(socket));
    }
  }

  ConnSocket& lowest() { return beast::get_lowest_layer(stream_); }

  // Completion handler calling member f; an operation that failed because the
  // connection's deadline passed reports beast::error::timeout.
  template <typename F>
  auto bind(F f) {
    return [self = this->shared_from_this(), f](beast::error_code ec, auto&&... args) {
      if (ec && self->timed_out_) ec = beast::error::timeout;
      (self.get()->*f)(ec, std::forward<decltype(args)>(args)...);
    };
  }

  // The connection's deadline: the operations of the current phase (TLS
  // handshake, wait for a request, header, body, response write, ...) must
  // finish within `d` from now, or the connection is closed. One timer per
  // connection, re-armed only when the new deadline is earlier than the
  // pending wait; a wait that ends before the deadline re-arms itself. So a
  // busy keep-alive connection touches the timer queue about once per
  // timeout period instead of several times per request.
  void set_deadline(std::chrono::steady_clock::duration d) {
    if (closed_) return;
    deadline_ = std::chrono::steady_clock::now() + d;
    if (timer_pending_ && timer_.expiry() <= deadline_) return;
    wait_for_deadline();
  }

  void wait_for_deadline() {
    timer_.expires_at(deadline_);  // cancels a pending wait (it ends with operation_aborted)
    timer_pending_ = true;
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec == net::error::operation_aborted) return;  // replaced or closing
      self->on_deadline_timer();
    });
  }

  void on_deadline_timer() {
    timer_pending_ = false;
    if (closed_) return;
    if (std::chrono::steady_clock::now() < deadline_) return wait_for_deadline();
    timed_out_ = true;
    beast::error_code ignored;
    lowest().close(ignored);  // the pending operation fails; see bind()
  }

  void on_start() {
    if constexpr (Tls) {
      set_deadline(opts_.handshake_timeout);
      stream_.async_handshake(bind(&Session::on_handshake));
    } else {
      read_request();
    }
  }

  void on_handshake(beast::error_code ec) {
    if (ec) {
      bump(state_.counters->tls_handshake_failures);
      if (ec == beast::error::timeout) {
        bump(state_.counters->timeouts);
        bump(state_.counters->tls_handshake_timeouts);
      }
      return close_now();
    }
    read_request();
  }

  void read_request() {
    if (closed_) return;
    if (state_.draining.load(std::memory_order_relaxed) && !first_request_) return close_now();
    parser_.emplace();
    parser_->body_limit(opts_.body_limit);
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<std::size_t>(opts_.header_limit, std::numeric_limits<std::uint32_t>::max())));
    if (!first_request_ && buffer_.size() == 0) {
      // Keep-alive: wait for the next request's first bytes under the idle
      // timeout; the header timeout starts when they arrive.
      idle_ = true;
      set_deadline(opts_.idle_timeout);
      stream_.async_read_some(buffer_.prepare(kReadChunk), bind(&Session::on_first_bytes));
      return;
    }
    read_header();
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    idle_ = false;
    if (ec) {
      if (ec == beast::error::timeout) bump(state_.counters->timeouts);
      return close_now();
    }
    buffer_.commit(n);
    read_header();
  }

  void read_header() {
    set_deadline(opts_.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_, bind(&Session::on_header));
  }

  void on_header(beast::error_code ec, std::size_t n) {
    bump(state_.counters->bytes_in, n);
    first_request_ = false;
    if (ec) return on_read_error(ec);
    if (parser_->is_done()) return handle_request();
    const auto& req = parser_->get();
    if (req.version() >= 11 && beast::iequals(req[http::field::expect], "100-continue")) {
      set_deadline(opts_.body_timeout);
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       bind(&Session::on_continue_sent));
      return;
    }
    read_body();
  }

  void on_continue_sent(beast::error_code ec, std::size_t n) {
    bump(state_.counters->bytes_out, n);
    if (ec) return close_now();
    bump(state_.counters->responses_1xx);
    read_body();
  }

  void read_body() {
    set_deadline(opts_.body_timeout);
    http::async_read(stream_, buffer_, *parser_, bind(&Session::on_body));
  }

  void on_body(beast::error_code ec, std::size_t n) {
    bump(state_.counters->bytes_in, n);
    if (ec) return on_read_error(ec);
    handle_request();
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return send_error(413, "request body exceeds " + std::to_string(opts_.body_limit) + " bytes");
    }
    if (ec == http::error::header_limit) {
      return send_error(431,
                        "request header exceeds " + std::to_string(opts_.header_limit) + " bytes");
    }
    if (ec == beast::error::timeout) {
      bump(state_.counters->timeouts);
      return close_now();
    }
    if (is_http_category(ec) && ec != http::error::end_of_stream &&
        ec != http::error::partial_message && ec != http::error::need_more &&
        ec != http::error::buffer_overflow) {
      return send_error(400, "malformed HTTP request: " + ec.message());
    }
    // End of stream, reset, aborted, TLS errors: nothing to answer.
    close_now();
  }

  void handle_request() {
    bump(state_.counters->requests);
    http::request<RequestBody> msg = parser_->release();
    const unsigned version = msg.version();
    const bool keep_alive = msg.keep_alive();
    const bool head = msg.method() == http::verb::head;
    Request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    req.content_type = std::string(msg[http::field::content_type]);
    req.body = std::move(msg.body());
    Response resp;
    try {
      resp = state_.handler(std::move(req));
      if (resp.status < 200 || resp.status > 599) {
        state_.emit("error", "handler returned invalid HTTP status " + std::to_string(resp.status));
        resp = Response{500, "application/json", json_error("internal error"), {}};
      }
    } catch (const std::exception& e) {
      bump(state_.counters->handler_exceptions);
      state_.emit("error", std::string("request handler threw: ") + e.what());
      resp = Response{500, "application/json", json_error("internal error"), {}};
    } catch (...) {
      bump(state_.counters->handler_exceptions);
      state_.emit("error", "request handler threw a non-standard exception");
      resp = Response{500, "application/json", json_error("internal error"), {}};
    }
    write_response(std::move(resp), version,
                   keep_alive && !state_.closing.load(std::memory_order_relaxed), false, head);
  }

  void send_error(unsigned status, std::string message) {
    bump(state_.counters->request_errors);
    Response resp{status, "application/json", json_error(message), {}};
    write_response(std::move(resp), 11, false, true);
  }

  void write_response(Response&& resp, unsigned version, bool keep_alive, bool drain_after,
                      bool head = false) {
    res_ = {};
    res_.version(version == 10 ? 10 : 11);
    res_.result(resp.status);
    res_.set(http::field::server, kServerName);
    if (!resp.content_type.empty()) res_.set(http::field::content_type, resp.content_type);
    for (const auto& [name, value] : resp.headers) {
      if (acceptable_extra_header(name, value)) {
        res_.insert(name, value);
      } else {
        state_.emit("warn", "dropped unacceptable response header \"" + name + "\"");
      }
    }
    res_.keep_alive(keep_alive);
    if (resp.status == 204 || resp.status == 304) {
      // No content and no Content-Length for these (RFC 9110 8.6, 15.3.5).
    } else {
      res_.body() = std::move(resp.body);
      res_.prepare_payload();
      // HEAD: the headers GET would have (Content-Length included), no content.
      if (head) res_.body().clear();
    }
    close_after_write_ = !keep_alive;
    drain_after_write_ = drain_after;
    switch (resp.status / 100) {
      case 2: bump(state_.counters->responses_2xx); break;
      case 3: bump(state_.counters->responses_3xx); break;
      case 4: bump(state_.counters->responses_4xx); break;
      default: bump(state_.counters->responses_5xx); break;
    }
    set_deadline(opts_.body_timeout);
    http::async_write(stream_, res_, bind(&Session::on_written));
  }

  void on_written(beast::error_code ec, std::size_t n) {
    bump(state_.counters->bytes_out, n);
    if (ec) {
      if (ec == beast::error::timeout) bump(state_.counters->timeouts);
      return close_now();
    }
    res_ = {};  // an idle keep-alive connection holds no response memory
    if (!close_after_write_) return read_request();
    if (drain_after_write_) {
      if constexpr (!Tls) {
        beast::error_code ignored;
        lowest().shutdown(tcp::socket::shutdown_send, ignored);
      }
      return drain();
    }
    shutdown();
  }

  // After an error response the client may still be sending the request (a
  // big body). Closing with unread data would reset the connection and the
  // client might never see our response, so read and discard until it stops
  // sending (EOF, or kDrainSilence without data), bounded in time and bytes.
  // (TLS cannot half-close: OpenSSL refuses application data once our
  // close_notify is out, so the TLS case ends with a plain TCP close.)
  void drain() {
    const auto now = std::chrono::steady_clock::now();
    if (!drain_started_) {
      drain_started_ = true;
      drained_ = 0;
      drain_deadline_ = now + std::min<std::chrono::seconds>(opts_.body_timeout, kMaxCloseWait);
    }
    if (now >= drain_deadline_ || drained_ > std::max<std::size_t>(opts_.body_limit, 1 << 20))
      return close_now();
    set_deadline(kDrainSilence);
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->drained_ += n;
                              if (ec) return self->close_now();
                              self->drain();
                            });
  }

  void shutdown() {
    if constexpr (Tls) {
      set_deadline(std::min<std::chrono::seconds>(opts_.header_timeout, kMaxCloseWait));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        self->close_now();
      });
    } else {
      beast::error_code ignored;
      lowest().shutdown(tcp::socket::shutdown_send, ignored);
      close_now();
    }
  }

  void close_now() {
    closed_ = true;
    idle_ = false;
    beast::error_code ignored;
    lowest().close(ignored);
    timer_.cancel();  // its handler holds the connection
  }

  std::shared_ptr<Listener> listener_;
  const Listener::SourceKey source_;
  State& state_;  // kept alive by listener_
  const ListenerOptions& opts_;
  std::shared_ptr<ssl::context> ctx_;  // must outlive stream_
  Stream stream_;
  ConnTimer timer_;
  std::chrono::steady_clock::time_point deadline_{};
  bool timer_pending_ = false;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<RequestBody>> parser_;
  http::response<http::string_body> res_;
  std::size_t drained_ = 0;
  std::chrono::steady_clock::time_point drain_deadline_{};
  bool first_request_ = true;
  bool idle_ = false;
  bool closed_ = false;
  bool close_after_write_ = false;
  bool drain_after_write_ = false;
  bool drain_started_ = false;
};

}  // namespace

void HttpServer::Listener::on_accept(beast::error_code ec, ConnSocket socket) {
  if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
  if (ec) {
    // EMFILE/ENFILE/ENOBUFS and friends: back off briefly instead of spinning.
    state->emit("warn", "accept failed: " + ec.message());
    retry_timer->expires_after(std::chrono::milliseconds(50));
    retry_timer->async_wait([self = shared_from_this()](beast::error_code wait_ec) {
      if (!wait_ec && self->acceptor->is_open()) self->do_accept();
    });
    return;
  }
  if (state->draining.load(std::memory_order_relaxed)) {
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  if (active.load(std::memory_order_relaxed) >= options.max_connections) {
    bump(state->counters->connections_rejected);
    beast::error_code ignored;
    socket.close(ignored);
    return do_accept();
  }
  beast::error_code ignored;
  const auto peer = socket.remote_endpoint(ignored);
  if (ignored) {  // already gone (reset before we looked)
    socket.close(ignored);
    return do_accept();
  }
  const SourceKey source = source_key(peer.address());
  if (!take_source(source)) {
    bump(state->counters->connections_rejected_per_source);
    socket.close(ignored);
    return do_accept();
  }
  socket.set_option(tcp::no_delay(true), ignored);
  bump(state->counters->connections_accepted);
  bool constructed = false;  // from then on the Session's destructor gives the slot back
  try {
    // Registered before it starts, so that stop() always sees it.
    if (options.tls) {
      auto s = std::make_shared<Session<true>>(std::move(socket), shared_from_this(),
                                               state->tls->current(), source);
      constructed = true;
      state->add_session(s);
      s->start();
    } else {
      auto s = std::make_shared<Session<false>>(std::move(socket), shared_from_this(), nullptr, source);
      constructed = true;
      state->add_session(s);
      s->start();
    }
  } catch (const std::exception& e) {  // allocation or SSL_new failure
    if (!constructed) release_source(source);
    if (socket.is_open()) socket.close(ignored);
    state->emit("error", std::string("could not set up connection: ") + e.what());
  }
  do_accept();
}

HttpServer::HttpServer(Handler handler, LogFn log, std::shared_ptr<TransportCounters> counters)
    : state_(std::make_shared<State>()), ioc_(std::make_unique<net::io_context>(1)) {
  state_->handler = std::move(handler);
  state_->log = std::move(log);
  state_->counters = counters ? std::move(counters) : std::make_shared<TransportCounters>();
}

HttpServer::HttpServer(Handler handler, tls::ReloadingTlsContext& tls, LogFn log,
                       std::shared_ptr<TransportCounters> counters)
    : HttpServer(std::move(handler), std::move(log), std::move(counters)) {
  state_->tls = &tls;
}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
  wait();
  std::vector<std::unique_ptr<net::io_context>> more;
  std::vector<std::shared_ptr<Listener>> listeners;
  {
    std::lock_guard lock(mu_);
    listeners.swap(listeners_);
    work_.clear();
    state_->loops.clear();
    more.swap(more_iocs_);
  }
  // No I/O thread runs any more. Destroying an io_context destroys its
  // pending handlers (and with them the connections). A pending accept on the
  // first io_context holds a socket of another one, so the first goes first,
  // its acceptors before it (connections elsewhere keep their Listener).
  for (auto& l : listeners) {
    l->retry_timer.reset();
    l->acceptor.reset();
  }
  listeners.clear();
  ioc_.reset();
  while (!more.empty()) more.pop_back();
}

Result<tcp::endpoint> HttpServer::add_listener(const ListenerOptions& options) {
  const std::string where = "listener " + options.host + ":" + std::to_string(options.port) + ": ";
  if (options.tls && state_->tls == nullptr)
    return fail(where + "TLS requested but the server has no TLS context");
  if (options.body_limit == 0 || options.header_limit == 0 || options.max_connections == 0 ||
      options.max_connections_per_source == 0 || options.handshake_timeout.count() <= 0)
    return fail(where + "limits and timeouts must be positive");
  beast::error_code ec;
  tcp::endpoint endpoint;
  const std::string host = options.host.empty() ? "0.0.0.0" : options.host;
  const auto address = net::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, options.port);
  } else {
    tcp::resolver resolver(*ioc_);
    const auto results = resolver.resolve(host, std::to_string(options.port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service,
                                          ec);
    if (ec || results.empty())
      return fail(where + "cannot resolve host: " + (ec ? ec.message() : "no address"));
    endpoint = results.begin()->endpoint();
  }

  std::lock_guard lock(mu_);
  if (stop_requested_) return fail(where + "server is stopping");
  auto listener = std::make_shared<Listener>(*ioc_, state_, options);
  auto& acceptor = *listener->acceptor;
  const auto open_and_bind = [&acceptor](const tcp::endpoint& at) {
    beast::error_code e;
    if (acceptor.is_open()) acceptor.close(e);
    if (acceptor.open(at.protocol(), e); e) return e;
    // "[::]" is dual-stack: IPv4 clients arrive as v4-mapped addresses.
    if (at.address().is_v6() && at.address().is_unspecified()) acceptor.set_option(net::ip::v6_only(false), e);
    if (!e) acceptor.set_option(net::socket_base::reuse_address(true), e);
    if (!e) acceptor.bind(at, e);
    if (!e) acceptor.listen(net::socket_base::max_listen_connections, e);
    return e;
  };
  ec = open_and_bind(endpoint);
  if (ec && endpoint.address().is_v6() && endpoint.address().is_unspecified() &&
      (ec == net::error::address_family_not_supported || ec == boost::system::errc::address_not_available)) {
    // A host without IPv6: "[::]" means every IPv4 address then.
    ec = open_and_bind(tcp::endpoint(net::ip::address_v4::any(), options.port));
  }
  if (ec) return fail(where + ec.message());
  auto bound = acceptor.local_endpoint(ec);
  if (ec) return fail(where + ec.message());
  net::post(acceptor.get_executor(), [listener] { listener->do_accept(); });
  listeners_.push_back(std::move(listener));
  return bound;
}

void HttpServer::start(unsigned threads) {
  std::lock_guard lock(mu_);
  if (started_ || stop_requested_) return;
  started_ = true;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // One io_context per thread, each run by exactly that thread.
  more_iocs_.reserve(threads - 1);
  for (unsigned i = 1; i < threads; ++i) more_iocs_.push_back(std::make_unique<net::io_context>(1));
  std::vector<net::io_context*> loops;
  loops.reserve(threads);
  loops.push_back(ioc_.get());
  for (auto& ioc : more_iocs_) loops.push_back(ioc.get());
  state_->loops = loops;  // before any I/O thread runs (the acceptors read it)
  work_.reserve(threads);
  for (net::io_context* ioc : loops) work_.push_back(net::make_work_guard(*ioc));
  threads_.reserve(threads);
  for (net::io_context* ioc : loops) {
    threads_.emplace_back([this, ioc] {
      for (;;) {
        try {
          ioc->run();
          return;
        } catch (const std::exception& e) {  // handlers do not throw; be safe anyway
          state_->emit("error", std::string("I/O thread caught: ") + e.what());
        } catch (...) {
          state_->emit("error", "I/O thread caught a non-standard exception");
        }
      }
    });
  }
}

void HttpServer::run(unsigned threads) {
  start(threads);
  wait();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (!stop_requested_) {
      stop_requested_ = true;
      stopper_ = std::thread([this, grace] { stop_sequence(grace); });
    }
  }
  bool on_io_thread = ioc_->get_executor().running_in_this_thread();
  {
    std::lock_guard lock(mu_);
    for (auto& ioc : more_iocs_)
      on_io_thread = on_io_thread || ioc->get_executor().running_in_this_thread();
  }
  if (!on_io_thread) wait();
}

void HttpServer::begin_drain() { state_->closing.store(true); }

void HttpServer::stop_sequence(std::chrono::milliseconds grace) {
  state_->closing.store(true);
  state_->draining.store(true);
  std::vector<std::shared_ptr<Listener>> listeners;
  {
    std::lock_guard lock(mu_);
    listeners = listeners_;
  }
  for (auto& l : listeners) l->close();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (auto& s : state_->live_sessions()) s->graceful_close();
  if (!state_->wait_empty_until(deadline)) {
    state_->emit("warn", "stop: closing connections still open after the grace period");
    for (auto& s : state_->live_sessions()) s->force_close();
    state_->wait_empty_until(std::chrono::steady_clock::now() + kMaxCloseWait);
  }
  std::vector<net::io_context*> loops;
  {
    std::lock_guard lock(mu_);
    work_.clear();
    loops.push_back(ioc_.get());
    for (auto& ioc : more_iocs_) loops.push_back(ioc.get());
  }
  for (net::io_context* ioc : loops) ioc->stop();
}

void HttpServer::wait() {
  std::lock_guard join_lock(join_mu_);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads)
    if (t.joinable()) t.join();
  std::thread stopper;
  {
    std::lock_guard lock(mu_);
    stopper = std::move(stopper_);
  }
  if (stopper.joinable()) stopper.join();
}

TransportStats TransportCounters::snapshot() const noexcept {
  auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  TransportStats s;
#define IG_TRANSPORT_LOAD(field, type, name, label, value, help) s.field = get(field);
  IG_TRANSPORT_COUNTERS(IG_TRANSPORT_LOAD)
#undef IG_TRANSPORT_LOAD
  return s;
}

TransportStats HttpServer::stats() const { return state_->counters->snapshot(); }

void write_transport_metrics(prometheus::TextWriter& out,
                             std::initializer_list<LabeledTransportStats> listeners) {
  std::string_view family;
  for (const CounterRow& row : kCounterRows) {
    if (row.name != family) {
      out.family(row.name, row.type, row.help);
      family = row.name;
    }
    for (const auto& l : listeners) {
      const std::uint64_t value = l.stats.*row.field;
      if (row.label.empty()) {
        out.sample(row.name, {{"listener", l.listener}}, value);
      } else {
        out.sample(row.name, {{"listener", l.listener}, {row.label, row.value}}, value);
      }
    }
  }
}

}  // namespace ig::server
