// The Kubernetes API as isolation-gate's client sees it: resources and their
// paths, errors that keep the API server's Status (code, reason, message,
// Retry-After), list pages, watch events, and the Client interface every
// caller uses. cpprestsdk is behind this interface (kube/http_client.h), so
// it could be replaced without touching the rest, and tests can fake it.
//
// Contract:
//  - Every call is synchronous and must be made from a thread of our own
//    (a reflector thread, a webhook request thread with a deadline), never
//    from one of cpprestsdk's pool threads (docs/architecture.md, "Library traps": deadlock).
//  - Every call returns an ApiResult: the value, or an ApiError whose message
//    is one line naming the verb and path ("LIST /api/v1/nodes: 410 Expired:
//    ..."), and whose code is the HTTP status (0: no answer: connection
//    refused, reset, timeout, TLS failure, undecodable body).
//  - Bodies are JSON (depth-limited before nlohmann parses them).
//  - This folder knows Kubernetes API conventions and nothing of Components,
//    admission or the gate.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace ig::kube {

struct ApiError {
  std::string message;                  // one line: verb, path, code, reason, Status message
  int code = 0;                         // HTTP status; 0 when there was no answer
  std::string reason;                   // Status.reason ("Expired", "NotFound", ...)
  std::chrono::seconds retry_after{0};  // Retry-After on 429/503, else 0
  // No answer because the connection was refused (nothing listens; cpprestsdk
  // reports it as host unreachable, which counts too): the server is down or
  // restarting, not refusing us (client-go retries a watch).
  bool refused = false;
  // The Status says "Too large resource version" (cause ResourceVersionTooLarge,
  // 504): the server is behind the resourceVersion asked for (a watch cache
  // not caught up, or etcd restored from a backup).
  bool rv_too_large = false;
  // A watch closed by the client because no byte came within
  // WatchOptions::silence (a dead connection, a hung proxy).
  bool silent = false;

  bool gone() const noexcept { return code == 410; }
  bool not_found() const noexcept { return code == 404; }
  bool conflict() const noexcept { return code == 409; }
  // Worth retrying with backoff: no answer, 429, 5xx.
  bool retriable() const noexcept { return code == 0 || code == 429 || code >= 500; }
};

// The error a v1 Status object describes (an ERROR event's object, an error
// answer's body): code, reason, rv_too_large, details.retryAfterSeconds, and a
// message "<what>: <code> <reason>: <Status message>".
ApiError error_from_status(std::string_view what, const nlohmann::json& status);
// True when a Status carries cause ResourceVersionTooLarge, or (servers before
// 1.18.6) is a 504 Timeout whose cause or message says "Too large resource version".
bool status_rv_too_large(const nlohmann::json& status);

template <typename T>
using ApiResult = Result<T, ApiError>;

// A resource type: enough to build its paths.
struct Resource {
  std::string_view group;     // "" for the core group
  std::string_view version;   // "v1"
  std::string_view plural;    // "nodes"
  std::string_view kind;      // "Node"
  bool namespaced = false;
};

// "/api/v1/nodes", "/apis/gibson.zeroroot.ai/v1alpha1/namespaces/NS/components";
// `ns` empty: across all namespaces (or cluster-scoped).
std::string collection_path(const Resource& r, std::string_view ns = {});
// The collection path plus "/NAME" and "/SUBRESOURCE" when given. Names are
// escaped (a name never contains '/', but a hostile one must not traverse).
std::string object_path(const Resource& r, std::string_view ns, std::string_view name,
                        std::string_view subresource = {});

// A metav1.MicroTime: RFC 3339 in UTC with microseconds,
// "2026-12-02T21:00:00.123456Z" (Lease renewTime, Event eventTime).
std::string format_micro_time(std::chrono::system_clock::time_point t);

// RFC 3986 percent-encoding of everything but the unreserved characters
// (A-Z a-z 0-9 - . _ ~): for query values and path segments.
std::string percent_encode(std::string_view s);

struct ListOptions {
  std::string resource_version;  // "" most recent; "0" any
  std::size_t limit = 500;       // page size; 0: no limit
  std::string continue_token;
  std::string label_selector;
  std::string field_selector;
};

struct ListPage {
  nlohmann::json items = nlohmann::json::array();  // the objects, as sent
  std::string resource_version;                    // of the list
  std::string continue_token;                      // "" on the last page
};

struct WatchOptions {
  std::string resource_version;                // start after this one
  bool allow_bookmarks = true;
  std::chrono::seconds timeout{300};           // the server-side timeoutSeconds
  // Client side: a stream that delivers no byte for this long is closed with
  // an ApiError whose `silent` is set (0: only the connection's inactivity
  // timeout, timeoutSeconds plus a margin). Set it only with bookmarks on: a
  // server sends one about every minute, so silence means a dead stream.
  std::chrono::milliseconds silence{0};
  std::string label_selector;
  std::string field_selector;
};

struct WatchEvent {
  enum class Type : std::uint8_t { Added, Modified, Deleted, Bookmark, Error };
  Type type = Type::Error;
  nlohmann::json object;  // for Error: the Status
};

// One open watch. next() blocks until an event, the end of the stream
// (nullopt: the server closed it cleanly, e.g. at timeoutSeconds), an error
// (dropped connection, undecodable event), or stop(). Not thread-safe except
// stop(), which may be called from any thread and makes next() return soon.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  virtual ApiResult<std::optional<WatchEvent>> next() = 0;
  virtual void stop() noexcept = 0;
};

enum class PatchType : std::uint8_t { Merge, Json };  // RFC 7386, RFC 6902

class Client {
 public:
  virtual ~Client() = default;
  // `timeout` bounds the whole call, rate-limiter wait included.
  virtual ApiResult<nlohmann::json> get(std::string_view path, std::chrono::milliseconds timeout) = 0;
  virtual ApiResult<ListPage> list(std::string_view path, const ListOptions& options) = 0;
  // list() that hands each item to `each` as soon as it is decoded, instead
  // of collecting the page (the returned page's items are empty): a client
  // that decodes as it reads keeps one item, not the page, in memory at a
  // time (kube/list_decoder.h). Items handed over before an error stay
  // handed over. The default calls list() and hands over its items.
  virtual ApiResult<ListPage> list_each(std::string_view path, const ListOptions& options,
                                        const std::function<void(nlohmann::json&&)>& each) {
    auto page = list(path, options);
    if (!page) return page;
    for (auto& item : page->items) each(std::move(item));
    page->items = nlohmann::json::array();
    return page;
  }
  virtual ApiResult<std::unique_ptr<WatchStream>> watch(std::string_view path,
                                                        const WatchOptions& options) = 0;
  virtual ApiResult<nlohmann::json> create(std::string_view path, const nlohmann::json& body) = 0;
  // create() that `cancel` abandons, as patch_cancellable() (an eviction of a
  // reconcile cancelled when leadership is lost). The default (test
  // doubles): create(), unless already stopped.
  virtual ApiResult<nlohmann::json> create_cancellable(std::string_view path, const nlohmann::json& body,
                                                       std::stop_token cancel) {
    if (cancel.stop_requested()) return ApiError{"CREATE " + std::string(path) + ": cancelled", 0, "Cancelled", {}};
    return create(path, body);
  }
  virtual ApiResult<nlohmann::json> patch(std::string_view path, PatchType type,
                                          const nlohmann::json& body) = 0;
  // patch() that `cancel` abandons (a reconcile cancelled when leadership is
  // lost): nothing is sent once it is stopped, a wait for the client's rate
  // limit or for the answer ends when it is, with an ApiError whose message
  // says "cancelled" (code 0). The default (test doubles): patch(), unless
  // already stopped.
  virtual ApiResult<nlohmann::json> patch_cancellable(std::string_view path, PatchType type,
                                                      const nlohmann::json& body, std::stop_token cancel) {
    if (cancel.stop_requested()) return ApiError{"PATCH " + std::string(path) + ": cancelled", 0, "Cancelled", {}};
    return patch(path, type, body);
  }
  // PUT: replaces the object; a metadata.resourceVersion in `body` makes it
  // conditional (409 Conflict when the stored object has moved on), which is
  // how optimistic concurrency works (leader election's Lease). `timeout`
  // bounds the whole call, rate-limiter wait included.
  virtual ApiResult<nlohmann::json> update(std::string_view path, const nlohmann::json& body,
                                           std::chrono::milliseconds timeout) = 0;
  // Server-side apply: PATCH `path` with `body` (an apply configuration:
  // apiVersion, kind, metadata name/namespace and only the fields the caller
  // owns) as application/apply-patch+yaml, `?fieldManager=...` and, with
  // `force`, `&force=true` (the caller takes fields another manager owns
  // instead of a 409 Conflict). The API server merges it (lists with
  // x-kubernetes-list-type map per key), removes what this manager applied
  // last time and no longer applies, and answers the object. `timeout` bounds
  // the whole call, rate-limiter wait included; `cancel` abandons it as in
  // patch_cancellable(). Clients that never apply keep this default, which
  // answers a 405 without any request.
  virtual ApiResult<nlohmann::json> apply(std::string_view path, const nlohmann::json& body,
                                          std::string_view field_manager, bool force,
                                          std::chrono::milliseconds timeout, std::stop_token cancel = {}) {
    (void)body, (void)field_manager, (void)force, (void)timeout, (void)cancel;
    return ApiError{"APPLY " + std::string(path) + ": this client does not apply", 405, "MethodNotAllowed", {}};
  }
  // DELETE (foreground-agnostic: the API server's default propagation); the
  // answer is the Status or the object being deleted. A 404 is the caller's
  // to judge. Clients that never delete (read-mostly decorators, test
  // doubles) keep this default, which answers a 405 without any request.
  virtual ApiResult<nlohmann::json> remove(std::string_view path, std::chrono::milliseconds timeout) {
    (void)timeout;
    return ApiError{"DELETE " + std::string(path) + ": this client does not delete", 405, "MethodNotAllowed", {}};
  }
};

}  // namespace ig::kube
