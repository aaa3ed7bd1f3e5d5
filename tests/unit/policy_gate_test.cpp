// The gate's whole contract: every row of the truth table, the shape
// fallback, the fail-closed zero values, and that it stays the only decision site.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

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
// label in a switch) but never make one: no enumerator of the gate's types is
// compared, and no Decision enumerator is used as a value. Only policy::decide
// produces Decisions.

std::string strip_comments_and_strings(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  enum { Code, Line, Block, Str, Chr } st = Code;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i], n = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (st) {
      case Code:
        if (c == '/' && n == '/') { st = Line; ++i; }
        else if (c == '/' && n == '*') { st = Block; ++i; }
        else if (c == '"') { st = Str; out += "\"\""; }
        else if (c == '\'') { st = Chr; out += "''"; }
        else out += c;
        break;
      case Line: if (c == '\n') { st = Code; out += c; } break;
      case Block: if (c == '*' && n == '/') { st = Code; ++i; } break;
      case Str: if (c == '\\') ++i; else if (c == '"') st = Code; break;
      case Chr: if (c == '\\') ++i; else if (c == '\'') st = Code; break;
    }
  }
  return out;
}

std::vector<std::string> decision_site_violations(const std::string& code) {
  static const std::regex enumerator(
      R"((Decision|ContentTrust|DeploymentShape|SandboxAvailability)(::|\s*\{\s*\}))");
  static const std::regex comparison(
      R"(([=!]=|<=?|>=?)\s*(policy::)?(Decision|ContentTrust|DeploymentShape|SandboxAvailability)(::\w+|\s*\{\s*\}))"
      R"(|(policy::)?(Decision|ContentTrust|DeploymentShape|SandboxAvailability)(::\w+|\s*\{\s*\})\s*([=!]=|<|>))");
  static const std::regex decision_value(R"((policy::)?Decision::(Deny|RequireSetec|AllowInProcess))");
  static const std::regex case_label(R"(case\s+(ig::)?(policy::)?Decision::\w+\s*:)");
  std::vector<std::string> found;
  std::istringstream lines(strip_comments_and_strings(code));
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (std::regex_search(line, comparison)) {
      found.push_back(std::to_string(number) + ": compares a gate input or decision: " + line);
      continue;
    }
    std::string without_cases = std::regex_replace(line, case_label, "");
    if (std::regex_search(without_cases, decision_value)) {
      found.push_back(std::to_string(number) + ": uses a Decision as a value: " + line);
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
    for (const auto& v : decision_site_violations(buf.str())) ADD_FAILURE() << rel << ":" << v;
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
  EXPECT_EQ(callers, std::vector<std::string>{"admission/pod_rules.cpp"});
}

}  // namespace
