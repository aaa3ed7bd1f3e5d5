// Certificates made by tls/certificates.h, checked with OpenSSL's own verifier.
#include "tls/certificates.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ig::tls {
namespace {

using namespace std::chrono_literals;

constexpr const char* kServiceHost = "isolation-gate.isolation-gate-system.svc";

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

X509Ptr parse_cert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

PkeyPtr parse_key(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return key;
}

// Verifies leaf against ca for `host` (DNS) or `ip`; returns X509_V_OK or the error.
int verify(const std::string& ca_pem, const std::string& leaf_pem, const char* host,
           const char* ip = nullptr) {
  X509Ptr ca = parse_cert(ca_pem), leaf = parse_cert(leaf_pem);
  if (!ca || !leaf) return -1;
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf.get(), nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (host) X509_VERIFY_PARAM_set1_host(param, host, 0);
  if (ip) X509_VERIFY_PARAM_set1_ip_asc(param, ip);
  const int ok = X509_verify_cert(ctx);
  const int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return err;
}

// The error of a failed Result ("" when it succeeded), for assertions.
template <typename T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? std::string() : r.error();
}

CertificateBundle make_chain() {
  auto bundle = make_serving_chain(
      {"isolation-gate", "isolation-gate.isolation-gate-system", kServiceHost},
      {"127.0.0.1", "::1"}, std::chrono::hours(24 * 365));
  EXPECT_TRUE(bundle) << error_of(bundle);
  return bundle ? *bundle : CertificateBundle{};
}

TEST(TlsCertificates, LeafVerifiesAgainstCaForServiceName) {
  const auto b = make_chain();
  EXPECT_EQ(verify(b.ca_cert_pem, b.cert_pem, kServiceHost), X509_V_OK);
  EXPECT_EQ(verify(b.ca_cert_pem, b.cert_pem, "isolation-gate"), X509_V_OK);
  EXPECT_EQ(verify(b.ca_cert_pem, b.cert_pem, nullptr, "127.0.0.1"), X509_V_OK);
  EXPECT_EQ(verify(b.ca_cert_pem, b.cert_pem, nullptr, "::1"), X509_V_OK);
}

TEST(TlsCertificates, WrongHostFailsVerification) {
  const auto b = make_chain();
  EXPECT_EQ(verify(b.ca_cert_pem, b.cert_pem, "isolation-gate.other-namespace.svc"),
            X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(verify(b.ca_cert_pem, b.cert_pem, nullptr, "10.0.0.1"), X509_V_ERR_IP_ADDRESS_MISMATCH);
}

TEST(TlsCertificates, LeafDoesNotVerifyAgainstAnotherCa) {
  const auto a = make_chain();
  const auto b = make_chain();
  EXPECT_NE(verify(b.ca_cert_pem, a.cert_pem, kServiceHost), X509_V_OK);
}

TEST(TlsCertificates, SubjectAltNamesPresent) {
  const auto b = make_chain();
  X509Ptr leaf = parse_cert(b.cert_pem);
  ASSERT_TRUE(leaf);
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(leaf.get(), NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(names, nullptr);
  std::set<std::string> dns;
  std::vector<int> ip_lengths;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS) {
      dns.emplace(reinterpret_cast<const char*>(ASN1_STRING_get0_data(gn->d.dNSName)),
                  static_cast<std::size_t>(ASN1_STRING_length(gn->d.dNSName)));
    } else if (gn->type == GEN_IPADD) {
      ip_lengths.push_back(ASN1_STRING_length(gn->d.iPAddress));
    }
  }
  GENERAL_NAMES_free(names);
  EXPECT_EQ(dns, (std::set<std::string>{"isolation-gate", "isolation-gate.isolation-gate-system",
                                        kServiceHost}));
  EXPECT_EQ(ip_lengths, (std::vector<int>{4, 16}));
}

TEST(TlsCertificates, KeysAreEcP256) {
  const auto b = make_chain();
  for (const std::string* pem : {&b.key_pem, &b.ca_key_pem}) {
    PkeyPtr key = parse_key(*pem);
    ASSERT_TRUE(key);
    EXPECT_TRUE(EVP_PKEY_is_a(key.get(), "EC"));
    char group[64] = {};
    size_t len = 0;
    ASSERT_EQ(EVP_PKEY_get_group_name(key.get(), group, sizeof group, &len), 1);
    EXPECT_STREQ(group, "prime256v1");
  }
  X509Ptr leaf = parse_cert(b.cert_pem);
  PkeyPtr leaf_key = parse_key(b.key_pem);
  EXPECT_EQ(X509_check_private_key(leaf.get(), leaf_key.get()), 1);
  EXPECT_EQ(X509_get_signature_nid(leaf.get()), NID_ecdsa_with_SHA256);
}

TEST(TlsCertificates, ExtensionsAndValidity) {
  const auto b = make_chain();
  X509Ptr ca = parse_cert(b.ca_cert_pem), leaf = parse_cert(b.cert_pem);
  ASSERT_TRUE(ca && leaf);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  EXPECT_EQ(X509_get_key_usage(ca.get()) & (KU_KEY_CERT_SIGN | KU_CRL_SIGN),
            static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_NE(X509_get0_subject_key_id(ca.get()), nullptr);
  int crit = -1;
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(ca.get(), NID_basic_constraints, &crit, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE(bc->ca);
  EXPECT_EQ(crit, 1);
  BASIC_CONSTRAINTS_free(bc);

  EXPECT_EQ(X509_check_ca(leaf.get()), 0);
  EXPECT_TRUE(X509_get_extended_key_usage(leaf.get()) & XKU_SSL_SERVER);
  EXPECT_TRUE(X509_get_key_usage(leaf.get()) & KU_DIGITAL_SIGNATURE);
  EXPECT_EQ(X509_check_issued(ca.get(), leaf.get()), X509_V_OK);
  ASSERT_NE(X509_get0_authority_key_id(leaf.get()), nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf.get()),
                                  X509_get0_subject_key_id(ca.get())),
            0);

  // notBefore backdated ~5 minutes, notAfter = now + validity.
  const time_t now = time(nullptr);
  time_t four_min_ago = now - 4 * 60, six_min_ago = now - 6 * 60;
  EXPECT_LT(X509_cmp_time(X509_get0_notBefore(leaf.get()), &four_min_ago), 0);
  EXPECT_GT(X509_cmp_time(X509_get0_notBefore(leaf.get()), &six_min_ago), 0);
  auto not_after = certificate_not_after(b.cert_pem);
  ASSERT_TRUE(not_after) << error_of(not_after);
  const auto expected = std::chrono::system_clock::now() + std::chrono::hours(24 * 365);
  EXPECT_LT(std::chrono::abs(*not_after - expected), 2min);
}

TEST(TlsCertificates, SerialsAreRandom128Bit) {
  const auto a = make_chain();
  const auto b = make_chain();
  auto sa = certificate_serial_hex(a.cert_pem);
  auto sb = certificate_serial_hex(b.cert_pem);
  auto sca = certificate_serial_hex(a.ca_cert_pem);
  ASSERT_TRUE(sa && sb && sca) << error_of(sa) << error_of(sb) << error_of(sca);
  EXPECT_NE(*sa, *sb);
  EXPECT_NE(*sa, *sca);
  EXPECT_LE(sa->size(), 32u);
  EXPECT_GE(sa->size(), 16u);  // fewer than 64 leading zero bits (p = 2^-64)
}

TEST(TlsCertificates, RenewedLeafFromSameCaVerifies) {
  const auto a = make_chain();
  auto renewed = make_serving_certificate(a.ca_cert_pem, a.ca_key_pem, {kServiceHost}, {}, 48h);
  ASSERT_TRUE(renewed) << error_of(renewed);
  EXPECT_EQ(renewed->ca_cert_pem, a.ca_cert_pem);
  EXPECT_EQ(verify(a.ca_cert_pem, renewed->cert_pem, kServiceHost), X509_V_OK);
  EXPECT_NE(renewed->cert_pem, a.cert_pem);

  const auto other = make_chain();
  auto mismatched = make_serving_certificate(a.ca_cert_pem, other.ca_key_pem, {kServiceHost}, {}, 48h);
  EXPECT_FALSE(mismatched);
  EXPECT_NE(error_of(mismatched).find("does not match"), std::string::npos) << error_of(mismatched);
}

TEST(TlsCertificates, RejectsBadInputs) {
  auto no_names = make_serving_chain({}, {}, 1h);
  EXPECT_FALSE(no_names);
  EXPECT_NE(error_of(no_names).find("SAN"), std::string::npos) << error_of(no_names);
  auto bad_name = make_serving_chain({"bad name"}, {}, 1h);
  EXPECT_FALSE(bad_name);
  EXPECT_NE(error_of(bad_name).find("bad name"), std::string::npos) << error_of(bad_name);
  EXPECT_FALSE(make_serving_chain({"a,DNS:evil"}, {}, 1h));
  auto bad_ip = make_serving_chain({"ok"}, {"300.1.1.1"}, 1h);
  EXPECT_FALSE(bad_ip);
  EXPECT_NE(error_of(bad_ip).find("300.1.1.1"), std::string::npos) << error_of(bad_ip);
  EXPECT_FALSE(make_serving_chain({"ok"}, {}, 0s));
  auto not_pem = certificate_not_after("not a pem");
  EXPECT_FALSE(not_pem);
  EXPECT_FALSE(error_of(not_pem).empty());
  EXPECT_FALSE(certificate_serial_hex(""));
  // A CN longer than X.509's 64-character limit still works (SAN carries it).
  const std::string long_name = std::string(40, 'a') + "." + std::string(40, 'b') + ".svc";
  auto b = make_serving_chain({long_name}, {}, 1h);
  ASSERT_TRUE(b) << error_of(b);
  EXPECT_EQ(verify(b->ca_cert_pem, b->cert_pem, long_name.c_str()), X509_V_OK);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ig-tls-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(TlsFiles, WriteAtomicallyThenRead) {
  TempDir dir;
  const std::string path = dir.file("tls.key");
  auto first = write_file_atomically(path, "first", 0600);
  ASSERT_TRUE(first) << error_of(first);
  auto second = write_file_atomically(path, "second contents", 0600);
  ASSERT_TRUE(second) << error_of(second);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto data = read_small_file(path, 1024);
  ASSERT_TRUE(data) << error_of(data);
  EXPECT_EQ(*data, "second contents");
  // No temporary files left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(TlsFiles, ReadErrors) {
  TempDir dir;
  auto missing = read_small_file(dir.file("missing"), 10);
  EXPECT_FALSE(missing);
  EXPECT_NE(error_of(missing).find("missing"), std::string::npos);
  ASSERT_TRUE(write_file_atomically(dir.file("big"), std::string(100, 'x'), 0644));
  auto too_big = read_small_file(dir.file("big"), 99);
  EXPECT_FALSE(too_big);
  EXPECT_NE(error_of(too_big).find("larger"), std::string::npos) << error_of(too_big);
  auto exact = read_small_file(dir.file("big"), 100);
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->size(), 100u);
  ASSERT_TRUE(write_file_atomically(dir.file("empty"), "", 0644));
  auto empty = read_small_file(dir.file("empty"), 0);
  ASSERT_TRUE(empty) << error_of(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(read_small_file(dir.path(), 10));  // a directory
  EXPECT_FALSE(write_file_atomically(dir.file("no/such/dir"), "x", 0600));
}

}  // namespace
}  // namespace ig::tls
