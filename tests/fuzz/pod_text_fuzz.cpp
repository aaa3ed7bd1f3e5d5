// libFuzzer target: the webhook's DOM-free pod reader (model/pod_text.h)
// against the DOM path it stands in for, differentially.
//
// Input: byte 0 chooses the request's kind (kKinds below, modulo its size);
// the rest is request.object's text.
//
// Invariants, checked here and abort() on a breach:
//  1. On text the projected parser accepts, read_pod_text() never gives
//     facts where the DOM path (pod_text_check.h) fails, and where it gives
//     facts they and the pod's location are the DOM path's.
//  2. On any other text it gives no facts (it validates what it reads), and
//     it never reads outside the text: ASan.
// Build and run: scripts/fuzz.sh [seconds] [pod_text_fuzz]
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "pod_text_check.h"

namespace {

struct Kind {
  std::string_view kind, api_version;
};
constexpr Kind kKinds[] = {
    {"Pod", "v1"},          {"Deployment", "apps/v1"}, {"StatefulSet", "apps/v1"}, {"DaemonSet", "apps/v1"},
    {"ReplicaSet", "apps/v1"}, {"Job", "batch/v1"},    {"CronJob", "batch/v1"},    {"Pod", "apps/v1"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const Kind& k = kKinds[data[0] % std::size(kKinds)];
  // A copy of exactly the text, so ASan sees any read past its end.
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string disagreement;
  const auto outcome = ig::pod_text_check::compare(text, k.kind, k.api_version, disagreement);
  (void)outcome;
  if (!disagreement.empty()) ig::fuzz::fail(disagreement, text);
  return 0;
}
