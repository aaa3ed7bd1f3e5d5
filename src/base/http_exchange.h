// One HTTP exchange as the transport (server/) and the webhook (admission/)
// both see it: request bytes in, status/headers/body out. Neither Beast nor
// Asio shows through.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json_text.h"

namespace ig::http {

struct Request {
  std::string method;        // "POST", "GET", ...
  std::string target;        // path with query, e.g. "/mutate/pods?timeout=10s"
  std::string content_type;  // Content-Type header value, "" when absent
  std::string body;          // complete body (already limited by the server)
};

struct Response {
  unsigned status = 500;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers = {};  // extra headers
};

// An error answer: a Kubernetes Status (status Failure) as the API server
// writes one, `message` escaped.
inline Response status_failure(unsigned code, std::string_view reason, std::string_view message) {
  Response r{code, "application/json", {}};
  json_text::Writer w(r.body);
  w.begin_object().key("apiVersion").string("v1").key("kind").string("Status");
  w.key("status").string("Failure").key("message").string(message);
  w.key("reason").string(reason).key("code").integer(code).end_object();
  return r;
}

// Called concurrently from the server's I/O threads; must not throw and must
// not block for long (decisions are microseconds; lookups have deadlines).
using Handler = std::function<Response(Request&&)>;

}  // namespace ig::http
