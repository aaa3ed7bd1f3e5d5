// The Kubernetes API client on cpprestsdk's http_client (kube::Client): GET,
// LIST, WATCH, CREATE, PATCH, APPLY (server-side apply) and UPDATE (PUT)
// against one cluster, authenticated and verified as its ClusterConfig says.
// cpprestsdk stays inside http_client.cpp (this header does not include it).
//
// Contract:
//  - Every call blocks the calling thread, which must be one of ours, never a
//    cpprestsdk pool thread (docs/architecture.md, "Library traps"). It waits
//    with a deadline; on the deadline the request is cancelled (its
//    connection closed) and the answer is code 0. The first client sizes
//    cpprestsdk's thread pool (options.pool_threads, 2 to 4); later ones
//    share it.
//  - TLS trusts only the cluster CA (no system roots), TLS 1.2 or later, the
//    server's certificate must name its host; no proxy.
//  - Every request: the rate limiter first (its wait counts against the
//    deadline), then the token source's bearer token, if any. On a 401 with a
//    token file or an exec plugin, the credentials are renewed at once and,
//    when they changed, the request is sent once more. Connections present
//    the client certificate of the credentials in use (a plugin's new one
//    replaces the shared pool).
//  - Answers >= 400 are ApiErrors with the API server's Status and
//    Retry-After; no answer, an oversized body (options.max_body_bytes) or
//    an undecodable one is code 0 with the cause. Messages are one line:
//    "GET /api/v1/nodes/a: 404 NotFound: nodes \"a\" not found".
//  - A LIST answer is parsed as it arrives, never held whole
//    (kube/list_decoder.h): at most 1 MiB of it waits unread (cpprestsdk
//    reads no more from the socket meanwhile), and max_body_bytes bounds
//    each of its items.
//  - watch() returns once the headers are in; next() reads the stream on the
//    caller's thread through kube::WatchDecoder: an event (an ERROR event,
//    e.g. 410 Expired, is an event for the caller), nullopt when the stream
//    ended cleanly or after stop(), or an error (code 0; `silent` after
//    WatchOptions::silence without a byte). The connection's inactivity
//    timeout is timeoutSeconds + 30 s, so a dead one never hangs. stop() may
//    come from any thread and wakes next() at once; a stream outlives its
//    client safely.
//  - Thread-safe: one client serves any number of threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/api.h"
#include "kube/config.h"
#include "kube/rate_limiter.h"
#include "kube/watch_decoder.h"

namespace ig::kube {

struct HttpClientOptions {
  double qps = RateLimiter::kDefaultQps;    // --kube-api-qps (<= 0: no limit)
  int burst = RateLimiter::kDefaultBurst;   // --kube-api-burst
  // CREATE, PATCH; a watch's headers; a LIST's headers, then each wait for
  // more of its answer (which is decoded as it arrives: the decoding's time
  // does not count).
  std::chrono::milliseconds request_timeout{30000};
  std::size_t max_body_bytes = 64u << 20;  // one answer (of a LIST: one item)
  std::size_t max_json_depth = 128;
  WatchDecoderLimits watch_limits;
  std::size_t pool_threads = 2;            // cpprestsdk's pool (first client only), 2..4
  std::shared_ptr<Clock> rate_clock;   // tests; default: the steady clock
  TokenSource::Clock token_clock;          // tests; default: the steady clock
  // Shared by the clients of one cluster (one exec plugin run serves them
  // all); default: the client's own, from its config.
  std::shared_ptr<TokenSource> tokens;
};

class HttpClient final : public Client {
 public:
  // `version` goes into the User-Agent ("isolation-gate/" + version). Fails
  // on a server URL cpprestsdk cannot use or a CA/client pair that does not
  // load.
  static Result<std::unique_ptr<HttpClient>> make(const ClusterConfig& config,
                                                  std::string_view version,
                                                  HttpClientOptions options = {});
  ~HttpClient() override;

  ApiResult<nlohmann::json> get(std::string_view path, std::chrono::milliseconds timeout) override;
  ApiResult<ListPage> list(std::string_view path, const ListOptions& options) override;
  // Decodes the page as it is parsed (kube/list_decoder.h).
  ApiResult<ListPage> list_each(std::string_view path, const ListOptions& options,
                                const std::function<void(nlohmann::json&&)>& each) override;
  ApiResult<std::unique_ptr<WatchStream>> watch(std::string_view path,
                                                const WatchOptions& options) override;
  ApiResult<nlohmann::json> create(std::string_view path, const nlohmann::json& body) override;
  ApiResult<nlohmann::json> create_cancellable(std::string_view path, const nlohmann::json& body,
                                               std::stop_token cancel) override;
  ApiResult<nlohmann::json> patch(std::string_view path, PatchType type,
                                  const nlohmann::json& body) override;
  ApiResult<nlohmann::json> patch_cancellable(std::string_view path, PatchType type, const nlohmann::json& body,
                                              std::stop_token cancel) override;
  ApiResult<nlohmann::json> update(std::string_view path, const nlohmann::json& body,
                                   std::chrono::milliseconds timeout) override;
  // Content-Type application/apply-patch+yaml (the body as JSON, which is YAML).
  ApiResult<nlohmann::json> apply(std::string_view path, const nlohmann::json& body,
                                  std::string_view field_manager, bool force,
                                  std::chrono::milliseconds timeout, std::stop_token cancel = {}) override;
  ApiResult<nlohmann::json> remove(std::string_view path, std::chrono::milliseconds timeout) override;

  const std::string& user_agent() const noexcept;

  struct Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The query string ("?a=1&b=x%20y", "" when nothing is set) of a LIST or a
// WATCH; values are percent-encoded (RFC 3986 unreserved characters kept).
std::string list_query(const ListOptions& options);
std::string watch_query(const WatchOptions& options);

}  // namespace ig::kube
