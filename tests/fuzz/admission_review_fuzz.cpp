// libFuzzer target: the admission request path on arbitrary bytes.
//  1. The projected parser agrees with nlohmann (same verdict, same value).
//  2. Webhook::serve() never crashes, and answers every body with a JSON
//     document; a 200 answer is an AdmissionReview, never allowed by accident
//     for an object the rules could not read.
// Build and run: scripts/fuzz.sh [seconds]
#include <cstdint>
#include <cstdlib>
#include <string>

#include "admission/catalog.h"
#include "admission/webhook.h"
#include "config/defaults.h"
#include "model/document.h"
#include "model/json_projection.h"

namespace {

using nlohmann::json;

ig::admission::Webhook& webhook() {
  static ig::admission::StaticCatalog catalog = [] {
    ig::admission::StaticCatalog c;
    ig::model::Component comp;
    comp.name = "report-parser";
    comp.trust_raw = "untrusted";
    comp.trust = ig::policy::parse_content_trust(std::string_view("untrusted"));
    c.add(comp, "team-a");
    return c;
  }();
  static ig::admission::FixedSandbox sandbox(ig::policy::SandboxAvailability::Available);
  static const ig::admission::GateSettings settings = [] {
    ig::admission::GateSettings g;
    g.runtime_class = std::string(ig::config::kDefaultRuntimeClass);
    g.own_namespace = std::string(ig::config::kDefaultNamespace);
    return g;
  }();
  static ig::admission::Webhook hook(ig::admission::AdmissionContext{settings, catalog, sandbox});
  return hook;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& projection = ig::admission::admission_review_projection();

  auto got = ig::model::parse_projected(text, projection, "fuzz");
  std::optional<json> expected;
  // The reference: model::parse_json (nlohmann, the depth limit, no repeated
  // member name). nlohmann takes a NUL byte for the end of input ("{}\0x"
  // parses); we do not.
  if (text.find('\0') == std::string_view::npos) {
    if (auto full = ig::model::parse_json(text, "fuzz")) expected = ig::model::project(*full, projection);
  }
  if (got.ok() != expected.has_value()) std::abort();
  if (expected && *expected != *got) std::abort();

  static const char* const kPaths[] = {"/mutate/pods", "/validate/pods", "/validate/workloads",
                                       "/validate/components"};
  auto response = webhook().serve({"POST", kPaths[size % 4], "application/json", std::string(text)});
  json body = json::parse(response.body, nullptr, false);
  if (body.is_discarded()) std::abort();
  if (response.status == 200 && !body.contains("response")) std::abort();
  return 0;
}
