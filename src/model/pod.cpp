#include "model/pod.h"

#include <array>
#include <type_traits>

#include "base/quote.h"
#include "model/document.h"
#include "model/pod_text.h"

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

// The members of one map a reader looks up by name, found in one pass over
// it: a container is read by a dozen names, and a map find each costs more
// than one walk over its (projected: a few) members. `Keys` lists them.
template <typename Json, std::size_t N>
class Members {
 public:
  Members(Json& object, const std::array<std::string_view, N>& keys) : keys_(keys) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      const std::string& k = it.key();
      for (std::size_t i = 0; i < N; ++i) {
        if (keys_[i] == k) {
          values_[i] = &*it;
          break;
        }
      }
    }
  }
  Json* get(std::string_view key) const noexcept {
    for (std::size_t i = 0; i < N; ++i)
      if (keys_[i] == key) return values_[i];
    return nullptr;  // not one of the keys: a reader asks only for those
  }

 private:
  const std::array<std::string_view, N>& keys_;
  std::array<Json*, N> values_{};
};

// Member `key` of `parent` (a map, or Members of one), nullptr when absent.
template <typename Json>
Json* lookup(Json& parent, std::string_view key) {
  auto it = parent.find(key);
  return it == parent.end() ? nullptr : &*it;
}
template <typename Json, std::size_t N>
Json* lookup(const Members<Json, N>& parent, std::string_view key) {
  return parent.get(key);
}

// Member `key` of `parent` when it is a map; nullptr when absent or null.
// Sets `error` when present with another type.
template <typename Parent>
auto* map_member(Parent& parent, std::string_view key, const FieldPath& where,
                 std::string_view source, std::string& error) {
  auto* it = lookup(parent, key);
  if (it == nullptr || it->is_null()) return decltype(it){nullptr};
  if (!it->is_object()) {
    error = field_error(source, FieldPath(where, key), "a map", *it);
    return decltype(it){nullptr};
  }
  return it;
}

// `where` is the parent's path; the member's is where.key. A label or
// annotation key is named as parent[key] (`subscript`). `Json` is const
// json (read_pod_facts: the string is copied) or json (take_pod_facts: it is
// moved out, the member left an empty string).
template <typename Parent>
bool read_optional_string(Parent& parent, std::string_view key, const FieldPath& where,
                          std::string_view source, std::optional<std::string>& out,
                          std::string& error, bool subscript = false) {
  auto* it = lookup(parent, key);
  using Json = std::remove_pointer_t<decltype(it)>;
  if (it == nullptr || it->is_null()) return true;
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

template <typename Parent>
bool read_optional_bool(Parent& parent, std::string_view key, const FieldPath& where,
                        std::string_view source, bool& out, std::string& error) {
  const auto* it = lookup(parent, key);
  if (it == nullptr || it->is_null()) return true;
  if (!it->is_boolean()) {
    error = field_error(source, FieldPath(where, key), "a boolean", *it);
    return false;
  }
  out = it->template get<bool>();
  return true;
}

// Calls visit(item, item_path, index) for each element of the list `key` of
// `parent` (absent or null: none). A member that is not a list, or an element
// that is not a map, is an error naming it; the walk stops at the first visit
// that returns false (having set `error`).
template <typename Parent, typename Visit>
bool for_each_map(Parent& parent, std::string_view key, const FieldPath& parent_path, std::string_view source,
                  std::string& error, Visit visit) {
  auto* it = lookup(parent, key);
  if (it == nullptr || it->is_null()) return true;
  const FieldPath list_path(parent_path, key);
  if (!it->is_array()) {
    error = field_error(source, list_path, "a list", *it);
    return false;
  }
  std::size_t index = 0;
  for (auto& item : *it) {
    const FieldPath item_path(list_path, index);
    if (!item.is_object()) {
      error = field_error(source, item_path, "a map", item);
      return false;
    }
    if (!visit(item, item_path, index)) return false;
    ++index;
  }
  return true;
}

// An optional list of strings (command, args, exec.command, capabilities):
// absent or null -> nullopt; a list of strings -> its strings (moved out when
// Json is not const); anything else -> an error naming the field.
template <typename Parent>
bool read_optional_strings(Parent& parent, std::string_view key, const FieldPath& where,
                           std::string_view source, std::optional<std::vector<std::string>>& out,
                           std::string& error) {
  auto* it = lookup(parent, key);
  using Json = std::remove_pointer_t<decltype(it)>;
  if (it == nullptr || it->is_null()) return true;
  const FieldPath path(where, key);
  if (!it->is_array()) {
    error = field_error(source, path, "a list of strings", *it);
    return false;
  }
  std::vector<std::string> items;
  items.reserve(it->size());
  std::size_t index = 0;
  for (auto& item : *it) {
    if (!item.is_string()) {
      error = field_error(source, FieldPath(path, index), "a string", item);
      return false;
    }
    if constexpr (std::is_const_v<Json>) {
      items.push_back(item.template get<std::string>());
    } else {
      items.push_back(std::move(item.template get_ref<std::string&>()));
    }
    ++index;
  }
  out = std::move(items);
  return true;
}

// The exec handler of a lifecycle hook or probe (`handler` is the hook or
// probe map): appended to `out` when it has an exec map.
template <typename Json>
bool read_exec(Json& handler, std::string_view field, const FieldPath& handler_path,
               std::string_view source, std::vector<ExecHandler>& out, std::string& error) {
  Json* exec = map_member(handler, "exec", handler_path, source, error);
  if (!error.empty()) return false;
  if (exec == nullptr) return true;
  std::optional<std::vector<std::string>> command;
  if (!read_optional_strings(*exec, "command", FieldPath(handler_path, "exec"), source, command, error)) {
    return false;
  }
  out.push_back({std::string(field), command ? std::move(*command) : std::vector<std::string>{}});
  return true;
}

constexpr std::string_view kProbes[] = {"livenessProbe", "readinessProbe", "startupProbe"};
constexpr std::string_view kHooks[] = {"postStart", "preStop"};

// What decides the code a container runs, besides its image: command, args,
// exec hooks and probes, loader environment variables, envFrom.
template <typename Json, typename Parent>
bool read_container_code(Parent& container, const FieldPath& item_path, std::string_view source,
                         ContainerFacts& entry, std::string& error) {
  if (!read_optional_strings(container, "command", item_path, source, entry.command, error) ||
      !read_optional_strings(container, "args", item_path, source, entry.args, error)) {
    return false;
  }
  if (entry.command && entry.command->empty()) entry.command.reset();
  if (entry.args && entry.args->empty()) entry.args.reset();
  if (Json* lifecycle = map_member(container, "lifecycle", item_path, source, error)) {
    const FieldPath lifecycle_path(item_path, "lifecycle");
    for (std::string_view hook : kHooks) {
      Json* h = map_member(*lifecycle, hook, lifecycle_path, source, error);
      if (!error.empty()) return false;
      if (h != nullptr &&
          !read_exec(*h, std::string("lifecycle.").append(hook), FieldPath(lifecycle_path, hook), source,
                     entry.exec, error)) {
        return false;
      }
    }
  }
  if (!error.empty()) return false;
  for (std::string_view probe : kProbes) {
    Json* p = map_member(container, probe, item_path, source, error);
    if (!error.empty()) return false;
    if (p != nullptr && !read_exec(*p, probe, FieldPath(item_path, probe), source, entry.exec, error)) {
      return false;
    }
  }
  const bool env_ok = for_each_map(container, "env", item_path, source, error,
                                   [&](auto& var, const FieldPath& var_path, std::size_t) {
    auto name = var.find("name");
    if (name == var.end() || name->is_null()) return true;
    if (!name->is_string()) {
      error = field_error(source, FieldPath(var_path, "name"), "a string", *name);
      return false;
    }
    const auto& text = name->template get_ref<const std::string&>();
    if (is_loader_env(text)) entry.loader_env.push_back(text);
    return true;
  });
  if (!env_ok) return false;
  if (auto* env_from = lookup(container, "envFrom"); env_from != nullptr && !env_from->is_null()) {
    if (!env_from->is_array()) {
      error = field_error(source, FieldPath(item_path, "envFrom"), "a list", *env_from);
      return false;
    }
    entry.env_from = !env_from->empty();
  }
  return true;
}

// Every member of a container the readers above and below look up.
constexpr std::array<std::string_view, 11> kContainerKeys = {
    "securityContext", "name", "image", "command", "args", "lifecycle",
    "livenessProbe", "readinessProbe", "startupProbe", "env", "envFrom"};

// One container list (containers, initContainers, ephemeralContainers): the
// privileged ones into `out`, every one with what it runs into `containers`.
template <typename Json, typename Parent>
bool read_containers(Parent& spec, std::string_view list_key, std::string_view prefix,
                     const FieldPath& spec_path, std::string_view source,
                     std::vector<std::string>& out, std::vector<ContainerFacts>& containers,
                     std::string& error) {
  return for_each_map(spec, list_key, spec_path, source, error,
                      [&](auto& item, const FieldPath& item_path, std::size_t index) {
    const Members<std::remove_reference_t<decltype(item)>, kContainerKeys.size()> container(item, kContainerKeys);
    ContainerFacts entry;
    entry.init = prefix == "init:";
    entry.ephemeral = prefix == "ephemeral:";
    Json* sc = map_member(container, "securityContext", item_path, source, error);
    if (!error.empty()) return false;
    if (sc != nullptr) {
      const FieldPath sc_path(item_path, "securityContext");
      if (!read_optional_bool(*sc, "privileged", sc_path, source, entry.privileged, error)) return false;
      if (Json* caps = map_member(*sc, "capabilities", sc_path, source, error)) {
        std::optional<std::vector<std::string>> add;
        if (!read_optional_strings(*caps, "add", FieldPath(sc_path, "capabilities"), source, add, error)) {
          return false;
        }
        if (add) {
          for (auto& cap : *add) {
            if (!is_default_capability(cap)) entry.added_capabilities.push_back(std::move(cap));
          }
        }
      }
      if (!error.empty()) return false;
    }
    std::optional<std::string> name;
    if (!read_optional_string(container, "name", item_path, source, name, error) ||
        !read_optional_string(container, "image", item_path, source, entry.image, error) ||
        !read_container_code<Json>(container, item_path, source, entry, error)) {
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
        entry.name += "#" + std::to_string(index);
      }
    }
    if (entry.privileged) out.push_back(entry.name);
    containers.push_back(std::move(entry));
    return true;
  });
}

// spec.volumes: the hostPath and image volumes (the rest are the pod's data).
template <typename Json, typename Parent>
bool read_volumes(Parent& spec, const FieldPath& spec_path, std::string_view source,
                  std::vector<VolumeFacts>& out, std::string& error) {
  return for_each_map(spec, "volumes", spec_path, source, error,
                      [&](auto& item, const FieldPath& item_path, std::size_t index) {
    static constexpr std::array<std::string_view, 3> kVolumeKeys = {"hostPath", "image", "name"};
    const Members<std::remove_reference_t<decltype(item)>, kVolumeKeys.size()> volume(item, kVolumeKeys);
    VolumeFacts entry;
    Json* host_path = map_member(volume, "hostPath", item_path, source, error);
    if (!error.empty()) return false;
    entry.host_path = host_path != nullptr;
    Json* image = map_member(volume, "image", item_path, source, error);
    if (!error.empty()) return false;
    if (image != nullptr) {
      std::optional<std::string> reference;
      if (!read_optional_string(*image, "reference", FieldPath(item_path, "image"), source, reference, error)) {
        return false;
      }
      entry.image = reference.value_or("");
    }
    if (!entry.host_path && !entry.image) return true;
    std::optional<std::string> name;
    if (!read_optional_string(volume, "name", item_path, source, name, error)) return false;
    entry.name = name ? std::move(*name) : "#" + std::to_string(index);
    out.push_back(std::move(entry));
    return true;
  });
}

}  // namespace

namespace {

constexpr std::string_view kLoaderEnv[] = {
    "LD_PRELOAD",        "LD_LIBRARY_PATH", "LD_AUDIT",         "BASH_ENV", "ENV",
    "PYTHONPATH",        "PYTHONSTARTUP",   "PYTHONHOME",       "NODE_OPTIONS", "NODE_PATH",
    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",   "JDK_JAVA_OPTIONS", "PERL5OPT", "PERL5LIB",
    "PERLLIB",           "RUBYOPT",         "RUBYLIB",          "GCONV_PATH",
};

std::vector<std::string> loader_env_names() { return {std::begin(kLoaderEnv), std::end(kLoaderEnv)}; }

}  // namespace

bool is_loader_env(std::string_view name) noexcept {
  // Most names start with none of the list's first letters: one switch says so.
  if (name.empty()) return false;
  switch (name[0]) {
    case 'L': case 'B': case 'E': case 'P': case 'N': case 'J': case '_': case 'R': case 'G': break;
    default: return false;
  }
  for (std::string_view n : kLoaderEnv)
    if (n == name) return true;
  return false;
}

bool is_default_capability(std::string_view name) noexcept {
  // containerd's and CRI-O's default capability set (oci.DefaultCaps / crio's default_capabilities).
  static constexpr std::string_view kDefault[] = {
      "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
      "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
  };
  auto upper_eq = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (c != b[i]) return false;
    }
    return true;
  };
  if (name.size() > 4 && upper_eq(name.substr(0, 4), "CAP_")) name.remove_prefix(4);
  for (std::string_view d : kDefault)
    if (upper_eq(name, d)) return true;
  return false;
}

std::string_view to_string(ObjectKind k) noexcept {
  for (const auto& info : kKinds)
    if (info.value == k) return info.kind;
  return "Pod";
}

std::optional<PodLocation> location_for(std::string_view kind, std::string_view api_version) {
  for (const auto& info : kKinds) {
    if (kind == info.kind && api_version == info.api_version) {
      return PodLocation{info.value, nullptr, std::string(info.pointer), std::string(info.field_path)};
    }
  }
  return std::nullopt;
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
      for (auto it = annotations->begin(); it != annotations->end(); ++it) {
        if (std::string_view(it.key()).starts_with(kKataAnnotationPrefix)) facts.kata_annotations.push_back(it.key());
      }
    }
    if (!error.empty()) return fail(error);
  }

  Json* spec_map = map_member(pod, "spec", pod_path, source, error);
  if (!error.empty()) return fail(error);
  const FieldPath spec_path(pod_path, "spec");
  if (spec_map == nullptr) return fail(std::string(source) + ": " + spec_path.str() + ": required");
  static constexpr std::array<std::string_view, 8> kSpecKeys = {
      "runtimeClassName", "hostNetwork", "hostPID", "hostIPC",
      "containers", "initContainers", "ephemeralContainers", "volumes"};
  const Members<Json, kSpecKeys.size()> spec(*spec_map, kSpecKeys);
  // One ContainerFacts per entry of the three lists: reserved, not moved as the vector grows.
  std::size_t container_count = 0;
  for (std::string_view list : {"containers", "initContainers", "ephemeralContainers"}) {
    if (auto* l = spec.get(list); l != nullptr && l->is_array()) container_count += l->size();
  }
  facts.containers.reserve(container_count);
  if (!read_optional_string(spec, "runtimeClassName", spec_path, source, facts.runtime_class, error) ||
      !read_optional_bool(spec, "hostNetwork", spec_path, source, facts.host_network, error) ||
      !read_optional_bool(spec, "hostPID", spec_path, source, facts.host_pid, error) ||
      !read_optional_bool(spec, "hostIPC", spec_path, source, facts.host_ipc, error) ||
      !read_containers<Json>(spec, "containers", "", spec_path, source, facts.privileged_containers,
                             facts.containers, error) ||
      !read_containers<Json>(spec, "initContainers", "init:", spec_path, source,
                             facts.privileged_containers, facts.containers, error) ||
      !read_containers<Json>(spec, "ephemeralContainers", "ephemeral:", spec_path, source,
                             facts.privileged_containers, facts.containers, error) ||
      !read_volumes<Json>(spec, spec_path, source, facts.volumes, error)) {
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
  using P = Projection;
  // A hook's or probe's handler: only its exec command is read; a handler
  // without exec (httpGet, tcpSocket, grpc, sleep) costs no DOM (sparse).
  const P handler = P::sparse({{"exec", P::object({{"command", P::whole()}})}});
  auto container = P::array(P::object({
      {"name", P::whole()},
      {"image", P::whole()},
      {"command", P::whole()},
      {"args", P::whole()},
      {"lifecycle", P::sparse({{"postStart", handler}, {"preStop", handler}})},
      {"livenessProbe", handler},
      {"readinessProbe", handler},
      {"startupProbe", handler},
      // Only the variables that load code: the others (most of a large pod's
      // body) are validated and dropped without DOM.
      {"env", P::array(P::sparse({{"name", P::one_of(loader_env_names())}}))},
      // Only whether it has entries: each one kept as an empty map.
      {"envFrom", P::array(P::object({}))},
      {"securityContext", P::sparse({{"privileged", P::whole()},
                                     {"capabilities", P::sparse({{"add", P::whole()}})}})},
  }));
  return P::object({
      {"runtimeClassName", P::whole()},
      {"hostNetwork", P::whole()},
      {"hostPID", P::whole()},
      {"hostIPC", P::whole()},
      {"containers", container},
      {"initContainers", container},
      {"ephemeralContainers", container},
      // hostPath only by its presence (an empty map), image by its reference.
      {"volumes", P::array(P::object({{"name", P::whole()},
                                      {"hostPath", P::object({})},
                                      {"image", P::object({{"reference", P::whole()}})}}))},
  });
}

Projection metadata_projection() {
  return Projection::object({
      {"name", Projection::whole()},
      {"generateName", Projection::whole()},
      {"namespace", Projection::whole()},
      {"labels", Projection::object({{std::string(kComponentLabel), Projection::whole()}})},
      // Our annotation, and every key under io.katacontainers. (a prefix field).
      {"annotations", Projection::object({{std::string(kIsolationAnnotation), Projection::whole()},
                                          {std::string(kKataAnnotationPrefix) + "*", Projection::whole()}})},
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
