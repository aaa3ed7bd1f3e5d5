#include "kube/tls_material.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>
#include <vector>

#include "tls/certificates.h"

namespace ig::kube {
namespace {

template <auto Free>
struct Freer {
  template <typename T>
  void operator()(T* p) const { Free(p); }
};
using BioPtr = std::unique_ptr<BIO, Freer<BIO_free>>;
using X509Ptr = std::unique_ptr<X509, Freer<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY_free>>;

std::string with_openssl_reason(std::string message) {
  const std::string reason = tls::openssl_error_queue();
  if (!reason.empty()) message += ": " + reason;
  return message;
}

BioPtr memory_bio(std::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Every certificate in `pem`, in order. An error when one does not parse or
// there is none.
Result<std::vector<X509Ptr>> read_certificates(std::string_view pem, std::string_view what) {
  ERR_clear_error();
  if (pem.size() > (1u << 26)) return fail(std::string(what) + ": certificate data too large");
  BioPtr bio = memory_bio(pem);
  if (!bio) return fail(with_openssl_reason(std::string(what) + ": out of memory"));
  std::vector<X509Ptr> certs;
  for (;;) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    certs.push_back(std::move(cert));
  }
  const unsigned long last = ERR_peek_last_error();
  const bool clean_end = last == 0 || (ERR_GET_LIB(last) == ERR_LIB_PEM &&
                                       ERR_GET_REASON(last) == PEM_R_NO_START_LINE);
  if (!clean_end) {
    return fail(with_openssl_reason(std::string(what) + ": certificate " +
                                    std::to_string(certs.size() + 1) + " does not parse"));
  }
  ERR_clear_error();
  if (certs.empty()) return fail(std::string(what) + ": no PEM CERTIFICATE found");
  return certs;
}

}  // namespace

Result<std::size_t> check_ca_bundle(std::string_view pem, std::string_view what) {
  auto certs = read_certificates(pem, what);
  if (!certs) return certs.failure();
  return certs->size();
}

Result<void> add_ca_bundle(X509_STORE* store, std::string_view pem, std::string_view what) {
  auto certs = read_certificates(pem, what);
  if (!certs) return certs.failure();
  for (const X509Ptr& cert : *certs) {
    // OpenSSL 3 takes the same certificate twice as a success.
    if (X509_STORE_add_cert(store, cert.get()) != 1)
      return fail(with_openssl_reason(std::string(what) + ": cannot add a CA certificate"));
  }
  return {};
}

Result<void> use_client_pair(SSL_CTX* ctx, std::string_view cert_pem, std::string_view key_pem,
                             std::string_view what) {
  auto certs = read_certificates(cert_pem, std::string(what) + " client certificate");
  if (!certs) return certs.failure();
  ERR_clear_error();
  BioPtr key_bio = memory_bio(key_pem);
  PkeyPtr key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return fail(with_openssl_reason(std::string(what) + " client key: no PEM private key"));
  if (SSL_CTX_use_certificate(ctx, (*certs)[0].get()) != 1)
    return fail(with_openssl_reason(std::string(what) + ": client certificate refused"));
  for (std::size_t i = 1; i < certs->size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, (*certs)[i].get()) != 1)
      return fail(with_openssl_reason(std::string(what) + ": client certificate chain refused"));
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1)
    return fail(with_openssl_reason(std::string(what) +
                                    ": client key does not match the client certificate"));
  return {};
}

Result<void> check_client_pair(std::string_view cert_pem, std::string_view key_pem,
                               std::string_view what) {
  std::unique_ptr<SSL_CTX, Freer<SSL_CTX_free>> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return fail(with_openssl_reason(std::string(what) + ": cannot make a TLS context"));
  return use_client_pair(ctx.get(), cert_pem, key_pem, what);
}

Result<std::string> decode_base64(std::string_view text, std::string_view what) {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve(text.size() / 4 * 3);
  unsigned int acc = 0;
  int bits = 0;
  std::size_t symbols = 0, padding = 0;
  for (unsigned char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const std::size_t v = kAlphabet.find(static_cast<char>(c));
    if (v == std::string_view::npos || padding > 0) return fail(std::string(what) + ": not base64");
    acc = (acc << 6) | static_cast<unsigned int>(v);
    bits += 6;
    ++symbols;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  // A final group of 1 symbol cannot encode a byte; padding must complete a group.
  if (symbols % 4 == 1 || padding > 2 || (padding > 0 && (symbols + padding) % 4 != 0))
    return fail(std::string(what) + ": not base64 (truncated)");
  return out;
}

}  // namespace ig::kube
