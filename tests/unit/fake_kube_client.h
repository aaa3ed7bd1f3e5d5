// The one fake kube::Client of the unit tests, shaped like client-go's
// k8s.io/client-go/testing (an ObjectTracker behind a Fake with reactors):
//
//  - A tracker of JSON objects by path (collection + "/" + name). Every write
//    bumps one resourceVersion counter (etcd's); create fills uid and
//    creationTimestamp and answers 409 AlreadyExists for a name taken; get,
//    patch, update and delete answer 404 for a missing object; update with a
//    stale metadata.resourceVersion answers 409 Conflict. Patches: merge
//    (RFC 7386) and JSON (RFC 6902); apply is a merge of the apply
//    configuration (no field ownership: no removal of fields no longer
//    applied, no conflicts). A path ending in "/status" writes the object it
//    names. List answers every object of the collection (across namespaces
//    for a path without one; a field selector "metadata.name=X" filters;
//    no pages) at the tracker's resourceVersion.
//  - Push watches: a watch of a collection gets the tracker's own writes
//    (after the resourceVersion it asks for: the history is replayed), and
//    what a test pushes (push(), end_watches()).
//  - Reactors, newest first (prepend_reactor): each sees the Action (verb,
//    path, body, options, the caller's cancel token) and answers (an
//    ApiError, an object, a page, a stream) or falls through (nullopt) to the
//    next one and finally the tracker. A reactor may block (a Gate, a wait on
//    the cancel token) and may call the tracker (track(), put(), find()).
//  - Every call is recorded as an Action before the reactors run.
//
// Thread-safe: calls come from reflector and engine threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kube/api.h"

namespace ig::kube::fake {

using namespace std::chrono_literals;

// One call as the client received it. verb: get, list, watch, create, patch,
// update, apply, delete.
struct Action {
  std::string verb;
  std::string path;
  nlohmann::json body;  // create, patch, update, apply
  PatchType patch_type = PatchType::Merge;
  ListOptions list;
  WatchOptions watch;
  std::chrono::milliseconds timeout{0};  // get, update, apply, delete
  std::string field_manager;             // apply
  bool force = false;                    // apply
  std::stop_token cancel;                // the cancellable calls' token
  // The token was stopped before the call: not sent (no reactor ran),
  // answered "cancelled"; count() and wait_actions() leave it out.
  bool cancelled = false;
};

// What a reactor (or the tracker) answers: one of an error, an object (get,
// create, patch, update, apply, delete), a page (list), a stream (watch).
struct Reply {
  Reply(ApiError e) : error(std::move(e)) {}             // NOLINT(google-explicit-constructor)
  Reply(nlohmann::json o) : object(std::move(o)) {}      // NOLINT(google-explicit-constructor)
  Reply(ListPage p) : page(std::move(p)) {}              // NOLINT(google-explicit-constructor)
  Reply(std::unique_ptr<WatchStream> s) : stream(std::move(s)) {}  // NOLINT(google-explicit-constructor)
  Reply(ApiResult<nlohmann::json> r) {  // NOLINT(google-explicit-constructor)
    if (r) object = std::move(*r);
    else error = r.failure();
  }
  std::optional<ApiError> error;
  nlohmann::json object;
  ListPage page;
  std::unique_ptr<WatchStream> stream;
};
using Reactor = std::function<std::optional<Reply>(const Action&)>;

// "VERB PATH: CODE REASON" with that code and reason.
ApiError api_error(std::string_view verb, std::string_view path, int code, std::string reason = {},
                   std::chrono::seconds retry_after = 0s);

// A door a reactor waits at (a call in flight, a hung server): closed until
// open(); wait() ends when it is open, `cancel` is stopped or `limit` passes
// (bounded), and says whether it was opened.
class Gate {
 public:
  explicit Gate(bool open = false) : open_(open) {}
  void open();
  void close();
  bool wait(std::stop_token cancel = {}, std::chrono::milliseconds limit = 10s);

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool open_;
};

// A stream of scripted steps (events, errors) that ends after the last one
// (nullopt), as a server closing the watch.
std::unique_ptr<WatchStream> scripted_stream(std::vector<ApiResult<std::optional<WatchEvent>>> steps);

// The objects, their history and the open watches: one per FakeClient, or
// shared by several (replicas of a controller, each with its own reactors
// and record, against one API server).
struct Tracker;

class FakeClient final : public Client {
 public:
  explicit FakeClient(std::shared_ptr<Tracker> tracker = nullptr);
  std::shared_ptr<Tracker> tracker() const { return t_; }
  ~FakeClient() override;

  // --- reactors and the record -------------------------------------------
  // `verb` "*" or one verb; `path` "" or a substring the action's path contains.
  void prepend_reactor(std::string verb, std::string path, Reactor fn);
  std::vector<Action> actions(std::string_view verb = "*", std::string_view path = {}) const;
  std::size_t count(std::string_view verb = "*", std::string_view path = {}) const;
  // Waits (bounded) until `n` matching actions were recorded.
  bool wait_actions(std::size_t n, std::string_view verb = "*", std::string_view path = {},
                    std::chrono::milliseconds limit = 10s) const;

  // --- the tracker ---------------------------------------------------------
  // The tracker's answer to `a`, without reactors or record.
  Reply track(const Action& a);
  // Stores `obj` in `collection` (a new resourceVersion unless `keep_version`
  // and it has one) and tells the watches (ADDED or MODIFIED).
  nlohmann::json put(std::string_view collection, nlohmann::json obj, bool keep_version = false);
  // Removes the object (no action recorded: a garbage collector, a TTL) and
  // tells the watches (DELETED).
  void erase(std::string_view object_path);
  std::optional<nlohmann::json> find(std::string_view object_path) const;
  std::vector<nlohmann::json> objects(std::string_view collection) const;
  // Runs under the tracker's lock after every write (invariant checks; it
  // may call find()).
  void on_change(std::function<void()> fn);
  // Waits (bounded) until `pred` holds, checked under the tracker's lock
  // after every write and action.
  bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds limit = 20s) const;

  // --- watches -------------------------------------------------------------
  // Waits (bounded) for an open watch of `collection`, then delivers `e` to
  // every one; ADDED and MODIFIED objects are stored as given, DELETED ones
  // removed (no new resourceVersion: the test says what the server sent).
  bool push(std::string_view collection, WatchEvent e);
  // Ends the open watches of `collection`: cleanly, or with `error`.
  void end_watches(std::string_view collection, std::optional<ApiError> error = std::nullopt);

  // --- Client ----------------------------------------------------------------
  ApiResult<nlohmann::json> get(std::string_view path, std::chrono::milliseconds timeout) override;
  ApiResult<ListPage> list_each(std::string_view path, const ListOptions& options,
                                const std::function<void(nlohmann::json&&)>& each) override;
  ApiResult<std::unique_ptr<WatchStream>> watch(std::string_view path, const WatchOptions& options) override;
  ApiResult<nlohmann::json> create(std::string_view path, const nlohmann::json& body,
                                   std::stop_token cancel = {}) override;
  ApiResult<nlohmann::json> patch(std::string_view path, PatchType type, const nlohmann::json& body,
                                  std::stop_token cancel = {}) override;
  ApiResult<nlohmann::json> update(std::string_view path, const nlohmann::json& body,
                                   std::chrono::milliseconds timeout) override;
  ApiResult<nlohmann::json> apply(std::string_view path, const nlohmann::json& body, std::string_view field_manager,
                                  bool force, std::chrono::milliseconds timeout, std::stop_token cancel) override;
  ApiResult<nlohmann::json> remove(std::string_view path, std::chrono::milliseconds timeout) override;

  struct Channel;  // a watch's queue (fake_kube_client.cpp)

 private:
  Reply dispatch(Action a);
  ApiResult<nlohmann::json> object_of(Action a);
  nlohmann::json store_locked(const std::string& collection, nlohmann::json obj, WatchEvent::Type type,
                              bool keep_version);
  void notify_locked(const std::string& collection, const std::string& name, const WatchEvent& e);

  std::shared_ptr<Tracker> t_;  // its mutex guards the reactors and the record too
  std::vector<std::tuple<std::string, std::string, Reactor>> reactors_;  // newest first
  std::vector<Action> actions_;
};

}  // namespace ig::kube::fake
