// Test support for the server_*_test.cpp files: a running HttpServer on
// 127.0.0.1 with ephemeral ports, and a small blocking client (plain or TLS,
// verifying the CA and host name) whose every operation is bounded by a timeout.
#pragma once

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "server/https_server.h"
#include "tls/certificates.h"
#include "tls/server_context.h"

namespace ig::server::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

inline constexpr const char* kHost = "isolation-gate.isolation-gate-system.svc";

// The error of a failed Result ("" when it succeeded), for assertions.
template <typename T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? std::string() : r.error();
}

inline tls::CertificateBundle make_chain() {
  auto b = tls::make_serving_chain({"isolation-gate", kHost}, {"127.0.0.1"}, std::chrono::hours(24));
  if (!b) throw std::runtime_error("make_serving_chain: " + b.error());
  return *b;
}

// Waits (bounded) for a condition that another thread makes true.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

class Client {
 public:
  using Tweak = std::function<void(SSL_CTX*)>;

  // tls=false: plain TCP. tls=true: verifies `ca_pem` (if not empty) and `host`.
  Client(uint16_t port, bool tls, const std::string& ca_pem = "", const std::string& host = kHost,
         const Tweak& tweak = {})
      : port_(port), ctx_(ssl::context::tls_client) {
    if (tls) {
      if (!ca_pem.empty()) {
        ctx_.add_certificate_authority(net::buffer(ca_pem));
        ctx_.set_verify_mode(ssl::verify_peer);
      }
      SSL_CTX_set_session_cache_mode(ctx_.native_handle(), SSL_SESS_CACHE_CLIENT);
      if (tweak) tweak(ctx_.native_handle());
      tls_.emplace(ioc_, ctx_);
      SSL_set_tlsext_host_name(tls_->native_handle(), host.c_str());
      SSL_set1_host(tls_->native_handle(), host.c_str());
    } else {
      plain_.emplace(ioc_);
    }
  }

  beast::tcp_stream& lowest() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }
  SSL* ssl() { return tls_ ? tls_->native_handle() : nullptr; }

  // TCP connect and (for TLS) handshake.
  beast::error_code connect(SSL_SESSION* resume = nullptr) {
    beast::error_code ec;
    lowest().expires_after(timeout_);
    lowest().async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_),
                           [&](beast::error_code e) { ec = e; });
    run();
    if (ec || !tls_) return ec;
    if (resume) SSL_set_session(ssl(), resume);
    lowest().expires_after(timeout_);
    tls_->async_handshake(ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
    run();
    return ec;
  }

  beast::error_code write(std::string_view data) {
    beast::error_code ec;
    lowest().expires_after(timeout_);
    with_stream([&](auto& s) {
      net::async_write(s, net::buffer(data.data(), data.size()),
                       [&](beast::error_code e, std::size_t) { ec = e; });
    });
    run();
    return ec;
  }

  beast::error_code read_response(http::response<http::string_body>& res) {
    beast::error_code ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    lowest().expires_after(timeout_);
    with_stream([&](auto& s) {
      http::async_read(s, buffer_, parser, [&](beast::error_code e, std::size_t) { ec = e; });
    });
    run();
    if (!ec) res = parser.release();
    return ec;
  }

  // Reads raw bytes up to and including `delim`.
  std::string read_until(std::string_view delim, beast::error_code& ec) {
    // Asio's read_until copies a v1 dynamic buffer such as flat_buffer, so read
    // into a string and hand any surplus back to buffer_.
    std::string raw = beast::buffers_to_string(buffer_.data());
    buffer_.consume(buffer_.size());
    lowest().expires_after(timeout_);
    std::size_t n = 0;
    with_stream([&](auto& s) {
      net::async_read_until(s, net::dynamic_buffer(raw), std::string(delim),
                            [&](beast::error_code e, std::size_t k) {
                              ec = e;
                              n = k;
                            });
    });
    run();
    const std::string rest = raw.substr(n);
    buffer_.commit(net::buffer_copy(buffer_.prepare(rest.size()), net::buffer(rest)));
    return raw.substr(0, n);
  }

  // True when the server closes the connection (EOF, reset, TLS truncation)
  // before `limit`; false on data or timeout.
  bool closed_by_peer(std::chrono::seconds limit = 5s) {
    beast::error_code ec;
    std::size_t n = 0;
    char byte;
    lowest().expires_after(limit);
    with_stream([&](auto& s) {
      s.async_read_some(net::buffer(&byte, 1), [&](beast::error_code e, std::size_t k) {
        ec = e;
        n = k;
      });
    });
    run();
    return n == 0 && ec && ec != beast::error::timeout;
  }

  http::response<http::string_body> request(http::verb verb, std::string target, std::string body,
                                            bool keep_alive = true,
                                            std::string content_type = "application/json") {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, kHost);
    if (!content_type.empty()) req.set(http::field::content_type, content_type);
    req.body() = std::move(body);
    req.keep_alive(keep_alive);
    req.prepare_payload();
    beast::error_code ec;
    lowest().expires_after(timeout_);
    with_stream([&](auto& s) {
      http::async_write(s, req, [&](beast::error_code e, std::size_t) { ec = e; });
    });
    run();
    if (ec) throw std::runtime_error("write: " + ec.message());
    http::response<http::string_body> res;
    ec = read_response(res);
    if (ec) throw std::runtime_error("read: " + ec.message());
    return res;
  }

  // Serial of the server's certificate, upper-case hex.
  std::string peer_serial() {
    X509* cert = SSL_get1_peer_certificate(ssl());
    if (!cert) return "";
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
    char* hex = BN_bn2hex(bn);
    std::string out(hex);
    OPENSSL_free(hex);
    BN_free(bn);
    X509_free(cert);
    return out;
  }

 private:
  template <typename F>
  void with_stream(F f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(*plain_);
    }
  }
  void run() {
    ioc_.restart();
    ioc_.run();
  }

  uint16_t port_;
  std::chrono::seconds timeout_{10};
  net::io_context ioc_;
  ssl::context ctx_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  std::optional<beast::tcp_stream> plain_;
  beast::flat_buffer buffer_;
};

// Echo handler: body back, method/target/content type in headers; "/throw"
// throws; "/block" waits until release() (bounded).
class EchoHandler {
 public:
  Response operator()(Request&& req) {
    if (req.target == "/throw") throw std::runtime_error("handler failure on purpose");
    if (req.target == "/block") {
      blocked_.set_value();
      release_future_.wait_for(10s);
    }
    Response r;
    r.status = 200;
    r.content_type = req.content_type.empty() ? "text/plain" : req.content_type;
    r.headers = {{"X-Method", req.method}, {"X-Target", req.target}};
    r.body = std::move(req.body);
    return r;
  }
  std::future<void> blocked() { return blocked_.get_future(); }
  void release() { release_.set_value(); }

 private:
  std::promise<void> blocked_;
  std::promise<void> release_;
  std::shared_future<void> release_future_ = release_.get_future().share();
};

// A server with one TLS listener and one plain listener on 127.0.0.1.
class ServerHarness {
 public:
  explicit ServerHarness(ListenerOptions tls_opts = {}, ListenerOptions plain_opts = {},
                         unsigned threads = 2)
      : chain_(make_chain()) {
    auto loaded = tls::ReloadingTlsContext::from_pem(chain_.cert_pem, chain_.key_pem, {});
    if (!loaded) throw std::runtime_error(loaded.error());
    tls_ = std::move(*loaded);
    init(tls_opts, plain_opts, threads);
  }

  // Uses an existing TLS context (e.g. file-backed for reload tests).
  ServerHarness(std::unique_ptr<tls::ReloadingTlsContext> ctx, tls::CertificateBundle chain,
                ListenerOptions tls_opts = {}, unsigned threads = 2)
      : chain_(std::move(chain)), tls_(std::move(ctx)) {
    init(tls_opts, ListenerOptions{}, threads);
  }

  ~ServerHarness() { server_->stop(1s); }

  HttpServer& server() { return *server_; }
  EchoHandler& handler() { return *handler_; }
  tls::ReloadingTlsContext& tls() { return *tls_; }
  const tls::CertificateBundle& chain() const { return chain_; }
  uint16_t tls_port() const { return tls_port_; }
  uint16_t plain_port() const { return plain_port_; }

  std::unique_ptr<Client> tls_client() {
    auto c = std::make_unique<Client>(tls_port_, true, chain_.ca_cert_pem);
    auto ec = c->connect();
    if (ec) throw std::runtime_error("tls connect: " + ec.message());
    return c;
  }
  std::unique_ptr<Client> plain_client() {
    auto c = std::make_unique<Client>(plain_port_, false);
    auto ec = c->connect();
    if (ec) throw std::runtime_error("plain connect: " + ec.message());
    return c;
  }

 private:
  void init(ListenerOptions tls_opts, ListenerOptions plain_opts, unsigned threads) {
    handler_ = std::make_shared<EchoHandler>();
    server_ = std::make_unique<HttpServer>(
        [h = handler_](Request&& r) { return (*h)(std::move(r)); }, *tls_);
    tls_opts.host = "127.0.0.1";
    tls_opts.port = 0;
    tls_opts.tls = true;
    auto tls_ep = server_->add_listener(tls_opts);
    if (!tls_ep) throw std::runtime_error(tls_ep.error());
    tls_port_ = tls_ep->port();
    plain_opts.host = "127.0.0.1";
    plain_opts.port = 0;
    plain_opts.tls = false;
    auto plain_ep = server_->add_listener(plain_opts);
    if (!plain_ep) throw std::runtime_error(plain_ep.error());
    plain_port_ = plain_ep->port();
    server_->start(threads);
  }

  tls::CertificateBundle chain_;
  std::unique_ptr<tls::ReloadingTlsContext> tls_;
  std::shared_ptr<EchoHandler> handler_;
  std::unique_ptr<HttpServer> server_;
  uint16_t tls_port_ = 0, plain_port_ = 0;
};

}  // namespace ig::server::testing
