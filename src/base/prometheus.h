// The one Prometheus text writer (exposition format 0.0.4): family() writes
// "# HELP" and "# TYPE" once per metric, sample() one line. Label values and
// HELP text are escaped; names are not checked. Integers print exactly;
// doubles in the shortest form that reads back. A Registry's write() calls
// its collectors in the order added; add() before the first write().
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ig::prometheus {

enum class Type { Counter, Gauge, Histogram };

// One metric's HELP text: a newline or carriage return in it fails the build.
class Help {
 public:
  consteval Help(const char* text) : text_(text) { check(); }  // NOLINT: implicit from literals
  consteval Help(std::string_view text) : text_(text) { check(); }  // NOLINT
  constexpr std::string_view text() const noexcept { return text_; }
  constexpr bool empty() const noexcept { return text_.empty(); }

 private:
  consteval void check() const {
    for (char c : text_) {
      // Not a constant expression: the compiler reports this line.
      if (c == '\n' || c == '\r') throw "prometheus::Help: HELP text must be one line";
    }
  }
  std::string_view text_;
};

struct Label {
  std::string_view name;
  std::string_view value;
};

class TextWriter {
 public:
  explicit TextWriter(std::string& out) : out_(out) {}

  void family(std::string_view name, Type type, Help help);
  void sample(std::string_view name, std::initializer_list<Label> labels, std::uint64_t value);
  void sample(std::string_view name, std::initializer_list<Label> labels, double value);
  // A histogram's _bucket/_sum/_count lines from per-bucket (not cumulative)
  // counts; `bounds` and `counts` have the same length.
  void histogram(std::string_view name, std::initializer_list<Label> labels, const double* bounds,
                 const std::uint64_t* counts, std::size_t buckets, std::uint64_t count, double sum);

 private:
  void labels(std::initializer_list<Label> labels, const Label* extra = nullptr);
  std::string& out_;
};

using Collector = std::function<void(TextWriter&)>;

class Registry {
 public:
  void add(Collector collector) { collectors_.push_back(std::move(collector)); }
  void write(TextWriter& out) const {
    for (const auto& c : collectors_) c(out);
  }

 private:
  std::vector<Collector> collectors_;
};

}  // namespace ig::prometheus
