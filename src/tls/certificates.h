// Certificate material for the webhook, made and inspected with OpenSSL 3.
//
// Contract:
// - Nothing here throws; every failure is an ig::Result error (base/result.h):
//   one human-readable line naming the file or name it is about, with
//   OpenSSL's reason appended where it has one.
// - make_serving_chain() makes a fresh CA and a serving certificate signed by it,
//   both EC P-256 / ECDSA-SHA256. The leaf carries a subjectAltName for every
//   DNS name and IP address given (at least one is required: the API server
//   refuses CN-only certificates), extendedKeyUsage serverAuth, keyUsage
//   digitalSignature, authority/subject key identifiers and a random 128-bit
//   serial; notBefore is backdated 5 minutes for clock skew.
// - make_serving_certificate() signs a new leaf with an existing CA (renewal
//   with overlap: the caBundle stays valid while the leaf is replaced).
// - make_ca() makes a CA alone (EC P-256, basicConstraints CA:TRUE critical,
//   keyUsage keyCertSign|cRLSign critical, subject key identifier), for CA
//   rotation: the new CA is published next to the old one before it signs.
// - Every certificate's notBefore is `issued_at - kNotBeforeBackdate` and its
//   notAfter `issued_at + validity`; issued_at defaults to the system clock
//   (callers with an injected clock pass theirs).
// - read_certificate_bundle() parses every certificate of a PEM bundle (an
//   error if there is none, or if a block does not parse); verifies() runs
//   OpenSSL's verifier (chain to one of the bundle's CAs, validity at the
//   given time, the DNS name against the SANs, serverAuth purpose).
// - PEM outputs: certificates as "CERTIFICATE", keys as unencrypted PKCS#8
//   "PRIVATE KEY".
// - The file helpers are POSIX-only and never leave a half-written target:
//   write_file_atomically writes a temporary file in the same directory,
//   fsyncs it, renames it over the target and fsyncs the directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ig::tls {

struct CertificateBundle {
  std::string ca_cert_pem;  // the CA certificate (goes into caBundle)
  std::string cert_pem;     // the serving (leaf) certificate
  std::string key_pem;      // the serving certificate's private key
  std::string ca_key_pem;   // the CA's private key (keep it to renew the leaf)
};

// Makes a CA and a serving certificate valid for `validity` from now (the CA is
// valid for the same period). dns_names: e.g. the Service's names
// (config::service_dns_names); a leading "*." wildcard label is
// accepted. ip_addresses: IPv4 or IPv6 literals.
Result<CertificateBundle> make_serving_chain(const std::vector<std::string>& dns_names,
                                             const std::vector<std::string>& ip_addresses,
                                             std::chrono::seconds validity);

// Signs a new serving certificate with an existing CA (ca_cert_pem/ca_key_pem
// as produced by make_serving_chain). The result's ca_cert_pem/ca_key_pem are
// copies of the inputs.
Result<CertificateBundle> make_serving_certificate(const std::string& ca_cert_pem,
                                                   const std::string& ca_key_pem,
                                                   const std::vector<std::string>& dns_names,
                                                   const std::vector<std::string>& ip_addresses,
                                                   std::chrono::seconds validity);

// How far notBefore is set before the moment of issue (clock skew).
inline constexpr std::chrono::seconds kNotBeforeBackdate{300};

struct CaMaterial {
  std::string ca_cert_pem;
  std::string ca_key_pem;
};

// A self-signed CA named `common_name` (O=isolation-gate), valid for
// `validity` from `issued_at` (default: now).
Result<CaMaterial> make_ca(std::string_view common_name, std::chrono::seconds validity,
                           std::optional<std::chrono::system_clock::time_point> issued_at = {});

// As above, with the moment of issue given (an injected clock).
Result<CertificateBundle> make_serving_certificate(const std::string& ca_cert_pem,
                                                   const std::string& ca_key_pem,
                                                   const std::vector<std::string>& dns_names,
                                                   const std::vector<std::string>& ip_addresses,
                                                   std::chrono::seconds validity,
                                                   std::chrono::system_clock::time_point issued_at);

// One certificate of a bundle.
struct CertificateInfo {
  std::string pem;         // this certificate alone, re-encoded
  std::string subject;     // one line, e.g. "O=isolation-gate, CN=isolation-gate-ca"
  std::string serial_hex;  // as certificate_serial_hex()
  std::chrono::system_clock::time_point not_before, not_after;
  bool is_ca = false;      // basicConstraints CA:TRUE
  // notBefore + kNotBeforeBackdate: the moment it was issued (by us).
  std::chrono::system_clock::time_point issued_at() const { return not_before + kNotBeforeBackdate; }
};

// Every certificate of a PEM bundle, in order. Text between PEM blocks is
// ignored; no certificate, or a CERTIFICATE block that does not parse, is an
// error.
Result<std::vector<CertificateInfo>> read_certificate_bundle(const std::string& pem);

// Whether `leaf_pem` (its first certificate) chains to a CA of
// `ca_bundle_pem`, is valid at `at_time` (so is the CA), is for `dns_name`
// and is fit for serverAuth. The error says why not.
Result<void> verifies(const std::string& leaf_pem, const std::string& ca_bundle_pem,
                      std::string_view dns_name, std::chrono::system_clock::time_point at_time);

// Whether `key_pem` is the private key of the first certificate in `cert_pem`.
Result<void> key_matches_certificate(const std::string& cert_pem, const std::string& key_pem);

// notAfter of the first certificate in `pem`.
Result<std::chrono::system_clock::time_point> certificate_not_after(const std::string& pem);

// Serial number of the first certificate in `pem`, upper-case hex without
// separators (e.g. "5A1F..."), for logs and tests.
Result<std::string> certificate_serial_hex(const std::string& pem);

// Writes `data` to `path` atomically with permission bits `mode` (e.g. 0600 for
// keys). On failure the target is untouched.
Result<void> write_file_atomically(const std::string& path, std::string_view data, mode_t mode);

// Reads a whole regular file of at most `max_bytes` bytes (larger files are an
// error, not truncated).
Result<std::string> read_small_file(const std::string& path, std::size_t max_bytes);

// Drains this thread's OpenSSL error queue into one "; "-separated string.
std::string openssl_error_queue();

}  // namespace ig::tls
