// The gate's whole contract: every row of the truth table, the shape
// fallback, the fail-closed zero values, and that it stays the only decision site.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "policy/gate.h"

namespace {

using namespace ig::policy;

struct Row {
  SandboxAvailability sandbox;
  ContentTrust trust;
  DeploymentShape shape;
  Decision expected;
};

// 2 sandbox states x 3 trust states (incl. unspecified) x 2 shapes.
constexpr Row kTruthTable[] = {
    {SandboxAvailability::Available, ContentTrust::Untrusted, DeploymentShape::SetecOnly, Decision::RequireSetec},
    {SandboxAvailability::Available, ContentTrust::Trusted, DeploymentShape::SetecOnly, Decision::RequireSetec},
    {SandboxAvailability::Available, ContentTrust::Unspecified, DeploymentShape::SetecOnly, Decision::RequireSetec},
    {SandboxAvailability::Available, ContentTrust::Untrusted, DeploymentShape::CustomerIsolation, Decision::RequireSetec},
    {SandboxAvailability::Available, ContentTrust::Trusted, DeploymentShape::CustomerIsolation, Decision::RequireSetec},
    {SandboxAvailability::Available, ContentTrust::Unspecified, DeploymentShape::CustomerIsolation, Decision::RequireSetec},
    {SandboxAvailability::Unavailable, ContentTrust::Untrusted, DeploymentShape::SetecOnly, Decision::Deny},
    {SandboxAvailability::Unavailable, ContentTrust::Trusted, DeploymentShape::SetecOnly, Decision::AllowInProcess},
    {SandboxAvailability::Unavailable, ContentTrust::Unspecified, DeploymentShape::SetecOnly, Decision::AllowInProcess},
    {SandboxAvailability::Unavailable, ContentTrust::Untrusted, DeploymentShape::CustomerIsolation, Decision::AllowInProcess},
    {SandboxAvailability::Unavailable, ContentTrust::Trusted, DeploymentShape::CustomerIsolation, Decision::AllowInProcess},
    {SandboxAvailability::Unavailable, ContentTrust::Unspecified, DeploymentShape::CustomerIsolation, Decision::AllowInProcess},
};

TEST(Gate, DecidesEveryRowOfTheTruthTable) {
  for (const auto& row : kTruthTable) {
    EXPECT_EQ(decide(row.sandbox, row.trust, row.shape), row.expected)
        << to_string(row.sandbox) << " / " << to_string(row.trust) << " / " << to_string(row.shape);
  }
}

TEST(Gate, IsNoexceptAndUsableAtCompileTimeShape) {
  static_assert(noexcept(decide(SandboxAvailability{}, ContentTrust{}, DeploymentShape{})));
  static_assert(noexcept(parse_shape(std::nullopt)));
  static_assert(noexcept(parse_content_trust(std::nullopt)));
}

TEST(Gate, ZeroValuesOfEveryEnumAreTheFailClosedOnes) {
  EXPECT_EQ(Decision{}, Decision::Deny);
  EXPECT_EQ(SandboxAvailability{}, SandboxAvailability::Unavailable);
  EXPECT_EQ(ContentTrust{}, ContentTrust::Untrusted);
  EXPECT_EQ(DeploymentShape{}, DeploymentShape::SetecOnly);
  // All-zero inputs deny.
  EXPECT_EQ(decide(SandboxAvailability{}, ContentTrust{}, DeploymentShape{}), Decision::Deny);
  // Default-constructed settings are fail-closed too.
  EXPECT_EQ(ShapeSetting{}.shape, DeploymentShape::SetecOnly);
  EXPECT_EQ(TrustSetting{}.trust, ContentTrust::Untrusted);
  EXPECT_FALSE(TrustSetting{}.valid);
}

TEST(Gate, ValuesOutsideTheEnumeratorsAreReadFailClosed) {
  for (int raw : {3, 7, 42, 128, 255}) {
    const auto garbage_sandbox = static_cast<SandboxAvailability>(raw);
    const auto garbage_trust = static_cast<ContentTrust>(raw);
    const auto garbage_shape = static_cast<DeploymentShape>(raw);
    // A sandbox that is not exactly Available is unavailable.
    EXPECT_EQ(decide(garbage_sandbox, ContentTrust::Untrusted, DeploymentShape::SetecOnly), Decision::Deny);
    EXPECT_EQ(decide(garbage_sandbox, ContentTrust::Trusted, DeploymentShape::SetecOnly), Decision::AllowInProcess);
    // A trust that is not Trusted/Unspecified is untrusted.
    EXPECT_EQ(decide(SandboxAvailability::Unavailable, garbage_trust, DeploymentShape::SetecOnly), Decision::Deny);
    // A shape that is not exactly CustomerIsolation is hosted.
    EXPECT_EQ(decide(SandboxAvailability::Unavailable, ContentTrust::Untrusted, garbage_shape), Decision::Deny);
    EXPECT_EQ(to_string(garbage_shape), "setec-only");
    EXPECT_EQ(to_string(garbage_trust), "untrusted");
    EXPECT_EQ(to_string(garbage_sandbox), "unavailable");
    EXPECT_EQ(to_string(static_cast<Decision>(raw)), "Deny");
    EXPECT_FALSE(is_available(garbage_sandbox));
    EXPECT_FALSE(is_trusted(garbage_trust));
  }
}

TEST(Gate, ReadsItsInputsAsItsHelpersSay) {
  EXPECT_TRUE(is_available(SandboxAvailability::Available));
  EXPECT_FALSE(is_available(SandboxAvailability::Unavailable));
  EXPECT_TRUE(is_trusted(ContentTrust::Trusted));
  EXPECT_TRUE(is_trusted(ContentTrust::Unspecified));
  EXPECT_FALSE(is_trusted(ContentTrust::Untrusted));
  EXPECT_TRUE(requires_platform_sandbox(DeploymentShape::SetecOnly));
  EXPECT_FALSE(requires_platform_sandbox(DeploymentShape::CustomerIsolation));
  EXPECT_TRUE(requires_platform_sandbox(static_cast<DeploymentShape>(7)));
}

TEST(DeploymentShapeParsing, SelectsCustomerIsolationOnlyForTheExactString) {
  auto s = parse_shape(std::string_view("customer-isolation"));
  EXPECT_EQ(s.shape, DeploymentShape::CustomerIsolation);
  EXPECT_FALSE(s.fell_back);
}

TEST(DeploymentShapeParsing, UnsetEmptyAndSetecOnlyAreHostedWithoutFallback) {
  for (auto raw : {std::optional<std::string_view>{}, std::optional<std::string_view>{""},
                   std::optional<std::string_view>{"setec-only"}}) {
    auto s = parse_shape(raw);
    EXPECT_EQ(s.shape, DeploymentShape::SetecOnly);
    EXPECT_FALSE(s.fell_back);
  }
}

TEST(DeploymentShapeParsing, EveryUnrecognisedValueFallsBackToSetecOnly) {
  using namespace std::string_view_literals;
  const std::string_view values[] = {
      "SETEC-ONLY"sv, "Customer-Isolation"sv, "CUSTOMER-ISOLATION"sv, " customer-isolation"sv,
      "customer-isolation "sv, "customer-isolation\n"sv, "\tcustomer-isolation"sv,
      "customer_isolation"sv, "customerisolation"sv, "customer-isolation\0"sv, "self-hosted"sv,
      "true"sv, "1"sv, "none"sv, "off"sv, "garbage"sv, " "sv, "setec-only "sv,
      "\xff\xfe"sv, std::string_view("customer-isolation-x")};
  for (auto v : values) {
    auto s = parse_shape(v);
    EXPECT_EQ(s.shape, DeploymentShape::SetecOnly) << "value: [" << v << "]";
    EXPECT_TRUE(s.fell_back) << "value: [" << v << "]";
  }
}

TEST(ContentTrustParsing, OmittedNullOrEmptyMeansTrustedAndUndeclared) {
  for (auto raw : {std::optional<std::string_view>{}, std::optional<std::string_view>{""}}) {
    auto t = parse_content_trust(raw);
    EXPECT_EQ(t.trust, ContentTrust::Unspecified);
    EXPECT_FALSE(t.declared);
    EXPECT_TRUE(t.valid);
    EXPECT_EQ(effective_trust_name(t.trust), "trusted");
  }
}

TEST(ContentTrustParsing, TrustedAndUntrustedAreTheOnlyValidValues) {
  auto trusted = parse_content_trust(std::string_view("trusted"));
  EXPECT_EQ(trusted.trust, ContentTrust::Trusted);
  EXPECT_TRUE(trusted.declared && trusted.valid);
  auto untrusted = parse_content_trust(std::string_view("untrusted"));
  EXPECT_EQ(untrusted.trust, ContentTrust::Untrusted);
  EXPECT_TRUE(untrusted.declared && untrusted.valid);
}

TEST(ContentTrustParsing, AnyOtherValueIsInvalidAndTreatedAsUntrusted) {
  for (std::string_view v : {"Trusted", "TRUSTED", " trusted", "trusted ", "yes", "true",
                             "maybe", "semi-trusted", "untrusted\n", "null"}) {
    auto t = parse_content_trust(v);
    EXPECT_EQ(t.trust, ContentTrust::Untrusted) << v;
    EXPECT_TRUE(t.declared) << v;
    EXPECT_FALSE(t.valid) << v;
    // The gate acts on it fail-closed.
    EXPECT_EQ(decide(SandboxAvailability::Unavailable, t.trust, DeploymentShape::SetecOnly),
              Decision::Deny);
  }
}

// --- The one decision site -------------------------------------------------
// Outside src/policy/, code may carry out a Decision (a `case Decision::X:`
// label in a switch) but never make one (docs/architecture.md, "The gate"):
//  - no enumerator of the gate's types is compared, and no Decision
//    enumerator is used as a value: only policy::decide produces Decisions;
//  - no string naming a gate input or a decision ("customer-isolation",
//    "setec-only", "trusted", "untrusted", "available", "unavailable",
//    "RequireSetec", "AllowInProcess", "Deny") is compared with anything, so
//    no code learns an input or a decision back from its printed word
//    (`in.shape == "customer-isolation"`, `describe() == "available"`).
//    Enums travel to the edge and become words only when printed.

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Comments removed (each becomes one space; newlines kept, so line numbers do
// not move). String and character literals, raw strings included, are kept
// when `keep_strings`, and otherwise reduced to "" and ''.
std::string strip_source(const std::string& text, bool keep_strings) {
  std::string out;
  out.reserve(text.size());
  const std::size_t n = text.size();
  auto at = [&](std::size_t i) { return i < n ? text[i] : '\0'; };
  auto literal = [&](std::size_t from, std::size_t to, char quote) {
    if (keep_strings) {
      out.append(text, from, to - from);
    } else {
      out += quote;
      out += quote;
      for (std::size_t k = from; k < to; ++k)
        if (text[k] == '\n') out += '\n';
    }
  };
  std::size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '/' && at(i + 1) == '/') {
      for (i += 2; i < n && text[i] != '\n'; ++i)
        if (text[i] == '\\' && at(i + 1) == '\n') { out += '\n'; ++i; }
      out += ' ';
      continue;
    }
    if (c == '/' && at(i + 1) == '*') {
      for (i += 2; i < n && !(text[i] == '*' && at(i + 1) == '/'); ++i)
        if (text[i] == '\n') out += '\n';
      i = std::min(n, i + 2);
      out += ' ';
      continue;
    }
    if (c == 'R' && at(i + 1) == '"') {
      // A raw string, unless R ends a longer identifier (u8R, LR, uR, UR are prefixes).
      std::size_t s = i;
      while (s > 0 && is_ident_char(text[s - 1])) --s;
      const std::string before = text.substr(s, i - s);
      const std::size_t open = text.find('(', i + 2);
      if ((before.empty() || before == "u8" || before == "L" || before == "u" || before == "U") &&
          open != std::string::npos) {
        const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
        std::size_t end = text.find(close, open + 1);
        end = end == std::string::npos ? n : end + close.size();
        out += 'R';
        literal(i + 1, end, '"');
        i = end;
        continue;
      }
    }
    if (c == '"' || c == '\'') {
      // A quote inside a number is a digit separator (1'000), not a literal.
      if (c == '\'' && i > 0 && is_ident_char(text[i - 1])) {
        std::size_t s = i;
        while (s > 0 && (is_ident_char(text[s - 1]) || text[s - 1] == '\'' || text[s - 1] == '.')) --s;
        if (std::isdigit(static_cast<unsigned char>(text[s]))) { out += c; ++i; continue; }
      }
      const std::size_t start = i++;
      while (i < n && text[i] != c && text[i] != '\n') i += text[i] == '\\' ? 2 : 1;
      if (i < n && text[i] == c) ++i;
      literal(start, std::min(i, n), c);
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

std::string strip_comments_and_strings(const std::string& text) { return strip_source(text, false); }

// The words the gate's inputs and decisions are printed as (policy::to_string,
// parse_shape, parse_content_trust, SandboxView::describe()).
const std::string kGateWords =
    "(customer-isolation|setec-only|trusted|untrusted|available|unavailable|"
    "RequireSetec|AllowInProcess|Deny)";

// A gate word compared with something, on one line of comment-free code:
// `x == "w"`, `x != std::string_view("w")`, `"w"sv == x`, `s.compare("w")`.
bool compares_a_gate_word(const std::string& line) {
  static const std::regex word_after_operator(
      R"re((==|!=)\s*(\(\s*)?([\w:]+\s*[({]\s*)?")re" + kGateWords + "\"");
  static const std::regex word_before_operator(
      "\"" + kGateWords + R"re("(sv|s)?\s*([)}]\s*)?(==|!=))re");
  static const std::regex word_in_comparing_call(
      R"re(\b(compare|starts_with|ends_with|find|rfind|strcmp|strncmp|strcasecmp|strncasecmp|)re"
      R"re(equals|iequals|contains)\s*\(([^;"()]|\(\))*")re" + kGateWords + "\"");
  return std::regex_search(line, word_after_operator) ||
         std::regex_search(line, word_before_operator) ||
         std::regex_search(line, word_in_comparing_call);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool ends_with_operator(const std::string& s) {
  return s.size() >= 2 && (s.compare(s.size() - 2, 2, "==") == 0 || s.compare(s.size() - 2, 2, "!=") == 0);
}

std::vector<std::string> decision_site_violations(const std::string& code) {
  static const std::regex comparison(
      R"(([=!]=|<=?|>=?)\s*(policy::)?(Decision|ContentTrust|DeploymentShape|SandboxAvailability)(::\w+|\s*\{\s*\}))"
      R"(|(policy::)?(Decision|ContentTrust|DeploymentShape|SandboxAvailability)(::\w+|\s*\{\s*\})\s*([=!]=|<|>))");
  static const std::regex decision_value(R"((policy::)?Decision::(Deny|RequireSetec|AllowInProcess))");
  static const std::regex case_label(R"(case\s+(ig::)?(policy::)?Decision::\w+\s*:)");
  std::vector<std::string> found;
  const std::vector<std::string> code_lines = split_lines(strip_comments_and_strings(code));
  const std::vector<std::string> with_strings = split_lines(strip_source(code, true));
  for (std::size_t k = 0; k < code_lines.size(); ++k) {
    const std::string& line = code_lines[k];
    const std::string number = std::to_string(k + 1);
    if (std::regex_search(line, comparison)) {
      found.push_back(number + ": compares a gate input or decision: " + line);
      continue;
    }
    std::string without_cases = std::regex_replace(line, case_label, "");
    if (std::regex_search(without_cases, decision_value)) {
      found.push_back(number + ": uses a Decision as a value: " + line);
      continue;
    }
    if (k >= with_strings.size()) continue;
    // The same line with its string literals; a comparison split over two
    // lines (`x ==` / `"trusted"`) is read as one.
    bool hit = compares_a_gate_word(with_strings[k]);
    if (!hit && k + 1 < with_strings.size() && !compares_a_gate_word(with_strings[k + 1])) {
      const std::string here = trim(with_strings[k]), next = trim(with_strings[k + 1]);
      if (ends_with_operator(here) || next.rfind("==", 0) == 0 || next.rfind("!=", 0) == 0 ||
          (next.rfind("\"", 0) == 0 && here.ends_with("(")))
        hit = compares_a_gate_word(here + " " + next);
    }
    if (hit) {
      found.push_back(number + ": compares a string naming a gate input or decision (keep the enum; "
                      "turn it into words only to print): " + trim(with_strings[k]));
    }
  }
  return found;
}

TEST(OneDecisionSite, TheGuardCatchesASecondDecisionSite) {
  // The guard itself must fire on the shapes of a second decision site.
  EXPECT_FALSE(decision_site_violations("if (d == Decision::Deny) return;").empty());
  EXPECT_FALSE(decision_site_violations("if (trust != ContentTrust::Untrusted) x();").empty());
  EXPECT_FALSE(decision_site_violations("bool hosted = shape == policy::DeploymentShape::SetecOnly;").empty());
  EXPECT_FALSE(decision_site_violations("return policy::Decision::AllowInProcess;").empty());
  EXPECT_FALSE(decision_site_violations("auto d = Decision::RequireSetec;").empty());
  EXPECT_FALSE(decision_site_violations("if (v.decision == policy::Decision{}) deny();").empty());
  // Carrying a decision out is allowed.
  EXPECT_TRUE(decision_site_violations("  case policy::Decision::Deny: return deny();").empty());
  EXPECT_TRUE(decision_site_violations("v.decision = policy::decide(a, t, s);").empty());
  EXPECT_TRUE(decision_site_violations("// if (d == Decision::Deny) in a comment").empty());
}

TEST(OneDecisionSite, TheGuardCatchesAGateInputLearntBackFromItsWord) {
  // Each shape of comparing a printed gate word, on either side, as a call.
  for (const char* code : {
           R"(std::string out = in.shape == "customer-isolation" ? "a" : "b";)",
           R"(if (x != "setec-only") return;)",
           R"(if (in.trust == "trusted") hint();)",
           R"(if ("untrusted" == t) deny();)",
           R"(gauge(sandbox.describe() == "available" ? 1 : 0);)",
           R"(if (s.compare("unavailable") == 0) x();)",
           R"(if (to_string(d) == "RequireSetec") patch();)",
           R"(bool in_process = decision_word == "AllowInProcess";)",
           R"(if (verdict.decision_name() == "Deny") count();)",
           R"(if (sandbox_flag != "available" && sandbox_flag != "unavailable") return 2;)",
           R"(if ("trusted"sv == trust_name) x();)",
           R"(if (t == std::string_view("untrusted")) x();)",
           R"(if (std::string("setec-only") != shape) x();)",
           R"(if (shape.starts_with("customer-isolation")) x();)",
           R"(if (std::strcmp(name.c_str(), "trusted") == 0) x();)",
           R"(if (word.compare(0, 4, "Deny") == 0) x();)",
           "const bool available = description ==\n    \"available\";",
           "if (shape\n    == \"customer-isolation\") x();",
           R"(auto r = R"x(raw)x"; if (shape == "customer-isolation") x();)",
       }) {
    EXPECT_FALSE(decision_site_violations(code).empty()) << code;
  }
  // The violation names the line it is on.
  const auto v = decision_site_violations("int a;\n/* two\nlines */\nif (in.trust == \"trusted\") x();\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rfind("4: ", 0), 0u) << v[0];
}

TEST(OneDecisionSite, TheGuardLetsGateWordsBePrinted) {
  for (const char* code : {
           // Printing words, as messages and annotations.
           R"(out << "the sandbox is available";)",
           R"(answer.annotate("decision", "Deny");)",
           R"(const std::pair<const char*, const char*> audit[] = {{"decision", "Deny"}, {"trust", "trusted"}};)",
           R"(std::string m = "trusted == untrusted is never true";)",
           R"(log("shape", "customer-isolation");)",
           R"(return "trusted";)",
           R"(std::cout << (ok ? "available" : "unavailable") << '\n';)",
           // Comparing words that are not the gate's.
           R"(if (output == "json") x();)",
           R"(if (kind == "Deployment" || kind == "StatefulSet") x();)",
           R"(if (r.operation == "CREATE") x();)",
           R"(if (word == "trusted-ish") x();)",
           R"(if (ns == "kube-system") x();)",
           // A comparison whose string is not a gate word, next to one that is printed.
           R"(if (a == b) log("trusted");)",
           R"(msg = "shape == \"customer-isolation\"";)",
           // Comments do not count.
           R"(// if (in.shape == "customer-isolation") x();)",
           "/* sandbox.describe() == \"available\" */ int x;",
       }) {
    EXPECT_TRUE(decision_site_violations(code).empty()) << code;
  }
}

TEST(OneDecisionSite, NothingOutsideSrcPolicyMakesADecision) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(IG_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src));
  std::size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const auto ext = entry.path().extension();
    if (ext != ".cpp" && ext != ".h" && ext != ".hpp" && ext != ".cc") continue;
    const auto rel = fs::relative(entry.path(), src).generic_string();
    if (rel.rfind("policy/", 0) == 0) continue;
    std::ifstream in(entry.path());
    std::stringstream buf;
    buf << in.rdbuf();
    ++files;
    for (const auto& v : decision_site_violations(buf.str())) ADD_FAILURE() << "src/" << rel << ":" << v;
  }
  EXPECT_GT(files, 5u);
}

TEST(OneDecisionSite, OnlyTheRuleEngineCallsTheGate) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(IG_SOURCE_DIR) / "src";
  const std::regex call(R"(\bdecide\s*\()");
  std::vector<std::string> callers;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const auto rel = fs::relative(entry.path(), src).generic_string();
    if (rel.rfind("policy/", 0) == 0) continue;
    std::ifstream in(entry.path());
    std::stringstream buf;
    buf << in.rdbuf();
    if (std::regex_search(strip_comments_and_strings(buf.str()), call)) callers.push_back(rel);
  }
  // The rule engine decides for requests; the operator's decision_for()
  // reports the same decision for a Component (status, drift). Nothing else.
  std::sort(callers.begin(), callers.end());
  EXPECT_EQ(callers, (std::vector<std::string>{"admission/pod_rules.cpp", "controller/component_status.cpp"}));
}

}  // namespace
