#include "fake_kube_client.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>

namespace ig::kube::fake {
namespace {

using json = nlohmann::json;

const char* http_verb(std::string_view verb) {
  if (verb == "create") return "POST";
  if (verb == "update") return "PUT";
  if (verb == "apply" || verb == "patch") return "PATCH";
  if (verb == "delete") return "DELETE";
  if (verb == "list") return "LIST";
  if (verb == "watch") return "WATCH";
  return "GET";
}

// "/api/v1/namespaces/NS/pods" -> "/api/v1/pods": what a list across
// namespaces covers. Other paths unchanged.
std::string across_namespaces(std::string_view collection) {
  const auto at = collection.find("/namespaces/");
  if (at == std::string_view::npos) return std::string(collection);
  const auto ns_end = collection.find('/', at + 12);
  if (ns_end == std::string_view::npos) return std::string(collection);
  return std::string(collection.substr(0, at)) + std::string(collection.substr(ns_end));
}

bool covers(std::string_view watched, const std::string& collection) {
  return watched == collection || watched == across_namespaces(collection);
}

std::string selected_name(const std::string& selector) {
  const std::string prefix = "metadata.name=";
  return selector.rfind(prefix, 0) == 0 ? selector.substr(prefix.size()) : std::string{};
}

// The object a path names (a "/status" subresource: its object), as
// collection and name.
std::pair<std::string, std::string> split(std::string_view path) {
  if (path.size() > 7 && path.substr(path.size() - 7) == "/status") path.remove_suffix(7);
  const auto slash = path.rfind('/');
  return {std::string(path.substr(0, slash)), std::string(path.substr(slash + 1))};
}

std::uint64_t version_of(const json& obj) {  // 0: none or not a number
  const json rv = obj.contains("metadata") ? obj["metadata"].value("resourceVersion", json()) : json();
  const std::string s = rv.is_string() ? rv.get<std::string>() : "";
  return !s.empty() && s.size() < 20 && s.find_first_not_of("0123456789") == std::string::npos ? std::stoull(s) : 0;
}

}  // namespace

ApiError api_error(std::string_view verb, std::string_view path, int code, std::string reason,
                   std::chrono::seconds retry_after) {
  ApiError e;
  e.message = std::string(http_verb(verb)) + " " + std::string(path) + ": " + std::to_string(code) + " " + reason;
  e.code = code;
  e.reason = std::move(reason);
  e.retry_after = retry_after;
  return e;
}

void Gate::open() {
  std::lock_guard lock(mu_);
  open_ = true;
  cv_.notify_all();
}
void Gate::close() {
  std::lock_guard lock(mu_);
  open_ = false;
}
bool Gate::wait(std::stop_token cancel, std::chrono::milliseconds limit) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, cancel, limit, [&] { return open_; });
}

// A watch's queue of steps: shared by the stream its caller owns and the
// fake that pushes into it.
struct FakeClient::Channel {
  std::string collection, name;  // name: the field selector's, "" for all
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ApiResult<std::optional<WatchEvent>>> steps;
  bool ended = false, stopped = false;

  void add(ApiResult<std::optional<WatchEvent>> step) {
    std::lock_guard lock(mu);
    steps.push_back(std::move(step));
    cv.notify_all();
  }
  void end(std::optional<ApiError> error) {
    std::lock_guard lock(mu);
    if (error) steps.push_back(*error);
    ended = true;
    cv.notify_all();
  }
  bool open() {
    std::lock_guard lock(mu);
    return !ended && !stopped;
  }
};

namespace {

class ChannelStream final : public WatchStream {
 public:
  explicit ChannelStream(std::shared_ptr<FakeClient::Channel> c) : c_(std::move(c)) {}
  ~ChannelStream() override { stop(); }
  ApiResult<std::optional<WatchEvent>> next() override {
    std::unique_lock lock(c_->mu);
    c_->cv.wait(lock, [&] { return c_->stopped || c_->ended || !c_->steps.empty(); });
    if (c_->stopped || c_->steps.empty()) return std::optional<WatchEvent>{};
    auto step = std::move(c_->steps.front());
    c_->steps.pop_front();
    return step;
  }
  void stop() noexcept override {
    std::lock_guard lock(c_->mu);
    c_->stopped = true;
    c_->cv.notify_all();
  }

 private:
  std::shared_ptr<FakeClient::Channel> c_;
};

}  // namespace

std::unique_ptr<WatchStream> scripted_stream(std::vector<ApiResult<std::optional<WatchEvent>>> steps) {
  auto c = std::make_shared<FakeClient::Channel>();
  for (auto& s : steps) c->steps.push_back(std::move(s));
  c->ended = true;
  return std::make_unique<ChannelStream>(std::move(c));
}

struct Tracker {
  struct Change {
    std::string collection, name;
    std::uint64_t rv;
    WatchEvent event;
  };
  std::recursive_mutex mu;
  std::condition_variable_any cv;
  std::uint64_t rv = 100;
  std::map<std::string, std::map<std::string, json>> objects;  // collection -> name -> object
  std::vector<Change> history;
  std::vector<std::shared_ptr<FakeClient::Channel>> channels;
  std::function<void()> on_change;

  ~Tracker() {
    for (auto& c : channels) c->end(std::nullopt);
  }
};

FakeClient::FakeClient(std::shared_ptr<Tracker> tracker)
    : t_(tracker ? std::move(tracker) : std::make_shared<Tracker>()) {}
FakeClient::~FakeClient() = default;

void FakeClient::prepend_reactor(std::string verb, std::string path, Reactor fn) {
  std::lock_guard lock(t_->mu);
  reactors_.insert(reactors_.begin(), {std::move(verb), std::move(path), std::move(fn)});
}

namespace {
bool matches(const Action& a, std::string_view verb, std::string_view path) {
  return !a.cancelled && (verb == "*" || a.verb == verb) && a.path.find(path) != std::string::npos;
}
}  // namespace

std::vector<Action> FakeClient::actions(std::string_view verb, std::string_view path) const {
  std::lock_guard lock(t_->mu);
  std::vector<Action> out;
  for (const auto& a : actions_)
    if ((verb == "*" || a.verb == verb) && a.path.find(path) != std::string::npos) out.push_back(a);
  return out;
}

std::size_t FakeClient::count(std::string_view verb, std::string_view path) const {
  std::lock_guard lock(t_->mu);
  return static_cast<std::size_t>(
      std::count_if(actions_.begin(), actions_.end(), [&](const Action& a) { return matches(a, verb, path); }));
}

bool FakeClient::wait_actions(std::size_t n, std::string_view verb, std::string_view path,
                              std::chrono::milliseconds limit) const {
  return wait_for([&] { return count(verb, path) >= n; }, limit);
}

bool FakeClient::wait_for(const std::function<bool()>& pred, std::chrono::milliseconds limit) const {
  std::unique_lock lock(t_->mu);
  return t_->cv.wait_for(lock, limit, pred);
}

void FakeClient::on_change(std::function<void()> fn) {
  std::lock_guard lock(t_->mu);
  t_->on_change = std::move(fn);
}

std::optional<json> FakeClient::find(std::string_view object_path) const {
  std::lock_guard lock(t_->mu);
  const auto [collection, name] = split(object_path);
  auto c = t_->objects.find(collection);
  if (c == t_->objects.end()) return std::nullopt;
  auto o = c->second.find(name);
  if (o == c->second.end()) return std::nullopt;
  return o->second;
}

void FakeClient::erase(std::string_view object_path) {
  std::lock_guard lock(t_->mu);
  const auto [collection, name] = split(object_path);
  auto c = t_->objects.find(collection);
  if (c == t_->objects.end() || !c->second.count(name)) return;
  store_locked(collection, c->second[name], WatchEvent::Type::Deleted, false);
}

std::vector<json> FakeClient::objects(std::string_view collection) const {
  std::lock_guard lock(t_->mu);
  std::vector<json> out;
  for (const auto& [coll, by_name] : t_->objects)
    if (covers(collection, coll))
      for (const auto& [_, o] : by_name) out.push_back(o);
  return out;
}

json FakeClient::put(std::string_view collection, json obj, bool keep_version) {
  std::lock_guard lock(t_->mu);
  const bool exists = t_->objects[std::string(collection)].count(obj["metadata"].value("name", "")) != 0;
  return store_locked(std::string(collection), std::move(obj),
                      exists ? WatchEvent::Type::Modified : WatchEvent::Type::Added, keep_version);
}

json FakeClient::store_locked(const std::string& collection, json obj, WatchEvent::Type type, bool keep_version) {
  std::uint64_t rv = keep_version ? version_of(obj) : 0;
  if (rv == 0) {
    rv = ++t_->rv;
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
  } else {
    t_->rv = std::max(t_->rv, rv);
  }
  const std::string name = obj["metadata"].value("name", "");
  if (type == WatchEvent::Type::Deleted) {
    t_->objects[collection].erase(name);
  } else {
    t_->objects[collection][name] = obj;
  }
  t_->history.push_back({collection, name, rv, {type, obj}});
  notify_locked(collection, name, t_->history.back().event);
  if (t_->on_change) t_->on_change();
  return obj;
}

void FakeClient::notify_locked(const std::string& collection, const std::string& name, const WatchEvent& e) {
  std::erase_if(t_->channels, [](const auto& c) { return !c->open(); });
  for (auto& c : t_->channels)
    if (covers(c->collection, collection) && (c->name.empty() || c->name == name)) c->add(std::optional<WatchEvent>(e));
  t_->cv.notify_all();
}

bool FakeClient::push(std::string_view collection, WatchEvent e) {
  std::unique_lock lock(t_->mu);
  const std::string coll(collection);
  auto open = [&] {
    return std::any_of(t_->channels.begin(), t_->channels.end(),
                       [&](const auto& c) { return c->collection == coll && c->open(); });
  };
  if (!t_->cv.wait_for(lock, 10s, open)) return false;
  const std::string name = e.object.contains("metadata") ? e.object["metadata"].value("name", "") : "";
  if (e.type == WatchEvent::Type::Added || e.type == WatchEvent::Type::Modified) t_->objects[coll][name] = e.object;
  if (e.type == WatchEvent::Type::Deleted) t_->objects[coll].erase(name);
  t_->rv = std::max(t_->rv, version_of(e.object));
  notify_locked(coll, name, e);
  return true;
}

void FakeClient::end_watches(std::string_view collection, std::optional<ApiError> error) {
  std::lock_guard lock(t_->mu);
  for (auto& c : t_->channels)
    if (c->collection == collection) c->end(error);
}

Reply FakeClient::dispatch(Action a) {
  std::vector<Reactor> chain;
  {
    std::lock_guard lock(t_->mu);
    actions_.push_back(a);
    t_->cv.notify_all();
    for (const auto& [verb, path, fn] : reactors_)
      if (matches(a, verb, path)) chain.push_back(fn);
  }
  for (const auto& fn : chain)
    if (auto r = fn(a)) return std::move(*r);
  return track(a);
}

Reply FakeClient::track(const Action& a) {
  std::lock_guard lock(t_->mu);
  auto fail = [&](int code, std::string reason) { return Reply(api_error(a.verb, a.path, code, std::move(reason))); };
  if (a.verb == "list") {
    ListPage page;
    const std::string want = selected_name(a.list.field_selector);
    for (const auto& [coll, by_name] : t_->objects)
      if (covers(a.path, coll))
        for (const auto& [name, o] : by_name)
          if (want.empty() || want == name) page.items.push_back(o);
    page.resource_version = std::to_string(t_->rv);
    return page;
  }
  if (a.verb == "watch") {
    auto c = std::make_shared<Channel>();
    c->collection = a.path;
    c->name = selected_name(a.watch.field_selector);
    const std::uint64_t after = version_of({{"metadata", {{"resourceVersion", a.watch.resource_version}}}});
    if (after != 0) {  // as the API server: the events after it
      for (const auto& h : t_->history)
        if (covers(a.path, h.collection) && h.rv > after && (c->name.empty() || c->name == h.name))
          c->steps.push_back(std::optional<WatchEvent>(h.event));
    }
    t_->channels.push_back(c);
    t_->cv.notify_all();
    return std::unique_ptr<WatchStream>(std::make_unique<ChannelStream>(std::move(c)));
  }
  if (a.verb == "create") {
    json obj = a.body;
    std::string name = obj["metadata"].value("name", "");
    if (name.empty()) name = obj["metadata"].value("generateName", "") + std::to_string(t_->rv + 1);
    obj["metadata"]["name"] = name;
    if (t_->objects[a.path].count(name)) return fail(409, "AlreadyExists");
    if (!obj["metadata"].contains("uid")) obj["metadata"]["uid"] = "uid-" + std::to_string(t_->rv + 1);
    if (!obj["metadata"].contains("creationTimestamp")) obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z";
    return store_locked(a.path, std::move(obj), WatchEvent::Type::Added, false);
  }
  const auto [collection, name] = split(a.path);
  auto& by_name = t_->objects[collection];
  auto it = by_name.find(name);
  if (it == by_name.end()) {
    if (a.verb != "apply") return fail(404, "NotFound");
    json obj = a.body;  // apply creates
    return store_locked(collection, std::move(obj), WatchEvent::Type::Added, false);
  }
  if (a.verb == "get") return it->second;
  if (a.verb == "delete") return store_locked(collection, it->second, WatchEvent::Type::Deleted, false);
  json obj = it->second;
  if (a.verb == "update") {
    const json sent = a.body.contains("metadata") ? a.body["metadata"].value("resourceVersion", json()) : json();
    if (sent.is_string() && sent != obj["metadata"]["resourceVersion"]) return fail(409, "Conflict");
    obj = a.body;
  } else {
    try {
      if (a.verb == "patch" && a.patch_type == PatchType::Json) {
        obj = obj.patch(a.body);
      } else {
        obj.merge_patch(a.body);  // patch (merge) and apply
      }
    } catch (const std::exception&) {
      return fail(422, "Invalid");
    }
  }
  return store_locked(collection, std::move(obj), WatchEvent::Type::Modified, false);
}

ApiResult<json> FakeClient::object_of(Action a) {
  if (a.cancel.stop_requested()) {  // never sent
    std::lock_guard lock(t_->mu);
    a.cancelled = true;
    actions_.push_back(a);
    t_->cv.notify_all();
    ApiError e = api_error(a.verb, a.path, 0, "Cancelled");
    e.message = std::string(http_verb(a.verb)) + " " + a.path + ": cancelled";
    return e;
  }
  Reply r = dispatch(std::move(a));
  if (r.error) return *r.error;
  return std::move(r.object);
}

namespace {
Action act(std::string verb, std::string_view path, json body = nullptr, std::stop_token cancel = {},
           std::chrono::milliseconds timeout = {}) {
  Action a;
  a.verb = std::move(verb);
  a.path = std::string(path);
  a.body = std::move(body);
  a.cancel = std::move(cancel);
  a.timeout = timeout;
  return a;
}
}  // namespace

ApiResult<json> FakeClient::get(std::string_view path, std::chrono::milliseconds timeout) {
  return object_of(act("get", path, nullptr, {}, timeout));
}

ApiResult<ListPage> FakeClient::list_each(std::string_view path, const ListOptions& options,
                                          const std::function<void(json&&)>& each) {
  Action a = act("list", path);
  a.list = options;
  Reply r = dispatch(std::move(a));
  if (r.error) return *r.error;
  for (auto& item : r.page.items) each(std::move(item));
  r.page.items = json::array();
  return std::move(r.page);
}

ApiResult<std::unique_ptr<WatchStream>> FakeClient::watch(std::string_view path, const WatchOptions& options) {
  Action a = act("watch", path);
  a.watch = options;
  Reply r = dispatch(std::move(a));
  if (r.error) return *r.error;
  return std::move(r.stream);
}

ApiResult<json> FakeClient::create(std::string_view path, const json& body, std::stop_token cancel) {
  return object_of(act("create", path, body, std::move(cancel)));
}

ApiResult<json> FakeClient::patch(std::string_view path, PatchType type, const json& body, std::stop_token cancel) {
  Action a = act("patch", path, body, std::move(cancel));
  a.patch_type = type;
  return object_of(std::move(a));
}

ApiResult<json> FakeClient::update(std::string_view path, const json& body, std::chrono::milliseconds timeout) {
  return object_of(act("update", path, body, {}, timeout));
}

ApiResult<json> FakeClient::apply(std::string_view path, const json& body, std::string_view field_manager, bool force,
                                  std::chrono::milliseconds timeout, std::stop_token cancel) {
  Action a = act("apply", path, body, std::move(cancel), timeout);
  a.field_manager = std::string(field_manager);
  a.force = force;
  return object_of(std::move(a));
}

ApiResult<json> FakeClient::remove(std::string_view path, std::chrono::milliseconds timeout) {
  return object_of(act("delete", path, nullptr, {}, timeout));
}

}  // namespace ig::kube::fake
