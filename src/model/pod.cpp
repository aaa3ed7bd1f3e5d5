#include "model/pod.h"

#include <type_traits>

#include "base/quote.h"
#include "model/document.h"

namespace ig::model {
namespace {

using json = nlohmann::json;

struct KindInfo {
  std::string_view kind;
  std::string_view api_version;
  ObjectKind value;
  std::string_view pointer;
  std::string_view field_path;
};

constexpr KindInfo kKinds[] = {
    {"Pod", "v1", ObjectKind::Pod, "", ""},
    {"Deployment", "apps/v1", ObjectKind::Deployment, "/spec/template", "spec.template"},
    {"StatefulSet", "apps/v1", ObjectKind::StatefulSet, "/spec/template", "spec.template"},
    {"DaemonSet", "apps/v1", ObjectKind::DaemonSet, "/spec/template", "spec.template"},
    {"ReplicaSet", "apps/v1", ObjectKind::ReplicaSet, "/spec/template", "spec.template"},
    {"Job", "batch/v1", ObjectKind::Job, "/spec/template", "spec.template"},
    {"CronJob", "batch/v1", ObjectKind::CronJob, "/spec/jobTemplate/spec/template",
     "spec.jobTemplate.spec.template"},
};

// A field's path for messages ("spec.containers[0].image"), built only when
// a message needs it: reading a pod names dozens of fields and almost never
// fails, so the happy path allocates no path strings.
class FieldPath {
 public:
  explicit FieldPath(std::string_view root) : leaf_(root) {}
  FieldPath(const FieldPath& parent, std::string_view member) : parent_(&parent), leaf_(member) {}
  FieldPath(const FieldPath& parent, std::size_t index)
      : parent_(&parent), index_(index), kind_(Kind::Index) {}
  // parent[key]: a label or annotation key.
  static FieldPath key(const FieldPath& parent, std::string_view key) {
    FieldPath p(parent, key);
    p.kind_ = Kind::Key;
    return p;
  }

  std::string str() const {
    std::string out = parent_ ? parent_->str() : std::string();
    switch (kind_) {
      case Kind::Member:
        if (!out.empty() && !leaf_.empty()) out.push_back('.');
        out.append(leaf_);
        break;
      case Kind::Index: out.append("[").append(std::to_string(index_)).append("]"); break;
      case Kind::Key: out.append("[").append(leaf_).append("]"); break;
    }
    return out;
  }

 private:
  enum class Kind { Member, Index, Key };
  const FieldPath* parent_ = nullptr;
  std::string_view leaf_;
  std::size_t index_ = 0;
  Kind kind_ = Kind::Member;
};

std::string field_error(std::string_view source, std::string_view path, std::string_view expected,
                        const json& got) {
  std::string out(source);
  out.append(": ").append(path).append(": expected ").append(expected).append(", got ");
  out.append(json_type_phrase(got));
  return out;
}

std::string field_error(std::string_view source, const FieldPath& path, std::string_view expected,
                        const json& got) {
  return field_error(source, std::string_view(path.str()), expected, got);
}

std::string join_path(std::string_view base, std::string_view leaf) {
  if (base.empty()) return std::string(leaf);
  std::string out(base);
  out.push_back('.');
  out.append(leaf);
  return out;
}

// Member `key` of `parent` when it is a map; nullptr when absent or null.
// Sets `error` when present with another type.
template <typename Json>
Json* map_member(Json& parent, std::string_view key, const FieldPath& where,
                 std::string_view source, std::string& error) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return nullptr;
  if (!it->is_object()) {
    error = field_error(source, FieldPath(where, key), "a map", *it);
    return nullptr;
  }
  return &*it;
}

// `where` is the parent's path; the member's is where.key. A label or
// annotation key is named as parent[key] (`subscript`). `Json` is const
// json (read_pod_facts: the string is copied) or json (take_pod_facts: it is
// moved out, the member left an empty string).
template <typename Json>
bool read_optional_string(Json& parent, std::string_view key, const FieldPath& where,
                          std::string_view source, std::optional<std::string>& out,
                          std::string& error, bool subscript = false) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return true;
  if (!it->is_string()) {
    error = field_error(source, subscript ? FieldPath::key(where, key) : FieldPath(where, key),
                        "a string", *it);
    return false;
  }
  if constexpr (std::is_const_v<Json>) {
    out = it->template get<std::string>();
  } else {
    out = std::move(it->template get_ref<std::string&>());
  }
  return true;
}

bool read_optional_bool(const json& parent, std::string_view key, const FieldPath& where,
                        std::string_view source, bool& out, std::string& error) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    error = field_error(source, FieldPath(where, key), "a boolean", *it);
    return false;
  }
  out = it->get<bool>();
  return true;
}

// One container list (containers, initContainers, ephemeralContainers): the
// privileged ones into `out`, every one with its image into `images`.
template <typename Json>
bool read_containers(Json& spec, std::string_view list_key, std::string_view prefix,
                     const FieldPath& spec_path, std::string_view source,
                     std::vector<std::string>& out, std::vector<ContainerImage>& images,
                     std::string& error) {
  auto it = spec.find(list_key);
  if (it == spec.end() || it->is_null()) return true;
  const FieldPath list_path(spec_path, list_key);
  if (!it->is_array()) {
    error = field_error(source, list_path, "a list", *it);
    return false;
  }
  std::size_t index = 0;
  for (auto& container : *it) {
    const FieldPath item_path(list_path, index++);
    if (!container.is_object()) {
      error = field_error(source, item_path, "a map", container);
      return false;
    }
    Json* sc = map_member(container, "securityContext", item_path, source, error);
    if (!error.empty()) return false;
    bool privileged = false;
    if (sc != nullptr &&
        !read_optional_bool(*sc, "privileged", FieldPath(item_path, "securityContext"), source,
                            privileged, error)) {
      return false;
    }
    std::optional<std::string> name;
    ContainerImage entry;
    if (!read_optional_string(container, "name", item_path, source, name, error) ||
        !read_optional_string(container, "image", item_path, source, entry.image, error)) {
      return false;
    }
    if (name && prefix.empty()) {
      entry.name = std::move(*name);  // the usual container: its name as it is
    } else {
      entry.name.reserve(prefix.size() + (name ? name->size() : 8));
      entry.name.append(prefix);
      if (name) {
        entry.name += *name;
      } else {
        entry.name += "#" + std::to_string(index - 1);
      }
    }
    if (privileged) out.push_back(entry.name);
    images.push_back(std::move(entry));
  }
  return true;
}

}  // namespace

std::string_view to_string(ObjectKind k) noexcept {
  for (const auto& info : kKinds)
    if (info.value == k) return info.kind;
  return "Pod";
}

Result<PodLocation> locate_pod(const json& object, std::string_view source) {
  const std::string src(source);
  if (!object.is_object()) return fail(field_error(source, "object", "a map", object));
  auto kind_it = object.find("kind");
  if (kind_it == object.end() || !kind_it->is_string()) {
    return fail(src + ": kind: expected one of Pod, Deployment, StatefulSet, DaemonSet, "
                      "ReplicaSet, Job, CronJob");
  }
  const auto& kind = kind_it->get_ref<const std::string&>();
  for (const auto& info : kKinds) {
    if (kind != info.kind) continue;
    auto api = object.find("apiVersion");
    if (api != object.end() &&
        !(api->is_string() && api->get_ref<const std::string&>() == info.api_version)) {
      return fail(src + ": apiVersion: expected " + std::string(info.api_version) + " for kind " +
                  kind);
    }
    PodLocation where{info.value, &object, std::string(info.pointer),
                      std::string(info.field_path)};
    if (!info.pointer.empty()) {
      const json* node = &object;
      std::string path;
      std::string_view rest = info.field_path;
      while (!rest.empty()) {
        auto dot = rest.find('.');
        std::string_view key = rest.substr(0, dot);
        path = join_path(path, key);
        auto it = node->find(key);
        if (it == node->end() || it->is_null()) {
          return fail(src + ": " + path + ": required for kind " + kind);
        }
        if (!it->is_object()) return fail(field_error(source, path, "a map", *it));
        node = &*it;
        rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
      }
      where.pod = node;
    }
    return where;
  }
  return fail(src + ": kind: " + quote(kind) +
              " is not a pod or workload; expected one of Pod, Deployment, StatefulSet, "
              "DaemonSet, ReplicaSet, Job, CronJob");
}

namespace {

// read_pod_facts() (Json = const json) and take_pod_facts() (Json = json).
template <typename Json>
Result<PodFacts> pod_facts(Json& object, Json& pod, const PodLocation& where, std::string_view source) {
  PodFacts facts;
  facts.kind = where.kind;
  std::string error;

  // The object's own name and namespace (for a workload, the workload's).
  const FieldPath top("");
  if (Json* meta = map_member(object, "metadata", top, source, error)) {
    const FieldPath meta_path(top, "metadata");
    std::optional<std::string> name, generate_name, ns;
    if (!read_optional_string(*meta, "name", meta_path, source, name, error) ||
        !read_optional_string(*meta, "generateName", meta_path, source, generate_name, error) ||
        !read_optional_string(*meta, "namespace", meta_path, source, ns, error)) {
      return fail(error);
    }
    if (name && !name->empty()) {
      facts.object_name = std::move(*name);
    } else if (generate_name && !generate_name->empty()) {
      facts.object_name = std::move(*generate_name);
      facts.object_name.push_back('*');
    }
    if (ns) facts.namespace_ = std::move(*ns);
  }
  if (!error.empty()) return fail(error);

  const FieldPath pod_path(where.field_path);
  Json* pod_meta = map_member(pod, "metadata", pod_path, source, error);
  if (!error.empty()) return fail(error);
  if (pod_meta != nullptr) {
    facts.has_metadata = true;
    const FieldPath meta_path(pod_path, "metadata");
    if (Json* labels = map_member(*pod_meta, "labels", meta_path, source, error)) {
      if (!read_optional_string(*labels, kComponentLabel, FieldPath(meta_path, "labels"), source,
                                facts.component, error, /*subscript=*/true)) {
        return fail(error);
      }
    }
    if (!error.empty()) return fail(error);
    if (Json* annotations = map_member(*pod_meta, "annotations", meta_path, source, error)) {
      facts.has_annotations = true;
      if (!read_optional_string(*annotations, kIsolationAnnotation, FieldPath(meta_path, "annotations"),
                                source, facts.isolation_annotation, error, /*subscript=*/true)) {
        return fail(error);
      }
    }
    if (!error.empty()) return fail(error);
  }

  Json* spec = map_member(pod, "spec", pod_path, source, error);
  if (!error.empty()) return fail(error);
  const FieldPath spec_path(pod_path, "spec");
  if (spec == nullptr) return fail(std::string(source) + ": " + spec_path.str() + ": required");
  if (!read_optional_string(*spec, "runtimeClassName", spec_path, source, facts.runtime_class, error) ||
      !read_optional_bool(*spec, "hostNetwork", spec_path, source, facts.host_network, error) ||
      !read_optional_bool(*spec, "hostPID", spec_path, source, facts.host_pid, error) ||
      !read_optional_bool(*spec, "hostIPC", spec_path, source, facts.host_ipc, error) ||
      !read_containers(*spec, "containers", "", spec_path, source, facts.privileged_containers,
                       facts.containers, error) ||
      !read_containers(*spec, "initContainers", "init:", spec_path, source,
                       facts.privileged_containers, facts.containers, error) ||
      !read_containers(*spec, "ephemeralContainers", "ephemeral:", spec_path, source,
                       facts.privileged_containers, facts.containers, error)) {
    return fail(error);
  }
  return facts;
}

}  // namespace

Result<PodFacts> read_pod_facts(const json& object, const PodLocation& where,
                                std::string_view source) {
  return pod_facts(object, *where.pod, where, source);
}

Result<PodFacts> take_pod_facts(json& object, const PodLocation& where, std::string_view source) {
  // where.pod points into `object` (locate_pod's contract), which is not
  // const here: the const_cast only gives back what locate_pod took.
  return pod_facts(object, const_cast<json&>(*where.pod), where, source);
}

namespace {

Projection pod_spec_projection() {
  auto container = Projection::array(Projection::object({
      {"name", Projection::whole()},
      {"image", Projection::whole()},
      {"securityContext", Projection::object({{"privileged", Projection::whole()}})},
  }));
  return Projection::object({
      {"runtimeClassName", Projection::whole()},
      {"hostNetwork", Projection::whole()},
      {"hostPID", Projection::whole()},
      {"hostIPC", Projection::whole()},
      {"containers", container},
      {"initContainers", container},
      {"ephemeralContainers", container},
  });
}

Projection metadata_projection() {
  return Projection::object({
      {"name", Projection::whole()},
      {"generateName", Projection::whole()},
      {"namespace", Projection::whole()},
      {"labels", Projection::object({{std::string(kComponentLabel), Projection::whole()}})},
      {"annotations", Projection::object({{std::string(kIsolationAnnotation), Projection::whole()}})},
  });
}

Projection pod_template_projection() {
  return Projection::object({{"metadata", metadata_projection()}, {"spec", pod_spec_projection()}});
}

}  // namespace

const Projection& pod_object_projection() {
  // A Pod's spec and a workload's spec (template / jobTemplate) share "spec".
  static const Projection projection = [] {
    std::vector<Projection::Field> spec_fields = pod_spec_projection().fields();
    spec_fields.push_back({"template", pod_template_projection()});
    spec_fields.push_back(
        {"jobTemplate",
         Projection::object({{"spec", Projection::object({{"template", pod_template_projection()}})}})});
    return Projection::object({
        {"apiVersion", Projection::whole()},
        {"kind", Projection::whole()},
        {"metadata", metadata_projection()},
        {"spec", Projection::object(std::move(spec_fields))},
    });
  }();
  return projection;
}

}  // namespace ig::model
