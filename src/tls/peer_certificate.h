// The certificate a TLS server presents, read by a handshake alone (nothing
// is sent after it): how the certificates leader observes which leaf a
// replica serves. The chain is not verified here (the caller decides what
// it trusts); the server's certificate is read even when the server then
// refuses the handshake for want of a client certificate. Every step is
// bounded: connect and handshake together within `timeout`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace ig::tls {

// `host` is a numeric address (an EndpointSlice's); `server_name` is sent as
// SNI. Returns the presented leaf as PEM.
Result<std::string> fetch_peer_certificate(const std::string& host, std::uint16_t port,
                                           const std::string& server_name, std::chrono::milliseconds timeout);

}  // namespace ig::tls
