// runtime::Probes: the manager's /healthz, /readyz and /metrics.
#include "runtime/probes.h"

#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/manager.h"

namespace ig::runtime {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

http::Request get(std::string target, std::string method = "GET") { return {std::move(method), std::move(target), "", ""}; }

TEST(RuntimeProbes, HealthzAnswersAndReadyzWhileItsChecksPass) {
  Probes p;
  bool ready = true;
  p.add_readyz_check("caches", [&ready] { return ready; });
  auto h = p.serve(get("/healthz"));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200u);
  EXPECT_EQ(json::parse(h->body), (json{{"status", "ok"}}));
  auto r = p.serve(get("/readyz?verbose"));  // a query string is ignored
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(json::parse(r->body), (json{{"status", "ready"}}));

  ready = false;
  r = p.serve(get("/readyz"));
  EXPECT_EQ(r->status, 503u);
  const json status = json::parse(r->body);
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["reason"], "ServiceUnavailable");
  EXPECT_EQ(status["code"], 503);
  EXPECT_EQ(status["message"], "not ready: caches");
  // Liveness does not depend on readiness.
  EXPECT_EQ(p.serve(get("/healthz"))->status, 200u);
}

TEST(RuntimeProbes, TheFirstFailingCheckIsNamedAndAThrowingCheckFails) {
  Probes p;
  p.add_readyz_check("serving", [] { return true; });
  p.add_readyz_check("certificate", []() -> bool { throw std::runtime_error("boom"); });
  p.add_readyz_check("caches", [] { return false; });
  EXPECT_EQ(json::parse(p.serve(get("/readyz"))->body)["message"], "not ready: certificate");
}

TEST(RuntimeProbes, MetricsAreTheRegistrysCollectorsInOrder) {
  Probes p;
  p.metrics().add([](prometheus::TextWriter& out) { out.sample("a_total", {}, std::uint64_t{1}); });
  p.metrics().add([](prometheus::TextWriter& out) { out.sample("b_total", {}, std::uint64_t{2}); });
  auto m = p.serve(get("/metrics"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200u);
  EXPECT_EQ(m->content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(m->body, "a_total 1\nb_total 2\n");
}

TEST(RuntimeProbes, OtherMethodsAre405AndOtherPathsAreNotTheirs) {
  Probes p;
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    auto r = p.serve(get(path, "POST"));
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 405u) << path;
    EXPECT_EQ(json::parse(r->body)["reason"], "MethodNotAllowed") << path;
    EXPECT_EQ(p.serve(get(path, "HEAD"))->status, 200u) << path;
  }
  EXPECT_FALSE(p.serve(get("/mutate/pods", "POST")));
  EXPECT_FALSE(p.serve(get("/healthzz")));
  // The plain-HTTP listener: only the probes, 404 for the rest.
  const http::Response r = p.serve_only(get("/mutate/pods", "POST"));
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(json::parse(r.body)["reason"], "NotFound");
  EXPECT_EQ(p.serve_only(get("/healthz")).status, 200u);
}

TEST(RuntimeProbes, TheManagersRegistryHoldsNoEngineFamiliesWithoutControllers) {
  Manager m;
  EXPECT_EQ(m.probes().serve(get("/metrics"))->body, "");
  m.probes().metrics().add([](prometheus::TextWriter& out) { out.sample("x_total", {}, std::uint64_t{3}); });
  EXPECT_THAT(m.probes().serve(get("/metrics"))->body, HasSubstr("x_total 3\n"));
}

}  // namespace
}  // namespace ig::runtime
