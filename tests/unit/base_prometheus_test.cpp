// The Prometheus text writer (src/base/prometheus.h): HELP and label values
// escaped as text format 0.0.4 requires. The real parser (promtool) reads the
// binary's live output in tests/e2e/test_metrics.py. The registry writes its
// collectors in order.
#include "base/prometheus.h"

#include <gtest/gtest.h>

#include <string>

namespace ig::prometheus {
namespace {

TEST(PrometheusWriter, EscapesHelpBackslashes) {
  std::string text;
  TextWriter out(text);
  out.family("m_total", Type::Counter, "a path like C:\\dir, kept one line");
  EXPECT_EQ(text,
            "# HELP m_total a path like C:\\\\dir, kept one line\n"
            "# TYPE m_total counter\n");
}

TEST(PrometheusWriter, EscapesLabelValues) {
  std::string text;
  TextWriter out(text);
  out.sample("m", {{"a", "x\"y\\z\nw"}}, std::uint64_t{3});
  EXPECT_EQ(text, "m{a=\"x\\\"y\\\\z\\nw\"} 3\n");
}

// A Help is built only at compile time; one holding a newline does not
// compile (the consteval constructor), which this cannot show at run time:
// it shows that a one-line constant is accepted from a constexpr table.
TEST(PrometheusWriter, HelpFromAConstantTable) {
  struct Row {
    std::string_view name;
    Help help;
  };
  static constexpr Row kRows[] = {{"a_total", "A."}, {"b", ""}};
  static_assert(kRows[1].help.empty());
  std::string text;
  TextWriter out(text);
  out.family(kRows[0].name, Type::Counter, kRows[0].help);
  EXPECT_EQ(text, "# HELP a_total A.\n# TYPE a_total counter\n");
}

TEST(PrometheusRegistry, WritesEveryCollectorInTheOrderAdded) {
  Registry registry;
  registry.add([](TextWriter& out) { out.sample("first", {}, std::uint64_t{1}); });
  registry.add([](TextWriter& out) { out.sample("second", {}, std::uint64_t{2}); });
  std::string text;
  TextWriter out(text);
  registry.write(out);
  EXPECT_EQ(text, "first 1\nsecond 2\n");
}

}  // namespace
}  // namespace ig::prometheus
