#include "controller/object_watch.h"

namespace ig::controller {

kube::ReflectorOptions reflector_options(std::string name, const kube::Resource& r, const std::string& ns,
                                         const WatchSettings& settings, std::string field_selector,
                                         std::string label_selector) {
  return {.name = std::move(name),
          .path = kube::collection_path(r, ns),
          .label_selector = std::move(label_selector),
          .field_selector = std::move(field_selector),
          .page_size = settings.page_size,
          .watch_silence = settings.watch_silence,
          .backoff = settings.backoff,
          .log = settings.log};
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
      reflector_(client, store_, reflector_options(std::string(resource.plural) + "/" + name, resource, ns, settings,
                                             "metadata.name=" + name)) {}

}  // namespace ig::controller
