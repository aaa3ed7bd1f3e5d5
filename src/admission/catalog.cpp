#include "admission/catalog.h"

#include <algorithm>
#include <filesystem>

#include "model/document.h"

namespace ig::admission {

std::string StaticCatalog::key(std::string_view ns, std::string_view name) {
  std::string k;
  k.reserve(ns.size() + name.size() + 1);
  k.append(ns).push_back('/');
  k.append(name);
  return k;
}

bool StaticCatalog::add(model::Component component, std::string_view default_namespace) {
  if (component.namespace_.empty()) component.namespace_ = std::string(default_namespace);
  auto k = key(component.namespace_, component.name);
  return by_key_.emplace(std::move(k), std::make_shared<const model::Component>(std::move(component)))
      .second;
}

LookupResult StaticCatalog::find(std::string_view ns, std::string_view name) const {
  // The key "ns/name" on the stack (a namespace is at most 63 bytes, a name
  // 253): the map is looked up by string_view, without allocating.
  char buf[320];
  std::string heap;
  std::string_view k;
  if (ns.size() + name.size() + 1 <= sizeof buf) {
    std::copy_n(ns.data(), ns.size(), buf);
    buf[ns.size()] = '/';
    std::copy_n(name.data(), name.size(), buf + ns.size() + 1);
    k = std::string_view(buf, ns.size() + name.size() + 1);
  } else {
    heap = key(ns, name);
    k = heap;
  }
  auto it = by_key_.find(k);
  if (it == by_key_.end()) return {LookupResult::Status::NotFound, nullptr, {}};
  return {LookupResult::Status::Found, it->second, {}};
}

Result<StaticCatalog> StaticCatalog::load_directory(const std::string& dir,
                                                           std::string_view default_namespace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(dir + ": not a directory");
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto ext = it->path().extension().string();
    if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(it->path());
  }
  if (ec) return fail(dir + ": cannot list: " + ec.message());
  std::sort(files.begin(), files.end());

  StaticCatalog catalog;
  for (const auto& path : files) {
    auto docs = model::load_documents_file(path.string());
    if (!docs) return fail(docs.error());
    std::size_t index = 0;
    for (const auto& doc : *docs) {
      ++index;
      if (!model::looks_like_component(doc)) continue;
      const std::string source =
          docs->size() > 1 ? path.string() + " (document " + std::to_string(index) + ")"
                           : path.string();
      auto component = model::decode_component(doc, source);
      if (!component) return fail(component.error());
      auto problems = model::component_problems(*component, source);
      if (!problems.empty()) return fail(problems.front());
      const std::string name = component->name;
      if (!catalog.add(std::move(component).value(), default_namespace)) {
        return fail(source + ": Component \"" + name + "\" is defined twice");
      }
    }
  }
  return catalog;
}

}  // namespace ig::admission
