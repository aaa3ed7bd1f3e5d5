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

Result<void> set_validity(X509* cert, std::chrono::seconds validity) {
  if (validity.count() <= 0) return fail("certificate validity must be positive");
  if (validity.count() > static_cast<long long>(LONG_MAX) / 2)
    return fail("certificate validity is too long");
  if (!X509_gmtime_adj(X509_getm_notBefore(cert), -5 * 60) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert), static_cast<long>(validity.count())))
    return ssl_error("setting certificate validity");
  return {};
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

Result<X509Ptr> make_ca(EVP_PKEY* ca_key, std::chrono::seconds validity) {
  X509Ptr ca(X509_new());
  if (!ca || X509_set_version(ca.get(), X509_VERSION_3) != 1)
    return ssl_error("allocating CA certificate");
  X509* c = ca.get();
  auto built = all_of({
      [&] { return set_random_serial(c); },
      [&] { return set_validity(c, validity); },
      [&] { return set_common_name(c, "isolation-gate-ca", true); },
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
                       CertificateBundle& out) {
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
      [&] { return set_validity(l, validity); },
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
  auto ca = make_ca(ca_key->get(), validity);
  if (!ca) return fail(ca.error());
  CertificateBundle bundle;
  if (auto leaf = make_leaf(ca->get(), ca_key->get(), dns_names, ip_addresses, validity, bundle); !leaf)
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
  ERR_clear_error();
  auto ca = cert_from_pem(ca_cert_pem);
  if (!ca) return fail(ca.error());
  auto ca_key = key_from_pem(ca_key_pem);
  if (!ca_key) return fail(ca_key.error());
  if (X509_check_private_key(ca->get(), ca_key->get()) != 1)
    return ssl_error("the CA key does not match the CA certificate");
  CertificateBundle bundle;
  if (auto leaf = make_leaf(ca->get(), ca_key->get(), dns_names, ip_addresses, validity, bundle); !leaf)
    return fail(leaf.error());
  bundle.ca_cert_pem = ca_cert_pem;
  bundle.ca_key_pem = ca_key_pem;
  return bundle;
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
