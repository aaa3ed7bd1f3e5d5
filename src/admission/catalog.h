// An immutable Component catalog: local mode's --components DIR and
// `evaluate`'s single Component. Lookups are O(1) and allocation-free.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "admission/context.h"
#include "base/result.h"

namespace ig::admission {

class StaticCatalog final : public ComponentLookup {
 public:
  // Adds a Component; `default_namespace` is used when it names none.
  // Returns false (and leaves the catalog unchanged) on a duplicate.
  bool add(model::Component component, std::string_view default_namespace);

  LookupResult find(std::string_view ns, std::string_view name) const override;
  std::size_t size() const noexcept { return by_key_.size(); }

  // Loads every Component in every *.yaml, *.yml and *.json file under `dir`
  // (other kinds of document are skipped). Strict: an invalid Component, a
  // duplicate or an unreadable file fails the whole load with a message.
  static Result<StaticCatalog> load_directory(const std::string& dir,
                                                     std::string_view default_namespace);

 private:
  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  static std::string key(std::string_view ns, std::string_view name);
  std::unordered_map<std::string, std::shared_ptr<const model::Component>, KeyHash,
                     std::equal_to<>>
      by_key_;
};

}  // namespace ig::admission
