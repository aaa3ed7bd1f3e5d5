#include "kube/object_meta.h"

namespace ig::kube {
namespace {

using nlohmann::json;

std::string_view string_in(const json& object, std::string_view key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>())
                                                : std::string_view();
}

const json* object_in(const json& object, std::string_view key) {
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? &*it : nullptr;
}

}  // namespace

std::string_view ObjectMeta::label(std::string_view key) const { return labels ? string_in(*labels, key) : ""; }

std::string_view ObjectMeta::annotation(std::string_view key) const {
  return annotations ? string_in(*annotations, key) : "";
}

ObjectMeta object_meta(const json& object) {
  ObjectMeta m;
  const json* md = object.is_object() ? object_in(object, "metadata") : nullptr;
  if (!md) return m;
  m.present = true;
  m.name = string_in(*md, "name");
  m.namespace_ = string_in(*md, "namespace");
  m.uid = string_in(*md, "uid");
  m.resource_version = string_in(*md, "resourceVersion");
  if (auto g = md->find("generation"); g != md->end() && g->is_number_integer()) m.generation = g->get<std::int64_t>();
  if (auto d = md->find("deletionTimestamp"); d != md->end() && !d->is_null()) m.deleting = true;
  m.labels = object_in(*md, "labels");
  m.annotations = object_in(*md, "annotations");
  return m;
}

}  // namespace ig::kube
