#include "tls/certificates.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <climits>
#include <algorithm>
#include <cstring>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <memory>

#include "base/quote.h"

namespace ig::tls {
namespace {

template <auto Fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const noexcept {
    Fn(p);
  }
};
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using Asn1IntPtr = std::unique_ptr<ASN1_INTEGER, Deleter<ASN1_INTEGER_free>>;
using X509ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, Deleter<GENERAL_NAME_free>>;
using Asn1StrPtr = std::unique_ptr<ASN1_STRING, Deleter<ASN1_STRING_free>>;


// An error carrying OpenSSL's reason (its error queue) after `what`.
Error ssl_error(std::string what) {
  const std::string detail = openssl_error_queue();
  if (!detail.empty()) {
    what += ": ";
    what += detail;
  }
  return fail(std::move(what));
}

std::string errno_text(int err) { return std::strerror(err); }

bool valid_dns_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  if (name.substr(0, 2) == "*.") name.remove_prefix(2);
  std::size_t label = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok || ++label > 63) return false;
  }
  return label > 0;
}

Result<PkeyPtr> make_p256_key() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return ssl_error("generating EC P-256 key");
  return key;
}

Result<std::string> key_to_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return ssl_error("encoding private key");
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

Result<std::string> cert_to_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return ssl_error("encoding certificate");
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

Result<X509Ptr> cert_from_pem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return ssl_error("reading PEM certificate");
  return cert;
}

Result<PkeyPtr> key_from_pem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return ssl_error("reading PEM private key");
  return key;
}

Result<void> set_random_serial(X509* cert) {
  BnPtr bn(BN_new());
  // 128 random bits; a zero serial is not allowed, so retry on the (2^-128) case.
  do {
    if (!bn || BN_rand(bn.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1)
      return ssl_error("generating serial number");
  } while (BN_is_zero(bn.get()));
  Asn1IntPtr serial(BN_to_ASN1_INTEGER(bn.get(), nullptr));
  if (!serial || X509_set_serialNumber(cert, serial.get()) != 1)
    return ssl_error("setting serial number");
  return {};
}

using TimePoint = std::chrono::system_clock::time_point;

Result<void> set_validity(X509* cert, std::chrono::seconds validity, TimePoint issued_at) {
  if (validity.count() <= 0) return fail("certificate validity must be positive");
  if (validity.count() > static_cast<long long>(LONG_MAX) / 2)
    return fail("certificate validity is too long");
  time_t at = std::chrono::system_clock::to_time_t(issued_at);
  if (!X509_time_adj_ex(X509_getm_notBefore(cert), 0, -static_cast<long>(kNotBeforeBackdate.count()), &at) ||
      !X509_time_adj_ex(X509_getm_notAfter(cert), 0, static_cast<long>(validity.count()), &at))
    return ssl_error("setting certificate validity");
  return {};
}

Result<TimePoint> asn1_time_point(const ASN1_TIME* t, const char* what) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return ssl_error(std::string("decoding ") + what);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Result<void> set_common_name(X509* cert, std::string_view cn, bool self_issued) {
  X509_NAME* name = X509_get_subject_name(cert);
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("isolation-gate"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1)
    return ssl_error("setting subject name");
  if (self_issued && X509_set_issuer_name(cert, name) != 1)
    return ssl_error("setting issuer name");
  return {};
}

Result<void> add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return ssl_error(std::string("adding extension ") + OBJ_nid2sn(nid) + "=" + value);
  return {};
}

// The first failure of a sequence of steps, or success.
Result<void> all_of(std::initializer_list<std::function<Result<void>()>> steps) {
  for (const auto& step : steps)
    if (auto r = step(); !r) return r;
  return {};
}

Result<void> add_subject_alt_names(X509* cert, const std::vector<std::string>& dns_names,
                                   const std::vector<std::string>& ip_addresses) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return ssl_error("allocating subjectAltName");
  for (const auto& dns : dns_names) {
    if (!valid_dns_name(dns)) return fail("invalid DNS name for subjectAltName: " + quote(dns));
    GeneralNamePtr gn(GENERAL_NAME_new());
    Asn1StrPtr ia5(ASN1_IA5STRING_new());
    if (!gn || !ia5 || ASN1_STRING_set(ia5.get(), dns.data(), static_cast<int>(dns.size())) != 1)
      return ssl_error("encoding DNS name");
    GENERAL_NAME_set0_value(gn.get(), GEN_DNS, ia5.release());
    if (sk_GENERAL_NAME_push(names.get(), gn.get()) == 0) return ssl_error("adding DNS name");
    gn.release();
  }
  for (const auto& ip : ip_addresses) {
    unsigned char raw[16];
    int raw_len = 0;
    if (inet_pton(AF_INET, ip.c_str(), raw) == 1) {
      raw_len = 4;
    } else if (inet_pton(AF_INET6, ip.c_str(), raw) == 1) {
      raw_len = 16;
    } else {
      return fail("invalid IP address for subjectAltName: " + quote(ip));
    }
    GeneralNamePtr gn(GENERAL_NAME_new());
    Asn1StrPtr oct(ASN1_OCTET_STRING_new());
    if (!gn || !oct || ASN1_OCTET_STRING_set(oct.get(), raw, raw_len) != 1)
      return ssl_error("encoding IP address");
    GENERAL_NAME_set0_value(gn.get(), GEN_IPADD, oct.release());
    if (sk_GENERAL_NAME_push(names.get(), gn.get()) == 0) return ssl_error("adding IP address");
    gn.release();
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1)
    return ssl_error("adding subjectAltName");
  return {};
}

Result<X509Ptr> sign_ca(EVP_PKEY* ca_key, std::string_view common_name, std::chrono::seconds validity,
                        TimePoint issued_at) {
  if (common_name.empty() || common_name.size() > 64)
    return fail("a CA common name must have 1 to 64 characters");
  X509Ptr ca(X509_new());
  if (!ca || X509_set_version(ca.get(), X509_VERSION_3) != 1)
    return ssl_error("allocating CA certificate");
  X509* c = ca.get();
  auto built = all_of({
      [&] { return set_random_serial(c); },
      [&] { return set_validity(c, validity, issued_at); },
      [&] { return set_common_name(c, common_name, true); },
      [&]() -> Result<void> {
        if (X509_set_pubkey(c, ca_key) != 1) return ssl_error("setting CA public key");
        return {};
      },
      [&] { return add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE"); },
      [&] { return add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign"); },
      [&] { return add_ext(c, c, NID_subject_key_identifier, "hash"); },
  });
  if (!built) return fail(built.error());
  if (X509_sign(c, ca_key, EVP_sha256()) <= 0) return ssl_error("signing CA certificate");
  return ca;
}

// Signs a leaf for the names with ca/ca_key; fills cert_pem and key_pem.
Result<void> make_leaf(X509* ca, EVP_PKEY* ca_key, const std::vector<std::string>& dns_names,
                       const std::vector<std::string>& ip_addresses, std::chrono::seconds validity,
                       TimePoint issued_at, CertificateBundle& out) {
  if (dns_names.empty() && ip_addresses.empty())
    return fail("a serving certificate needs at least one DNS name or IP address (SAN)");
  auto key = make_p256_key();
  if (!key) return fail(key.error());
  X509Ptr leaf(X509_new());
  if (!leaf || X509_set_version(leaf.get(), X509_VERSION_3) != 1)
    return ssl_error("allocating serving certificate");
  // CN is informational (clients match SANs); X.509 limits it to 64 characters.
  std::string cn = !dns_names.empty() ? dns_names.front() : ip_addresses.front();
  if (cn.size() > 64) cn = "isolation-gate";
  X509* l = leaf.get();
  auto built = all_of({
      [&] { return set_random_serial(l); },
      [&] { return set_validity(l, validity, issued_at); },
      [&] { return set_common_name(l, cn, false); },
      [&]() -> Result<void> {
        if (X509_set_issuer_name(l, X509_get_subject_name(ca)) != 1 ||
            X509_set_pubkey(l, key->get()) != 1)
          return ssl_error("setting issuer or public key");
        return {};
      },
      [&] { return add_ext(l, ca, NID_basic_constraints, "critical,CA:FALSE"); },
      [&] { return add_ext(l, ca, NID_key_usage, "critical,digitalSignature"); },
      [&] { return add_ext(l, ca, NID_ext_key_usage, "serverAuth"); },
      [&] { return add_ext(l, ca, NID_subject_key_identifier, "hash"); },
      [&] { return add_ext(l, ca, NID_authority_key_identifier, "keyid:always"); },
      [&] { return add_subject_alt_names(l, dns_names, ip_addresses); },
  });
  if (!built) return built;
  if (X509_sign(l, ca_key, EVP_sha256()) <= 0) return ssl_error("signing serving certificate");
  auto cert_pem = cert_to_pem(l);
  if (!cert_pem) return fail(cert_pem.error());
  auto key_pem = key_to_pem(key->get());
  if (!key_pem) return fail(key_pem.error());
  out.cert_pem = std::move(*cert_pem);
  out.key_pem = std::move(*key_pem);
  return {};
}

}  // namespace

Result<CertificateBundle> make_serving_chain(const std::vector<std::string>& dns_names,
                                             const std::vector<std::string>& ip_addresses,
                                             std::chrono::seconds validity) {
  ERR_clear_error();
  auto ca_key = make_p256_key();
  if (!ca_key) return fail(ca_key.error());
  const TimePoint now = std::chrono::system_clock::now();
  auto ca = sign_ca(ca_key->get(), "isolation-gate-ca", validity, now);
  if (!ca) return fail(ca.error());
  CertificateBundle bundle;
  if (auto leaf = make_leaf(ca->get(), ca_key->get(), dns_names, ip_addresses, validity, now, bundle); !leaf)
    return fail(leaf.error());
  auto ca_pem = cert_to_pem(ca->get());
  if (!ca_pem) return fail(ca_pem.error());
  auto ca_key_pem = key_to_pem(ca_key->get());
  if (!ca_key_pem) return fail(ca_key_pem.error());
  bundle.ca_cert_pem = std::move(*ca_pem);
  bundle.ca_key_pem = std::move(*ca_key_pem);
  return bundle;
}

Result<CertificateBundle> make_serving_certificate(const std::string& ca_cert_pem,
                                                   const std::string& ca_key_pem,
                                                   const std::vector<std::string>& dns_names,
                                                   const std::vector<std::string>& ip_addresses,
                                                   std::chrono::seconds validity) {
  return make_serving_certificate(ca_cert_pem, ca_key_pem, dns_names, ip_addresses, validity,
                                  std::chrono::system_clock::now());
}

Result<CertificateBundle> make_serving_certificate(const std::string& ca_cert_pem,
                                                   const std::string& ca_key_pem,
                                                   const std::vector<std::string>& dns_names,
                                                   const std::vector<std::string>& ip_addresses,
                                                   std::chrono::seconds validity,
                                                   TimePoint issued_at) {
  ERR_clear_error();
  auto ca = cert_from_pem(ca_cert_pem);
  if (!ca) return fail(ca.error());
  auto ca_key = key_from_pem(ca_key_pem);
  if (!ca_key) return fail(ca_key.error());
  if (X509_check_private_key(ca->get(), ca_key->get()) != 1)
    return ssl_error("the CA key does not match the CA certificate");
  CertificateBundle bundle;
  if (auto leaf = make_leaf(ca->get(), ca_key->get(), dns_names, ip_addresses, validity, issued_at,
                            bundle);
      !leaf)
    return fail(leaf.error());
  bundle.ca_cert_pem = ca_cert_pem;
  bundle.ca_key_pem = ca_key_pem;
  return bundle;
}

Result<CaMaterial> make_ca(std::string_view common_name, std::chrono::seconds validity,
                           std::optional<TimePoint> issued_at) {
  ERR_clear_error();
  auto key = make_p256_key();
  if (!key) return fail(key.error());
  auto ca = sign_ca(key->get(), common_name, validity,
                    issued_at.value_or(std::chrono::system_clock::now()));
  if (!ca) return fail(ca.error());
  auto cert_pem = cert_to_pem(ca->get());
  if (!cert_pem) return fail(cert_pem.error());
  auto key_pem = key_to_pem(key->get());
  if (!key_pem) return fail(key_pem.error());
  return CaMaterial{std::move(*cert_pem), std::move(*key_pem)};
}

Result<std::vector<CertificateInfo>> read_certificate_bundle(const std::string& pem) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  ERR_clear_error();
  std::vector<CertificateInfo> out;
  std::size_t at = 0;
  while ((at = pem.find(kBegin, at)) != std::string::npos) {
    const std::size_t end = pem.find(kEnd, at);
    if (end == std::string::npos)
      return fail("certificate " + std::to_string(out.size() + 1) + " of the bundle has no END line");
    const std::string block = pem.substr(at, end + kEnd.size() - at) + "\n";
    at = end + kEnd.size();
    auto cert = cert_from_pem(block);
    if (!cert) return fail("certificate " + std::to_string(out.size() + 1) + " of the bundle: " + cert.error());
    CertificateInfo info;
    auto encoded = cert_to_pem(cert->get());
    if (!encoded) return fail(encoded.error());
    info.pem = std::move(*encoded);
    if (BioPtr bio(BIO_new(BIO_s_mem()));
        bio && X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert->get()), 0,
                                  XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
      char* data = nullptr;
      const long len = BIO_get_mem_data(bio.get(), &data);
      info.subject.assign(data, static_cast<std::size_t>(len));
    }
    auto serial = certificate_serial_hex(info.pem);
    if (!serial) return fail(serial.error());
    info.serial_hex = std::move(*serial);
    auto nb = asn1_time_point(X509_get0_notBefore(cert->get()), "notBefore");
    if (!nb) return fail(nb.error());
    auto na = asn1_time_point(X509_get0_notAfter(cert->get()), "notAfter");
    if (!na) return fail(na.error());
    info.not_before = *nb;
    info.not_after = *na;
    info.is_ca = X509_check_ca(cert->get()) == 1;
    out.push_back(std::move(info));
  }
  if (out.empty()) return fail("the bundle holds no PEM certificate");
  ERR_clear_error();
  return out;
}

Result<void> verifies(const std::string& leaf_pem, const std::string& ca_bundle_pem,
                      std::string_view dns_name, TimePoint at_time) {
  ERR_clear_error();
  auto leaf = cert_from_pem(leaf_pem);
  if (!leaf) return fail("the serving certificate: " + leaf.error());
  auto cas = read_certificate_bundle(ca_bundle_pem);
  if (!cas) return fail("the CA bundle: " + cas.error());
  std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>> ctx(X509_STORE_CTX_new());
  if (!store || !ctx) return ssl_error("allocating a certificate store");
  for (const auto& ca : *cas) {
    auto c = cert_from_pem(ca.pem);
    if (!c || X509_STORE_add_cert(store.get(), c->get()) != 1) return ssl_error("adding a CA to the store");
  }
  if (X509_STORE_CTX_init(ctx.get(), store.get(), leaf->get(), nullptr) != 1)
    return ssl_error("initialising verification");
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, std::chrono::system_clock::to_time_t(at_time));
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (X509_VERIFY_PARAM_set1_host(param, dns_name.data(), dns_name.size()) != 1)
    return ssl_error("setting the host name to verify");
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return fail("the serving certificate does not verify for " + quote(dns_name) + ": " +
                X509_verify_cert_error_string(err));
  }
  return {};
}

Result<void> key_matches_certificate(const std::string& cert_pem, const std::string& key_pem) {
  ERR_clear_error();
  auto cert = cert_from_pem(cert_pem);
  if (!cert) return fail(cert.error());
  auto key = key_from_pem(key_pem);
  if (!key) return fail(key.error());
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return fail("the private key does not match the certificate");
  }
  return {};
}

Result<std::chrono::system_clock::time_point> certificate_not_after(const std::string& pem) {
  ERR_clear_error();
  auto cert = cert_from_pem(pem);
  if (!cert) return fail(cert.error());
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &tm) != 1) return ssl_error("decoding notAfter");
  const time_t t = timegm(&tm);
  return std::chrono::system_clock::from_time_t(t);
}

Result<std::string> certificate_serial_hex(const std::string& pem) {
  ERR_clear_error();
  auto cert = cert_from_pem(pem);
  if (!cert) return fail(cert.error());
  BnPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert->get()), nullptr));
  char* hex = bn ? BN_bn2hex(bn.get()) : nullptr;
  if (!hex) return ssl_error("decoding serial number");
  std::string out(hex);
  OPENSSL_free(hex);
  return out;
}

Result<void> write_file_atomically(const std::string& path, std::string_view data, mode_t mode) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return fail("creating temporary file for " + path + ": " + errno_text(errno));
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(what + " " + tmp + ": " + errno_text(err));
  };
  if (::fchmod(fd, mode) != 0) return abandon("chmod");
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return abandon("writing");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return abandon("fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail("closing " + tmp + ": " + errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail("renaming " + tmp + " to " + path + ": " + errno_text(err));
  }
  // Make the rename itself durable; failure here does not undo the write.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

Result<std::string> read_small_file(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("opening " + path + ": " + errno_text(errno));
  auto give_up = [&](std::string message) {
    ::close(fd);
    return fail(std::move(message));
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return give_up(path + " is not a readable regular file");
  if (static_cast<std::size_t>(st.st_size) > max_bytes)
    return give_up(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  std::string out;
  out.resize(max_bytes + 1 < static_cast<std::size_t>(st.st_size) + 1
                 ? max_bytes + 1
                 : static_cast<std::size_t>(st.st_size) + 1);
  std::size_t used = 0;
  for (;;) {
    if (used == out.size()) {
      if (out.size() > max_bytes) break;
      out.resize(std::min(max_bytes + 1, out.size() * 2));
    }
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return give_up("reading " + path + ": " + errno_text(errno));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (used > max_bytes) return fail(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  out.resize(used);
  return out;
}

std::string openssl_error_queue() {
  std::string out;
  unsigned long code = 0;
  while ((code = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace ig::tls
