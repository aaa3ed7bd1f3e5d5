#include "kube/list_decoder.h"

#include <string>
#include <utility>

#include "base/one_line.h"

namespace ig::kube {

Result<ListPage> decode_list(std::istream& body, std::size_t max_depth,
                             const std::function<void(nlohmann::json&&)>& each) {
  using json = nlohmann::json;
  struct Refused {
    std::string why;
  };
  bool items_next = false, in_items = false, seen_items = false;
  // nlohmann's DOM parser, except that each element of the top-level "items"
  // array is moved to `each` once complete and left out of the document
  // (whose "items" stays an empty array). Depths count the open containers.
  const json::parser_callback_t handle = [&](int depth, json::parse_event_t event, json& parsed) {
    using Event = json::parse_event_t;
    const bool opens = event == Event::object_start || event == Event::array_start;
    if (opens && static_cast<std::size_t>(depth) >= max_depth)
      throw Refused{"the answer nests deeper than " + std::to_string(max_depth) + " levels"};
    if (event == Event::key && depth == 1) {
      items_next = parsed == "items";
      if (items_next && std::exchange(seen_items, true)) throw Refused{"field items appears twice"};
    }
    if (event == Event::array_start && depth == 1 && items_next) in_items = true;
    if (!in_items || opens) return true;
    if (depth == 1) {
      in_items = false;  // the items array ends
    } else if (depth == 2) {
      each(std::move(parsed));  // an element is complete
      return false;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(body, handle);
  } catch (const Refused& r) {
    return fail(r.why);
  } catch (const json::exception& e) {  // a parse error, or a number out of range
    return fail("the answer is not JSON: " + one_line(e.what()));
  }
  if (!doc.is_object()) return fail("the answer is not a JSON object");
  ListPage page;
  auto items = doc.find("items");
  if (items != doc.end() && !items->is_null() && !items->is_array()) return fail("field items is not a list");
  auto meta = doc.find("metadata");
  if (meta != doc.end() && !meta->is_null()) {
    if (!meta->is_object()) return fail("field metadata is not an object");
    for (auto [key, target] : {std::pair{"resourceVersion", &page.resource_version},
                               std::pair{"continue", &page.continue_token}}) {
      auto f = meta->find(key);
      if (f == meta->end() || f->is_null()) continue;
      if (!f->is_string()) return fail(std::string("field metadata.") + key + " is not a string");
      *target = f->get<std::string>();
    }
  }
  return page;
}

}  // namespace ig::kube
