// The Kubernetes API client's TLS material, checked and loaded with OpenSSL:
// the cluster CA bundle and the optional client certificate (chain, leaf
// first) and key, which must match. Nothing throws; an error is one line
// naming `what`, with OpenSSL's reason where it has one.
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>
#include <string_view>

#include "base/result.h"

namespace ig::kube {

// The number of certificates in `pem` (at least one, each must parse).
Result<std::size_t> check_ca_bundle(std::string_view pem, std::string_view what);

// Adds every certificate of `pem` to `store`.
Result<void> add_ca_bundle(X509_STORE* store, std::string_view pem, std::string_view what);

// The certificate (chain) and key parse and belong together.
Result<void> check_client_pair(std::string_view cert_pem, std::string_view key_pem,
                               std::string_view what);

// Loads the certificate chain and key into `ctx` for client authentication.
Result<void> use_client_pair(SSL_CTX* ctx, std::string_view cert_pem, std::string_view key_pem,
                             std::string_view what);

// The bytes `text` encodes (RFC 4648, padding optional, whitespace ignored).
Result<std::string> decode_base64(std::string_view text, std::string_view what);

}  // namespace ig::kube
