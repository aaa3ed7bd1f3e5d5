// libFuzzer target: Component manifests, YAML or JSON (model::parse_documents,
// model::decode_component, model::component_problems): what `evaluate`,
// local mode's catalog and the components webhook read.
//
// Invariants, checked here and abort() on a breach:
//  - no crash, no hang (alias expansion and depth are bounded by the decoder);
//  - a duplicate key anywhere is refused: when nlohmann (JSON input) or
//    yaml-cpp's own tree (YAML input) shows a map with a repeated key,
//    parse_documents must fail;
//  - JSON input that nlohmann parses strictly (no duplicate, not too deep)
//    decodes to the same value;
//  - a parse either errors or yields Components whose effective trust is one
//    of the known values: content_trust omitted/null/"" -> Unspecified
//    (valid, undeclared), "trusted" -> Trusted, "untrusted" -> Untrusted, any
//    other value -> Untrusted and invalid (fail closed), and then
//    component_problems() reports it;
//  - every error is one line naming the source.
// Build and run: scripts/fuzz.sh [seconds] [component_fuzz]
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "model/component.h"
#include "model/document.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto docs = ig::model::parse_documents(text, "fuzz.yaml");

  const auto first = text.find_first_not_of(" \t\r\n");
  const bool json_input = first != std::string_view::npos && (text[first] == '{' || text[first] == '[');
  if (json_input) {
    auto strict = ig::fuzz::parse_strict_json(text);
    if (strict.duplicate) IG_FUZZ_CHECK(!docs, "JSON with a duplicate key accepted", text);
    if (strict.value && !strict.too_deep && docs) {
      IG_FUZZ_CHECK(docs->size() == 1 && (*docs)[0] == *strict.value, "JSON decoded to another value", text);
    }
  } else if (auto dup = ig::fuzz::yaml_has_duplicate_key(text); dup && *dup) {
    IG_FUZZ_CHECK(!docs, "YAML with a duplicate key accepted", text);
  }
  if (!docs) {
    const std::string& e = docs.error();
    IG_FUZZ_CHECK(e.rfind("fuzz.yaml", 0) == 0, "error does not name the source", e);
    IG_FUZZ_CHECK(e.find('\n') == std::string::npos, "error is not one line", e);
    return 0;
  }
  for (const auto& doc : *docs) {
    auto c = ig::model::decode_component(doc, "fuzz.yaml");
    if (!c) {
      IG_FUZZ_CHECK(c.error().find('\n') == std::string::npos, "decode error is not one line", c.error());
      continue;
    }
    using ig::policy::ContentTrust;
    const auto& t = c->trust;
    const std::string raw = c->trust_raw().value_or("");
    // What the manifest says, read again from the document itself.
    std::optional<std::string> written;
    if (doc.is_object() && doc.contains("spec") && doc["spec"].is_object() && doc["spec"].contains("policy") &&
        doc["spec"]["policy"].is_object() && doc["spec"]["policy"].contains("content_trust") &&
        doc["spec"]["policy"]["content_trust"].is_string())
      written = doc["spec"]["policy"]["content_trust"].get<std::string>();
    IG_FUZZ_CHECK(written.value_or("") == raw, "trust_raw is not what the manifest says", ig::model::dump_json(doc));
    if (raw.empty()) {
      IG_FUZZ_CHECK(t.trust == ContentTrust::Unspecified && t.valid && !t.declared, "omitted trust", raw);
    } else if (raw == "trusted") {
      IG_FUZZ_CHECK(t.trust == ContentTrust::Trusted && t.valid && t.declared, "trusted", raw);
    } else if (raw == "untrusted") {
      IG_FUZZ_CHECK(t.trust == ContentTrust::Untrusted && t.valid && t.declared, "untrusted", raw);
    } else {
      IG_FUZZ_CHECK(t.trust == ContentTrust::Untrusted && !t.valid, "unknown trust is not fail-closed", raw);
      IG_FUZZ_CHECK(!ig::model::component_problems(*c, "fuzz.yaml").empty(), "unknown trust not reported", raw);
    }
  }
  return 0;
}
