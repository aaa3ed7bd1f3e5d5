#include "kube/list_decoder.h"

#include <string>
#include <utility>
#include <vector>

#include "base/json_depth.h"
#include "base/one_line.h"

namespace ig::kube {
namespace {

using json = nlohmann::json;

// nlohmann's SAX events built into a DOM, as nlohmann's own DOM parser does,
// except that the elements of the top-level "items" array are built one at a
// time, in a DOM of their own, and handed to `each` once complete. The
// document's DOM keeps "items" as an empty array.
class ListSax {
 public:
  ListSax(json& root, std::size_t max_depth, const std::function<void(json&&)>& each)
      : root_(root), each_(each), max_depth_(max_depth) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool v) { return put(json(v)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(json(v)); }
  bool string(json::string_t& v) { return put(json(std::move(v))); }
  bool binary(json::binary_t& v) { return put(json(std::move(v))); }
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool key(json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    error_ = one_line(e.what());
    return false;
  }

  const std::string& error() const noexcept { return error_; }
  // Set when the document is JSON but not a list this decoder can stream.
  const std::string& refusal() const noexcept { return refusal_; }

 private:
  // Where a new value goes: the root, the end of the open array, or the open
  // object's member named key_; an element of "items" goes to item_. Null
  // when the value is refused.
  json* place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    if (stack_.size() == items_depth_) {
      item_ = std::move(v);
      return &item_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    if (stack_.size() == 1 && key_ == "items") {
      if (seen_items_) {
        refusal_ = "field items appears twice";
        return nullptr;
      }
      seen_items_ = true;
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }

  bool put(json&& v) {
    if (place(std::move(v)) == nullptr) return false;
    if (stack_.size() == items_depth_) hand_over();
    return true;
  }

  bool open(json::value_t type) {
    // The top-level object's "items", when a list: its elements are streamed.
    const bool items = type == json::value_t::array && stack_.size() == 1 && root_.is_object() &&
                       key_ == "items";
    if (stack_.size() >= max_depth_) {
      refusal_ = "the answer nests deeper than " + std::to_string(max_depth_) + " levels";
      return false;
    }
    json* v = place(json(type));
    if (v == nullptr) return false;
    stack_.push_back(v);
    if (items) items_depth_ = stack_.size();
    return true;
  }

  bool close() {
    if (stack_.size() == items_depth_) items_depth_ = kNone;  // the items array ends
    stack_.pop_back();
    if (stack_.size() == items_depth_) hand_over();
    return true;
  }

  void hand_over() {
    each_(std::move(item_));
    item_ = json();
  }

  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  json& root_;
  const std::function<void(json&&)>& each_;
  const std::size_t max_depth_;
  std::vector<json*> stack_;
  std::string key_;
  json item_;
  // The size of the stack while inside "items" (its elements are children
  // of the top); kNone outside it.
  std::size_t items_depth_ = kNone;
  bool seen_items_ = false;
  std::string error_;
  std::string refusal_;
};

// `parse(sax)` runs nlohmann's SAX parser over the input.
Result<ListPage> decode(const std::function<bool(ListSax&)>& parse, std::size_t max_depth,
                        const std::function<void(json&&)>& each) {
  json doc;
  ListSax sax(doc, max_depth, each);
  const bool ok = parse(sax);
  if (!ok) {
    if (!sax.refusal().empty()) return fail(sax.refusal());
    return fail("the answer is not JSON" + (sax.error().empty() ? std::string() : ": " + sax.error()));
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

}  // namespace

Result<ListPage> decode_list(std::string_view body, std::size_t max_depth,
                             const std::function<void(json&&)>& each) {
  if (json_nesting_depth(body, max_depth) > max_depth)
    return fail("the answer nests deeper than " + std::to_string(max_depth) + " levels");
  return decode([&](ListSax& sax) { return json::sax_parse(body.data(), body.data() + body.size(), &sax); },
                max_depth, each);
}

Result<ListPage> decode_list(std::istream& body, std::size_t max_depth, const std::function<void(json&&)>& each) {
  return decode([&](ListSax& sax) { return json::sax_parse(body, &sax); }, max_depth, each);
}

}  // namespace ig::kube
