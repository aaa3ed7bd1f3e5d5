// The certificate plan (src/controller/certificate_plan.h), pure: when the
// old CA may leave ca.crt after a CA rotation. A table over what the leader
// observed each ready replica serving.
#include "controller/certificate_plan.h"

#include <gtest/gtest.h>

#include "config/defaults.h"
#include "tls/certificates.h"

namespace ig::controller {
namespace {

using namespace std::chrono_literals;

// The moment after a CA rotation's switch: ca.crt holds the old CA and the
// new one (whose key is ca.key), the Secret's leaf is signed by the new one;
// `old_leaf` is what a replica that has not caught up still serves.
struct AfterSwitch {
  SecretMaterial secret;
  std::string old_leaf, old_ca, new_ca;
  CertTime now;
  PlanSettings settings;
};

AfterSwitch after_switch() {
  AfterSwitch a;
  a.settings.cert_validity = 600s;
  a.settings.ca_validity = 3600s;
  a.settings.grace = 10s;
  a.settings.names = config::service_dns_names("gate-svc", "gate-ns");
  const CertTime t0 = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  auto old_ca = tls::make_ca("old", 1000s, t0);  // expires at t0 + 1000 s
  auto new_ca = tls::make_ca("new", a.settings.ca_validity, t0 + 100s);
  EXPECT_TRUE(old_ca && new_ca);
  auto old_leaf = tls::make_serving_certificate(old_ca->ca_cert_pem, old_ca->ca_key_pem, a.settings.names, {},
                                                a.settings.cert_validity, t0 + 90s);
  auto new_leaf = tls::make_serving_certificate(new_ca->ca_cert_pem, new_ca->ca_key_pem, a.settings.names, {},
                                                a.settings.cert_validity, t0 + 110s);
  EXPECT_TRUE(old_leaf && new_leaf);
  a.old_ca = old_ca->ca_cert_pem;
  a.new_ca = new_ca->ca_cert_pem;
  a.old_leaf = old_leaf->cert_pem;
  a.secret.exists = true;
  a.secret.tls_crt = new_leaf->cert_pem;
  a.secret.tls_key = new_leaf->key_pem;
  a.secret.ca_crt = a.old_ca + a.new_ca;
  a.secret.ca_key = new_ca->ca_key_pem;
  a.now = t0 + 200s;  // long after the switch: no timer would hold the old CA any more
  return a;
}

TEST(CertificatePlan, TheOldCaLeavesOnlyOnceEveryReadyReplicaIsObservedOnTheNewOne) {
  const AfterSwitch a = after_switch();
  const std::string fresh = a.secret.tls_crt;
  struct Row {
    const char* what;
    std::optional<std::vector<std::string>> served;
    bool dropped;
  };
  const std::vector<Row> rows = {
      {"every ready replica on the new CA", std::vector<std::string>{fresh, fresh}, true},
      {"the only ready replica on the new CA", std::vector<std::string>{fresh}, true},
      {"one replica lagging on the old leaf", std::vector<std::string>{fresh, a.old_leaf}, false},
      {"one replica could not be dialled", std::vector<std::string>{fresh, ""}, false},
      {"no ready replica", std::vector<std::string>{}, false},
      {"not observed", std::nullopt, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    PlanFacts facts;
    facts.bundle_confirmed_since = a.now - 150s;
    facts.served = row.served;
    auto plan = plan_secret(a.secret, a.now, facts, a.settings);
    ASSERT_TRUE(plan) << plan.error();
    EXPECT_EQ(plan->write, row.dropped);
    EXPECT_EQ(plan->next.ca_crt, row.dropped ? a.new_ca : a.old_ca + a.new_ca);
    EXPECT_EQ(plan->next.tls_crt, fresh);  // the leaf is not touched either way
    EXPECT_EQ(plan->wants_served, !row.served.has_value());
    EXPECT_FALSE(plan->leaf_rotated);
    EXPECT_FALSE(plan->ca_rotated);
    if (row.dropped) {
      EXPECT_NE(plan->why.find("every ready replica serves a leaf of the new one"), std::string::npos);
    }
  }
}

TEST(CertificatePlan, AnExpiredOldCaLeavesWithoutAnObservation) {
  AfterSwitch a = after_switch();
  const CertTime later = a.now + 900s;  // past the old CA's notAfter, before the new one's renewal
  auto plan = plan_secret(a.secret, later, PlanFacts{}, a.settings);  // nothing observed
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_TRUE(plan->write);
  EXPECT_EQ(plan->next.ca_crt, a.new_ca);
  EXPECT_FALSE(plan->ca_rotated);
}

TEST(CertificatePlan, WithOneCaNothingIsObserved) {
  AfterSwitch a = after_switch();
  a.secret.ca_crt = a.new_ca;
  auto plan = plan_secret(a.secret, a.now, PlanFacts{}, a.settings);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_FALSE(plan->write) << plan->why;
  EXPECT_FALSE(plan->wants_served);
  ASSERT_TRUE(plan->wake);  // the leaf's renewal at two thirds
}

}  // namespace
}  // namespace ig::controller
