// PEM and base64 material for the Kubernetes API client's TLS, checked and
// loaded with OpenSSL 3: the cluster CA (one or more certificates) and the
// optional client certificate and key.
//
// Contract:
//  - Nothing here throws; every failure is an ig::Result error: one line that
//    names `what` (the file or kubeconfig field the material came from), with
//    OpenSSL's reason appended where it has one.
//  - check_ca_bundle() accepts PEM text holding at least one CERTIFICATE, each
//    of which must parse (text outside the PEM blocks is ignored, as OpenSSL
//    does); add_ca_bundle() adds every one of them
//    to a store (the API client's store holds only these: "only the cluster
//    CA", docs/architecture.md, "Library traps").
//  - check_client_pair()/use_client_pair(): a certificate chain (leaf first)
//    and its private key, which must match.
//  - decode_base64(): RFC 4648 standard alphabet, padding optional at the end,
//    ASCII whitespace (line breaks) ignored; anything else is an error.
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>
#include <string_view>

#include "base/result.h"

namespace ig::kube {

// The number of certificates in `pem` (at least one), or why it is not a CA bundle.
Result<std::size_t> check_ca_bundle(std::string_view pem, std::string_view what);

// Adds every certificate of `pem` to `store`.
Result<void> add_ca_bundle(X509_STORE* store, std::string_view pem, std::string_view what);

// The certificate (chain) and key parse and belong together.
Result<void> check_client_pair(std::string_view cert_pem, std::string_view key_pem,
                               std::string_view what);

// Loads the certificate chain and key into `ctx` for client authentication.
Result<void> use_client_pair(SSL_CTX* ctx, std::string_view cert_pem, std::string_view key_pem,
                             std::string_view what);

// The bytes `text` encodes.
Result<std::string> decode_base64(std::string_view text, std::string_view what);

}  // namespace ig::kube
