// Shared by the libFuzzer targets: invariant checks that abort with a reason,
// and reference predicates computed independently of the code under test
// (nlohmann's own parser and yaml-cpp's own tree, not the project's decoders),
// so that a target can say "this input could not be decided / must be
// refused" without asking the code it is checking.
//
// Guarantees: every helper is bounded (no recursion on attacker-controlled
// depth beyond kMaxDepth, alias cycles are walked once), never throws.
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ig::fuzz {

// Deeper than any limit of the code under test (128): inputs past it are
// left alone by the references (they answer "unknown").
inline constexpr int kMaxDepth = 256;

// An invariant broke: print why (libFuzzer keeps stderr with the crash
// artifact) and abort so the input is saved.
[[noreturn]] inline void fail(std::string_view why, std::string_view detail = {}) {
  std::fprintf(stderr, "\nFUZZ INVARIANT BROKEN: %.*s\n%.*s\n", int(why.size()), why.data(),
               int(detail.size() > 2000 ? 2000 : detail.size()), detail.data());
  std::abort();
}

#define IG_FUZZ_CHECK(cond, why, detail) \
  do {                                   \
    if (!(cond)) ::ig::fuzz::fail(why, detail); \
  } while (0)

// Strict JSON, as the API server sends it: nlohmann's parser (iterative),
// with a parser callback of our own that notices a repeated member name in
// any object and a nesting depth past kMaxDepth. nullopt: not strict JSON
// (syntax error, NUL byte, duplicate key, invalid UTF-8 is left to
// nlohmann, which rejects it).
struct StrictJson {
  std::optional<nlohmann::json> value;  // nullopt: not JSON at all, or duplicate, or too deep
  bool duplicate = false;
  bool too_deep = false;
};

inline StrictJson parse_strict_json(std::string_view text) {
  StrictJson out;
  if (text.find('\0') != std::string_view::npos) return out;
  std::vector<std::set<std::string>> keys;  // one set per open object
  bool dup = false, deep = false;
  int depth = 0;
  auto cb = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (ev) {
      case E::object_start:
        keys.emplace_back();
        if (++depth > kMaxDepth) deep = true;
        break;
      case E::array_start:
        keys.emplace_back();  // placeholder, keeps the stack aligned
        if (++depth > kMaxDepth) deep = true;
        break;
      case E::object_end:
      case E::array_end:
        if (!keys.empty()) keys.pop_back();
        --depth;
        break;
      case E::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) dup = true;
        break;
      case E::value:
        break;
    }
    return !deep;  // stop building past the depth limit
  };
  try {
    nlohmann::json v = nlohmann::json::parse(text.begin(), text.end(), cb);
    out.duplicate = dup;
    out.too_deep = deep;
    if (!dup && !deep) out.value = std::move(v);
  } catch (...) {
    out.duplicate = dup;
    out.too_deep = deep;
  }
  return out;
}

// True when some mapping in the YAML stream has two keys with the same
// scalar text (Kubernetes' YAML->JSON keys are strings, so `a` and "a" are
// one key). nullopt: yaml-cpp cannot load the stream (syntax, depth) or the
// walk passes its node budget, so nothing is claimed.
// yaml-cpp 0.7's LoadAll loops forever (and eats memory) on a stream its
// parser stops consuming (",": jbeder/yaml-cpp#1040); a first pass stops at
// a document that starts where the previous one did. True: LoadAll ends.
class YamlProgress final : public YAML::EventHandler {
 public:
  bool stuck = false;
  void OnDocumentStart(const YAML::Mark& m) override {
    stuck = stuck || (docs_++ > 0 && m.pos == last_);
    last_ = m.pos;
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
  int docs_ = 0;
  int last_ = -1;
};

inline bool yaml_load_all_ends(const std::string& text) {
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    YamlProgress progress;
    while (parser.HandleNextDocument(progress))
      if (progress.stuck) return false;
  } catch (...) {
  }
  return true;
}

inline std::optional<bool> yaml_has_duplicate_key(std::string_view text) {
  std::vector<YAML::Node> docs;
  try {
    if (!yaml_load_all_ends(std::string(text))) return std::nullopt;
    docs = YAML::LoadAll(std::string(text));
  } catch (...) {
    return std::nullopt;
  }
  // No visited set (yaml-cpp gives nodes no public identity): the node
  // budget bounds alias expansion and alias cycles; past it, no claim.
  std::vector<std::pair<YAML::Node, int>> todo;
  for (auto& d : docs) todo.emplace_back(d, 0);
  std::size_t budget = 200000;
  while (!todo.empty()) {
    if (budget-- == 0) return std::nullopt;
    auto [n, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxDepth) return std::nullopt;
    if (!n.IsDefined() || n.IsNull() || n.IsScalar()) continue;
    if (n.IsMap()) {
      std::set<std::string> keys;
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (it->first.IsScalar() && !keys.insert(it->first.Scalar()).second) return true;
        todo.emplace_back(it->second, depth + 1);
      }
    } else if (n.IsSequence()) {
      for (auto it = n.begin(); it != n.end(); ++it) todo.emplace_back(*it, depth + 1);
    }
  }
  return false;
}

}  // namespace ig::fuzz
