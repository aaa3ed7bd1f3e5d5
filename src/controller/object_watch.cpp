#include "controller/object_watch.h"

namespace ig::controller {
namespace {

kube::ReflectorOptions one_object(const kube::Resource& r, const std::string& ns, const std::string& name,
                                  const WatchSettings& s) {
  kube::ReflectorOptions o;
  o.name = std::string(r.plural) + "/" + name;
  o.path = kube::collection_path(r, ns);
  o.field_selector = "metadata.name=" + name;
  o.page_size = 10;
  o.watch_timeout = s.watch_timeout;
  o.backoff = s.backoff;
  o.log = s.log;
  return o;
}

}  // namespace

std::string resource_version_of(const nlohmann::json& object) {
  const auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return {};
  const auto rv = md->find("resourceVersion");
  return rv != md->end() && rv->is_string() ? rv->get<std::string>() : std::string{};
}

ObjectWatch::ObjectWatch(kube::Client& client, const kube::Resource& resource, std::string ns, std::string name,
                         const WatchSettings& settings, std::function<void()> on_change)
    : resource_(resource),
      name_(name),
      key_(kube::object_key(ns, name)),
      store_([](const nlohmann::json& object) -> Result<nlohmann::json> { return object; },
             [this, cb = std::move(on_change)](std::string_view) {
               changes_.fetch_add(1, std::memory_order_acq_rel);
               if (cb) cb();
             }),
      reflector_(client, store_, one_object(resource, ns, name, settings)) {}

}  // namespace ig::controller
