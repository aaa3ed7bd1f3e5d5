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
#include <memory>

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


bool fail(std::string& error, std::string what) {
  const std::string detail = openssl_error_queue();
  error = std::move(what);
  if (!detail.empty()) {
    error += ": ";
    error += detail;
  }
  return false;
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

PkeyPtr make_p256_key(std::string& error) {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) fail(error, "generating EC P-256 key");
  return key;
}

std::optional<std::string> key_to_pem(EVP_PKEY* key, std::string& error) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    fail(error, "encoding private key");
    return std::nullopt;
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

std::optional<std::string> cert_to_pem(X509* cert, std::string& error) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    fail(error, "encoding certificate");
    return std::nullopt;
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

X509Ptr cert_from_pem(const std::string& pem, std::string& error) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) fail(error, "reading PEM certificate");
  return cert;
}

PkeyPtr key_from_pem(const std::string& pem, std::string& error) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) fail(error, "reading PEM private key");
  return key;
}

bool set_random_serial(X509* cert, std::string& error) {
  BnPtr bn(BN_new());
  // 128 random bits; a zero serial is not allowed, so retry on the (2^-128) case.
  do {
    if (!bn || BN_rand(bn.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1)
      return fail(error, "generating serial number");
  } while (BN_is_zero(bn.get()));
  Asn1IntPtr serial(BN_to_ASN1_INTEGER(bn.get(), nullptr));
  if (!serial || X509_set_serialNumber(cert, serial.get()) != 1)
    return fail(error, "setting serial number");
  return true;
}

bool set_validity(X509* cert, std::chrono::seconds validity, std::string& error) {
  if (validity.count() <= 0) {
    error = "certificate validity must be positive";
    return false;
  }
  if (validity.count() > static_cast<long long>(LONG_MAX) / 2) {
    error = "certificate validity is too long";
    return false;
  }
  if (!X509_gmtime_adj(X509_getm_notBefore(cert), -5 * 60) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert), static_cast<long>(validity.count())))
    return fail(error, "setting certificate validity");
  return true;
}

bool set_common_name(X509* cert, std::string_view cn, bool self_issued, std::string& error) {
  X509_NAME* name = X509_get_subject_name(cert);
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("isolation-gate"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1)
    return fail(error, "setting subject name");
  if (self_issued && X509_set_issuer_name(cert, name) != 1)
    return fail(error, "setting issuer name");
  return true;
}

bool add_ext(X509* cert, X509* issuer, int nid, const char* value, std::string& error) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return fail(error, std::string("adding extension ") + OBJ_nid2sn(nid) + "=" + value);
  return true;
}

bool add_subject_alt_names(X509* cert, const std::vector<std::string>& dns_names,
                           const std::vector<std::string>& ip_addresses, std::string& error) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return fail(error, "allocating subjectAltName");
  for (const auto& dns : dns_names) {
    if (!valid_dns_name(dns)) {
      error = "invalid DNS name for subjectAltName: \"" + dns + "\"";
      return false;
    }
    GeneralNamePtr gn(GENERAL_NAME_new());
    Asn1StrPtr ia5(ASN1_IA5STRING_new());
    if (!gn || !ia5 || ASN1_STRING_set(ia5.get(), dns.data(), static_cast<int>(dns.size())) != 1)
      return fail(error, "encoding DNS name");
    GENERAL_NAME_set0_value(gn.get(), GEN_DNS, ia5.release());
    if (sk_GENERAL_NAME_push(names.get(), gn.get()) == 0) return fail(error, "adding DNS name");
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
      error = "invalid IP address for subjectAltName: \"" + ip + "\"";
      return false;
    }
    GeneralNamePtr gn(GENERAL_NAME_new());
    Asn1StrPtr oct(ASN1_OCTET_STRING_new());
    if (!gn || !oct || ASN1_OCTET_STRING_set(oct.get(), raw, raw_len) != 1)
      return fail(error, "encoding IP address");
    GENERAL_NAME_set0_value(gn.get(), GEN_IPADD, oct.release());
    if (sk_GENERAL_NAME_push(names.get(), gn.get()) == 0) return fail(error, "adding IP address");
    gn.release();
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1)
    return fail(error, "adding subjectAltName");
  return true;
}

X509Ptr make_ca(EVP_PKEY* ca_key, std::chrono::seconds validity, std::string& error) {
  X509Ptr ca(X509_new());
  if (!ca || X509_set_version(ca.get(), X509_VERSION_3) != 1) {
    fail(error, "allocating CA certificate");
    return nullptr;
  }
  if (!set_random_serial(ca.get(), error) || !set_validity(ca.get(), validity, error) ||
      !set_common_name(ca.get(), "isolation-gate-ca", true, error))
    return nullptr;
  if (X509_set_pubkey(ca.get(), ca_key) != 1) {
    fail(error, "setting CA public key");
    return nullptr;
  }
  if (!add_ext(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE", error) ||
      !add_ext(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign", error) ||
      !add_ext(ca.get(), ca.get(), NID_subject_key_identifier, "hash", error))
    return nullptr;
  if (X509_sign(ca.get(), ca_key, EVP_sha256()) <= 0) {
    fail(error, "signing CA certificate");
    return nullptr;
  }
  return ca;
}

// Signs a leaf for the names with ca/ca_key; fills cert_pem and key_pem.
bool make_leaf(X509* ca, EVP_PKEY* ca_key, const std::vector<std::string>& dns_names,
               const std::vector<std::string>& ip_addresses, std::chrono::seconds validity,
               CertificateBundle& out, std::string& error) {
  if (dns_names.empty() && ip_addresses.empty()) {
    error = "a serving certificate needs at least one DNS name or IP address (SAN)";
    return false;
  }
  PkeyPtr key = make_p256_key(error);
  if (!key) return false;
  X509Ptr leaf(X509_new());
  if (!leaf || X509_set_version(leaf.get(), X509_VERSION_3) != 1)
    return fail(error, "allocating serving certificate");
  // CN is informational (clients match SANs); X.509 limits it to 64 characters.
  std::string cn = !dns_names.empty() ? dns_names.front() : ip_addresses.front();
  if (cn.size() > 64) cn = "isolation-gate";
  if (!set_random_serial(leaf.get(), error) || !set_validity(leaf.get(), validity, error) ||
      !set_common_name(leaf.get(), cn, false, error))
    return false;
  if (X509_set_issuer_name(leaf.get(), X509_get_subject_name(ca)) != 1 ||
      X509_set_pubkey(leaf.get(), key.get()) != 1)
    return fail(error, "setting issuer or public key");
  if (!add_ext(leaf.get(), ca, NID_basic_constraints, "critical,CA:FALSE", error) ||
      !add_ext(leaf.get(), ca, NID_key_usage, "critical,digitalSignature", error) ||
      !add_ext(leaf.get(), ca, NID_ext_key_usage, "serverAuth", error) ||
      !add_ext(leaf.get(), ca, NID_subject_key_identifier, "hash", error) ||
      !add_ext(leaf.get(), ca, NID_authority_key_identifier, "keyid:always", error) ||
      !add_subject_alt_names(leaf.get(), dns_names, ip_addresses, error))
    return false;
  if (X509_sign(leaf.get(), ca_key, EVP_sha256()) <= 0)
    return fail(error, "signing serving certificate");
  auto cert_pem = cert_to_pem(leaf.get(), error);
  auto key_pem = key_to_pem(key.get(), error);
  if (!cert_pem || !key_pem) return false;
  out.cert_pem = std::move(*cert_pem);
  out.key_pem = std::move(*key_pem);
  return true;
}

}  // namespace

std::optional<CertificateBundle> make_serving_chain(const std::vector<std::string>& dns_names,
                                                    const std::vector<std::string>& ip_addresses,
                                                    std::chrono::seconds validity,
                                                    std::string& error) {
  ERR_clear_error();
  PkeyPtr ca_key = make_p256_key(error);
  if (!ca_key) return std::nullopt;
  X509Ptr ca = make_ca(ca_key.get(), validity, error);
  if (!ca) return std::nullopt;
  CertificateBundle bundle;
  if (!make_leaf(ca.get(), ca_key.get(), dns_names, ip_addresses, validity, bundle, error))
    return std::nullopt;
  auto ca_pem = cert_to_pem(ca.get(), error);
  auto ca_key_pem = key_to_pem(ca_key.get(), error);
  if (!ca_pem || !ca_key_pem) return std::nullopt;
  bundle.ca_cert_pem = std::move(*ca_pem);
  bundle.ca_key_pem = std::move(*ca_key_pem);
  return bundle;
}

std::optional<CertificateBundle> make_serving_certificate(const std::string& ca_cert_pem,
                                                          const std::string& ca_key_pem,
                                                          const std::vector<std::string>& dns_names,
                                                          const std::vector<std::string>& ip_addresses,
                                                          std::chrono::seconds validity,
                                                          std::string& error) {
  ERR_clear_error();
  X509Ptr ca = cert_from_pem(ca_cert_pem, error);
  if (!ca) return std::nullopt;
  PkeyPtr ca_key = key_from_pem(ca_key_pem, error);
  if (!ca_key) return std::nullopt;
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    fail(error, "the CA key does not match the CA certificate");
    return std::nullopt;
  }
  CertificateBundle bundle;
  if (!make_leaf(ca.get(), ca_key.get(), dns_names, ip_addresses, validity, bundle, error))
    return std::nullopt;
  bundle.ca_cert_pem = ca_cert_pem;
  bundle.ca_key_pem = ca_key_pem;
  return bundle;
}

std::optional<std::chrono::system_clock::time_point> certificate_not_after(const std::string& pem,
                                                                           std::string& error) {
  ERR_clear_error();
  X509Ptr cert = cert_from_pem(pem, error);
  if (!cert) return std::nullopt;
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) != 1) {
    fail(error, "decoding notAfter");
    return std::nullopt;
  }
  const time_t t = timegm(&tm);
  return std::chrono::system_clock::from_time_t(t);
}

std::optional<std::string> certificate_serial_hex(const std::string& pem, std::string& error) {
  ERR_clear_error();
  X509Ptr cert = cert_from_pem(pem, error);
  if (!cert) return std::nullopt;
  BnPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  char* hex = bn ? BN_bn2hex(bn.get()) : nullptr;
  if (!hex) {
    fail(error, "decoding serial number");
    return std::nullopt;
  }
  std::string out(hex);
  OPENSSL_free(hex);
  return out;
}

bool write_file_atomically(const std::string& path, std::string_view data, mode_t mode,
                           std::string& error) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    error = "creating temporary file for " + path + ": " + errno_text(errno);
    return false;
  }
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    error = what + " " + tmp + ": " + errno_text(err);
    return false;
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
    error = "closing " + tmp + ": " + errno_text(err);
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    error = "renaming " + tmp + " to " + path + ": " + errno_text(err);
    return false;
  }
  // Make the rename itself durable; failure here does not undo the write.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

std::optional<std::string> read_small_file(const std::string& path, std::size_t max_bytes,
                                           std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "opening " + path + ": " + errno_text(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = path + " is not a readable regular file";
    ::close(fd);
    return std::nullopt;
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    error = path + " is larger than " + std::to_string(max_bytes) + " bytes";
    ::close(fd);
    return std::nullopt;
  }
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
      error = "reading " + path + ": " + errno_text(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (used > max_bytes) {
    error = path + " is larger than " + std::to_string(max_bytes) + " bytes";
    return std::nullopt;
  }
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
