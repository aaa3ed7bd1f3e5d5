// A pod is its Component's code (docs/security.md, "A pod is its Component's
// code"): the checks that tie what a pod runs, and what it can reach, to
// what its Component declares. Pure: each returns the phrases of what does
// not hold ("container \"app\" sets command [...]"), empty when all holds;
// pod_rules.cpp turns them into denials with their reasons.
//
//  - image_binding: every container runs spec.image or an allowed extra
//    image, at least one regular container runs spec.image, and every image
//    volume mounts one of them (ImageNotBound).
//  - entrypoint_binding: containers on the Component's image run its
//    declared spec.command and spec.args (absent: the pod sets none; an init
//    container may run one of spec.exec instead, command then args), and
//    every exec hook and exec probe of those containers runs one of its
//    spec.exec commands (EntrypointNotBound). Containers on an allowed extra
//    image run what the admin allowed with the image.
//  - loader_env: no container sets an environment variable that loads code
//    (model::is_loader_env) or takes envFrom, whose keys admission cannot
//    see (LoaderEnvNotAllowed).
//  - host_access: privileged containers, host namespaces, hostPath volumes,
//    capabilities beyond the runtime's default (HostAccessOutsideMicroVM).
//  - unbound_outside_microvm: what a pod admitted in a microVM runs or
//    reaches that would be denied outside one (the rules above that
//    RequireSetec does not enforce): host_access, then entrypoint_binding,
//    then loader_env, in the order the AllowInProcess denial checks them (so
//    the first phrase is the denial's). Admission warns with it; the drift
//    audit counts it per Component (its BoundOutsideMicroVM condition).
//  - microvm_conflicts: what a microVM cannot provide or what would reach the
//    host from the guest: host namespaces, privileged containers, hostPath
//    volumes, io.katacontainers.* annotations an admin did not allow
//    (IncompatibleWithMicroVM).
// Ephemeral containers added by an enforcement admin (`exempt`) are a
// debugging session, not the Component's code: they are left out of the
// image, entrypoint and loader checks, never out of host access.
#pragma once

#include <string>
#include <vector>

#include "admission/context.h"
#include "model/component.h"
#include "model/pod.h"

namespace ig::admission {

// Which containers (by index in facts.containers) are exempt from the code
// checks; empty: none.
using Exempt = std::vector<bool>;

struct ImageBinding {
  bool bound = false;                 // the Component declares spec.image
  std::string component_image_error;  // spec.image does not parse
  std::vector<std::string> unbound;   // `container "x" runs "y"`, ...
  bool digest_hint = false;           // a container names a digest the Component does not
  // Per container: it runs the Component's own image (not an extra one).
  std::vector<bool> own_image;
};

ImageBinding image_binding(const model::PodFacts& facts, const model::Component& component,
                           const GateSettings& settings, const Exempt& exempt);

std::vector<std::string> entrypoint_binding(const model::PodFacts& facts, const model::Component& component,
                                            const ImageBinding& images, const Exempt& exempt);

std::vector<std::string> loader_env(const model::PodFacts& facts, const Exempt& exempt);

std::vector<std::string> host_access(const model::PodFacts& facts);

// `images` is image_binding(facts, component, settings, exempt).
std::vector<std::string> unbound_outside_microvm(const model::PodFacts& facts, const model::Component& component,
                                                 const ImageBinding& images, const Exempt& exempt);
// The same for a pod as it runs (no exempt container): binds the images itself.
std::vector<std::string> unbound_outside_microvm(const model::PodFacts& facts, const model::Component& component,
                                                 const GateSettings& settings);

std::vector<std::string> microvm_conflicts(const model::PodFacts& facts, const GateSettings& settings);

// Ephemeral containers in `facts` that `old` did not have (all of them when
// `old` is null), by index in facts.containers.
std::vector<std::size_t> added_ephemeral(const model::PodFacts& facts, const model::PodFacts* old);

// "a", "a and b", "a, b and c"; past the fifth, "and N more <noun>s"
// ("and 1 more <noun>").
std::string join_phrases(const std::vector<std::string>& phrases, std::string_view noun = "");

// ["a", "b c"] as a reader sees it: ["a", "b c"] (JSON-like, quoted).
std::string show_command(const std::vector<std::string>& command);

}  // namespace ig::admission
