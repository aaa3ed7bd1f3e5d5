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
// - PEM outputs: certificates as "CERTIFICATE", keys as unencrypted PKCS#8
//   "PRIVATE KEY".
// - The file helpers are POSIX-only and never leave a half-written target:
//   write_file_atomically writes a temporary file in the same directory,
//   fsyncs it, renames it over the target and fsyncs the directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
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
