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

// KUBERNETES_EXEC_INFO's value; spec.cluster only with provide_cluster_info.
std::string exec_info_json(const ExecConfig& config, bool interactive, std::string_view server,
                           std::string_view ca_pem);

// The plugin's standard output as credentials, checked as client-go does.
Result<Credentials> parse_exec_credential(std::string_view output, std::string_view api_version);

// Whether the run is interactive, or why it cannot run (Always, no terminal).
Result<bool> exec_interactive(const ExecConfig& config, bool stdin_is_terminal);

// One run of the plugin: its credentials or why not.
Result<Credentials> run_exec_plugin(const ExecConfig& config, std::string_view server, std::string_view ca_pem,
                                    bool stdin_is_terminal);

}  // namespace ig::kube
