// tls::DirectStream (OpenSSL on the socket's descriptor): the stream alone
// against Asio's client stream on loopback, then the server over it. Every
// wait is bounded: io_context::run_for, the client's expiries, eventually().
#include <gtest/gtest.h>

#include <openssl/ssl.h>

#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server_test_support.h"
#include "tls/direct_stream.h"

namespace ig::tls {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

// A connected pair on loopback: the server end as a DirectStream, the client
// end as Asio's ssl::stream, both on one io_context.
class DirectPair {
 public:
  explicit DirectPair(int client_max_version = 0)
      : chain_(server::testing::make_chain()), client_ctx_(ssl::context::tls_client) {
    auto ctx = make_server_context(chain_.cert_pem, chain_.key_pem);
    if (!ctx) throw std::runtime_error(ctx.error());
    server_ctx_ = *ctx;
    if (client_max_version != 0) SSL_CTX_set_max_proto_version(client_ctx_.native_handle(), client_max_version);
    tcp::acceptor acceptor(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    client_.emplace(ioc_, client_ctx_);
    client_->next_layer().connect(acceptor.local_endpoint());
    tcp::socket accepted(ioc_);
    acceptor.accept(accepted);
    server_.emplace(std::move(accepted), server_ctx_->native_handle());
  }

  DirectStream<tcp::socket>& server() { return *server_; }
  ssl::stream<tcp::socket>& client() { return *client_; }
  tcp::socket& client_socket() { return client_->next_layer(); }

  // Runs the loop until it has no work left, at most `limit`.
  void run(std::chrono::milliseconds limit = 10s) {
    ioc_.restart();
    ioc_.run_for(limit);
  }

  // Runs the loop until `done` is true, at most `limit`.
  template <class Pred>
  void run_until(Pred done, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    ioc_.restart();
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      ioc_.run_one_for(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
      if (ioc_.stopped()) ioc_.restart();
    }
  }

  // Both handshakes; the server's error, the client's in `client_ec`.
  error_code handshake(error_code* client_ec = nullptr) {
    error_code s = net::error::would_block, c = net::error::would_block;
    server_->async_handshake([&](error_code ec) { s = ec; });
    client_->async_handshake(ssl::stream_base::client, [&](error_code ec) { c = ec; });
    run();
    if (client_ec != nullptr) *client_ec = c;
    return s;
  }

 private:
  CertificateBundle chain_;
  std::shared_ptr<ssl::context> server_ctx_;
  ssl::context client_ctx_;
  net::io_context ioc_;
  std::optional<ssl::stream<tcp::socket>> client_;
  std::optional<DirectStream<tcp::socket>> server_;
};

struct ReadResult {
  error_code ec = net::error::would_block;  // "not completed"
  std::size_t n = 0;
  bool done = false;
};

// Either end: the DirectStream under test or the client's Asio ssl::stream.
template <class Stream>
void start_read(Stream& s, net::mutable_buffer b, ReadResult& r) {
  s.async_read_some(b, [&r](error_code ec, std::size_t n) {
    r.ec = ec;
    r.n = n;
    r.done = true;
  });
}

// The client sends `text`; the DirectStream reads it in one read.
::testing::AssertionResult server_receives(DirectPair& p, std::string_view text) {
  std::array<char, 64> in{};
  ReadResult r;
  start_read(p.server(), net::buffer(in), r);
  net::async_write(p.client(), net::buffer(text), [](error_code, std::size_t) {});
  p.run();
  if (!r.done) return ::testing::AssertionFailure() << "the read did not complete";
  if (r.ec) return ::testing::AssertionFailure() << "the read failed: " << r.ec.message();
  if (std::string_view(in.data(), r.n) != text)
    return ::testing::AssertionFailure() << "read \"" << std::string_view(in.data(), r.n) << "\"";
  return ::testing::AssertionSuccess();
}

class DirectStreamVersions : public ::testing::TestWithParam<int> {};

TEST_P(DirectStreamVersions, HandshakeReadAndGatheredWrite) {
  DirectPair p(GetParam());
  error_code client_ec;
  ASSERT_FALSE(p.handshake(&client_ec));
  ASSERT_FALSE(client_ec) << client_ec.message();
  EXPECT_EQ(SSL_version(p.server().native_handle()), GetParam());

  ASSERT_TRUE(server_receives(p, "hello"));

  // Two buffers go out as one SSL_write: one record, read by one SSL_read.
  const std::array<net::const_buffer, 3> parts{net::buffer(std::string_view("abc")), net::const_buffer(),
                                               net::buffer(std::string_view("def"))};
  error_code wec = net::error::would_block;
  std::size_t written = 0;
  p.server().async_write_some(parts, [&](error_code ec, std::size_t n) {
    wec = ec;
    written = n;
  });
  std::array<char, 64> out{};
  ReadResult got;
  start_read(p.client(), net::buffer(out), got);
  p.run();
  ASSERT_FALSE(wec) << wec.message();
  EXPECT_EQ(written, 6u);
  ASSERT_FALSE(got.ec) << got.ec.message();
  EXPECT_EQ(std::string(out.data(), got.n), "abcdef");
}

// More than the socket buffers hold, both ways at once: the writes wait for
// writability (SSL_ERROR_WANT_WRITE), the reads take many records.
TEST_P(DirectStreamVersions, LargeTransfersBothWays) {
  DirectPair p(GetParam());
  ASSERT_FALSE(p.handshake());
  std::string up(3 * 1024 * 1024, '\0'), down(3 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < up.size(); ++i) {
    up[i] = static_cast<char>(i * 7 + 1);
    down[i] = static_cast<char>(i * 13 + 5);
  }
  std::string up_got(up.size(), '\0'), down_got(down.size(), '\0');
  error_code e1 = net::error::would_block, e2 = e1, e3 = e1, e4 = e1;
  net::async_write(p.client(), net::buffer(up), [&](error_code ec, std::size_t) { e1 = ec; });
  net::async_write(p.server(), net::buffer(down), [&](error_code ec, std::size_t) { e2 = ec; });
  net::async_read(p.server(), net::buffer(up_got), [&](error_code ec, std::size_t) { e3 = ec; });
  net::async_read(p.client(), net::buffer(down_got), [&](error_code ec, std::size_t) { e4 = ec; });
  p.run(30s);
  ASSERT_FALSE(e1) << e1.message();
  ASSERT_FALSE(e2) << e2.message();
  ASSERT_FALSE(e3) << e3.message();
  ASSERT_FALSE(e4) << e4.message();
  EXPECT_TRUE(up_got == up);
  EXPECT_TRUE(down_got == down);
}

INSTANTIATE_TEST_SUITE_P(Tls, DirectStreamVersions, ::testing::Values(TLS1_2_VERSION, TLS1_3_VERSION),
                         [](const auto& info) { return info.param == TLS1_2_VERSION ? "Tls12" : "Tls13"; });

TEST(DirectStream, CompletionIsNeverInsideTheInitiatingCall) {
  DirectPair p;
  ASSERT_FALSE(p.handshake());
  ReadResult r;
  start_read(p.server(), net::mutable_buffer(), r);  // zero bytes: done at once, but posted
  EXPECT_FALSE(r.done);
  p.run();
  ASSERT_TRUE(r.done);
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.n, 0u);

  bool written = false;
  p.server().async_write_some(net::buffer(std::string_view("x")), [&](error_code ec, std::size_t n) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 1u);
    written = true;
  });
  EXPECT_FALSE(written);  // send(2) succeeded at once; the completion still waits for the loop
  p.run();
  EXPECT_TRUE(written);
}

TEST(DirectStream, ThePeersCloseNotifyIsEofAndShutdownCompletes) {
  DirectPair p;
  ASSERT_FALSE(p.handshake());
  std::array<char, 16> in{};
  ReadResult r;
  start_read(p.server(), net::buffer(in), r);
  error_code client_shutdown = net::error::would_block;
  p.client().async_shutdown([&](error_code ec) { client_shutdown = ec; });
  p.run_until([&] { return r.done; });  // the client's shutdown still waits for ours
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, net::error::eof) << r.ec.message();
  EXPECT_EQ(r.n, 0u);
  error_code server_shutdown = net::error::would_block;
  p.server().async_shutdown([&](error_code ec) { server_shutdown = ec; });
  p.run();
  EXPECT_FALSE(server_shutdown) << server_shutdown.message();  // both close_notify seen
  EXPECT_FALSE(client_shutdown) << client_shutdown.message();
}

TEST(DirectStream, ATcpCloseWithoutCloseNotifyIsTruncation) {
  DirectPair p;
  ASSERT_FALSE(p.handshake());
  std::array<char, 16> in{};
  ReadResult r;
  start_read(p.server(), net::buffer(in), r);
  // A FIN, not close(): the client has not read its session tickets, and
  // closing with unread data would be a reset (ECONNRESET, also an error).
  p.client_socket().shutdown(tcp::socket::shutdown_send);
  p.run();
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, ssl::error::stream_truncated) << r.ec.message();
}

// The first 5 bytes of an application-data record announcing 100 bytes, and
// 10 of them.
std::string partial_record() {
  std::string rec = {0x17, 0x03, 0x03, 0x00, 0x64};
  rec += std::string(10, 'z');
  return rec;
}

TEST(DirectStream, APeerThatClosesMidRecordEndsTheReadWithAnError) {
  DirectPair p;
  ASSERT_FALSE(p.handshake());
  std::array<char, 16> in{};
  ReadResult r;
  start_read(p.server(), net::buffer(in), r);
  net::write(p.client_socket(), net::buffer(partial_record()));
  p.client_socket().close();
  p.run();
  ASSERT_TRUE(r.done);
  EXPECT_TRUE(r.ec);
  EXPECT_EQ(r.n, 0u);
}

TEST(DirectStream, APartialRecordThenSilenceWaitsUntilTheSocketIsClosed) {
  DirectPair p;
  ASSERT_FALSE(p.handshake());
  std::array<char, 16> in{};
  ReadResult r;
  start_read(p.server(), net::buffer(in), r);
  net::write(p.client_socket(), net::buffer(partial_record()));
  p.run(300ms);
  EXPECT_FALSE(r.done);  // nothing to deliver: it waits for the rest of the record
  p.server().next_layer().close();  // what the server's deadline does
  p.run();
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, net::error::operation_aborted) << r.ec.message();
  // Once closed, no attempt touches the descriptor.
  ReadResult after;
  start_read(p.server(), net::buffer(in), after);
  p.run();
  ASSERT_TRUE(after.done);
  EXPECT_EQ(after.ec, net::error::bad_descriptor) << after.ec.message();
}

TEST(DirectStream, PlainHttpFailsTheHandshakeWithATlsError) {
  DirectPair p;
  error_code s = net::error::would_block;
  p.server().async_handshake([&](error_code ec) { s = ec; });
  net::write(p.client_socket(), net::buffer(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
  p.run();
  ASSERT_TRUE(s);
  EXPECT_EQ(s.category(), net::error::get_ssl_category()) << s.message();
}

TEST(DirectStream, RenegotiationIsRefused) {
  DirectPair p(TLS1_2_VERSION);
  ASSERT_FALSE(p.handshake());
  std::array<char, 16> in{};
  ReadResult r;
  start_read(p.server(), net::buffer(in), r);
  ASSERT_EQ(SSL_renegotiate(p.client().native_handle()), 1);
  error_code again = net::error::would_block;
  p.client().async_handshake(ssl::stream_base::client, [&](error_code ec) { again = ec; });
  p.run();
  EXPECT_TRUE(again) << "the client's renegotiation succeeded";
  ASSERT_TRUE(r.done);  // the client gave up with an alert: the server's read ends
  EXPECT_TRUE(r.ec);
  EXPECT_EQ(r.n, 0u);
}

// TLS 1.3 KeyUpdate: reading the peer's request makes OpenSSL write ours.
TEST(DirectStream, KeyUpdateIsAnswered) {
  DirectPair p(TLS1_3_VERSION);
  ASSERT_FALSE(p.handshake());
  ASSERT_EQ(SSL_key_update(p.client().native_handle(), SSL_KEY_UPDATE_REQUESTED), 1);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(server_receives(p, "ping"));
    error_code wec = net::error::would_block;
    net::async_write(p.server(), net::buffer(std::string_view("pong")), [&](error_code ec, std::size_t) { wec = ec; });
    std::array<char, 16> out{};
    ReadResult got;
    start_read(p.client(), net::buffer(out), got);
    p.run();
    ASSERT_FALSE(wec) << wec.message();
    ASSERT_FALSE(got.ec) << got.ec.message();
    EXPECT_EQ(std::string(out.data(), got.n), "pong");
  }
}

}  // namespace
}  // namespace ig::tls

// The server over DirectStream: what a client sees.
namespace ig::server::testing {
namespace {

TEST(ServerDirectTls, Tls12AndTls13ClientsAreServedLargeBodiesIncluded) {
  ServerHarness h;
  const std::string big(2 * 1024 * 1024 + 17, 'b');  // larger than the socket buffers: writes wait
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    Client c(h.tls_port(), true, h.chain().ca_cert_pem, kHost,
             [version](SSL_CTX* ctx) { SSL_CTX_set_max_proto_version(ctx, version); });
    ASSERT_FALSE(c.connect());
    EXPECT_EQ(SSL_version(c.ssl()), version);
    EXPECT_EQ(c.request(http::verb::post, "/validate/pods", "small").body(), "small");
    auto res = c.request(http::verb::post, "/validate/pods", big);
    EXPECT_EQ(res.result_int(), 200u);
    EXPECT_TRUE(res.body() == big) << "version " << version;
  }
}

TEST(ServerDirectTls, APartialRecordThenSilenceIsClosedOnTheHeaderTimeout) {
  ListenerOptions opts;
  opts.header_timeout = 1s;
  ServerHarness h(opts);
  auto c = h.tls_client();
  net::write(c->lowest().socket(), net::buffer(tls::partial_record()));
  EXPECT_TRUE(c->closed_by_peer(10s));
  EXPECT_TRUE(eventually([&] { return h.server().stats().timeouts == 1; }));
  EXPECT_EQ(h.server().stats().requests, 0u);
  EXPECT_EQ(h.tls_client()->request(http::verb::get, "/healthz", "").result_int(), 200u);
}

TEST(ServerDirectTls, APeerThatClosesMidRecordLeavesTheServerServing) {
  ServerHarness h;
  {
    auto c = h.tls_client();
    net::write(c->lowest().socket(), net::buffer(tls::partial_record()));
    c->lowest().socket().close();
  }
  {
    // Mid-body: the header complete, then half a record of body and a close.
    auto c = h.tls_client();
    ASSERT_FALSE(c->write("POST /validate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
    net::write(c->lowest().socket(), net::buffer(tls::partial_record()));
    c->lowest().socket().close();
  }
  EXPECT_TRUE(eventually([&] { return h.server().stats().connections_active == 0; }));
  EXPECT_EQ(h.server().stats().requests, 0u);
  EXPECT_EQ(h.tls_client()->request(http::verb::get, "/healthz", "").result_int(), 200u);
}

TEST(ServerDirectTls, PlainHttpOnTheTlsPortIsAFailedHandshake) {
  ServerHarness h;
  Client plain(h.tls_port(), false);
  ASSERT_FALSE(plain.connect());
  ASSERT_FALSE(plain.write("POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"));
  beast::error_code ec;
  const std::string got = plain.read_until("HTTP/1.1 200", ec);
  EXPECT_TRUE(ec);  // closed, never answered
  EXPECT_TRUE(eventually([&] { return h.server().stats().tls_handshake_failures == 1; }));
  EXPECT_EQ(h.server().stats().requests, 0u);
}

TEST(ServerDirectTls, RenegotiationIsRefusedAndTheServerKeepsServing) {
  ServerHarness h;
  Client c(h.tls_port(), true, h.chain().ca_cert_pem, kHost,
           [](SSL_CTX* ctx) { SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); });
  ASSERT_FALSE(c.connect());
  EXPECT_EQ(c.request(http::verb::get, "/healthz", "").result_int(), 200u);
  ASSERT_EQ(SSL_renegotiate(c.ssl()), 1);
  EXPECT_TRUE(c.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") || c.closed_by_peer());
  EXPECT_EQ(h.tls_client()->request(http::verb::get, "/healthz", "").result_int(), 200u);
}

}  // namespace
}  // namespace ig::server::testing
