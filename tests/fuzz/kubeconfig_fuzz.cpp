// libFuzzer target: kubeconfig parsing (kube::kubeconfig_config), the file
// `evaluate`, local mode and `serve --kubeconfig` read.
//
// The input is written to kubeconfig in a private temporary directory (the
// parser reads a path; relative certificate/token paths resolve there, and
// that directory holds only this file).
//
// Invariants, checked here and abort() on a breach:
//  - no crash, no hang;
//  - a duplicate key anywhere in the YAML (yaml-cpp's own tree) is refused;
//  - a success names an https:// server without a trailing '/', has a CA,
//    and has no more than one way to authenticate per kind (a token source
//    is a token or a file, never both; an exec plugin, with a command, is
//    the only credential when there is one);
//  - an error is one line that names the kubeconfig.
// Build and run: scripts/fuzz.sh [seconds] [kubeconfig_fuzz]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "fuzz_support.h"
#include "kube/config.h"

namespace {

const std::string& kubeconfig_path() {
  static const std::string path = [] {
    char dir[] = "/tmp/ig-kubeconfig-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    return std::string(dir) + "/kubeconfig";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string& path = kubeconfig_path();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  auto cfg = ig::kube::kubeconfig_config(path, "");
  if (auto dup = ig::fuzz::yaml_has_duplicate_key(text); dup && *dup)
    IG_FUZZ_CHECK(!cfg, "kubeconfig with a duplicate key accepted", text);
  if (!cfg) {
    const std::string& e = cfg.error();
    IG_FUZZ_CHECK(e.find(path) != std::string::npos, "error does not name the kubeconfig", e);
    IG_FUZZ_CHECK(e.find('\n') == std::string::npos, "error is not one line", e);
    return 0;
  }
  IG_FUZZ_CHECK(cfg->server.rfind("https://", 0) == 0, "server is not https://", cfg->server);
  IG_FUZZ_CHECK(cfg->server.back() != '/', "server keeps a trailing /", cfg->server);
  IG_FUZZ_CHECK(!cfg->ca_pem.empty(), "no CA", text);
  IG_FUZZ_CHECK(cfg->bearer_token.empty() || cfg->token_file.empty(), "token and token file", text);
  IG_FUZZ_CHECK(cfg->client_cert_pem.empty() == cfg->client_key_pem.empty(), "certificate without key", text);
  // An exec plugin is the only credential of its user (parsed, never run here).
  IG_FUZZ_CHECK(!cfg->exec || (cfg->bearer_token.empty() && cfg->token_file.empty() && cfg->client_cert_pem.empty()),
                "exec plugin beside another credential", text);
  IG_FUZZ_CHECK(!cfg->exec || !cfg->exec->command.empty(), "exec plugin without a command", text);
  return 0;
}
