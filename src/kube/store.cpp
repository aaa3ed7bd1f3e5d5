#include "kube/store.h"

namespace ig::kube {

std::string object_key(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key;
  key.reserve(ns.size() + name.size() + 1);
  key.append(ns).push_back('/');
  key.append(name);
  return key;
}

std::string object_key(const nlohmann::json& object) {
  if (!object.is_object()) return {};
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  auto name = meta->find("name");
  if (name == meta->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return {};
  }
  auto ns = meta->find("namespace");
  const std::string empty;
  const std::string& ns_text =
      ns != meta->end() && ns->is_string() ? ns->get_ref<const std::string&>() : empty;
  return object_key(ns_text, name->get_ref<const std::string&>());
}

}  // namespace ig::kube
