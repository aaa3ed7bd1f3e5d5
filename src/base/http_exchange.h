// One HTTP exchange as the transport (server/) and the webhook (admission/)
// both see it: request bytes in, status/headers/body out. Neither Beast nor
// Asio shows through.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

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

// Called concurrently from the server's I/O threads; must not throw and must
// not block for long (decisions are microseconds; lookups have deadlines).
using Handler = std::function<Response(Request&&)>;

}  // namespace ig::http
