// What the gate's callers need to know about a pod, read from a Pod or from
// the pod template of a workload (Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job, CronJob).
//
// Contract: read_pod_facts() accepts any JSON value; wrong shapes (a list
// where a map belongs, a label that is not a string) are errors naming the
// field, never exceptions. It reads without copying the object;
// take_pod_facts() moves the strings it reads out of it instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "model/json_projection.h"

namespace ig::model {

inline constexpr std::string_view kComponentLabel = "gibson.zeroroot.ai/component";
inline constexpr std::string_view kIsolationAnnotation = "gibson.zeroroot.ai/isolation";

enum class ObjectKind { Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob };

std::string_view to_string(ObjectKind k) noexcept;

// Where the pod (template) sits inside the object.
struct PodLocation {
  ObjectKind kind = ObjectKind::Pod;
  const nlohmann::json* pod = nullptr;  // the Pod itself or the template {metadata, spec}
  std::string pointer;                  // JSON pointer of `pod` in the object ("" for a Pod)
  std::string field_path;               // same, dotted for messages ("spec.template")
};

// Finds the pod template by apiVersion/kind. Errors name what was found.
Result<PodLocation> locate_pod(const nlohmann::json& object, std::string_view source);

// One container of the pod (template) and the image it names.
struct ContainerImage {
  std::string name;                  // "name"; init/ephemeral: "init:name", "ephemeral:name"
  std::optional<std::string> image;  // spec.*containers[].image; nullopt when absent or null
  bool operator==(const ContainerImage&) const = default;
};

struct PodFacts {
  ObjectKind kind = ObjectKind::Pod;
  std::string object_name;  // metadata.name of the object (or generateName + "*")
  std::string namespace_;   // metadata.namespace of the object, "" when absent
  std::optional<std::string> component;      // the component label of the pod (template)
  std::optional<std::string> runtime_class;  // spec.runtimeClassName
  bool host_network = false, host_pid = false, host_ipc = false;
  std::vector<std::string> privileged_containers;  // "name" (init/ephemeral: "init:name")
  std::vector<ContainerImage> containers;  // every container, init and ephemeral one, in order
  bool has_metadata = false;     // the pod (template) has a metadata map
  bool has_annotations = false;  // ... with an annotations map
  std::optional<std::string> isolation_annotation;  // current value of our annotation
};

Result<PodFacts> read_pod_facts(const nlohmann::json& object, const PodLocation& where,
                                std::string_view source);

// The same facts, with the same errors, but every string it reads is moved
// out of `object` (left an empty string there; the shape is kept): for a
// caller that drops the object once the facts are read (the webhook).
// `where` must come from locate_pod(object).
Result<PodFacts> take_pod_facts(nlohmann::json& object, const PodLocation& where,
                                std::string_view source);

// Every field locate_pod() and read_pod_facts() read of a Pod or workload
// object, built from the same key constants (a renamed label cannot be
// dropped by the projected parser while the rules still read it).
const Projection& pod_object_projection();

}  // namespace ig::model
