// CAs made alone (make_ca), bundles read back (read_certificate_bundle), and
// verifies(): the pieces CA rotation is built from (tls/certificates.h).
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tls/certificates.h"

namespace ig::tls {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;

const std::vector<std::string> kNames = {"isolation-gate", "isolation-gate.ns",
                                          "isolation-gate.ns.svc", "isolation-gate.ns.svc.cluster.local"};

template <typename T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? std::string() : r.error();
}

CaMaterial ca(std::string cn = "test-ca", std::chrono::seconds validity = 24h,
              std::optional<Clock::time_point> at = {}) {
  auto made = make_ca(cn, validity, at);
  EXPECT_TRUE(made) << error_of(made);
  return made ? *made : CaMaterial{};
}

CertificateBundle leaf(const CaMaterial& c, std::chrono::seconds validity = 1h,
                       Clock::time_point at = Clock::now()) {
  auto made = make_serving_certificate(c.ca_cert_pem, c.ca_key_pem, kNames, {}, validity, at);
  EXPECT_TRUE(made) << error_of(made);
  return made ? *made : CertificateBundle{};
}

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};

std::unique_ptr<X509, X509Free> parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

TEST(TlsCaBundle, MakeCaIsACriticalCaWithKeyCertSignAndSki) {
  const CaMaterial c = ca("isolation-gate-ca-1");
  auto cert = parse(c.ca_cert_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  const int bc = X509_get_ext_by_NID(cert.get(), NID_basic_constraints, -1);
  ASSERT_GE(bc, 0);
  EXPECT_EQ(X509_EXTENSION_get_critical(X509_get_ext(cert.get(), bc)), 1);
  EXPECT_EQ(X509_get_key_usage(cert.get()), static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  EXPECT_TRUE(key_matches_certificate(c.ca_cert_pem, c.ca_key_pem));
  EXPECT_FALSE(key_matches_certificate(c.ca_cert_pem, ca().ca_key_pem));
  auto infos = read_certificate_bundle(c.ca_cert_pem);
  ASSERT_TRUE(infos) << error_of(infos);
  ASSERT_EQ(infos->size(), 1u);
  EXPECT_TRUE(infos->front().is_ca);
  EXPECT_NE(infos->front().subject.find("isolation-gate-ca-1"), std::string::npos) << infos->front().subject;
}

TEST(TlsCaBundle, IssuedAtSetsTheValidityWindow) {
  const auto at = Clock::from_time_t(2'000'000'000);  // 2033
  const CaMaterial c = ca("later-ca", 1000s, at);
  const CertificateBundle l = leaf(c, 100s, at + 10s);
  auto cas = read_certificate_bundle(c.ca_cert_pem);
  auto leaves = read_certificate_bundle(l.cert_pem);
  ASSERT_TRUE(cas && leaves);
  EXPECT_EQ(cas->front().not_before, at - kNotBeforeBackdate);
  EXPECT_EQ(cas->front().not_after, at + 1000s);
  EXPECT_EQ(cas->front().issued_at(), at);
  EXPECT_EQ(leaves->front().issued_at(), at + 10s);
  EXPECT_EQ(leaves->front().not_after, at + 110s);
  EXPECT_FALSE(leaves->front().is_ca);
  // verifies() judges at the time given, not at the system clock's.
  EXPECT_TRUE(verifies(l.cert_pem, c.ca_cert_pem, kNames[2], at + 50s));
  EXPECT_FALSE(verifies(l.cert_pem, c.ca_cert_pem, kNames[2], Clock::now()));
  EXPECT_FALSE(verifies(l.cert_pem, c.ca_cert_pem, kNames[2], at + 111s));
}

TEST(TlsCaBundle, BundleOfTwoCasVerifiesLeavesOfEither) {
  const CaMaterial old_ca = ca("old");
  const CaMaterial new_ca = ca("new");
  const std::string bundle = old_ca.ca_cert_pem + "\n# comment between blocks\n" + new_ca.ca_cert_pem;
  auto infos = read_certificate_bundle(bundle);
  ASSERT_TRUE(infos) << error_of(infos);
  ASSERT_EQ(infos->size(), 2u);
  EXPECT_EQ(infos->at(0).pem, old_ca.ca_cert_pem);
  EXPECT_EQ(infos->at(1).pem, new_ca.ca_cert_pem);
  EXPECT_NE(infos->at(0).serial_hex, infos->at(1).serial_hex);
  const auto now = Clock::now();
  for (const auto& name : kNames) {
    EXPECT_TRUE(verifies(leaf(old_ca).cert_pem, bundle, name, now)) << name;
    EXPECT_TRUE(verifies(leaf(new_ca).cert_pem, bundle, name, now)) << name;
  }
  // Once the old CA is dropped, only the new CA's leaves verify.
  EXPECT_FALSE(verifies(leaf(old_ca).cert_pem, new_ca.ca_cert_pem, kNames[0], now));
  EXPECT_TRUE(verifies(leaf(new_ca).cert_pem, new_ca.ca_cert_pem, kNames[0], now));
}

TEST(TlsCaBundle, VerifiesSaysWhyNot) {
  const CaMaterial c = ca();
  const CertificateBundle l = leaf(c);
  const auto now = Clock::now();
  auto wrong_name = verifies(l.cert_pem, c.ca_cert_pem, "other.example", now);
  ASSERT_FALSE(wrong_name);
  EXPECT_NE(wrong_name.error().find("other.example"), std::string::npos) << wrong_name.error();
  EXPECT_FALSE(verifies(l.cert_pem, ca().ca_cert_pem, kNames[0], now));
  EXPECT_FALSE(verifies(l.cert_pem, "", kNames[0], now));
  EXPECT_FALSE(verifies("not a certificate", c.ca_cert_pem, kNames[0], now));
  // A leaf is not a CA: a bundle holding only it verifies nothing.
  EXPECT_FALSE(verifies(l.cert_pem, l.cert_pem, kNames[0], now));
}

TEST(TlsCaBundle, ReadBundleRejectsEmptyAndBrokenBlocks) {
  EXPECT_FALSE(read_certificate_bundle(""));
  EXPECT_FALSE(read_certificate_bundle("just text"));
  const std::string good = ca().ca_cert_pem;
  EXPECT_FALSE(read_certificate_bundle(good + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"));
  EXPECT_FALSE(read_certificate_bundle(good + "-----BEGIN CERTIFICATE-----\nAAAA\n"));
}

TEST(TlsCaBundle, MakeCaRejectsBadInputs) {
  EXPECT_FALSE(make_ca("", 1h));
  EXPECT_FALSE(make_ca(std::string(65, 'x'), 1h));
  EXPECT_FALSE(make_ca("ca", 0s));
}

}  // namespace
}  // namespace ig::tls
