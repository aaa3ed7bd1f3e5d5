// Kubeconfig exec credential plugins (client.authentication.k8s.io v1 and
// v1beta1), run as client-go runs them (docs/operations.md).
//
// Contract:
//  - A run gets this process's environment with exec.env over it and
//    KUBERNETES_EXEC_INFO. An interactive run shares our standard input and
//    error; any other gets /dev/null, its standard error captured (the tail
//    quoted in errors) and a process group of its own. No other descriptor
//    is inherited.
//  - A run past ExecConfig::timeout is killed (with its process group) and
//    is an error; at most 1 MiB of standard output is read.
//  - The answer must be an ExecCredential of the configured apiVersion with a
//    token and/or a client pair that loads. Errors name the plugin and its
//    kubeconfig user.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/config.h"

namespace ig::kube {

inline constexpr std::string_view kExecApiV1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view kExecApiV1beta1 = "client.authentication.k8s.io/v1beta1";

// One run of the plugin: its credentials or why not (interactiveMode Always
// without a terminal: not run). KUBERNETES_EXEC_INFO has spec.cluster only with provide_cluster_info.
Result<Credentials> run_exec_plugin(const ExecConfig& config, std::string_view server, std::string_view ca_pem,
                                    bool stdin_is_terminal);

}  // namespace ig::kube
