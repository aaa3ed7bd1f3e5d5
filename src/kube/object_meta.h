// The one reader of an object's metadata as the API server sends it:
// views into the JSON (valid while the object lives and is not changed).
// Lenient: a member that is absent, null or not of its type reads as empty
// ("", 0, no labels); `present` says whether metadata was an object at all.
// Decoders that must refuse malformed metadata check `present` and the
// fields they require themselves.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ig::kube {

struct ObjectMeta {
  bool present = false;  // metadata is an object
  std::string_view name, namespace_, uid, resource_version;
  std::int64_t generation = 0;
  bool deleting = false;  // deletionTimestamp set
  const nlohmann::json* labels = nullptr;       // an object, or nullptr
  const nlohmann::json* annotations = nullptr;  // an object, or nullptr

  std::string_view label(std::string_view key) const;
  std::string_view annotation(std::string_view key) const;
};

ObjectMeta object_meta(const nlohmann::json& object);

}  // namespace ig::kube
