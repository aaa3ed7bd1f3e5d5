#include "model/pod_text.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/json_projection.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ig::model {
// What scan_pod_text() read: the object's type meta and names, and the
// three places a pod may sit (the object, spec.template,
// spec.jobTemplate.spec.template).
struct PodScanParts {
  // One pod (template): its metadata and spec as read_pod_facts() reads them.
  struct Part {
    bool has_metadata = false, has_annotations = false, has_spec = false;
    std::optional<std::string> component, isolation;
    std::vector<std::string> kata;
    std::optional<std::string> runtime_class;
    bool host_network = false, host_pid = false, host_ipc = false;
    // containers, initContainers, ephemeralContainers (read_pod_facts' order).
    std::array<std::vector<ContainerFacts>, 3> lists;
    std::vector<VolumeFacts> volumes;
  };
  std::optional<std::string> object_kind, object_api, name, generate_name, ns;
  Part top, tmpl, job_tmpl;
  bool has_template = false, has_job_template = false;
};

namespace {

using PodPart = PodScanParts::Part;

constexpr std::array<std::string_view, 3> kPrefixes = {"", "init:", "ephemeral:"};

// One object's member names, to refuse a repeated one as the projected
// parser does: the first 16 in place (a name is compared with the earlier
// ones only when its hash bit is already set), the rest appended to the
// reader's spill and sorted at the object's end.
class Names {
 public:
  explicit Names(std::vector<std::string_view>& spill) : spill_(spill), base_(spill.size()) {}

  [[gnu::always_inline]] bool add(std::string_view name) {
    if (n_ < kInPlace) {
      const std::uint64_t bit = std::uint64_t{1} << (hash(name) & 63);
      if ((seen_ & bit) != 0) {
        for (std::size_t j = 0; j < n_; ++j)
          if (std::string_view(names_[j].data, names_[j].size) == name) return false;
      }
      seen_ |= bit;
      names_[n_++] = {name.data(), name.size()};
      return true;
    }
    if (n_ == kInPlace) {
      for (const Name& earlier : names_) spill_.emplace_back(earlier.data, earlier.size);
    }
    spill_.push_back(name);
    ++n_;
    return true;
  }
  // At the object's end: whether no name was repeated.
  bool finish() {
    if (n_ <= kInPlace) return true;
    const auto first = spill_.begin() + static_cast<std::ptrdiff_t>(base_);
    std::sort(first, spill_.end());
    const bool unique = std::adjacent_find(first, spill_.end()) == spill_.end();
    spill_.resize(base_);
    return unique;
  }

 private:
  static unsigned hash(std::string_view k) {
    if (k.empty()) return 0;
    return static_cast<unsigned>(k.size()) * 5u + static_cast<unsigned char>(k[0]) * 7u +
           static_cast<unsigned char>(k.back()) * 13u;
  }
  static constexpr std::size_t kInPlace = 16;
  struct Name {
    const char* data;
    std::size_t size;
  };
  std::vector<std::string_view>& spill_;
  std::size_t base_;
  Name names_[kInPlace];  // not initialised: names_[0..n_) are set before use
  std::size_t n_ = 0;
  std::uint64_t seen_ = 0;
};

// A reader that validates what it reads: the parts of the pod it reads by
// itself (every name, and the strings it keeps, must be printable ASCII
// without an escape; anything else ends the read), every other value by the
// projected parser's rules (ValueValidator). Every read is bounded by
// `end_`; any shape it does not read makes the whole read fail (nullopt).
class Reader {
 public:
  Reader(std::string_view text, std::size_t depth, std::size_t max_depth)
      : p_(text.data()), end_(text.data() + text.size()), depth_(depth), max_depth_(max_depth),
        validator_(text, max_depth) {}

  const char* position() const { return p_; }

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
  // ---- Text primitives. ----
  [[gnu::always_inline]] void ws() {
    if (p_ < end_ && static_cast<unsigned char>(*p_) > ' ') return;  // the usual case: none
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // The first byte at or after p that is '"', '\\', a control character or
  // not ASCII (end when none).
  [[gnu::always_inline]] const char* special(const char* p) const {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end_ - p >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      // Signed: bytes >= 0x80 are below 0x20 too.
      const __m128i hit =
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), _mm_cmplt_epi8(v, space));
      const int m = _mm_movemask_epi8(hit);
      if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
      p += 16;
    }
#endif
    while (p < end_ && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) >= 0x20 &&
           static_cast<unsigned char>(*p) < 0x80)
      ++p;
    return p;
  }
  // p_ on a string's opening quote: its bytes, when they are printable
  // ASCII without an escape (otherwise false: the read ends).
  [[gnu::always_inline]] bool string(std::string_view& out) {
    const char* first = p_ + 1;
    const char* q = special(first);
    if (q >= end_ || *q != '"') return false;
    out = std::string_view(first, static_cast<std::size_t>(q - first));
    p_ = q + 1;
    return true;
  }
  // Skips one value, p_ on its first byte, validating it: a plain string
  // (printable ASCII without an escape, the commonest) here, any other
  // value by the validator.
  bool skip() {
    if (p_ < end_ && *p_ == '"') {
      const char* q = special(p_ + 1);
      if (q < end_ && *q == '"') {
        p_ = q + 1;
        return true;
      }
    }
    const char* after = validator_.skip(p_, depth_);
    if (after == nullptr) return false;
    p_ = after;
    return true;
  }
  // A null value (consumed) or not (p_ unmoved).
  bool null() {
    if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
      p_ += 4;
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
  // whole. False at a value that is not an object, a name that string()
  // does not read, a repeated name or nesting past the limit.
  template <typename Member>
  bool members(Member member) {
    if (p_ >= end_ || *p_ != '{' || ++depth_ > max_depth_) return false;
    ++p_;
    ws();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      --depth_;
      return true;
    }
    Names names(spill_);
    while (true) {
      std::string_view name;
      if (p_ >= end_ || *p_ != '"' || !string(name) || !names.add(name)) return false;
      ws();
      if (p_ >= end_ || *p_ != ':') return false;
      ++p_;
      ws();
      if (!member(name)) return false;
      ws();
      if (p_ >= end_) return false;
      if (*p_ == '}') {
        ++p_;
        --depth_;
        return names.finish();
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
    if (p_ >= end_ || *p_ != '[' || ++depth_ > max_depth_) return false;
    ++p_;
    ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      --depth_;
      return true;
    }
    while (true) {
      if (!element()) return false;
      ws();
      if (p_ >= end_) return false;
      if (*p_ == ']') {
        ++p_;
        --depth_;
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
  std::size_t depth_;  // containers open around p_
  std::size_t max_depth_;
  ValueValidator validator_;
  std::vector<std::string_view> spill_;  // Names past the 16th, every open object's
};

}  // namespace

void PodScanDeleter::operator()(PodScanParts* parts) const noexcept { delete parts; }

const char* scan_pod_text(const char* p, const char* end, std::size_t depth, PodScan& out) {
  out.reset(new PodScanParts);
  PodScanParts& s = *out;
  Reader reader(std::string_view(p, static_cast<std::size_t>(end - p)), depth, DecodeLimits{}.max_depth);
  if (!reader.read_object(s.object_kind, s.object_api, s.name, s.generate_name, s.ns, s.top, s.tmpl,
                          s.job_tmpl, s.has_template, s.has_job_template)) {
    out.reset();
    return nullptr;
  }
  return reader.position();
}

std::optional<PodText> read_pod_text(std::string_view text, std::string_view kind,
                                     std::string_view api_version, std::size_t depth) {
  if (text.size() > DecodeLimits{}.max_bytes) return std::nullopt;
  // A UTF-8 byte order mark and white space before the value, as the parser.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  const auto json_space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!text.empty() && json_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && json_space(text.back())) text.remove_suffix(1);
  PodScan scan;
  const char* end = text.data() + text.size();
  if (scan_pod_text(text.data(), end, depth, scan) != end) return std::nullopt;
  return finish_pod_text(std::move(scan), kind, api_version);
}

std::optional<PodText> finish_pod_text(PodScan scan, std::string_view kind, std::string_view api_version) {
  if (!scan) return std::nullopt;
  auto& [object_kind, object_api, name, generate_name, ns, top, tmpl, job_tmpl, has_template,
         has_job_template] = *scan;
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
