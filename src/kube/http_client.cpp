#include "kube/http_client.h"

#include <arpa/inet.h>
#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>
#include <cpprest/producerconsumerstream.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <pplx/threadpool.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <functional>
#include <istream>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <streambuf>
#include <utility>
#include <vector>

#include "base/json_depth.h"
#include "base/one_line.h"
#include "base/quote.h"
#include "kube/list_decoder.h"
#include "kube/tls_material.h"
#include "kube/watch_decoder.h"

namespace ig::kube {
namespace {

namespace http = web::http;
using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;
using namespace std::chrono_literals;

constexpr std::size_t kMaxBody = 64u << 20;  // one answer (of a LIST: one item)
constexpr std::size_t kMaxJsonDepth = 128;
constexpr std::size_t kPoolThreads = 2;     // cpprestsdk's pool, shared by every client
constexpr std::size_t kMaxErrorBody = 1u << 20;
constexpr std::size_t kReadChunk = 64u << 10;
constexpr std::size_t kUnread = 1u << 20;  // of an answer, at most unread in memory
// How long a cancelled request (or body read) is waited for, so that its
// continuations have run before we go (a process exiting right after leaks).
constexpr std::chrono::seconds kCancelledWait{2};
constexpr std::chrono::seconds kWatchInactivitySlack{30};

// --- waiting on a pplx task from our own thread ------------------------------

// The completion of one task, set by a continuation on a cpprestsdk pool
// thread, waited for by our thread with a deadline.
template <typename T>
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<T> value;
  std::string error;
  bool refused = false;  // the connection was refused (or the host unreachable)
};

std::string exception_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const pplx::task_canceled&) {
    return "cancelled";
  } catch (const std::exception& ex) {
    return *ex.what() != '\0' ? ex.what() : "failed";
  } catch (...) {
    return "unknown error";
  }
}

template <typename T>
std::shared_ptr<Completion<T>> track(pplx::task<T> task) {
  auto c = std::make_shared<Completion<T>>();
  task.then([c](pplx::task<T> t) {
    std::unique_lock lock(c->mu);
    try {
      c->value.emplace(t.get());  // t is complete: get() does not block
    } catch (const http::http_exception& ex) {
      c->error = exception_text(std::current_exception());
      // cpprestsdk reports a refused connect as EHOSTUNREACH.
      c->refused = ex.error_code().value() == ECONNREFUSED || ex.error_code().value() == EHOSTUNREACH;
    } catch (...) {
      c->error = exception_text(std::current_exception());
    }
    c->done = true;
    lock.unlock();
    c->cv.notify_all();
  });
  return c;
}

// True when done before the deadline, if any (and before `cancel` was stopped).
template <typename T>
bool wait_until(Completion<T>& c, std::optional<Deadline> deadline, const std::stop_token& cancel = {}) {
  // Registered before the lock is taken: a token already stopped runs the
  // callback here, at once, and the callback takes the lock.
  std::stop_callback wake(cancel, [&c] {
    std::lock_guard lock(c.mu);
    c.cv.notify_all();
  });
  std::unique_lock lock(c.mu);
  auto ready = [&] { return c.done || cancel.stop_requested(); };
  if (deadline) {
    c.cv.wait_until(lock, *deadline, ready);
  } else {
    c.cv.wait(lock, ready);
  }
  return c.done;
}

// "?key=value&..." of the parameters whose value is not empty; values percent-encoded.
std::string query_of(std::initializer_list<std::pair<std::string_view, std::string>> params) {
  std::string q;
  for (const auto& [key, value] : params) {
    if (!value.empty()) q.append(q.empty() ? "?" : "&").append(key).append("=").append(percent_encode(value));
  }
  return q;
}

// --- reading a response body --------------------------------------------------

// cpprestsdk's producer/consumer buffer holding at most `limit` bytes unread:
// a write is parked until the reader takes some, and cpprestsdk reads the
// socket again only once its write completed, so the rest of the answer waits
// in the kernel (TCP flow control). Its reader closes it for writing
// (cpprestsdk does not close one it did not make); abandon() fails a parked write.
class BoundedBodyBuffer final
    : public concurrency::streams::details::basic_producer_consumer_buffer<std::uint8_t> {
  using Base = concurrency::streams::details::basic_producer_consumer_buffer<std::uint8_t>;

 public:
  explicit BoundedBodyBuffer(std::size_t limit) : Base(512), limit_(limit) {}

  void abandon() {
    std::optional<Parked> parked;
    {
      std::lock_guard lock(mu_);
      abandoned_ = true;
      parked.swap(parked_);
    }
    if (parked) parked->done.set_exception(std::make_exception_ptr(std::runtime_error("the body was abandoned")));
  }

 protected:
  pplx::task<size_t> _putn(const std::uint8_t* ptr, size_t count) override {
    {
      std::lock_guard lock(mu_);
      if (abandoned_) return pplx::task_from_exception<size_t>(std::runtime_error("the body was abandoned"));
      if (written_ - read_ >= limit_) {
        parked_.emplace(Parked{ptr, count, {}});
        return pplx::create_task(parked_->done);
      }
      written_ += count;
    }
    return Base::_putn(ptr, count);
  }

  pplx::task<size_t> _getn(std::uint8_t* ptr, size_t count) override {
    auto self = std::static_pointer_cast<BoundedBodyBuffer>(shared_from_this());
    return Base::_getn(ptr, count).then([self](size_t n) {
      self->taken(n);
      return n;
    });
  }

 private:
  struct Parked {
    const std::uint8_t* ptr;  // cpprestsdk's, valid until `done` is set
    size_t count;
    pplx::task_completion_event<size_t> done;
  };

  void taken(size_t n) {
    std::optional<Parked> parked;
    {
      std::lock_guard lock(mu_);
      read_ += n;
      if (!parked_ || written_ - read_ >= limit_) return;
      parked.swap(parked_);
      written_ += parked->count;
    }
    try {
      parked->done.set(Base::_putn(parked->ptr, parked->count).get());
    } catch (...) {
      parked->done.set_exception(std::current_exception());
    }
  }

  const std::size_t limit_;
  std::mutex mu_;
  std::size_t written_ = 0, read_ = 0;
  std::optional<Parked> parked_;
  bool abandoned_ = false;
};

// A request whose answer's headers came.
struct Sent {
  http::http_response response;
  std::shared_ptr<pplx::cancellation_token_source> cts;
  std::shared_ptr<BoundedBodyBuffer> body;  // the response stream
  std::shared_ptr<http::client::http_client> client;  // the one it went through
};

// Reads a response body as it arrives: each read asks for what is buffered
// (at least one byte, at most a chunk), since getn(n) waits for all n.
class BodyReader {
 public:
  enum class Status { Data, End, Error, Timeout, Stopped };

  explicit BodyReader(const Sent& sent) : response_(sent.response), buf_(sent.body) {
    closed_ = track(response_.content_ready().then([b = buf_](pplx::task<http::http_response> t) {
      std::exception_ptr error;  // null: a clean end
      try {
        t.get();
      } catch (...) {
        error = std::current_exception();
      }
      return b->close(std::ios_base::out, error).then([] { return true; });
    }));
  }

  // Waits (kCancelledWait) for an outstanding getn and for the buffer's
  // close (a close still running when the process exits leaks); the owner
  // cancelled first.
  ~BodyReader() {
    buf_->abandon();
    if (pending_) wait_until(*pending_, SteadyClock::now() + kCancelledWait);
    wait_until(*closed_, SteadyClock::now() + kCancelledWait);
  }
  BodyReader(const BodyReader&) = delete;
  BodyReader& operator=(const BodyReader&) = delete;

  // Appends at least one byte to `out` (Data), or says why not: a body cut
  // short (a dropped connection ends it too) is an Error, not its End.
  Status read(std::string& out, std::optional<Deadline> deadline) {
    if (stop_.stop_requested()) return Status::Stopped;
    try {
      if (!pending_) {
        // in_avail() is read without the buffer's lock: a hint, never above
        // what is buffered (tests/unit/tsan_suppressions.txt).
        const std::size_t count = std::clamp<std::size_t>(buf_->in_avail(), 1, kReadChunk);
        // The continuation keeps the bytes alive for a getn that outlives us.
        pending_ = track(buf_->getn(bytes_->data(), count).then([bytes = bytes_](std::size_t n) { return n; }));
      }
      if (!wait_until(*pending_, deadline, stop_.get_token()))
        return stop_.stop_requested() ? Status::Stopped : Status::Timeout;
      const auto done = std::exchange(pending_, nullptr);
      if (!done->error.empty()) return failed(done->error);
      if (*done->value > 0) {
        out.append(reinterpret_cast<const char*>(bytes_->data()), std::min(*done->value, bytes_->size()));
        return Status::Data;
      }
      auto complete = track(response_.content_ready());
      if (!wait_until(*complete, std::min(deadline.value_or(Deadline::max()), SteadyClock::now() + kCancelledWait)))
        return failed("the body did not complete");
      return complete->error.empty() ? Status::End : failed(complete->error);
    } catch (...) {
      return failed(exception_text(std::current_exception()));
    }
  }

  // Wakes a read() blocked in another thread; later reads return Stopped.
  void stop() noexcept { stop_.request_stop(); }

  const std::string& error() const noexcept { return error_; }

 private:
  http::http_response response_;
  std::shared_ptr<BoundedBodyBuffer> buf_;
  std::shared_ptr<std::vector<std::uint8_t>> bytes_ = std::make_shared<std::vector<std::uint8_t>>(kReadChunk);
  std::shared_ptr<Completion<std::size_t>> pending_;  // an outstanding getn
  std::shared_ptr<Completion<bool>> closed_;          // the buffer closed for writing
  std::stop_source stop_;
  std::string error_;

  Status failed(std::string error) {
    error_ = std::move(error);
    return Status::Error;
  }
};

// A body as a std::streambuf, one chunk held at a time: read whole, or by
// kube::decode_list (`idle` > 0). It ends at the body's end, at `until`, after
// `idle` without a byte, or once the bytes since mark() pass `max`; failure()
// says why, naming what passed `max` ("an item of the answer").
class BodyStreambuf final : public std::streambuf {
 public:
  BodyStreambuf(const Sent& sent, std::string_view what, std::size_t max, Deadline until,
                std::chrono::milliseconds idle = {})
      : reader_(sent), what_(what), max_(max), until_(until), idle_(idle) {}

  // An item was handed over: the bound counts from here.
  void mark() noexcept { item_start_ = before_ + static_cast<std::size_t>(gptr() - eback()); }
  // Why the body stopped before its end; "" when it did not.
  const std::string& failure() const noexcept { return failure_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (ended_) return traits_type::eof();
    before_ += chunk_.size();
    chunk_.clear();
    setg(nullptr, nullptr, nullptr);
    const Deadline deadline = idle_.count() > 0 ? std::min(until_, SteadyClock::now() + idle_) : until_;
    switch (reader_.read(chunk_, deadline)) {
      case BodyReader::Status::Data:
        if (before_ + chunk_.size() - item_start_ > max_)
          return stop(std::string(what_) + " is larger than " + std::to_string(max_) + " bytes");
        setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
        return traits_type::to_int_type(*gptr());
      case BodyReader::Status::End:
        return stop("");
      case BodyReader::Status::Error:
        return stop("reading the answer: " + reader_.error());
      case BodyReader::Status::Timeout:
      case BodyReader::Status::Stopped:
        break;
    }
    if (deadline == until_) return stop("the answer did not complete within the deadline");
    return stop("no byte of the answer came for " + std::to_string(idle_.count()) + "ms");
  }

 private:
  int_type stop(std::string why) {
    ended_ = true;
    failure_ = std::move(why);
    return traits_type::eof();
  }

  BodyReader reader_;
  const std::string_view what_;
  const std::size_t max_;
  const Deadline until_;
  const std::chrono::milliseconds idle_;
  std::string chunk_;
  std::size_t before_ = 0;      // bytes of the chunks before chunk_
  std::size_t item_start_ = 0;  // where the current item began
  bool ended_ = false;
  std::string failure_;
};

// --- errors -------------------------------------------------------------------

ApiError no_answer(std::string_view verb, std::string_view path, std::string_view cause) {
  ApiError e;
  e.message = std::string(verb) + " " + std::string(path) + ": " + cut_utf8(one_line(cause), 512);
  return e;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The request as we build it, before each send.
struct Outgoing {
  std::string_view verb;  // GET, LIST, WATCH, CREATE, PATCH, APPLY (for messages)
  http::method method;
  std::string_view path;  // for messages; sent with `query` after it
  std::string query{};
  const nlohmann::json* body = nullptr;
  std::string content_type{};
  // A client of its own with this inactivity timeout (a watch; 0: the shared pool).
  std::chrono::microseconds own_client{0};
};

// --- the watch stream ---------------------------------------------------------

class HttpWatchStream final : public WatchStream {
 public:
  HttpWatchStream(Sent sent, std::string path, std::chrono::milliseconds silence)
      : sent_(std::move(sent)), reader_(sent_), path_(std::move(path)), silence_(silence) {}

  ~HttpWatchStream() override { stop(); }

  ApiResult<std::optional<WatchEvent>> next() override {
    if (failed_) return *failed_;
    for (;;) {
      if (stopped_.load()) return std::optional<WatchEvent>();
      auto e = decoder_.next();
      if (!e) return fail_with(e.error());
      if (e->has_value()) return std::move(*e);
      std::string chunk;
      std::optional<Deadline> quiet_until;
      if (silence_.count() > 0) quiet_until = SteadyClock::now() + silence_;
      const auto status = reader_.read(chunk, quiet_until);
      if (status == BodyReader::Status::Data) {
        decoder_.feed(chunk);
        continue;
      }
      if (status == BodyReader::Status::Stopped || stopped_.load()) return std::optional<WatchEvent>();
      if (status == BodyReader::Status::Error) return fail_with("connection lost: " + reader_.error());
      if (status == BodyReader::Status::Timeout) {  // no byte within silence_
        fail_with("no byte for " + std::to_string(silence_.count()) +
                  " ms (bookmarks on): the stream is silent; closed");
        failed_->silent = true;
        return *failed_;
      }
      if (decoder_.has_partial_event())
        return fail_with("the stream ended inside event " + std::to_string(decoder_.events() + 1));
      stop();  // a clean end: nullopt from now on
      return std::optional<WatchEvent>();
    }
  }

  void stop() noexcept override {
    stopped_.store(true);
    reader_.stop();
    try {
      sent_.cts->cancel();
    } catch (...) {
    }
  }

 private:
  // Ends the stream with this error (next() returns it from now on).
  ApiError fail_with(std::string cause) {
    failed_ = no_answer("WATCH", path_, std::move(cause));
    stop();
    return *failed_;
  }

  const Sent sent_;  // keeps its client alive
  BodyReader reader_;
  std::string path_;
  WatchDecoder decoder_;
  std::chrono::milliseconds silence_;
  std::atomic<bool> stopped_{false};
  std::optional<ApiError> failed_;
};

// --- the client ---------------------------------------------------------------

class CppRestClient final : public HttpClient {
 public:
  CppRestClient(const ClusterConfig& config, HttpClientOptions options, std::string user_agent, std::string host)
      : config_(config),
        options_(std::move(options)),
        user_agent_(std::move(user_agent)),
        host_(std::move(host)),
        host_is_ip_(is_ip_literal(host_)),
        tokens_(options_.tokens ? options_.tokens : std::make_shared<TokenSource>(config, options_.clock)),
        limiter_(options_.qps, options_.burst, options_.clock) {}

  ApiResult<nlohmann::json> get(std::string_view path, std::chrono::milliseconds timeout) override {
    return call({.verb = "GET", .method = http::methods::GET, .path = path}, timeout);
  }

  ApiResult<ListPage> list_each(std::string_view path, const ListOptions& options,
                                const std::function<void(nlohmann::json&&)>& each) override {
    const std::string query = query_of({{"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
                                        {"continue", options.continue_token},
                                        {"resourceVersion", options.resource_version},
                                        {"labelSelector", options.label_selector},
                                        {"fieldSelector", options.field_selector}});
    Outgoing out{.verb = "LIST", .method = http::methods::GET, .path = path, .query = query};
    auto sent = open(out, SteadyClock::now() + options_.request_timeout);
    if (!sent) return sent.failure();
    BodyStreambuf buf(*sent, "an item of the answer", kMaxBody, Deadline::max(), options_.request_timeout);
    std::istream body(&buf);
    auto page = decode_list(body, kMaxJsonDepth, [&](nlohmann::json&& item) {
      buf.mark();
      each(std::move(item));
    });
    if (buf.failure().empty() && page) return std::move(*page);
    sent->cts->cancel();  // the rest of the body is not read
    if (buf.failure().empty()) return no_answer(out.verb, out.path, page.error());
    renew_client(sent->client);
    return no_answer(out.verb, out.path, buf.failure());
  }

  ApiResult<std::unique_ptr<WatchStream>> watch(std::string_view path, const WatchOptions& options) override {
    const auto server_side = options.timeout.count() > 0 ? options.timeout : std::chrono::seconds(1800);
    const std::string query =
        query_of({{"watch", "true"},
                  {"resourceVersion", options.resource_version},
                  {"allowWatchBookmarks", options.allow_bookmarks ? "true" : ""},
                  {"timeoutSeconds", options.timeout.count() > 0 ? std::to_string(options.timeout.count()) : ""},
                  {"labelSelector", options.label_selector},
                  {"fieldSelector", options.field_selector}});
    Outgoing out{.verb = "WATCH", .method = http::methods::GET, .path = path, .query = query,
                 .own_client = server_side + kWatchInactivitySlack};
    auto sent = open(out, SteadyClock::now() + options_.request_timeout);
    if (!sent) return sent.failure();
    if (sent->response.status_code() != 200) {
      sent->cts->cancel();
      return no_answer(out.verb, out.path,
                       "unexpected status " + std::to_string(sent->response.status_code()) + " for a watch");
    }
    return std::unique_ptr<WatchStream>(new HttpWatchStream(std::move(*sent), std::string(path), options.silence));
  }

  ApiResult<nlohmann::json> create(std::string_view path, const nlohmann::json& body,
                                   std::stop_token cancel) override {
    return call({.verb = "CREATE", .method = http::methods::POST, .path = path, .body = &body,
                 .content_type = "application/json"},
                options_.request_timeout, cancel);
  }

  ApiResult<nlohmann::json> patch(std::string_view path, PatchType type, const nlohmann::json& body,
                                  std::stop_token cancel) override {
    const char* content_type =
        type == PatchType::Json ? "application/json-patch+json" : "application/merge-patch+json";
    return call({.verb = "PATCH", .method = http::methods::PATCH, .path = path, .body = &body,
                 .content_type = content_type},
                options_.request_timeout, cancel);
  }

  ApiResult<nlohmann::json> update(std::string_view path, const nlohmann::json& body,
                                   std::chrono::milliseconds timeout) override {
    return call({.verb = "UPDATE", .method = http::methods::PUT, .path = path, .body = &body,
                 .content_type = "application/json"},
                timeout);
  }

  ApiResult<nlohmann::json> apply(std::string_view path, const nlohmann::json& body, std::string_view field_manager,
                                  bool force, std::chrono::milliseconds timeout, std::stop_token cancel) override {
    std::string query = query_of({{"fieldManager", std::string(field_manager)}, {"force", force ? "true" : ""}});
    return call({.verb = "APPLY", .method = http::methods::PATCH, .path = path, .query = std::move(query),
                 .body = &body, .content_type = "application/apply-patch+yaml"},
                timeout, cancel);
  }

  ApiResult<nlohmann::json> remove(std::string_view path, std::chrono::milliseconds timeout) override {
    return call({.verb = "DELETE", .method = http::methods::DEL, .path = path}, timeout);
  }

 private:
  const ClusterConfig config_;
  const HttpClientOptions options_;
  const std::string user_agent_;
  const std::string host_;
  const bool host_is_ip_;
  std::shared_ptr<TokenSource> tokens_;
  RateLimiter limiter_;
  // The shared connection pool, replaced after a call that got no answer (so
  // nothing queues behind a dead connection) and when the credentials bring
  // another client certificate.
  std::mutex pool_mu_;
  std::shared_ptr<http::client::http_client> pool_;
  std::shared_ptr<const Credentials> pool_creds_;  // whose pair `pool_` presents

  // The shared pool for these (never null) credentials' client certificate.
  std::shared_ptr<http::client::http_client> pooled_client(const std::shared_ptr<const Credentials>& creds) {
    std::lock_guard lock(pool_mu_);
    if (!pool_ || pool_creds_->client_cert_pem != creds->client_cert_pem ||
        pool_creds_->client_key_pem != creds->client_key_pem) {
      pool_ = new_client(request_inactivity(), creds);
      pool_creds_ = creds;
    }
    return pool_;
  }
  void renew_client(const std::shared_ptr<http::client::http_client>& used) {
    std::lock_guard lock(pool_mu_);
    if (!used || pool_ != used) return;
    try {
      pool_ = new_client(request_inactivity(), pool_creds_);
    } catch (...) {
      // Keep the old one: the URI was accepted at make(), so this does not happen.
    }
  }

  // A client (a connection pool) presenting these credentials' client certificate, if any.
  std::shared_ptr<http::client::http_client> new_client(std::chrono::microseconds inactivity,
                                                        std::shared_ptr<const Credentials> creds) const {
    http::client::http_client_config cfg;
    cfg.set_timeout(inactivity);
    cfg.set_proxy(web::web_proxy(web::web_proxy::disabled));
    cfg.set_validate_certificates(true);
    cfg.set_tlsext_sni_enabled(!host_is_ip_);
    cfg.set_ssl_context_callback([ca = config_.ca_pem, creds = std::move(creds), h = host_,
                                  ip = host_is_ip_](boost::asio::ssl::context& ctx) {
      SSL_CTX* c = ctx.native_handle();
      // Only the cluster CA: a fresh store replaces the default paths'.
      X509_STORE* store = X509_STORE_new();
      SSL_CTX_set_cert_store(c, store);
      // Already checked at make(); on a failure the store stays empty, so
      // every server is refused (closed).
      (void)add_ca_bundle(store, ca, "cluster CA");
      X509_VERIFY_PARAM* param = SSL_CTX_get0_param(c);
      if (ip) {
        X509_VERIFY_PARAM_set1_ip_asc(param, h.c_str());
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        X509_VERIFY_PARAM_set1_host(param, h.c_str(), h.size());
      }
      SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
      SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
      if (!creds->client_cert_pem.empty())
        (void)use_client_pair(c, creds->client_cert_pem, creds->client_key_pem, "client certificate");
    });
    return std::make_shared<http::client::http_client>(web::uri(config_.server), cfg);
  }

  std::chrono::microseconds request_inactivity() const {
    return std::max<std::chrono::microseconds>(options_.request_timeout, 60s) + 5s;
  }

  // One send with `creds`: the rate limiter, the headers back by `deadline`. A send that got
  // no answer replaces the shared pool.
  ApiResult<Sent> send_once(const Outgoing& out, Deadline deadline, const std::shared_ptr<const Credentials>& creds,
                            const std::stop_token& cancel) {
    if (auto ok = limiter_.acquire(deadline, cancel); !ok) return no_answer(out.verb, out.path, ok.error());
    if (cancel.stop_requested()) return no_answer(out.verb, out.path, "cancelled before it was sent");
    std::shared_ptr<http::client::http_client> c;
    try {
      c = out.own_client.count() > 0 ? new_client(out.own_client, creds) : pooled_client(creds);
      http::http_request req(out.method);
      req.set_request_uri(web::uri(std::string(out.path) + out.query));
      auto& h = req.headers();
      h.add("User-Agent", user_agent_);
      h.add("Accept", "application/json");
      if (!creds->token.empty()) h.add("Authorization", "Bearer " + creds->token);
      if (out.body) {
        // Invalid UTF-8 replaced, never a throw; as bytes: cpprestsdk's std::string body is a
        // char buffer it then reads as a uint8_t one (undefined behaviour, UBSan's vptr check).
        const std::string text = out.body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        std::vector<std::uint8_t> bytes(text.begin(), text.end());
        req.set_body(concurrency::streams::bytestream::open_istream(std::move(bytes)), text.size(), out.content_type);
      }
      auto body = std::make_shared<BoundedBodyBuffer>(kUnread);
      req.set_response_stream(concurrency::streams::streambuf<std::uint8_t>(body).create_ostream());
      auto cts = std::make_shared<pplx::cancellation_token_source>();
      auto done = track(c->request(req, cts->get_token()));
      if (!wait_until(*done, deadline, cancel)) {
        cts->cancel();
        wait_until(*done, SteadyClock::now() + kCancelledWait);
        renew_client(c);
        if (cancel.stop_requested()) return no_answer(out.verb, out.path, "cancelled while waiting for an answer");
        return no_answer(out.verb, out.path, "timed out waiting for an answer from " + config_.server);
      }
      if (!done->value) {
        renew_client(c);
        std::string cause = "no answer from " + config_.server + ": " + done->error;
        // cpprestsdk does not say why a handshake failed; the likely causes:
        if (done->error.find("handshake") != std::string::npos)
          cause += " (TLS: the server's certificate must be signed by the cluster CA and name " + host_ + ")";
        if (done->refused) cause += " (connection refused)";
        ApiError e = no_answer(out.verb, out.path, cause);
        e.refused = done->refused;
        return e;
      }
      return Sent{std::move(*done->value), std::move(cts), std::move(body), std::move(c)};
    } catch (...) {
      renew_client(c);
      return no_answer(out.verb, out.path, exception_text(std::current_exception()));
    }
  }

  // Reads the whole body (at most `max` bytes) by `deadline`.
  ApiResult<std::string> read_body(Sent& sent, const Outgoing& out, Deadline deadline, std::size_t max) {
    BodyStreambuf buf(sent, "the answer", max, deadline);
    std::string body(std::istreambuf_iterator<char>(&buf), {});
    if (buf.failure().empty()) return body;
    sent.cts->cancel();
    renew_client(sent.client);
    return no_answer(out.verb, out.path, buf.failure());
  }

  // The error an answer >= 400 says: the HTTP code, the Status in its body
  // (its reason, else the reason phrase), Retry-After (else the Status's) on 429/503.
  ApiError error_from(Sent& sent, const Outgoing& out, Deadline deadline) {
    auto body = read_body(sent, out, std::min(deadline, SteadyClock::now() + 5s), kMaxErrorBody);
    nlohmann::json status;
    if (body && !body->empty() && json_nesting_depth(*body, kMaxJsonDepth) <= kMaxJsonDepth)
      status = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (!status.is_object()) status = nlohmann::json::object();
    status["code"] = sent.response.status_code();
    if (const auto reason = status.value("reason", nlohmann::json()); !reason.is_string() || reason == "")
      status["reason"] = sent.response.reason_phrase();
    ApiError e = error_from_status(std::string(out.verb) + " " + std::string(out.path), status);
    std::string v;  // Retry-After, "" when absent
    sent.response.headers().match("Retry-After", v);
    if (e.code != 429 && e.code != 503)
      e.retry_after = std::chrono::seconds(0);
    else if (!v.empty() && v.size() <= 6 && v.find_first_not_of("0123456789") == std::string::npos)
      e.retry_after = std::chrono::seconds(std::stol(v));
    return e;
  }

  // An exchange up to a successful answer's headers, with the token source's
  // credentials; after a 401, once more if renewed credentials differ.
  ApiResult<Sent> open(const Outgoing& out, Deadline deadline, const std::stop_token& cancel = {}) {
    auto creds = tokens_->credentials();
    if (!creds) return no_answer(out.verb, out.path, "credentials: " + creds.error());
    auto sent = send_once(out, deadline, *creds, cancel);
    if (sent && sent->response.status_code() == 401) {
      auto fresh = tokens_->renew_after_unauthorized(*creds);
      if (!fresh) {
        ApiError e = error_from(*sent, out, deadline);
        e.message += "; renewing the credentials failed: " + cut_utf8(one_line(fresh.error()), 2048);
        return e;
      }
      if (*fresh) {
        // Drain the 401's body so its connection can be reused.
        (void)read_body(*sent, out, std::min(deadline, SteadyClock::now() + 2s), kMaxErrorBody);
        sent = send_once(out, deadline, *fresh, cancel);
      }
    }
    if (sent && sent->response.status_code() >= 400) return error_from(*sent, out, deadline);
    return sent;
  }

  // A whole exchange whose answer is one JSON object.
  ApiResult<nlohmann::json> call(const Outgoing& out, std::chrono::milliseconds timeout,
                                 const std::stop_token& cancel = {}) {
    const Deadline deadline = SteadyClock::now() + timeout;
    auto sent = open(out, deadline, cancel);
    if (!sent) return sent.failure();
    auto body = read_body(*sent, out, deadline, kMaxBody);
    if (!body) return body.failure();
    if (json_nesting_depth(*body, kMaxJsonDepth) > kMaxJsonDepth)
      return no_answer(out.verb, out.path,
                       "the answer nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    nlohmann::json doc = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return no_answer(out.verb, out.path, "the answer is not JSON");
    if (!doc.is_object()) return no_answer(out.verb, out.path, "the answer is not a JSON object");
    return doc;
  }
};

}  // namespace

// --- the public surface -------------------------------------------------------

Result<std::unique_ptr<HttpClient>> HttpClient::make(const ClusterConfig& config, std::string_view version,
                                                     HttpClientOptions options) {
  const std::string what = "API client for " + quote(config.server);
  if (config.server.rfind("https://", 0) != 0) return fail(what + ": the server is not an https:// URL");
  if (auto ok = check_ca_bundle(config.ca_pem, what + ": cluster CA"); !ok) return ok.failure();
  if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
    if (auto ok = check_client_pair(config.client_cert_pem, config.client_key_pem, what); !ok)
      return ok.failure();
  }
  std::string host;
  try {
    host = web::uri(config.server).host();
  } catch (const std::exception& e) {
    return fail(what + ": " + one_line(e.what()));
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return fail(what + ": the server names no host");
  [[maybe_unused]] static const bool pool_sized = [] {
    try {
      crossplat::threadpool::initialize_with_threads(kPoolThreads);
    } catch (...) {
      // Already initialised by someone else in this process: shared as it is.
    }
    return true;
  }();
  return std::unique_ptr<HttpClient>(
      new CppRestClient(config, std::move(options), "isolation-gate/" + std::string(version), std::move(host)));
}

}  // namespace ig::kube
