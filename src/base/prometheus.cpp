#include "base/prometheus.h"

#include <cstdio>

namespace ig::prometheus {
namespace {

std::string_view type_name(Type t) {
  switch (t) {
    case Type::Counter: return "counter";
    case Type::Gauge: return "gauge";
    case Type::Histogram: return "histogram";
  }
  return "untyped";
}

// Backslash and newline escaped, and '"' in a label value (text format 0.0.4).
void append_escaped(std::string& out, std::string_view value, bool label) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"': out += label ? "\\\"" : "\""; break;
      default: out += c;
    }
  }
}

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // The shortest of %.15g..%.17g that reads back exactly.
  for (int precision = 15; precision < 17; ++precision) {
    char shorter[40];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, v);
    double back = 0;
    if (std::sscanf(shorter, "%lf", &back) == 1 && back == v) return shorter;
  }
  return buf;
}

// "%g": a bucket bound ("5e-05", "0.25", "1").
std::string format_bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void TextWriter::family(std::string_view name, Type type, Help help) {
  out_.append("# HELP ").append(name).append(" ");
  append_escaped(out_, help.text(), false);
  out_.append("\n# TYPE ");
  out_.append(name).append(" ").append(type_name(type)).append("\n");
}

void TextWriter::labels(std::initializer_list<Label> labels, const Label* extra) {
  if (labels.size() == 0 && extra == nullptr) return;
  out_.push_back('{');
  bool first = true;
  auto one = [&](const Label& l) {
    if (!first) out_.push_back(',');
    first = false;
    out_.append(l.name).append("=\"");
    append_escaped(out_, l.value, true);
    out_.push_back('"');
  };
  for (const auto& l : labels) one(l);
  if (extra) one(*extra);
  out_.push_back('}');
}

void TextWriter::sample(std::string_view name, std::initializer_list<Label> l, std::uint64_t value) {
  out_.append(name);
  labels(l);
  out_.append(" ").append(std::to_string(value)).append("\n");
}

void TextWriter::sample(std::string_view name, std::initializer_list<Label> l, double value) {
  out_.append(name);
  labels(l);
  out_.append(" ").append(format_double(value)).append("\n");
}

void TextWriter::histogram(std::string_view name, std::initializer_list<Label> l,
                           const double* bounds, const std::uint64_t* counts, std::size_t buckets,
                           std::uint64_t count, double sum) {
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= buckets; ++i) {  // the last: le="+Inf", `count`
    if (i < buckets) cumulative += counts[i];
    const std::string le = i < buckets ? format_bound(bounds[i]) : "+Inf";
    const Label le_label{"le", le};
    out_.append(bucket);
    labels(l, &le_label);
    out_.append(" ").append(std::to_string(i < buckets ? cumulative : count)).append("\n");
  }
  sample(std::string(name) + "_sum", l, sum);
  sample(std::string(name) + "_count", l, count);
}

}  // namespace ig::prometheus
