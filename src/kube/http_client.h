// The Kubernetes API client on cpprestsdk's http_client (kube::Client): GET,
// LIST, WATCH, CREATE, PATCH, APPLY (server-side apply) and UPDATE (PUT)
// against one cluster, authenticated and verified as its ClusterConfig says.
// cpprestsdk stays inside http_client.cpp (this header does not include it).
//
// Contract:
//  - Every call blocks the calling thread, which must be one of ours (a
//    reflector thread, a webhook request thread with a deadline), never a
//    cpprestsdk pool thread (docs/architecture.md, "Library traps"). Inside, cpprestsdk's tasks
//    only set our own completion state; our thread waits on it with a
//    deadline, and on the deadline cancels the request (a pplx cancellation
//    token closes the connection) and returns code 0.
//  - The pool: the first client made in the process sizes cpprestsdk's thread
//    pool (crossplat::threadpool::initialize_with_threads, options.pool_threads,
//    2 to 4) before anything uses it; later clients share it.
//  - TLS trusts only the cluster CA: the SSL context's certificate store is
//    replaced by a new one holding only config.ca_pem's certificates; the
//    server's certificate must name the server's host (DNS name or IP
//    address); TLS 1.2 or later; the client certificate and key when given.
//    No proxy is used.
//  - Every request: the rate limiter first (its wait counts against the
//    call's deadline), then `Authorization: Bearer` from the token source
//    (re-read as the file rotates; an exec plugin's until it expires) when
//    there is a token, `User-Agent: isolation-gate/VERSION`, `Accept:
//    application/json`. On a 401 with a token file or an exec plugin, the file
//    is re-read or the plugin run again at once and, when the credentials
//    changed, the request is sent once more (rate-limited again); a plugin
//    that fails then is named in the 401's error.
//  - Client certificates: the config's, or an exec plugin's. Connections are
//    made with the certificate of the credentials in use; when a plugin
//    answers with another certificate, the shared pool is replaced (new
//    connections present the new one; a running watch keeps its connection
//    until it ends).
//  - Answers >= 400 are ApiErrors with the API server's Status (message,
//    reason, code; the HTTP reason phrase when the body is not a Status), and
//    Retry-After (seconds; else Status details.retryAfterSeconds) on 429 and
//    503. No answer (connection refused or reset, TLS failure, timeout, rate
//    limit deadline), an oversized body or an undecodable one is code 0, with
//    the cause in the message (`refused` set for a refused connection);
//    `rv_too_large` is set from the Status's causes. Messages are one line: "GET /api/v1/nodes/a:
//    404 NotFound: nodes \"a\" not found".
//  - Bodies: at most options.max_body_bytes, nesting checked with
//    ig::json_nesting_depth before nlohmann parses them; objects answer GET,
//    CREATE, PATCH and APPLY, a list (items, metadata.resourceVersion,
//    metadata.continue) answers LIST. A LIST answer is parsed as it arrives
//    and never held whole (kube/list_decoder.h): at most 1 MiB of it waits
//    unread (cpprestsdk reads no more from the socket meanwhile),
//    max_body_bytes bounds each of its items, and its nesting is checked as
//    it is parsed.
//  - watch(): returns once the answer's headers are in (within
//    options.request_timeout); the stream is read from the thread calling
//    next(), chunk by chunk as the bytes arrive, through kube::WatchDecoder.
//    Each watch has its own connection, whose inactivity timeout is the
//    server-side timeoutSeconds plus 30 s, so a silent dead connection ends
//    in an error, never a hang; with WatchOptions::silence set, a stream that
//    delivers no byte for that long ends sooner, in an error with `silent`. next(): an event; nullopt when the server
//    ended the stream cleanly or after stop(); an error (code 0) when the
//    connection dropped, the stream ended inside an event or an event did not
//    decode. stop() may be called from any thread; it cancels the connection
//    and wakes a blocked next() at once. The stream outlives its client
//    safely.
//    An ERROR event (e.g. 410 Expired) is an event, with the Status as its
//    object: the caller decides (the reflector relists).
//  - Connections are kept alive and shared by the client's calls; after a
//    call that got no answer the client starts a fresh pool.
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
