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

// A command a container runs through the kubelet besides its entrypoint: an
// exec lifecycle hook or an exec probe.
struct ExecHandler {
  std::string field;                 // "lifecycle.postStart", "livenessProbe", ...
  std::vector<std::string> command;  // exec.command ([] when absent)
  bool operator==(const ExecHandler&) const = default;
};

// One container of the pod (template): the image it names and everything
// else that decides what code runs in it, or what it can reach on the host.
struct ContainerFacts {
  std::string name;                  // "name"; init/ephemeral: "init:name", "ephemeral:name"
  std::optional<std::string> image;  // spec.*containers[].image; nullopt when absent or null
  // command / args; nullopt when absent, null or [] (the image's own
  // ENTRYPOINT / CMD, as the kubelet reads an empty list).
  std::optional<std::vector<std::string>> command, args;
  std::vector<ExecHandler> exec;        // exec hooks and probes, in field order
  std::vector<std::string> loader_env;  // env names that load code (is_loader_env)
  bool env_from = false;                // envFrom has an entry (its keys are not visible)
  bool privileged = false;              // securityContext.privileged
  // securityContext.capabilities.add beyond the runtime's default set
  // (is_default_capability), as written.
  std::vector<std::string> added_capabilities;
  bool ephemeral = false;  // an ephemeral container (kubectl debug)
  bool init = false;       // an init container
  bool operator==(const ContainerFacts&) const = default;
};

// An environment variable through which a process loads code it was not
// built with: the dynamic loader's (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT),
// the shells' (BASH_ENV, ENV) and the language runtimes' (PYTHONPATH,
// PYTHONSTARTUP, PYTHONHOME, NODE_OPTIONS, NODE_PATH, JAVA_TOOL_OPTIONS,
// _JAVA_OPTIONS, JDK_JAVA_OPTIONS, PERL5OPT, PERL5LIB, PERLLIB, RUBYOPT,
// RUBYLIB, GCONV_PATH). Exact, case-sensitive names.
bool is_loader_env(std::string_view name) noexcept;

// A capability in containerd's and CRI-O's default set (adding it changes
// nothing); "CAP_" prefixes and case are ignored, as the runtimes do.
bool is_default_capability(std::string_view name) noexcept;

// A volume that is not the pod's own data: a host path, or an image mounted
// as a volume (its content is code the Component did not declare).
struct VolumeFacts {
  std::string name;
  bool host_path = false;
  std::optional<std::string> image;  // volumes[].image.reference; "" when the reference is absent
  bool operator==(const VolumeFacts&) const = default;
};

inline constexpr std::string_view kKataAnnotationPrefix = "io.katacontainers.";

struct PodFacts {
  ObjectKind kind = ObjectKind::Pod;
  std::string object_name;  // metadata.name of the object (or generateName + "*")
  std::string namespace_;   // metadata.namespace of the object, "" when absent
  std::optional<std::string> component;      // the component label of the pod (template)
  std::optional<std::string> runtime_class;  // spec.runtimeClassName
  bool host_network = false, host_pid = false, host_ipc = false;
  std::vector<std::string> privileged_containers;  // "name" (init/ephemeral: "init:name")
  std::vector<ContainerFacts> containers;  // every container, init and ephemeral one, in order
  std::vector<VolumeFacts> volumes;        // only hostPath and image volumes
  std::vector<std::string> kata_annotations;  // annotation keys under io.katacontainers.
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
