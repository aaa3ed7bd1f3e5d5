// HttpServer over real TLS: the client verifies the CA and the service host name.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "server_test_support.h"

namespace ig::server::testing {
namespace {

TEST(ServerHttps, PostEchoesThroughHandler) {
  ServerHarness h;
  auto c = h.tls_client();
  auto res = c->request(http::verb::post, "/mutate/pods?timeout=10s", R"({"kind":"AdmissionReview"})");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), R"({"kind":"AdmissionReview"})");
  EXPECT_EQ(res[http::field::server], "isolation-gate");
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(res["X-Method"], "POST");
  EXPECT_EQ(res["X-Target"], "/mutate/pods?timeout=10s");
  EXPECT_EQ(SSL_version(c->ssl()), TLS1_3_VERSION);
  EXPECT_EQ(SSL_get_verify_result(c->ssl()), X509_V_OK);
  ASSERT_TRUE(eventually([&] { return h.server().stats().bytes_out > 0; }));
  const auto stats = h.server().stats();
  EXPECT_EQ(stats.requests, 1u);
  EXPECT_EQ(stats.responses_2xx, 1u);
  EXPECT_GT(stats.bytes_in, 0u);
  EXPECT_GT(stats.bytes_out, 0u);
}

TEST(ServerHttps, WrongHostNameFailsClientVerification) {
  ServerHarness h;
  Client c(h.tls_port(), true, h.chain().ca_cert_pem, "isolation-gate.elsewhere.svc");
  EXPECT_TRUE(c.connect());
  Client other_ca(h.tls_port(), true, make_chain().ca_cert_pem);
  EXPECT_TRUE(other_ca.connect());
}

TEST(ServerHttps, KeepAliveServesTwoRequestsOnOneConnection) {
  ServerHarness h;
  auto c = h.tls_client();
  EXPECT_EQ(c->request(http::verb::post, "/validate/pods", "one").body(), "one");
  auto res = c->request(http::verb::post, "/validate/pods", "two");
  EXPECT_EQ(res.body(), "two");
  EXPECT_TRUE(res.keep_alive());
  EXPECT_EQ(h.server().stats().connections_accepted, 1u);
  EXPECT_EQ(h.server().stats().requests, 2u);
}

TEST(ServerHttps, BodyOverLimitGets413) {
  ServerHarness h;
  auto c = h.tls_client();
  auto res = c->request(http::verb::post, "/mutate/pods", std::string(3 * 1024 * 1024 + 1, 'x'));
  EXPECT_EQ(res.result_int(), 413u);
  EXPECT_EQ(res.body(), R"({"error":"request body exceeds 3145728 bytes"})");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(c->closed_by_peer());
  // Exactly at the limit is fine.
  auto c2 = h.tls_client();
  EXPECT_EQ(c2->request(http::verb::post, "/mutate/pods", std::string(3 * 1024 * 1024, 'x'))
                .result_int(),
            200u);
}

TEST(ServerHttps, NegativeChunkSizeGets400AndServerStillAnswers) {
  // Regression: cpprestsdk's listener aborted the process on this.
  ServerHarness h;
  {
    auto c = h.tls_client();
    ASSERT_FALSE(c->write("POST /mutate/pods HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                          "Content-Type: application/json\r\n\r\n-1\r\n{}\r\n0\r\n\r\n"));
    http::response<http::string_body> res;
    ASSERT_FALSE(c->read_response(res));
    EXPECT_EQ(res.result_int(), 400u);
    EXPECT_NE(res.body().find(R"({"error":"malformed HTTP request)"), std::string::npos) << res.body();
    EXPECT_EQ(res[http::field::content_type], "application/json");
    EXPECT_TRUE(c->closed_by_peer());
  }
  auto next = h.tls_client();
  EXPECT_EQ(next->request(http::verb::post, "/mutate/pods", "{}").result_int(), 200u);
  EXPECT_EQ(h.server().stats().request_errors, 1u);
}

TEST(ServerHttps, Tls11ClientFailsHandshake) {
  ServerHarness h;
  Client old(h.tls_port(), true, "", kHost, [](SSL_CTX* ctx) {
    SSL_CTX_set_security_level(ctx, 0);
    SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0");
    SSL_CTX_set_min_proto_version(ctx, TLS1_1_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_1_VERSION);
  });
  EXPECT_TRUE(old.connect());
  EXPECT_TRUE(eventually([&] { return h.server().stats().tls_handshake_failures == 1; }));
  // TLS 1.2 is still accepted.
  Client tls12(h.tls_port(), true, h.chain().ca_cert_pem, kHost,
               [](SSL_CTX* ctx) { SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); });
  ASSERT_FALSE(tls12.connect());
  EXPECT_EQ(SSL_version(tls12.ssl()), TLS1_2_VERSION);
  EXPECT_EQ(tls12.request(http::verb::get, "/healthz", "").result_int(), 200u);
}

TEST(ServerHttps, SessionResumptionWorks) {
  ServerHarness h;
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    auto tweak = [version](SSL_CTX* ctx) { SSL_CTX_set_max_proto_version(ctx, version); };
    Client first(h.tls_port(), true, h.chain().ca_cert_pem, kHost, tweak);
    ASSERT_FALSE(first.connect());
    // TLS 1.3 tickets arrive after the handshake: complete a request first.
    EXPECT_EQ(first.request(http::verb::get, "/healthz", "").result_int(), 200u);
    SSL_SESSION* session = SSL_get1_session(first.ssl());
    ASSERT_NE(session, nullptr);
    Client second(h.tls_port(), true, h.chain().ca_cert_pem, kHost, tweak);
    ASSERT_FALSE(second.connect(session));
    EXPECT_TRUE(SSL_session_reused(second.ssl())) << "version " << version;
    EXPECT_EQ(second.request(http::verb::get, "/healthz", "").result_int(), 200u);
    SSL_SESSION_free(session);
  }
}

TEST(ServerHttps, HeaderFloodRejected) {
  ServerHarness h;
  auto c = h.tls_client();
  std::string req = "POST /mutate/pods HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 400; ++i) req += "X-Flood-" + std::to_string(i) + ": " + std::string(40, 'a') + "\r\n";
  req += "Content-Length: 2\r\n\r\n{}";
  ASSERT_GT(req.size(), 16u * 1024);
  ASSERT_FALSE(c->write(req));
  http::response<http::string_body> res;
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.result_int(), 431u);
  EXPECT_EQ(res.body(), R"({"error":"request header exceeds 16384 bytes"})");
  EXPECT_TRUE(c->closed_by_peer());
  EXPECT_EQ(h.server().stats().requests, 0u);
}

TEST(ServerHttps, HandlerThrowingGives500AndConnectionStaysUsable) {
  ServerHarness h;
  auto c = h.tls_client();
  auto res = c->request(http::verb::post, "/throw", "{}");
  EXPECT_EQ(res.result_int(), 500u);
  EXPECT_EQ(res.body(), R"({"error":"internal error"})");
  EXPECT_EQ(c->request(http::verb::post, "/after", "ok").body(), "ok");
  EXPECT_EQ(h.server().stats().handler_exceptions, 1u);
  EXPECT_EQ(h.server().stats().responses_5xx, 1u);
}

TEST(ServerHttps, Expect100ContinueIsAnswered) {
  ServerHarness h;
  auto c = h.tls_client();
  ASSERT_FALSE(c->write("POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                        "Expect: 100-continue\r\n\r\n"));
  beast::error_code ec;
  EXPECT_EQ(c->read_until("\r\n\r\n", ec), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_FALSE(ec);
  ASSERT_FALSE(c->write("hello"));
  http::response<http::string_body> res;
  ASSERT_FALSE(c->read_response(res));
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "hello");
  // Too big: the final 413 comes instead of 100 Continue.
  auto c2 = h.tls_client();
  ASSERT_FALSE(c2->write("POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n"
                         "Expect: 100-continue\r\n\r\n"));
  ASSERT_FALSE(c2->read_response(res));
  EXPECT_EQ(res.result_int(), 413u);
}

// curl sends Expect: 100-continue for large bodies; check the real thing.
TEST(ServerHttps, CurlPostWithExpectContinue) {
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "curl not installed";
  ServerHarness h;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ig-curl-" + std::to_string(::getpid()) + "-" + std::to_string(h.tls_port()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(tls::write_file_atomically((dir / "ca.pem").string(), h.chain().ca_cert_pem, 0600));
  const std::string body(2 * 1024 * 1024, 'b');
  ASSERT_TRUE(tls::write_file_atomically((dir / "body").string(), body, 0600));
  ASSERT_TRUE(tls::write_file_atomically((dir / "big").string(), std::string(4 * 1024 * 1024, 'c'),
                                         0600));
  auto curl = [&](const std::string& file, const std::string& expect = "100-continue") {
    const std::string port = std::to_string(h.tls_port());
    const std::string cmd = "/usr/bin/curl -sS --max-time 20 --cacert " + (dir / "ca.pem").string() +
                            " --resolve " + kHost + ":" + port + ":127.0.0.1" +
                            " -H 'Expect: " + expect + "' -H 'Content-Type: application/json'" +
                            " --data-binary @" + file + " -o " + (dir / "out").string() +
                            " -w '%{http_code}' https://" + kHost + ":" + port + "/mutate/pods 2>&1";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[512];
      while (fgets(buf, sizeof buf, p)) out += buf;
      pclose(p);
    }
    return out;
  };
  EXPECT_EQ(curl((dir / "body").string()), "200");
  auto echoed = tls::read_small_file((dir / "out").string(), 8 * 1024 * 1024);
  ASSERT_TRUE(echoed) << error_of(echoed);
  EXPECT_EQ(echoed->size(), body.size());
  EXPECT_EQ(curl((dir / "big").string()), "413");
  auto err = tls::read_small_file((dir / "out").string(), 1024);
  ASSERT_TRUE(err) << error_of(err);
  EXPECT_EQ(*err, R"({"error":"request body exceeds 3145728 bytes"})");
  EXPECT_GE(h.server().stats().responses_1xx, 1u);
  // Without Expect curl sends the whole body at once; it must still see the 413
  // (the server discards the rest instead of resetting the connection).
  EXPECT_EQ(curl((dir / "big").string(), ""), "413");
  err = tls::read_small_file((dir / "out").string(), 1024);
  ASSERT_TRUE(err) << error_of(err);
  EXPECT_EQ(*err, R"({"error":"request body exceeds 3145728 bytes"})");
  std::filesystem::remove_all(dir);
}

TEST(ServerHttps, ReloadNewConnectionsSeeNewCertificateOpenOnesComplete) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ig-reload-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string crt = (dir / "tls.crt").string(), key = (dir / "tls.key").string();
  const auto a = make_chain(), b = make_chain();
  ASSERT_TRUE(tls::write_file_atomically(crt, a.cert_pem, 0600));
  ASSERT_TRUE(tls::write_file_atomically(key, a.key_pem, 0600));
  auto loaded = tls::ReloadingTlsContext::from_files(crt, key, {});
  ASSERT_TRUE(loaded) << error_of(loaded);
  auto* reloading = loaded->get();
  ServerHarness h(std::move(*loaded), a);

  const auto serial_a = tls::certificate_serial_hex(a.cert_pem).value();
  const auto serial_b = tls::certificate_serial_hex(b.cert_pem).value();

  Client before(h.tls_port(), true, a.ca_cert_pem);
  ASSERT_FALSE(before.connect());
  EXPECT_EQ(before.peer_serial(), serial_a);

  ASSERT_TRUE(tls::write_file_atomically(crt, b.cert_pem, 0600));
  ASSERT_TRUE(tls::write_file_atomically(key, b.key_pem, 0600));
  ASSERT_TRUE(reloading->poll_for_changes());

  Client after(h.tls_port(), true, b.ca_cert_pem);
  ASSERT_FALSE(after.connect());
  EXPECT_EQ(after.peer_serial(), serial_b);
  EXPECT_EQ(after.request(http::verb::post, "/mutate/pods", "new").body(), "new");

  // The connection opened before the reload still completes its request.
  auto res = before.request(http::verb::post, "/mutate/pods", "old");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "old");
  EXPECT_EQ(before.peer_serial(), serial_a);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ig::server::testing
