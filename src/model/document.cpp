#include "model/document.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <istream>
#include <optional>
#include <set>
#include <sstream>

#include "base/one_line.h"
#include "base/quote.h"

namespace ig::model {
namespace {

std::string prefixed(std::string_view source, std::string_view message) {
  std::string out;
  out.reserve(source.size() + message.size() + 2);
  out.append(source).append(": ").append(message);
  return out;
}

// nlohmann messages start with "[json.exception.parse_error.101] ": keep the rest.
std::string_view strip_nlohmann_prefix(std::string_view what) {
  if (!what.empty() && what.front() == '[') {
    auto close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  return what;
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> options) {
  for (auto o : options)
    if (s == o) return true;
  return false;
}

// Plain (unquoted) scalar resolution as Kubernetes' YAML (YAML 1.1) does it.
json resolve_plain_scalar(const std::string& s) {
  if (is_one_of(s, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (is_one_of(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}))
    return true;
  if (is_one_of(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"}))
    return false;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  const char* digits = (*first == '+' || *first == '-') ? first + 1 : first;
  if (digits < last && *digits >= '0' && *digits <= '9') {
    std::int64_t i = 0;
    const char* start = (*first == '+') ? first + 1 : first;
    auto [p, ec] = std::from_chars(start, last, i);
    if (ec == std::errc() && p == last) return i;
    double d = 0;
    auto [pd, ecd] = std::from_chars(start, last, d, std::chars_format::general);
    if (ecd == std::errc() && pd == last) return d;
  }
  if (is_one_of(s, {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"}))
    return std::numeric_limits<double>::infinity();
  if (is_one_of(s, {"-.inf", "-.Inf", "-.INF"})) return -std::numeric_limits<double>::infinity();
  return s;
}

std::string mark_text(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ": ";
}

// Depth-capped, node-count-capped YAML -> JSON walk. The depth cap bounds the
// recursion and ends alias cycles; the node cap ends alias expansion bombs.
class YamlToJson {
 public:
  YamlToJson(std::string_view source, const DecodeLimits& limits)
      : source_(source), limits_(limits) {}

  bool convert(const YAML::Node& node, json& out, std::size_t depth) {
    if (++nodes_ > limits_.max_nodes) {
      return fail_at(node, "document too large: more than " + std::to_string(limits_.max_nodes) +
                               " values (after expanding aliases)");
    }
    if (depth > limits_.max_depth) {
      return fail_at(node, "nesting deeper than " + std::to_string(limits_.max_depth) +
                               " levels (or an alias that refers to itself)");
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out = nullptr;
        return true;
      case YAML::NodeType::Scalar: {
        const std::string& tag = node.Tag();
        if (tag == "!" || tag == "tag:yaml.org,2002:str") {
          out = node.Scalar();
        } else {
          out = resolve_plain_scalar(node.Scalar());
        }
        return true;
      }
      case YAML::NodeType::Sequence: {
        out = json::array();
        for (const auto& child : node) {
          json value;
          if (!convert(child, value, depth + 1)) return false;
          out.push_back(std::move(value));
        }
        return true;
      }
      case YAML::NodeType::Map: {
        out = json::object();
        std::set<std::string> merged;  // keys that came from this map's merge key
        bool saw_merge = false;
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) return fail_at(kv.first, "map keys must be strings");
          if (is_merge_key(kv.first)) {
            if (saw_merge) return fail_at(kv.first, "duplicate key " + quote(kv.first.Scalar()));
            saw_merge = true;
            if (!merge(kv.first, kv.second, out, merged, depth)) return false;
            continue;
          }
          // Refused as kubectl's YAML decoder refuses it: with the last one
          // winning, "content_trust: untrusted" then "content_trust: trusted"
          // would make a Component trusted. A key after the merge key that
          // also sets it overrides the merged value (every YAML reader agrees).
          if (out.contains(kv.first.Scalar()) && merged.erase(kv.first.Scalar()) == 0) {
            return fail_at(kv.first, "duplicate key " + quote(kv.first.Scalar()));
          }
          json value;
          if (!convert(kv.second, value, depth + 1)) return false;
          out[kv.first.Scalar()] = std::move(value);
        }
        return true;
      }
    }
    return fail_at(node, "unsupported YAML node");
  }

  const std::string& error() const { return error_; }

 private:
  // The merge key: a plain (or !!merge-tagged) "<<"; a quoted "<<" is an
  // ordinary key, as in go-yaml.
  static bool is_merge_key(const YAML::Node& key) {
    return key.Scalar() == "<<" && (key.Tag() == "?" || key.Tag() == "tag:yaml.org,2002:merge");
  }

  // Merges `value` (a map, or a list of maps: earlier maps win) into `out`,
  // as go-yaml (the API server's and kubectl's reader) does. A key already
  // set explicitly before the merge key is refused: go-yaml v2 would take
  // the merged value there and v3 the explicit one.
  bool merge(const YAML::Node& key, const YAML::Node& value, json& out, std::set<std::string>& merged,
             std::size_t depth) {
    std::vector<YAML::Node> maps;
    if (value.IsMap()) {
      maps.push_back(value);
    } else if (value.IsSequence()) {
      for (const auto& m : value) {
        if (!m.IsMap()) return fail_at(m, "a merge key (<<) takes a map or a list of maps, found " + node_phrase(m));
        maps.push_back(m);
      }
    } else {
      return fail_at(key, "a merge key (<<) takes a map or a list of maps, found " + node_phrase(value));
    }
    for (const auto& m : maps) {
      json from;
      if (!convert(m, from, depth + 1)) return false;
      for (auto& item : from.items()) {
        const std::string& k = item.key();
        if (out.contains(k)) {
          if (merged.count(k) != 0) continue;  // an earlier map of the list set it
          return fail_at(key, "key " + quote(k) +
                                  " is set both before the merge key (<<) and by it: YAML readers disagree "
                                  "on which wins; put the merge key first");
        }
        out[k] = std::move(item.value());
        merged.insert(k);
      }
    }
    return true;
  }

  static std::string node_phrase(const YAML::Node& n) {
    if (n.IsScalar()) return "a scalar";
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a map";
    return "null";
  }

  bool fail_at(const YAML::Node& node, const std::string& message) {
    error_ = prefixed(source_, mark_text(node.Mark()) + message);
    return false;
  }

  std::string_view source_;
  const DecodeLimits& limits_;
  std::size_t nodes_ = 0;
  std::string error_;
};

}  // namespace

Result<json> parse_json(std::string_view text, std::string_view source,
                        const DecodeLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return fail(prefixed(source, "input is larger than " + std::to_string(limits.max_bytes) +
                                     " bytes"));
  }
  if (json_nesting_depth(text, limits.max_depth) > limits.max_depth) {
    return fail(prefixed(source, "JSON nested deeper than " + std::to_string(limits.max_depth) +
                                     " levels"));
  }
  // Duplicate keys are refused (nlohmann keeps the last): the keys of each
  // open object, innermost last.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t refuse_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open_objects.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;
  };
  try {
    json parsed = json::parse(text.begin(), text.end(), refuse_duplicates);
    if (!duplicate.empty()) return fail(prefixed(source, "invalid JSON: duplicate key " + quote(duplicate)));
    return parsed;
  } catch (const json::exception& e) {
    return fail(prefixed(source, std::string("invalid JSON: ") +
                                     std::string(strip_nlohmann_prefix(e.what()))));
  }
}

namespace {

// yaml-cpp 0.7's LoadAll never returns on a stream where its parser stops
// consuming tokens (a ',' outside a flow collection: ",", ", *b]"): it
// appends a null document per turn until memory runs out (found by
// tests/fuzz/component_fuzz; upstream jbeder/yaml-cpp#1040, fixed after 0.8
// by PR #1319). A first pass through the parser with a handler that keeps
// nothing refuses a document that starts where the previous one did.
class ProgressCheck final : public YAML::EventHandler {
 public:
  // The stuck position, once a document made no progress.
  std::optional<YAML::Mark> stuck;

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (started_ && mark.pos == last_.pos) stuck = mark;
    started_ = true;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false;
  YAML::Mark last_;
};

// Throws YAML exceptions as LoadAll does; the stuck stream as a ParserException.
void check_yaml_progress(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ProgressCheck check;
  while (parser.HandleNextDocument(check)) {
    if (check.stuck) throw YAML::ParserException(*check.stuck, "unexpected token (a ',' outside [] or {}?)");
  }
}

}  // namespace

namespace {

// A decoded YAML document and the line it starts on, with the lines of its
// `items` when it is a list (for Manifest lines).
struct LocatedYaml {
  json value;
  std::size_t line = 0;
  std::vector<std::size_t> item_lines;
};

Result<std::vector<LocatedYaml>> parse_yaml_located(std::string_view text, std::string_view source,
                                                    const DecodeLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return fail(prefixed(source, "input is larger than " + std::to_string(limits.max_bytes) +
                                     " bytes"));
  }
  std::vector<YAML::Node> nodes;
  try {
    std::string input(text);
    check_yaml_progress(input);
    nodes = YAML::LoadAll(input);
  } catch (const YAML::DeepRecursion& e) {
    return fail(prefixed(source, mark_text(e.mark) + "YAML nested too deeply"));
  } catch (const YAML::Exception& e) {
    return fail(prefixed(source, mark_text(e.mark) + "invalid YAML: " + one_line(e.msg)));
  } catch (const std::exception& e) {
    return fail(prefixed(source, "invalid YAML: " + one_line(e.what())));
  }
  std::vector<LocatedYaml> docs;
  docs.reserve(nodes.size());
  YamlToJson converter(source, limits);
  for (const auto& node : nodes) {
    if (node.IsNull()) continue;
    LocatedYaml doc;
    try {
      if (!converter.convert(node, doc.value, 1)) return fail(converter.error());
      doc.line = node.Mark().is_null() ? 0 : static_cast<std::size_t>(node.Mark().line) + 1;
      if (node.IsMap() && node["items"] && node["items"].IsSequence()) {
        for (const auto& item : node["items"]) {
          doc.item_lines.push_back(item.Mark().is_null() ? doc.line
                                                         : static_cast<std::size_t>(item.Mark().line) + 1);
        }
      }
    } catch (const YAML::Exception& e) {
      return fail(prefixed(source, mark_text(e.mark) + "invalid YAML: " + one_line(e.msg)));
    }
    docs.push_back(std::move(doc));
  }
  return docs;
}

bool starts_like_json(std::string_view text) {
  auto first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (text[first] == '{' || text[first] == '[');
}

// A list document: kind "List" or "<Kind>List" with an `items` list.
bool is_list(const json& doc) {
  if (!doc.is_object()) return false;
  auto kind = doc.find("kind");
  auto items = doc.find("items");
  if (kind == doc.end() || !kind->is_string() || items == doc.end() || !items->is_array()) return false;
  const auto& k = kind->get_ref<const std::string&>();
  return k.size() >= 4 && k.compare(k.size() - 4, 4, "List") == 0;
}

void add_manifests(json doc, std::size_t line, const std::vector<std::size_t>& item_lines,
                   std::size_t document, std::vector<Manifest>& out) {
  if (!is_list(doc)) {
    out.push_back(Manifest{std::move(doc), line, document, 0});
    return;
  }
  // A typed list (DeploymentList) from the API leaves kind and apiVersion
  // off its items.
  const std::string list_kind = doc["kind"].get<std::string>();
  const std::string item_kind = list_kind == "List" ? "" : list_kind.substr(0, list_kind.size() - 4);
  const json api_version = doc.value("apiVersion", json());
  std::size_t index = 0;
  for (auto& item : doc["items"]) {
    if (item.is_object() && !item_kind.empty()) {
      if (!item.contains("kind")) item["kind"] = item_kind;
      if (!item.contains("apiVersion") && api_version.is_string()) item["apiVersion"] = api_version;
    }
    const std::size_t item_line = index < item_lines.size() ? item_lines[index] : line;
    out.push_back(Manifest{std::move(item), item_line, document, ++index});
  }
}

}  // namespace

Result<std::vector<json>> parse_yaml_documents(std::string_view text, std::string_view source,
                                               const DecodeLimits& limits) {
  auto located = parse_yaml_located(text, source, limits);
  if (!located) return fail(located.error());
  std::vector<json> docs;
  docs.reserve(located->size());
  for (auto& d : *located) docs.push_back(std::move(d.value));
  return docs;
}

Result<std::vector<json>> parse_documents(std::string_view text, std::string_view source,
                                          const DecodeLimits& limits) {
  if (starts_like_json(text)) {
    auto doc = parse_json(text, source, limits);
    if (doc) {
      std::vector<json> docs;
      docs.push_back(std::move(doc).value());
      return docs;
    }
    // Flow-style YAML ({kind: Pod, ...}) starts like JSON too: it is YAML
    // when yaml-cpp reads it; otherwise the JSON error is the useful one.
    auto yaml = parse_yaml_documents(text, source, limits);
    if (yaml) return yaml;
    return fail(doc.error());
  }
  return parse_yaml_documents(text, source, limits);
}

Result<std::string> read_text(std::istream& in, const std::string& source, const DecodeLimits& limits) {
  std::string text;
  char buffer[64 * 1024];
  while (in) {
    in.read(buffer, sizeof buffer);
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > limits.max_bytes) {
      return fail(source + ": input is larger than " + std::to_string(limits.max_bytes) + " bytes");
    }
  }
  if (in.bad()) return fail(source + ": cannot read");
  return text;
}

Result<std::string> read_text_file(const std::string& path, const DecodeLimits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot open: " + std::strerror(errno));
  // Not seeked: pipes and /dev/stdin have no size. A regular file's size
  // still refuses a large one before reading it.
  if (std::filesystem::is_regular_file(path, ec)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limits.max_bytes) {
      return fail(path + ": file is larger than " + std::to_string(limits.max_bytes) + " bytes");
    }
  }
  return read_text(in, path, limits);
}

Result<std::vector<json>> load_documents_file(const std::string& path, const DecodeLimits& limits) {
  auto text = read_text_file(path, limits);
  if (!text) return fail(text.error());
  return parse_documents(*text, path, limits);
}

Result<std::vector<Manifest>> parse_manifests(std::string_view text, std::string_view source,
                                              const DecodeLimits& limits) {
  std::vector<Manifest> out;
  if (starts_like_json(text)) {
    auto doc = parse_json(text, source, limits);
    if (doc) {
      add_manifests(std::move(doc).value(), 1, {}, 1, out);
      return out;
    }
  }
  auto docs = parse_yaml_located(text, source, limits);
  if (!docs) {
    // JSON-looking text that is not flow-style YAML either: the JSON error is the useful one.
    if (starts_like_json(text)) return fail(parse_json(text, source, limits).error());
    return fail(docs.error());
  }
  std::size_t document = 0;
  for (auto& d : *docs) add_manifests(std::move(d.value), d.line, d.item_lines, ++document, out);
  return out;
}

namespace {

Result<json> single_document(Result<std::vector<json>> docs, std::string_view source) {
  if (!docs) return fail(docs.error());
  if (docs->empty()) return fail(prefixed(source, "no document in file"));
  if (docs->size() > 1) {
    return fail(prefixed(source, "expected one document, found " + std::to_string(docs->size())));
  }
  return std::move(docs->front());
}

void emit_yaml(YAML::Emitter& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& item : value.items()) {
        out << YAML::Key << YAML::DoubleQuoted << item.key() << YAML::Value;
        emit_yaml(out, item.value());
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& v : value) emit_yaml(out, v);
      out << YAML::EndSeq;
      return;
    case json::value_t::string: out << YAML::DoubleQuoted << value.get_ref<const std::string&>(); return;
    case json::value_t::null: out << YAML::Null; return;
    default: out << dump_json(value); return;  // numbers and booleans as JSON writes them
  }
}

}  // namespace

Result<json> load_single_document_file(const std::string& path, const DecodeLimits& limits) {
  return single_document(load_documents_file(path, limits), path);
}

Result<json> parse_single_document(std::string_view text, std::string_view source, const DecodeLimits& limits) {
  return single_document(parse_documents(text, source, limits), source);
}

std::string dump_yaml(const json& value) {
  YAML::Emitter out;
  emit_yaml(out, value);
  std::string text = out.c_str();
  text += "\n";
  return text;
}

std::string_view json_type_phrase(const json& value) noexcept { return json_type_phrase(value.type()); }

std::string_view json_type_phrase(json::value_t type) noexcept {
  switch (type) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "a map";
    case json::value_t::array: return "a list";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

std::string dump_json(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace ig::model
