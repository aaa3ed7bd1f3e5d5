#include "cli/api_access.h"

#include "config/defaults.h"
#include "kube/config.h"

#ifndef IG_VERSION
#error "IG_VERSION must be defined by the build (CMake's project version)"
#endif

namespace ig::cli {

Result<ApiAccess> connect(const std::string& kubeconfig, const std::string& context, const std::string& namespace_flag,
                          std::chrono::milliseconds request_timeout) {
  auto config = kube::load_cluster_config(kubeconfig, context, kube::process_env());
  if (!config) return fail("cannot configure the Kubernetes API client: " + config.error());
  kube::HttpClientOptions options;
  options.request_timeout = request_timeout;
  auto client = kube::HttpClient::make(*config, IG_VERSION, options);
  if (!client) return fail("cannot make the Kubernetes API client: " + client.error());
  ApiAccess out;
  out.client = std::move(*client);
  out.context_namespace = config->namespace_name;
  out.ns = !namespace_flag.empty()           ? namespace_flag
           : !config->namespace_name.empty() ? config->namespace_name
                                             : std::string(config::kDefaultNamespace);
  return out;
}

}  // namespace ig::cli
