// The Kubernetes resources the product uses, written once. The product's own
// Component CRD stays with the code that knows Components
// (controller/cluster.h kComponents): kube/ knows nothing of Components.
#pragma once

#include "kube/api.h"

namespace ig::kube {

inline constexpr Resource kPods{"", "v1", "pods", "Pod", true};
inline constexpr Resource kNamespaces{"", "v1", "namespaces", "Namespace", false};
inline constexpr Resource kNodes{"", "v1", "nodes", "Node", false};
inline constexpr Resource kSecrets{"", "v1", "secrets", "Secret", true};
inline constexpr Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
inline constexpr Resource kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
inline constexpr Resource kEventsV1{"events.k8s.io", "v1", "events", "Event", true};
inline constexpr Resource kEndpointSlices{"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true};
inline constexpr Resource kRuntimeClasses{"node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", false};
inline constexpr Resource kMutatingWebhookConfigurations{
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false};
inline constexpr Resource kValidatingWebhookConfigurations{
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
    false};

}  // namespace ig::kube
