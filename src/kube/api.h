// The Kubernetes API as our callers see it: resource paths, errors that keep
// the API server's Status, list pages, watch events, and the Client interface
// (implemented on cpprestsdk by kube/http_client.h, faked by tests).
//
// Contract: every call is synchronous, from a thread of our own (never a
// cpprestsdk pool thread), and returns the value or an ApiError: one line
// naming verb and path ("LIST /api/v1/nodes: 410 Expired: ..."), code the
// HTTP status (0: no answer, or an undecodable one). JSON bodies are
// depth-limited before they are parsed.
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
  bool refused = false;       // no answer: connection refused (or host unreachable)
  bool rv_too_large = false;  // ResourceVersionTooLarge: the server is behind the asked resourceVersion
  bool silent = false;        // a watch closed for no byte within WatchOptions::silence

  bool gone() const noexcept { return code == 410; }
  bool not_found() const noexcept { return code == 404; }
  bool conflict() const noexcept { return code == 409; }
  // Worth retrying with backoff: no answer, 429, 5xx.
  bool retriable() const noexcept { return code == 0 || code == 429 || code >= 500; }
};

// The error a v1 Status object describes; message "<what>: <code> <reason>: <message>",
// the Status's texts cut to one line.
ApiError error_from_status(std::string_view what, const nlohmann::json& status);

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
// The collection path plus "/NAME" and "/SUBRESOURCE" when given, escaped.
std::string object_path(const Resource& r, std::string_view ns, std::string_view name,
                        std::string_view subresource = {});

// A metav1.MicroTime: "2026-12-02T21:00:00.123456Z".
std::string format_micro_time(std::chrono::system_clock::time_point t);

// RFC 3986 percent-encoding of all but the unreserved characters.
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
  // Client side, with bookmarks on: no byte for this long closes the stream
  // with a `silent` ApiError (0: off).
  std::chrono::milliseconds silence{0};
  std::string label_selector;
  std::string field_selector;
};

struct WatchEvent {
  enum class Type : std::uint8_t { Added, Modified, Deleted, Bookmark, Error };
  Type type = Type::Error;
  nlohmann::json object;  // for Error: the Status
};

// One open watch. next() blocks until an event (an ERROR event is one), the
// end (nullopt: a clean close, or stop()), or an error. Not thread-safe
// except stop(), which any thread may call and which wakes next() soon.
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
  // A LIST that hands each item to `each` as it is decoded (the page's items
  // stay empty); items handed over before an error stay handed over.
  virtual ApiResult<ListPage> list_each(std::string_view path, const ListOptions& options,
                                        const std::function<void(nlohmann::json&&)>& each) = 0;
  // list_each() with the items gathered into the page.
  ApiResult<ListPage> list(std::string_view path, const ListOptions& options);
  virtual ApiResult<std::unique_ptr<WatchStream>> watch(std::string_view path,
                                                        const WatchOptions& options) = 0;
  // `cancel` abandons a create, patch or apply: nothing is sent once it is
  // stopped, and a wait (rate limit, answer) ends when it is, with a code-0
  // ApiError saying "cancelled".
  virtual ApiResult<nlohmann::json> create(std::string_view path, const nlohmann::json& body,
                                           std::stop_token cancel = {}) = 0;
  virtual ApiResult<nlohmann::json> patch(std::string_view path, PatchType type, const nlohmann::json& body,
                                          std::stop_token cancel = {}) = 0;
  // PUT; a metadata.resourceVersion in `body` makes it conditional (409).
  virtual ApiResult<nlohmann::json> update(std::string_view path, const nlohmann::json& body,
                                           std::chrono::milliseconds timeout) = 0;
  // Server-side apply of `body` (an apply configuration) as `field_manager`;
  // `force` takes fields another manager owns instead of a 409.
  virtual ApiResult<nlohmann::json> apply(std::string_view path, const nlohmann::json& body,
                                          std::string_view field_manager, bool force,
                                          std::chrono::milliseconds timeout, std::stop_token cancel = {}) = 0;
  // DELETE (the server's default propagation); a 404 is the caller's to judge.
  virtual ApiResult<nlohmann::json> remove(std::string_view path, std::chrono::milliseconds timeout) = 0;
};

}  // namespace ig::kube
