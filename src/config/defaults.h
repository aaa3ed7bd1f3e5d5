// The product's defaults, written once: the sandbox RuntimeClass, the
// namespace and Service isolation-gate runs as, the listen addresses, and the
// DNS names the API server uses to reach the webhook. The Helm chart's values
// (charts/isolation-gate/values.yaml) carry the same defaults.
//
// Contract: nothing else under src/ spells these values; `serve`, `evaluate`
// and `certs` take their flag defaults from here (docs/architecture.md,
// "Names").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ig::config {

// The setec sandbox's RuntimeClass (Kata Containers with Firecracker).
inline constexpr std::string_view kDefaultRuntimeClass = "kata-fc";
// The namespace isolation-gate runs in; it is never enforced.
inline constexpr std::string_view kDefaultNamespace = "isolation-gate-system";
// The group whose members may switch enforcement off in a namespace
// (--enforcement-admins): Kubernetes' own superuser group.
inline constexpr std::string_view kDefaultEnforcementAdmin = "system:masters";
// The webhook's Service name.
inline constexpr std::string_view kDefaultServiceName = "isolation-gate";

// HTTPS webhook listener and plain-HTTP probe/metrics listener.
inline constexpr std::string_view kDefaultListen = "[::]:8443";
inline constexpr std::string_view kDefaultMetricsListen = "[::]:8080";

// The names a Service answers to inside the cluster, most specific last:
// NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local. A serving
// certificate for the webhook carries all four.
std::vector<std::string> service_dns_names(std::string_view service, std::string_view ns);

}  // namespace ig::config
