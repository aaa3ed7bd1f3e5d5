// HttpServer over plain HTTP (the /healthz /readyz /metrics listener) and the
// transport's lifecycle: timeouts, limits, graceful stop.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "server_test_support.h"

namespace ig::server::testing {
namespace {

TEST(ServerHttp, PlainListenerWorks) {
  ServerHarness h;
  auto c = h.plain_client();
  auto res = c->request(http::verb::get, "/healthz", "", true, "");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res[http::field::server], "isolation-gate");
  EXPECT_EQ(res[http::field::content_type], "text/plain");
  EXPECT_EQ(res["X-Target"], "/healthz");
  EXPECT_EQ(c->request(http::verb::get, "/readyz", "", true, "")["X-Target"], "/readyz");
}

TEST(ServerHttp, TlsListenerRefusesPlainHttpAndKeepsServing) {
  ServerHarness h;
  Client c(h.tls_port(), false);
  ASSERT_FALSE(c.connect());
  ASSERT_FALSE(c.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_TRUE(eventually([&] { return h.server().stats().tls_handshake_failures == 1; }));
  EXPECT_EQ(h.tls_client()->request(http::verb::get, "/healthz", "").result_int(), 200u);
}

TEST(ServerHttp, NegativeChunkSizeGets400AndServerStillAnswers) {
  ServerHarness h;
  auto c = h.plain_client();
  ASSERT_FALSE(c->write("POST /mutate/pods HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "-1\r\n"));
  http::response<http::string_body> res;
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.result_int(), 400u);
  EXPECT_TRUE(c->closed_by_peer());
  EXPECT_EQ(h.plain_client()->request(http::verb::get, "/healthz", "").result_int(), 200u);
}

TEST(ServerHttp, MalformedRequestsGet400) {
  ServerHarness h;
  for (const char* bad : {
           "GARBAGE\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
           "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
           "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
           "GET / HTTP/9.9\r\n\r\n",
       }) {
    auto c = h.plain_client();
    ASSERT_FALSE(c->write(bad));
    http::response<http::string_body> res;
    ASSERT_FALSE(c->read_response(res)) << bad;
    EXPECT_EQ(res.result_int(), 400u) << bad;
    EXPECT_TRUE(c->closed_by_peer()) << bad;
  }
  EXPECT_EQ(h.server().stats().requests, 0u);
}

TEST(ServerHttp, ChunkedBodyOverLimitGets413) {
  ListenerOptions plain;
  plain.body_limit = 1000;
  ServerHarness h({}, plain);
  auto c = h.plain_client();
  std::string req = "POST /mutate/pods HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) req += "190\r\n" + std::string(400, 'x') + "\r\n";
  req += "0\r\n\r\n";
  ASSERT_FALSE(c->write(req));
  http::response<http::string_body> res;
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.result_int(), 413u);
  EXPECT_EQ(res.body(), R"({"error":"request body exceeds 1000 bytes"})");
  // A chunked body within the limit is assembled.
  auto ok = h.plain_client();
  ASSERT_FALSE(ok->write("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  ASSERT_FALSE(ok->read_response(res));
  EXPECT_EQ(res.body(), "abcde");
}

TEST(ServerHttp, PipelinedRequestsAnsweredInOrder) {
  ServerHarness h;
  auto c = h.plain_client();
  ASSERT_FALSE(c->write("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nA"
                        "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nB"));
  http::response<http::string_body> res;
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.body(), "A");
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.body(), "B");
}

TEST(ServerHttp, Http10WithoutKeepAliveIsClosed) {
  ServerHarness h;
  auto c = h.plain_client();
  ASSERT_FALSE(c->write("POST /old HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi"));
  http::response<http::string_body> res;
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.version(), 10u);
  EXPECT_EQ(res.body(), "hi");
  EXPECT_TRUE(c->closed_by_peer());
  // HTTP/1.0 with keep-alive stays open.
  auto k = h.plain_client();
  ASSERT_FALSE(k->write("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  ASSERT_FALSE(k->read_response(res));
  EXPECT_TRUE(res.keep_alive());
  ASSERT_FALSE(k->write("GET /b HTTP/1.0\r\n\r\n"));
  ASSERT_FALSE(k->read_response(res));
  EXPECT_EQ(res["X-Target"], "/b");
}

TEST(ServerHttp, HeadResponseHasNoContent) {
  HttpServer server([](Request&& r) {
    return Response{200, "application/json", r.target == "/head" ? R"({"status":"ok"})" : "", {}};
  });
  ListenerOptions plain;
  plain.host = "127.0.0.1";
  plain.port = 0;
  plain.tls = false;
  auto ep = server.add_listener(plain);
  ASSERT_TRUE(ep) << error_of(ep);
  server.start(1);
  Client c(ep->port(), false);
  ASSERT_FALSE(c.connect());
  // Pipelined HEAD then GET: a body after HEAD would be read as the next response.
  ASSERT_FALSE(c.write("HEAD /head HTTP/1.1\r\nHost: x\r\n\r\nGET /get HTTP/1.1\r\nHost: x\r\n\r\n"));
  beast::error_code ec;
  const std::string head = c.read_until("\r\n\r\n", ec);
  ASSERT_FALSE(ec);
  EXPECT_NE(head.find("Content-Length: 15\r\n"), std::string::npos) << head;
  const std::string next = c.read_until("\r\n\r\n", ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(next.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << next;
  EXPECT_NE(next.find("Content-Length: 0\r\n"), std::string::npos) << next;
}

TEST(ServerHttp, ConnectionCloseIsRespected) {
  ServerHarness h;
  auto c = h.plain_client();
  auto res = c->request(http::verb::post, "/x", "body", /*keep_alive=*/false);
  EXPECT_EQ(res.body(), "body");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(c->closed_by_peer());
}

TEST(ServerHttp, IdleAndHeaderTimeoutsCloseConnections) {
  ListenerOptions plain;
  plain.idle_timeout = std::chrono::seconds(1);
  plain.header_timeout = std::chrono::seconds(1);
  ListenerOptions tls;
  tls.header_timeout = std::chrono::seconds(1);
  ServerHarness h(tls, plain);
  // Idle keep-alive connection.
  auto idle = h.plain_client();
  EXPECT_EQ(idle->request(http::verb::get, "/x", "").result_int(), 200u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle->closed_by_peer(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  // Slowloris: half a header, never finished.
  auto slow = h.plain_client();
  ASSERT_FALSE(slow->write("POST /x HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  EXPECT_TRUE(slow->closed_by_peer(5s));
  // Connected but silent (TLS listener: handshake never started).
  Client silent(h.tls_port(), false);
  ASSERT_FALSE(silent.connect());
  EXPECT_TRUE(silent.closed_by_peer(5s));
  EXPECT_TRUE(eventually([&] { return h.server().stats().connections_active == 0; }));
  EXPECT_GE(h.server().stats().timeouts, 2u);
}

TEST(ServerHttp, BodyTimeoutClosesSlowUpload) {
  ListenerOptions plain;
  plain.body_timeout = std::chrono::seconds(1);
  ServerHarness h({}, plain);
  auto c = h.plain_client();
  ASSERT_FALSE(c->write("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly a part"));
  EXPECT_TRUE(c->closed_by_peer(5s));
}

TEST(ServerHttp, MaxConnectionsRejectsExtraConnections) {
  ListenerOptions plain;
  plain.max_connections = 1;
  ServerHarness h({}, plain);
  auto first = h.plain_client();
  EXPECT_EQ(first->request(http::verb::get, "/x", "").result_int(), 200u);
  Client second(h.plain_port(), false);
  ASSERT_FALSE(second.connect());
  EXPECT_TRUE(second.closed_by_peer());
  EXPECT_EQ(h.server().stats().connections_rejected, 1u);
  // The first one is unaffected.
  EXPECT_EQ(first->request(http::verb::get, "/y", "").result_int(), 200u);
}

// A plain TCP connection from `source` (any 127.0.0.0/8 address is local).
struct RawConnection {
  RawConnection(uint16_t port, const char* source) : socket(ioc) {
    socket.open(tcp::v4());
    socket.bind(tcp::endpoint(net::ip::make_address(source), 0));
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }
  // True when the server closed the connection (EOF or reset) within `limit`.
  bool closed_by_peer(std::chrono::seconds limit = 5s) {
    char byte = 0;
    bool closed = false;
    socket.async_read_some(net::buffer(&byte, 1), [&](beast::error_code e, std::size_t) { closed = !!e; });
    ioc.run_for(limit);
    return closed;
  }
  net::io_context ioc;
  tcp::socket socket;
};

TEST(ServerHttp, PerSourceCapRejectsBeyondItOtherSourcesAreServed) {
  ListenerOptions plain;
  plain.max_connections_per_source = 2;
  ServerHarness h({}, plain);
  auto a = h.plain_client();
  auto b = h.plain_client();
  EXPECT_EQ(a->request(http::verb::get, "/a", "").result_int(), 200u);
  EXPECT_EQ(b->request(http::verb::get, "/b", "").result_int(), 200u);
  RawConnection third(h.plain_port(), "127.0.0.1");
  EXPECT_TRUE(third.closed_by_peer());
  EXPECT_EQ(h.server().stats().connections_rejected_per_source, 1u);
  EXPECT_EQ(h.server().stats().connections_rejected, 0u);
  // Another source address has slots of its own.
  RawConnection other(h.plain_port(), "127.0.0.2");
  net::write(other.socket, net::buffer(std::string_view("GET /o HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(other.socket, buf, res);
  EXPECT_EQ(res.result_int(), 200u);
  // A slot given back is taken again (once the server has seen the close).
  b.reset();
  EXPECT_TRUE(eventually([&] { return h.server().stats().connections_active == 2; }));
  auto again = h.plain_client();
  EXPECT_EQ(again->request(http::verb::get, "/again", "").result_int(), 200u);
  EXPECT_EQ(a->request(http::verb::get, "/a2", "").result_int(), 200u);
  EXPECT_EQ(h.server().stats().connections_rejected_per_source, 1u);
}

TEST(ServerHttp, HandshakeTimeoutIsItsOwnAndShorterThanTheHeaderTimeout) {
  ListenerOptions tls;
  tls.handshake_timeout = std::chrono::milliseconds(300);
  tls.header_timeout = std::chrono::seconds(30);
  ServerHarness h(tls);
  auto handshaken = h.tls_client();  // handshake done, no request yet: header timeout applies
  Client silent(h.tls_port(), false);
  ASSERT_FALSE(silent.connect());
  EXPECT_TRUE(silent.closed_by_peer(10s));
  EXPECT_TRUE(eventually([&] { return h.server().stats().tls_handshake_timeouts == 1; }));
  // Closed for the handshake, not for the header: the other one still serves.
  EXPECT_EQ(handshaken->request(http::verb::get, "/x", "").result_int(), 200u);
  EXPECT_EQ(h.server().stats().tls_handshake_failures, 1u);
}

TEST(ServerHttp, BeginDrainClosesAfterEachResponseAndLeavesIdleConnectionsOpen) {
  ServerHarness h;
  auto idle = h.plain_client();
  auto res = idle->request(http::verb::get, "/before", "");
  EXPECT_TRUE(res.keep_alive());
  h.server().begin_drain();
  h.server().begin_drain();  // idempotent
  // A new connection is still served, and closed after its response.
  auto fresh = h.plain_client();
  auto during = fresh->request(http::verb::get, "/during", "");
  EXPECT_EQ(during.result_int(), 200u);
  EXPECT_FALSE(during.keep_alive());
  EXPECT_TRUE(fresh->closed_by_peer());
  // The idle one was left open: its next request is answered, then closed.
  auto later = idle->request(http::verb::post, "/idle", "body");
  EXPECT_EQ(later.body(), "body");
  EXPECT_FALSE(later.keep_alive());
  EXPECT_TRUE(idle->closed_by_peer());
  EXPECT_EQ(h.server().stats().requests, 3u);
}

TEST(ServerHttp, GracefulStopFinishesInFlightRequests) {
  ServerHarness h;
  auto idle = h.plain_client();
  EXPECT_EQ(idle->request(http::verb::get, "/warm", "").result_int(), 200u);
  auto busy = h.tls_client();
  auto blocked = h.handler().blocked();
  ASSERT_FALSE(busy->write("POST /block HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"));
  ASSERT_EQ(blocked.wait_for(10s), std::future_status::ready);

  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    h.server().stop(10s);
    stopped = true;
  });
  // The idle keep-alive connection is closed at once; the busy one is not.
  EXPECT_TRUE(idle->closed_by_peer());
  EXPECT_FALSE(stopped.load());
  h.handler().release();
  http::response<http::string_body> res;
  ASSERT_FALSE(busy->read_response(res));
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "{}");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(busy->closed_by_peer());  // close_notify
  busy.reset();
  stopper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(h.server().stats().connections_active, 0u);
  // No longer accepting.
  Client late(h.plain_port(), false);
  EXPECT_TRUE(late.connect());
}

TEST(ServerHttp, StopGraceExpiresThenClosesEverything) {
  ServerHarness h;
  auto busy = h.plain_client();
  auto blocked = h.handler().blocked();
  ASSERT_FALSE(busy->write("POST /block HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  ASSERT_EQ(blocked.wait_for(10s), std::future_status::ready);
  // Half a request on another connection: not idle, must be cut at the deadline.
  auto partial = h.plain_client();
  ASSERT_FALSE(partial->write("POST /x HTTP/1.1\r\n"));
  std::thread releaser([&] {
    std::this_thread::sleep_for(300ms);  // after the 100 ms grace has expired
    h.handler().release();
  });
  const auto t0 = std::chrono::steady_clock::now();
  h.server().stop(100ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
  releaser.join();
  EXPECT_TRUE(partial->closed_by_peer());
  EXPECT_EQ(h.server().stats().connections_active, 0u);
}

TEST(ServerHttp, AddListenerErrors) {
  HttpServer plain_only([](Request&&) { return Response{200, "text/plain", "ok", {}}; });
  ListenerOptions tls;
  tls.host = "127.0.0.1";
  tls.port = 0;
  auto no_tls = plain_only.add_listener(tls);
  EXPECT_FALSE(no_tls);
  EXPECT_NE(error_of(no_tls).find("TLS"), std::string::npos) << error_of(no_tls);

  ListenerOptions plain = tls;
  plain.tls = false;
  auto ep = plain_only.add_listener(plain);
  ASSERT_TRUE(ep) << error_of(ep);
  EXPECT_NE(ep->port(), 0);
  // The same port again: bind fails with a message naming it.
  plain.port = ep->port();
  ListenerOptions dup = plain;
  auto taken = plain_only.add_listener(dup);
  EXPECT_FALSE(taken);
  EXPECT_NE(error_of(taken).find(std::to_string(ep->port())), std::string::npos) << error_of(taken);
  plain.host = "no-such-host.invalid";
  plain.port = 0;
  EXPECT_FALSE(plain_only.add_listener(plain));
  // "localhost" resolves.
  plain.host = "localhost";
  auto local = plain_only.add_listener(plain);
  EXPECT_TRUE(local) << error_of(local);

  plain_only.start(1);
  Client c(ep->port(), false);
  ASSERT_FALSE(c.connect());
  EXPECT_EQ(c.request(http::verb::get, "/", "").body(), "ok");
  plain_only.stop(1s);
  plain_only.stop(1s);  // idempotent
}

TEST(ServerHttp, RunBlocksUntilStopFromAnotherThread) {
  HttpServer server([](Request&&) { return Response{204, "", "", {{"X-A", "1"}, {"Bad\r\nName", "x"}}}; });
  ListenerOptions plain;
  plain.host = "127.0.0.1";
  plain.port = 0;
  plain.tls = false;
  auto ep = server.add_listener(plain);
  ASSERT_TRUE(ep) << error_of(ep);
  std::thread runner([&] { server.run(2); });
  Client c(ep->port(), false);
  ASSERT_FALSE(c.connect());
  auto res = c.request(http::verb::get, "/", "");
  EXPECT_EQ(res.result_int(), 204u);
  EXPECT_EQ(res["X-A"], "1");
  EXPECT_EQ(res.count(http::field::content_type), 0u);
  EXPECT_EQ(res.count(http::field::content_length), 0u);
  EXPECT_EQ(res.count("Bad\r\nName"), 0u);
  server.stop(1s);
  runner.join();
}

TEST(ServerHttp, InvalidHandlerStatusBecomes500) {
  HttpServer server([](Request&&) { return Response{42, "text/plain", "?", {}}; });
  ListenerOptions plain;
  plain.host = "127.0.0.1";
  plain.port = 0;
  plain.tls = false;
  auto ep = server.add_listener(plain);
  ASSERT_TRUE(ep) << error_of(ep);
  server.start(1);
  Client c(ep->port(), false);
  ASSERT_FALSE(c.connect());
  EXPECT_EQ(c.request(http::verb::get, "/", "").result_int(), 500u);
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every counter the transport counts is exported, for every listener given,
// each metric's HELP/TYPE once (IG_TRANSPORT_COUNTERS is the one list).
TEST(ServerMetrics, EveryCounterOfEveryListenerIsExported) {
  ServerHarness h;
  auto c = h.plain_client();
  EXPECT_EQ(c->request(http::verb::get, "/healthz", "").result_int(), 200u);
  EXPECT_EQ(c->request(http::verb::get, "/throw", "").result_int(), 500u);
  ASSERT_TRUE(eventually([&] { return h.server().stats().responses_5xx == 1; }));
  TransportStats probes;
  probes.requests = 7;
  std::string text;
  prometheus::TextWriter out(text);
  write_transport_metrics(out, {{"webhook", h.server().stats()}, {"probes", probes}});

  std::size_t rows = 0;
#define IG_CHECK_ROW(field, type, name, label, value, help)                                          \
  ++rows;                                                                                          \
  EXPECT_EQ(occurrences(text, "# TYPE " name " "), 1u) << name;                                    \
  EXPECT_EQ(occurrences(text, "# HELP " name " "), 1u) << name;                                    \
  for (const char* listener : {"webhook", "probes"}) {                                             \
    std::string series = std::string(name) + "{listener=\"" + listener + "\"";                      \
    if (*label) series += std::string(",") + label + "=\"" + value + "\"";                          \
    EXPECT_EQ(occurrences(text, series + "} "), 1u) << series;                                     \
  }
  IG_TRANSPORT_COUNTERS(IG_CHECK_ROW)
#undef IG_CHECK_ROW
  EXPECT_EQ(rows, 17u);
  EXPECT_NE(text.find("# TYPE isolation_gate_connections_active gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE isolation_gate_http_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("isolation_gate_http_requests_total{listener=\"probes\"} 7\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("isolation_gate_http_handler_exceptions_total{listener=\"webhook\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("isolation_gate_http_responses_total{listener=\"webhook\",code=\"5xx\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("isolation_gate_http_responses_total{listener=\"webhook\",code=\"2xx\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("isolation_gate_http_received_bytes_total{listener=\"webhook\"} 0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace ig::server::testing
