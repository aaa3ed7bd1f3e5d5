#include "kube/store.h"

#include "kube/object_meta.h"

namespace ig::kube {

std::string object_key(std::string_view ns, std::string_view name) {
  std::string key;
  key.reserve(ns.size() + 1 + name.size());
  if (!ns.empty()) key.append(ns).push_back('/');
  return key.append(name);
}

std::string object_key(const nlohmann::json& object) {
  const ObjectMeta m = object_meta(object);
  return m.name.empty() ? std::string() : object_key(m.namespace_, m.name);
}

}  // namespace ig::kube
