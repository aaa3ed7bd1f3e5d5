// libFuzzer target: the LIST answer decoder (kube::decode_list), which parses
// an API server's page with a SAX handler of its own and hands the items over
// one at a time.
//
// Input: the answer's body.
//
// Invariants, checked here and abort() on a breach:
//  - no crash, no hang;
//  - differential against nlohmann's own whole-document parse: a body nlohmann
//    refuses is refused; a body accepted is a JSON object whose "items" (when
//    present and not null) equals the items handed over, in order, and whose
//    metadata.resourceVersion and metadata.continue are the page's;
//  - a JSON object with at most one top-level "items", a list or null, and
//    readable metadata, within the depth limit, is accepted.
// Build and run: scripts/fuzz.sh [seconds] [list_decoder_fuzz]
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "base/json_depth.h"
#include "fuzz_support.h"
#include "kube/list_decoder.h"

namespace {

constexpr std::size_t kDepth = 64;

bool string_or_null(const nlohmann::json& meta, const char* key) {
  auto f = meta.find(key);
  return f == meta.end() || f->is_null() || f->is_string();
}

std::string text_of(const nlohmann::json& meta, const char* key) {
  auto f = meta.find(key);
  return f == meta.end() || !f->is_string() ? std::string() : f->get<std::string>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  std::vector<nlohmann::json> items;
  std::istringstream in{std::string(body)};
  auto page = ig::kube::decode_list(in, kDepth, [&items](nlohmann::json&& item) { items.push_back(std::move(item)); });

  if (ig::json_nesting_depth(body, kDepth) > kDepth) {
    IG_FUZZ_CHECK(!page, "nesting past the limit is accepted", std::string(body.substr(0, 200)));
    return 0;
  }
  // The reference: nlohmann's DOM parser, counting top-level "items" keys.
  int items_keys = 0;
  const nlohmann::json::parser_callback_t count = [&items_keys](int depth, nlohmann::json::parse_event_t event,
                                                                nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed == "items") ++items_keys;
    return true;
  };
  const nlohmann::json doc = nlohmann::json::parse(body, count, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    IG_FUZZ_CHECK(!page, "a body nlohmann refuses is accepted", std::string(body.substr(0, 200)));
    return 0;
  }
  const auto items_field = doc.is_object() ? doc.find("items") : doc.end();
  const auto meta = doc.is_object() ? doc.find("metadata") : doc.end();
  const bool acceptable =
      doc.is_object() && items_keys <= 1 &&
      (items_field == doc.end() || items_field->is_null() || items_field->is_array()) &&
      (meta == doc.end() || meta->is_null() ||
       (meta->is_object() && string_or_null(*meta, "resourceVersion") && string_or_null(*meta, "continue")));
  IG_FUZZ_CHECK(acceptable == page.ok(), acceptable ? "an acceptable list is refused" : "an unacceptable list is accepted",
                (page ? std::string("(accepted)") : page.error()) + "\n" + std::string(body.substr(0, 200)));
  if (!page) return 0;
  const nlohmann::json expected =
      items_field == doc.end() || items_field->is_null() ? nlohmann::json::array() : *items_field;
  IG_FUZZ_CHECK(nlohmann::json(items) == expected, "the items handed over differ from nlohmann's",
                std::string(body.substr(0, 200)));
  const bool has_meta = meta != doc.end() && meta->is_object();
  IG_FUZZ_CHECK(page->resource_version == (has_meta ? text_of(*meta, "resourceVersion") : std::string()),
                "resourceVersion differs", page->resource_version);
  IG_FUZZ_CHECK(page->continue_token == (has_meta ? text_of(*meta, "continue") : std::string()),
                "continue differs", page->continue_token);
  return 0;
}
