#include "model/pod_text.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ig::model {
namespace {

// One pod (template): its metadata and spec as read_pod_facts() reads them.
struct PodPart {
  bool has_metadata = false, has_annotations = false, has_spec = false;
  std::optional<std::string> component, isolation;
  std::vector<std::string> kata;
  std::optional<std::string> runtime_class;
  bool host_network = false, host_pid = false, host_ipc = false;
  // containers, initContainers, ephemeralContainers (read_pod_facts' order).
  std::array<std::vector<ContainerFacts>, 3> lists;
  std::vector<VolumeFacts> volumes;
};

constexpr std::array<std::string_view, 3> kPrefixes = {"", "init:", "ephemeral:"};

// A reader over validated JSON text (pod_text.h): every read is bounded by
// `end_`; any shape it does not read makes the whole read fail (nullopt).
class Reader {
 public:
  explicit Reader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool read_object(std::optional<std::string>& kind, std::optional<std::string>& api_version,
                   std::optional<std::string>& name, std::optional<std::string>& generate_name,
                   std::optional<std::string>& ns, PodPart& pod, PodPart& tmpl, PodPart& job_tmpl,
                   bool& has_template, bool& has_job_template) {
    return members([&](std::string_view key) {
      if (key == "apiVersion") return optional_string(api_version);
      if (key == "kind") return optional_string(kind);
      if (key == "metadata") {
        if (null()) return true;
        pod.has_metadata = true;
        return members([&](std::string_view k) {
          if (k == "name") return optional_string(name);
          if (k == "generateName") return optional_string(generate_name);
          if (k == "namespace") return optional_string(ns);
          return pod_metadata_member(k, pod);
        });
      }
      if (key == "spec") {
        if (null()) return true;
        pod.has_spec = true;
        return members([&](std::string_view k) {
          if (k == "template") return read_template(tmpl, has_template);
          if (k == "jobTemplate") {
            if (null()) return true;
            return members([&](std::string_view j) {
              if (j != "spec") return skip();
              if (null()) return true;
              return members([&](std::string_view s) {
                return s == "template" ? read_template(job_tmpl, has_job_template) : skip();
              });
            });
          }
          return spec_member(k, pod);
        });
      }
      return skip();
    });
  }

 private:
  // ---- Text primitives (the text is valid JSON; bounds are still kept). ----
  [[gnu::always_inline]] void ws() {
    if (p_ < end_ && static_cast<unsigned char>(*p_) > ' ') return;  // the usual case: none
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // The next '"' or '\\' at or after p (end when none).
  [[gnu::always_inline]] const char* quote_or_backslash(const char* p) const {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    while (end_ - p >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
      if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
      p += 16;
    }
#endif
    while (p < end_ && *p != '"' && *p != '\\') ++p;
    return p;
  }
  // p_ on a string's opening quote: past its closing one.
  bool skip_string() {
    const char* p = p_ + 1;
    while (true) {
      p = quote_or_backslash(p);
      if (p >= end_) return false;
      if (*p == '"') {
        p_ = p + 1;
        return true;
      }
      p += 2;  // an escape: the next byte is escaped (\u's digits are plain)
    }
  }
  // p_ on a string's opening quote: its bytes; false when it has an escape
  // (its decoded text is not its bytes: the caller does not read it).
  [[gnu::always_inline]] bool string(std::string_view& out) {
    const char* first = p_ + 1;
    const char* q = quote_or_backslash(first);
    if (q >= end_ || *q != '"') return false;
    out = std::string_view(first, static_cast<std::size_t>(q - first));
    p_ = q + 1;
    return true;
  }
  // Skips one value, p_ on its first byte.
  bool skip() {
    if (p_ >= end_) return false;
    const char c = *p_;
    if (c == '"') return skip_string();
    if (c != '{' && c != '[') {  // a number or literal: up to its delimiter
      while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ' && *p_ != '\n' &&
             *p_ != '\r' && *p_ != '\t')
        ++p_;
      return true;
    }
    // An object or list: to the bracket that closes it. `depth` counts the
    // brackets open outside strings, `in_string` says whether p is inside
    // one (after its opening quote).
    std::size_t depth = 0;
    bool in_string = false;
    const char* p = p_;
    // Bytes [p, limit) one at a time; true when the value ends there (p_ past it).
    const auto bytes = [&](const char* limit) {
      while (p < limit) {
        const char b = *p;
        if (in_string) {
          if (b == '\\') {
            p += 2;  // the escaped byte too (\u's digits are plain)
            continue;
          }
          if (b == '"') in_string = false;
        } else if (b == '"') {
          in_string = true;
        } else if (b == '{' || b == '[') {
          ++depth;
        } else if (b == '}' || b == ']') {
          if (--depth == 0) {
            p_ = p + 1;
            return true;
          }
        }
        ++p;
      }
      return false;
    };
#if defined(__SSE2__)
    // 16 bytes at a time: the quotes' running parity (a prefix XOR) marks
    // the bytes inside strings, so the brackets outside them are found
    // without stopping at each string. A block with a backslash is read
    // byte by byte (an escaped quote does not end its string).
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), open = _mm_set1_epi8('{'),
                  close = _mm_set1_epi8('}'), fold = _mm_set1_epi8(0x20);
    while (end_ - p >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      if (_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash)) != 0) {
        if (bytes(p + 16)) return true;
        continue;
      }
      // 0x20 folds '[' into '{' and ']' into '}'.
      const __m128i f = _mm_or_si128(v, fold);
      unsigned inside = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)));
      inside ^= inside << 1;
      inside ^= inside << 2;
      inside ^= inside << 4;
      inside ^= inside << 8;
      if (in_string) inside = ~inside;
      inside &= 0xFFFFu;
      in_string = (inside >> 15) != 0;
      const unsigned opens = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(f, open))) & ~inside;
      const unsigned closes = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(f, close))) & ~inside;
      for (unsigned any = opens | closes; any != 0; any &= any - 1) {
        const unsigned bit = any & (0u - any);
        if (opens & bit) {
          ++depth;
        } else if (--depth == 0) {
          p_ = p + __builtin_ctz(bit) + 1;
          return true;
        }
      }
      p += 16;
    }
#endif
    return bytes(end_);
  }
  // A null value (consumed) or not (p_ unmoved).
  bool null() {
    if (p_ < end_ && *p_ == 'n') {
      p_ += std::min<std::ptrdiff_t>(4, end_ - p_);
      return true;
    }
    return false;
  }
  bool optional_string(std::optional<std::string>& out) {
    if (null()) return true;
    if (p_ >= end_ || *p_ != '"') return false;
    std::string_view s;
    if (!string(s)) return false;
    out.emplace(s);
    return true;
  }
  bool optional_bool(bool& out) {
    if (null()) return true;
    if (end_ - p_ >= 4 && std::memcmp(p_, "true", 4) == 0) {
      out = true;
      p_ += 4;
      return true;
    }
    if (end_ - p_ >= 5 && std::memcmp(p_, "false", 5) == 0) {
      out = false;
      p_ += 5;
      return true;
    }
    return false;
  }
  // null -> nullopt; a list of strings -> them (none with an escape).
  bool optional_strings(std::optional<std::vector<std::string>>& out) {
    if (null()) return true;
    out.emplace();
    return elements([&] {
      std::string_view s;
      if (p_ >= end_ || *p_ != '"' || !string(s)) return false;
      out->emplace_back(s);
      return true;
    });
  }
  // An object's members: member(name) with p_ on the value, which it reads
  // whole. False at a value that is not an object or a name with an escape.
  template <typename Member>
  bool members(Member member) {
    if (p_ >= end_ || *p_ != '{') return false;
    ++p_;
    ws();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    while (true) {
      std::string_view name;
      if (p_ >= end_ || *p_ != '"' || !string(name)) return false;
      ws();
      if (p_ >= end_ || *p_ != ':') return false;
      ++p_;
      ws();
      if (!member(name)) return false;
      ws();
      if (p_ >= end_) return false;
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      ws();
    }
  }
  // A list's elements: element() with p_ on each. False at a value that is
  // not a list.
  template <typename Element>
  bool elements(Element element) {
    if (p_ >= end_ || *p_ != '[') return false;
    ++p_;
    ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    while (true) {
      if (!element()) return false;
      ws();
      if (p_ >= end_) return false;
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      ws();
    }
  }

  // ---- The pod's fields (pod.cpp's pod_facts, in the same terms). ----
  bool read_template(PodPart& part, bool& present) {
    if (null()) return true;
    present = true;
    return members([&](std::string_view k) {
      if (k == "metadata") {
        if (null()) return true;
        part.has_metadata = true;
        return members([&](std::string_view m) { return pod_metadata_member(m, part); });
      }
      if (k == "spec") {
        if (null()) return true;
        part.has_spec = true;
        return members([&](std::string_view s) { return spec_member(s, part); });
      }
      return skip();
    });
  }

  bool pod_metadata_member(std::string_view key, PodPart& part) {
    if (key == "labels") {
      if (null()) return true;
      return members([&](std::string_view label) {
        return label == kComponentLabel ? optional_string(part.component) : skip();
      });
    }
    if (key == "annotations") {
      if (null()) return true;
      part.has_annotations = true;
      return members([&](std::string_view a) {
        if (a == kIsolationAnnotation) return optional_string(part.isolation);
        if (a.starts_with(kKataAnnotationPrefix)) part.kata.emplace_back(a);
        return skip();
      });
    }
    return skip();
  }

  bool spec_member(std::string_view key, PodPart& part) {
    if (key == "runtimeClassName") return optional_string(part.runtime_class);
    if (key == "hostNetwork") return optional_bool(part.host_network);
    if (key == "hostPID") return optional_bool(part.host_pid);
    if (key == "hostIPC") return optional_bool(part.host_ipc);
    if (key == "containers") return containers(part.lists[0], 0);
    if (key == "initContainers") return containers(part.lists[1], 1);
    if (key == "ephemeralContainers") return containers(part.lists[2], 2);
    if (key == "volumes") return volumes(part.volumes);
    return skip();
  }

  // A hook's or probe's handler: its exec command, when it has exec.
  bool handler(std::optional<std::vector<std::string>>& exec) {
    if (null()) return true;
    return members([&](std::string_view k) {
      if (k != "exec") return skip();
      if (null()) return true;
      exec.emplace();
      return members([&](std::string_view c) {
        if (c != "command") return skip();
        std::optional<std::vector<std::string>> command;
        if (!optional_strings(command)) return false;
        if (command) *exec = std::move(*command);
        return true;
      });
    });
  }

  bool containers(std::vector<ContainerFacts>& out, std::size_t list) {
    if (null()) return true;
    std::size_t index = 0;
    return elements([&] {
      ContainerFacts entry;
      entry.init = list == 1;
      entry.ephemeral = list == 2;
      std::optional<std::string> name;
      // postStart, preStop, livenessProbe, readinessProbe, startupProbe.
      std::array<std::optional<std::vector<std::string>>, 5> exec;
      const bool ok = members([&](std::string_view k) {
        if (k == "name") return optional_string(name);
        if (k == "image") return optional_string(entry.image);
        if (k == "command") return optional_strings(entry.command);
        if (k == "args") return optional_strings(entry.args);
        if (k == "lifecycle") {
          if (null()) return true;
          return members([&](std::string_view h) {
            if (h == "postStart") return handler(exec[0]);
            if (h == "preStop") return handler(exec[1]);
            return skip();
          });
        }
        if (k == "livenessProbe") return handler(exec[2]);
        if (k == "readinessProbe") return handler(exec[3]);
        if (k == "startupProbe") return handler(exec[4]);
        if (k == "env") {
          if (null()) return true;
          return elements([&] {
            return members([&](std::string_view v) {
              if (v != "name" || p_ >= end_ || *p_ != '"') return skip();  // a name of another type is not read
              std::string_view text;
              if (!string(text)) return false;
              if (is_loader_env(text)) entry.loader_env.emplace_back(text);
              return true;
            });
          });
        }
        if (k == "envFrom") {
          if (null()) return true;
          bool any = false;
          if (!elements([&] {
                any = true;
                return skip();
              })) {
            return false;
          }
          entry.env_from = any;
          return true;
        }
        if (k == "securityContext") {
          if (null()) return true;
          return members([&](std::string_view s) {
            if (s == "privileged") return optional_bool(entry.privileged);
            if (s != "capabilities") return skip();
            if (null()) return true;
            return members([&](std::string_view c) {
              if (c != "add") return skip();
              std::optional<std::vector<std::string>> add;
              if (!optional_strings(add)) return false;
              if (add) {
                for (auto& cap : *add)
                  if (!is_default_capability(cap)) entry.added_capabilities.push_back(std::move(cap));
              }
              return true;
            });
          });
        }
        return skip();
      });
      if (!ok) return false;
      if (entry.command && entry.command->empty()) entry.command.reset();
      if (entry.args && entry.args->empty()) entry.args.reset();
      static constexpr std::string_view kExecFields[] = {"lifecycle.postStart", "lifecycle.preStop",
                                                         "livenessProbe", "readinessProbe", "startupProbe"};
      for (std::size_t i = 0; i < exec.size(); ++i) {
        if (exec[i]) entry.exec.push_back({std::string(kExecFields[i]), std::move(*exec[i])});
      }
      const std::string_view prefix = kPrefixes[list];
      if (name && prefix.empty()) {
        entry.name = std::move(*name);
      } else {
        entry.name.append(prefix);
        if (name) {
          entry.name += *name;
        } else {
          entry.name += "#" + std::to_string(index);
        }
      }
      out.push_back(std::move(entry));
      ++index;
      return true;
    });
  }

  bool volumes(std::vector<VolumeFacts>& out) {
    if (null()) return true;
    std::size_t index = 0;
    return elements([&] {
      VolumeFacts entry;
      std::optional<std::string> name;
      bool name_read = true;  // false: a name that is not a string or has an escape
      const bool ok = members([&](std::string_view k) {
        if (k == "name") {
          const char* at = p_;
          if (optional_string(name)) return true;
          p_ = at;
          name_read = false;  // an error only if the volume is one read_pod_facts names
          return skip();
        }
        if (k == "hostPath") {
          if (null()) return true;
          if (p_ >= end_ || *p_ != '{') return false;
          entry.host_path = true;
          return skip();
        }
        if (k == "image") {
          if (null()) return true;
          entry.image.emplace();
          return members([&](std::string_view r) {
            if (r != "reference") return skip();
            std::optional<std::string> reference;
            if (!optional_string(reference)) return false;
            if (reference) entry.image = std::move(*reference);
            return true;
          });
        }
        return skip();
      });
      if (!ok) return false;
      if (entry.host_path || entry.image) {
        if (!name_read) return false;
        entry.name = name ? std::move(*name) : "#" + std::to_string(index);
        out.push_back(std::move(entry));
      }
      ++index;
      return true;
    });
  }

  const char* p_;
  const char* end_;
};

}  // namespace

std::optional<PodText> read_pod_text(std::string_view text, std::string_view kind,
                                     std::string_view api_version) {
  std::optional<std::string> object_kind, object_api, name, generate_name, ns;
  PodPart top, tmpl, job_tmpl;
  bool has_template = false, has_job_template = false;
  // A UTF-8 byte order mark and white space before the value, as the parser.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  while (!text.empty() && (text[0] == ' ' || text[0] == '\n' || text[0] == '\r' || text[0] == '\t'))
    text.remove_prefix(1);
  Reader reader(text);
  if (!reader.read_object(object_kind, object_api, name, generate_name, ns, top, tmpl, job_tmpl,
                          has_template, has_job_template)) {
    return std::nullopt;
  }
  // The type meta as the handler completes it; a disagreement is the DOM path's to word.
  if (object_kind && *object_kind != kind) return std::nullopt;
  if (object_api && *object_api != api_version) return std::nullopt;
  auto where = location_for(kind, api_version);
  if (!where) return std::nullopt;
  PodPart* part = &top;
  if (where->kind == ObjectKind::CronJob) {
    if (!has_job_template) return std::nullopt;
    part = &job_tmpl;
  } else if (where->kind != ObjectKind::Pod) {
    if (!has_template) return std::nullopt;
    part = &tmpl;
  }
  if (!part->has_spec) return std::nullopt;  // "spec: required"

  PodText out{std::move(*where), {}};
  PodFacts& facts = out.facts;
  facts.kind = out.where.kind;
  if (name && !name->empty()) {
    facts.object_name = std::move(*name);
  } else if (generate_name && !generate_name->empty()) {
    facts.object_name = std::move(*generate_name);
    facts.object_name.push_back('*');
  }
  if (ns) facts.namespace_ = std::move(*ns);
  facts.component = std::move(part->component);
  facts.runtime_class = std::move(part->runtime_class);
  facts.host_network = part->host_network;
  facts.host_pid = part->host_pid;
  facts.host_ipc = part->host_ipc;
  std::size_t count = 0;
  for (const auto& list : part->lists) count += list.size();
  facts.containers.reserve(count);
  for (auto& list : part->lists) {
    for (auto& c : list) {
      if (c.privileged) facts.privileged_containers.push_back(c.name);
      facts.containers.push_back(std::move(c));
    }
  }
  facts.volumes = std::move(part->volumes);
  // read_pod_facts walks the annotations as a std::map: in key order.
  std::sort(part->kata.begin(), part->kata.end());
  facts.kata_annotations = std::move(part->kata);
  facts.has_metadata = part->has_metadata;
  facts.has_annotations = part->has_annotations;
  facts.isolation_annotation = std::move(part->isolation);
  return out;
}

}  // namespace ig::model
