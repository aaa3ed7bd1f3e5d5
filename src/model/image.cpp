#include "model/image.h"

#include "base/quote.h"

namespace ig::model {
namespace {

constexpr std::string_view kDefaultDomain = "docker.io";
constexpr std::string_view kLegacyDefaultDomain = "index.docker.io";
constexpr std::string_view kOfficialRepoPrefix = "library/";
constexpr std::string_view kDefaultTag = "latest";
constexpr std::size_t kNameTotalLengthMax = 255;
constexpr std::size_t kTagLengthMax = 128;

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }
bool is_word(char c) { return is_alnum(c) || c == '_'; }
bool is_lower_hex(char c) { return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9'); }
bool is_hex(char c) { return is_lower_hex(c) || (c >= 'A' && c <= 'F'); }
bool has_upper(std::string_view s) {
  for (char c : s)
    if (c >= 'A' && c <= 'Z') return true;
  return false;
}

// pathComponent: [a-z0-9]+ ((?:[._]|__|[-]+) [a-z0-9]+)*
bool valid_path_component(std::string_view s) {
  std::size_t i = 0;
  auto alnum_run = [&] {
    const std::size_t start = i;
    while (i < s.size() && is_lower_alnum(s[i])) ++i;
    return i > start;
  };
  if (!alnum_run()) return false;
  while (i < s.size()) {
    if (s[i] == '.') {
      ++i;
    } else if (s[i] == '_') {
      ++i;
      if (i < s.size() && s[i] == '_') ++i;
    } else if (s[i] == '-') {
      while (i < s.size() && s[i] == '-') ++i;
    } else {
      return false;
    }
    if (!alnum_run()) return false;
  }
  return true;
}

// remoteName: pathComponent ("/" pathComponent)*
bool valid_path(std::string_view s) {
  while (true) {
    const auto slash = s.find('/');
    if (!valid_path_component(s.substr(0, slash))) return false;
    if (slash == std::string_view::npos) return true;
    s.remove_prefix(slash + 1);
  }
}

// domainNameComponent: [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
bool valid_domain_component(std::string_view s) {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  for (char c : s)
    if (!is_alnum(c) && c != '-') return false;
  return true;
}

// host (domainName or [IPv6]) with an optional :port.
bool valid_domain(std::string_view s) {
  std::string_view host = s;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : s.substr(1, close - 1))
      if (!is_hex(c) && c != ':') return false;
    host = {};
    s.remove_prefix(close + 1);
  } else {
    const auto colon = s.find(':');
    host = s.substr(0, colon);
    s = colon == std::string_view::npos ? std::string_view{} : s.substr(colon);
    while (true) {
      const auto dot = host.find('.');
      if (!valid_domain_component(host.substr(0, dot))) return false;
      if (dot == std::string_view::npos) break;
      host.remove_prefix(dot + 1);
    }
  }
  if (s.empty()) return true;  // no port
  if (s.front() != ':' || s.size() < 2) return false;
  for (char c : s.substr(1))
    if (c < '0' || c > '9') return false;
  return true;
}

// tag: [\w][\w.-]{0,127}
bool valid_tag(std::string_view s) {
  if (s.empty() || s.size() > kTagLengthMax || !is_word(s.front())) return false;
  for (char c : s)
    if (!is_word(c) && c != '.' && c != '-') return false;
  return true;
}

// The digests the runtime can verify: sha256, sha384, sha512, lowercase hex
// of the algorithm's length.
bool valid_digest(std::string_view s) {
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view algorithm = s.substr(0, colon);
  const std::string_view encoded = s.substr(colon + 1);
  std::size_t length = 0;
  if (algorithm == "sha256") {
    length = 64;
  } else if (algorithm == "sha384") {
    length = 96;
  } else if (algorithm == "sha512") {
    length = 128;
  } else {
    return false;
  }
  if (encoded.size() != length) return false;
  for (char c : encoded)
    if (!is_lower_hex(c)) return false;
  return true;
}

// Is the first element of a name a registry domain (distribution/reference's
// splitDockerDomain)? "localhost", or it contains "." or ":", or an uppercase
// letter (namespaces are lowercase).
bool is_domain_element(std::string_view first) {
  return first == "localhost" || first == kLegacyDefaultDomain ||
         first.find_first_of(".:") != std::string_view::npos || has_upper(first);
}

// A name's registry domain and repository path, as views (into the name, or
// the default domain); `official` when the path takes the library/ prefix.
struct SplitName {
  std::string_view domain;
  std::string_view path;
  bool official = false;
};

// splitDockerDomain, then the library/ prefix for single-element Docker Hub
// names. `name` has no tag and no digest.
SplitName split_domain(std::string_view name) {
  const auto slash = name.find('/');
  if (slash == std::string_view::npos) return {kDefaultDomain, name, true};
  SplitName out;
  const std::string_view first = name.substr(0, slash);
  if (is_domain_element(first)) {
    out.domain = first == kLegacyDefaultDomain ? kDefaultDomain : first;
    out.path = name.substr(slash + 1);
  } else {
    out.domain = kDefaultDomain;
    out.path = name;
  }
  out.official = out.domain == kDefaultDomain && out.path.find('/') == std::string_view::npos;
  return out;
}

// "domain/path", built in one allocation (this runs for every container of
// every admitted pod).
Result<std::string> normalise_name(std::string_view name, std::string_view reference) {
  const auto bad = [&](std::string_view why) {
    return fail(quote(reference) + " is not a valid image reference: " + std::string(why));
  };
  if (name.empty()) return bad("it has no repository name");
  const SplitName split = split_domain(name);
  if (!valid_domain(split.domain)) return bad("registry " + quote(split.domain) + " is not a host[:port]");
  std::string full;
  full.reserve(split.domain.size() + 1 + (split.official ? kOfficialRepoPrefix.size() : 0) +
               split.path.size());
  full.append(split.domain);
  full.push_back('/');
  if (split.official) full.append(kOfficialRepoPrefix);
  full.append(split.path);
  const std::string_view path = std::string_view(full).substr(split.domain.size() + 1);
  if (!valid_path(path)) {
    return bad("repository " + quote(path) +
               " must be lowercase letters, digits and single separators (. _ __ -) between "
               "/-separated components");
  }
  if (full.size() > kNameTotalLengthMax) return bad("the repository name is longer than 255 characters");
  return full;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Where the tag's ":" is in `name_tag` (no digest): the last ":" after the
// last "/" (a ":" before a "/" is a registry port).
std::size_t tag_colon(std::string_view name_tag) {
  const auto colon = name_tag.rfind(':');
  if (colon == std::string_view::npos) return colon;
  const auto slash = name_tag.rfind('/');
  if (slash != std::string_view::npos && slash > colon) return std::string_view::npos;
  return colon;
}

}  // namespace

std::string ImageRef::canonical() const {
  if (!digest.empty()) return repository + "@" + digest;
  return repository + ":" + tag;
}

Result<ImageRef> parse_image(std::string_view reference) {
  const auto bad = [&](std::string_view why) {
    return fail(quote(reference) + " is not a valid image reference: " + std::string(why));
  };
  if (reference.empty()) return bad("it is empty");
  if (reference.size() == 64) {
    bool all_hex = true;
    for (char c : reference) all_hex = all_hex && is_lower_hex(c);
    if (all_hex) return bad("a 64-character hexadecimal string is an image ID, not a reference");
  }
  ImageRef out;
  std::string_view name_tag = reference;
  if (const auto at = reference.find('@'); at != std::string_view::npos) {
    const std::string_view digest = reference.substr(at + 1);
    if (!valid_digest(digest)) {
      return bad("digest " + quote(digest) +
                 " is not sha256:, sha384: or sha512: followed by its lowercase hex");
    }
    out.digest = std::string(digest);
    name_tag = reference.substr(0, at);
  }
  std::string_view name = name_tag;
  if (const auto colon = tag_colon(name_tag); colon != std::string_view::npos) {
    const std::string_view tag = name_tag.substr(colon + 1);
    if (!valid_tag(tag)) {
      return bad("tag " + quote(tag) +
                 " must be 1 to 128 letters, digits, _ . - (not starting with . or -)");
    }
    out.tag = std::string(tag);
    name = name_tag.substr(0, colon);
  }
  auto repository = normalise_name(name, reference);
  if (!repository) return fail(repository.error());
  out.repository = std::move(repository).value();
  if (out.tag.empty() && out.digest.empty()) out.tag = std::string(kDefaultTag);
  return out;
}

bool image_matches(const ImageRef& bound, const ImageRef& image) noexcept {
  if (bound.repository != image.repository) return false;
  if (!bound.digest.empty()) return image.digest == bound.digest;
  return image.digest.empty() && image.tag == bound.tag;
}

bool ImagePattern::matches(const ImageRef& candidate) const noexcept {
  switch (kind) {
    case Kind::Exact: return image_matches(image, candidate);
    case Kind::AnyTag: return candidate.repository == image.repository;
    case Kind::Prefix: return candidate.repository.compare(0, prefix.size(), prefix) == 0;
  }
  return false;
}

Result<ImagePattern> parse_image_pattern(std::string_view raw) {
  const std::string_view text = trim(raw);
  ImagePattern out;
  out.text = std::string(text);
  const auto bad = [&](std::string_view why) {
    return fail("image pattern " + quote(text) + ": " + std::string(why) +
                " (use REPO:TAG, REPO@DIGEST, REPO:* or PREFIX/*)");
  };
  if (text.empty()) return bad("it is empty");
  const auto star = text.find('*');
  if (star != std::string_view::npos && star + 1 != text.size()) {
    return bad("\"*\" may appear only at the end, as :* or /*");
  }
  if (text.size() >= 2 && text.substr(text.size() - 2) == "/*") {
    const std::string_view prefix = text.substr(0, text.size() - 2);
    if (prefix.empty()) return bad("a prefix is required before /*");
    if (prefix.find_first_of("@*") != std::string_view::npos) return bad("a prefix names no digest");
    const auto slash = prefix.find('/');
    const std::string_view first = prefix.substr(0, slash);
    // A whole registry, or a single path segment (docker.io's top level:
    // "library/*" is every official image): any image with a shell is there.
    if (slash == std::string_view::npos) {
      return bad("registry-wide patterns are refused: " + quote(text) +
                 " allows every image of a registry or of a single path segment; name the registry and "
                 "an organisation (ghcr.io/org/*), or REPO:TAG");
    }
    std::string domain, path;
    if (is_domain_element(first)) {
      domain = first == kLegacyDefaultDomain ? std::string(kDefaultDomain) : std::string(first);
      if (slash != std::string_view::npos) path = std::string(prefix.substr(slash + 1));
      if (slash != std::string_view::npos && path.empty()) return bad("empty path component");
    } else {
      domain = std::string(kDefaultDomain);
      path = std::string(prefix);
    }
    if (!valid_domain(domain)) return bad("registry " + quote(domain) + " is not a host[:port]");
    if (!path.empty() && !valid_path(path)) {
      return bad("path " + quote(path) + " is not lowercase /-separated components");
    }
    if (path.empty() || (domain == kDefaultDomain && path == "library")) {
      return bad("registry-wide patterns are refused: " + quote(text) +
                 " allows every image of a registry or of its official library; name an organisation "
                 "(ghcr.io/org/*), or REPO:TAG");
    }
    out.kind = ImagePattern::Kind::Prefix;
    out.prefix = domain + "/" + path + "/";
    return out;
  }
  if (text.size() >= 2 && text.substr(text.size() - 2) == ":*") {
    const std::string_view repo = text.substr(0, text.size() - 2);
    if (repo.find('@') != std::string_view::npos || tag_colon(repo) != std::string_view::npos) {
      return bad("REPO:* names a repository without a tag or digest");
    }
    auto name = normalise_name(repo, text);
    if (!name) return bad(name.error());
    out.kind = ImagePattern::Kind::AnyTag;
    out.image.repository = std::move(name).value();
    return out;
  }
  if (star != std::string_view::npos) return bad("\"*\" may appear only as :* or /*");
  const bool has_digest = text.find('@') != std::string_view::npos;
  if (!has_digest && tag_colon(text) == std::string_view::npos) {
    return bad("a bare repository is ambiguous; name its tag, or :* for any tag");
  }
  auto image = parse_image(text);
  if (!image) return bad(image.error());
  out.kind = ImagePattern::Kind::Exact;
  out.image = std::move(image).value();
  return out;
}

Result<std::vector<ImagePattern>> parse_image_patterns(std::string_view list) {
  std::vector<ImagePattern> out;
  while (true) {
    const auto comma = list.find(',');
    const std::string_view entry = trim(list.substr(0, comma));
    if (!entry.empty()) {
      auto pattern = parse_image_pattern(entry);
      if (!pattern) return fail(pattern.error());
      out.push_back(std::move(pattern).value());
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

bool any_pattern_matches(const std::vector<ImagePattern>& patterns, const ImageRef& image) noexcept {
  for (const auto& p : patterns)
    if (p.matches(image)) return true;
  return false;
}

}  // namespace ig::model
