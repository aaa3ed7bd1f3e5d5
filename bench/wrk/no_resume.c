// LD_PRELOAD shim for wrk: every new connection does a FULL TLS handshake.
//
// wrk (4.1) closes a connection with SSL_shutdown + SSL_clear and reuses the
// same SSL object for the next connect. SSL_clear keeps the session of a
// cleanly shut down connection, so the next SSL_connect offers it and the
// server resumes it (TLS 1.3 PSK with ECDHE: no certificate, no signature).
// An API server's webhook client (Go crypto/tls with no ClientSessionCache)
// never resumes, so for the "new connection per request" mode this shim
// drops the session after SSL_clear. bench/run.sh verifies with nginx's
// $ssl_session_reused which handshakes were resumed.
//
//   cc -shared -fPIC -O2 -o no_resume.so bench/wrk/no_resume.c -ldl
//   LD_PRELOAD=$PWD/no_resume.so wrk ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <openssl/ssl.h>

int SSL_clear(SSL* ssl) {
  static int (*real)(SSL*) = 0;
  if (!real) real = (int (*)(SSL*))dlsym(RTLD_NEXT, "SSL_clear");
  int rc = real(ssl);
  SSL_set_session(ssl, NULL);
  return rc;
}
