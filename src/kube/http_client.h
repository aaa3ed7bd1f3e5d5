// kube::Client on cpprestsdk (which stays inside http_client.cpp).
//
// Contract:
//  - Every call blocks the calling thread (ours, never a cpprestsdk pool
//    thread) until its deadline, which includes the rate limiter's wait; on
//    the deadline the request is cancelled and the answer is code 0.
//  - TLS 1.2+, only the cluster CA, the server's certificate names its host;
//    no proxy. On a 401 with a token file or an exec plugin, the credentials
//    are renewed and, when they changed, the request is sent once more.
//  - A LIST answer is decoded as it arrives (at most 1 MiB unread); an
//    answer, or one item of a LIST, is at most 64 MiB.
//  - A watch stream's stop() may come from any thread and wakes next() at
//    once; a stream outlives its client safely.
//  - Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/api.h"
#include "kube/config.h"
#include "kube/rate_limiter.h"

namespace ig::kube {

struct HttpClientOptions {
  double qps = RateLimiter::kDefaultQps;    // --kube-api-qps (<= 0: no limit)
  int burst = RateLimiter::kDefaultBurst;   // --kube-api-burst
  // CREATE, PATCH, a watch's headers; a LIST's headers and each wait for more.
  std::chrono::milliseconds request_timeout{30000};
  std::shared_ptr<Clock> clock = Clock::steady();  // the rate limiter's and the token file's
  // Shared by the clients of one cluster; default: the client's own.
  std::shared_ptr<TokenSource> tokens;
};

class HttpClient : public Client {
 public:
  // User-Agent "isolation-gate/<version>". Fails on an unusable server URL,
  // CA or client pair.
  static Result<std::unique_ptr<HttpClient>> make(const ClusterConfig& config,
                                                  std::string_view version,
                                                  HttpClientOptions options = {});
};

}  // namespace ig::kube
