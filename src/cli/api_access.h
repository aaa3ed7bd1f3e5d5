// The Kubernetes API client of the one-shot commands (cleanup, selftest): the
// same configuration rules as `serve` (--kubeconfig, else $KUBECONFIG, else
// the in-cluster service account; --context), one place.
//
// Contract: connect() never throws; a configuration that cannot be used is an
// error naming what is wrong. `namespace_flag` empty takes the service
// account's (or the context's) namespace, else config::kDefaultNamespace.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/result.h"
#include "kube/http_client.h"

namespace ig::cli {

struct ApiAccess {
  std::unique_ptr<kube::HttpClient> client;
  std::string ns;  // the namespace the command works in
  std::string context_namespace;  // the kubeconfig context's (or service account's) namespace; "" when none
};

Result<ApiAccess> connect(const std::string& kubeconfig, const std::string& context, const std::string& namespace_flag,
                          std::chrono::milliseconds request_timeout);

}  // namespace ig::cli
