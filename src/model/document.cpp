#include "model/document.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <charconv>
#include <cstdio>
#include <fstream>
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
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) return fail_at(kv.first, "map keys must be strings");
          // Refused as kubectl's YAML decoder refuses it: with the last one
          // winning, "content_trust: untrusted" then "content_trust: trusted"
          // would make a Component trusted.
          if (out.contains(kv.first.Scalar())) {
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

Result<std::vector<json>> parse_yaml_documents(std::string_view text, std::string_view source,
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
  std::vector<json> docs;
  docs.reserve(nodes.size());
  YamlToJson converter(source, limits);
  for (const auto& node : nodes) {
    if (node.IsNull()) continue;
    json doc;
    try {
      if (!converter.convert(node, doc, 1)) return fail(converter.error());
    } catch (const YAML::Exception& e) {
      return fail(prefixed(source, mark_text(e.mark) + "invalid YAML: " + one_line(e.msg)));
    }
    docs.push_back(std::move(doc));
  }
  return docs;
}

Result<std::vector<json>> parse_documents(std::string_view text, std::string_view source,
                                          const DecodeLimits& limits) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
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

Result<std::vector<json>> load_documents_file(const std::string& path, const DecodeLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) return fail(path + ": cannot read");
  if (static_cast<std::size_t>(size) > limits.max_bytes) {
    return fail(path + ": file is larger than " + std::to_string(limits.max_bytes) + " bytes");
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  in.read(text.data(), size);
  if (!in) return fail(path + ": cannot read");
  return parse_documents(text, path, limits);
}

Result<json> load_single_document_file(const std::string& path, const DecodeLimits& limits) {
  auto docs = load_documents_file(path, limits);
  if (!docs) return fail(docs.error());
  if (docs->empty()) return fail(path + ": no document in file");
  if (docs->size() > 1) {
    return fail(path + ": expected one document, found " + std::to_string(docs->size()));
  }
  return std::move(docs->front());
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
