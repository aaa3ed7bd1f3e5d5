// Container image references, read the way the container runtime reads them,
// and the two comparisons the pod <-> Component binding needs.
//
// Contract:
//  - parse_image() accepts exactly the reference grammar of the
//    distribution/reference library that containerd and the kubelet use
//    ([domain[:port]/]path[:tag][@digest], lowercase path components, tags of
//    at most 128 characters, sha256/sha384/sha512 digests in lowercase hex,
//    names of at most 255 characters) and normalises it exactly as they do
//    (ParseDockerRef): a name without a domain is on docker.io
//    ("nginx" -> "docker.io/library/nginx", "team/app" -> "docker.io/team/app",
//    "index.docker.io/x" -> "docker.io/library/x"); a first component is a
//    domain only when it is "localhost" or contains ".", ":" or an uppercase
//    letter; no tag and no digest means the tag "latest"; a reference with a
//    digest runs that digest (its tag, if any, is not what the runtime pulls).
//    Anything else is an error naming the reference, never an exception.
//  - image_matches(bound, image): `image` runs what `bound` names. Same
//    normalised repository, and: when `bound` names a digest, `image` names
//    the same digest; otherwise `image` names no digest and the same tag.
//  - parse_image_pattern() reads one --allowed-extra-images entry:
//      REPO:TAG, REPO@DIGEST, REPO:TAG@DIGEST  that image (image_matches)
//      REPO:*                                 the repository, any tag or digest
//      PREFIX/*                               every repository under PREFIX/
//    normalised like images ("docker.io/istio/*"). A bare REPO (no tag,
//    digest or wildcard), a lone "*", other wildcards and registry-wide
//    prefixes (a registry alone, "docker.io/*"; a single path segment,
//    "istio/*"; docker.io's official library, "docker.io/library/*") are
//    errors.
// Pure: no I/O, no globals, no exceptions on any input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ig::model {

struct ImageRef {
  std::string repository;  // normalised: "docker.io/library/nginx", "reg:5000/x"
  std::string tag;         // "" only when a digest is given without a tag
  std::string digest;      // "sha256:<hex>", "" when none
  // What the runtime pulls: "repository@digest" when there is a digest,
  // otherwise "repository:tag".
  std::string canonical() const;
};

Result<ImageRef> parse_image(std::string_view reference);

bool image_matches(const ImageRef& bound, const ImageRef& image) noexcept;

struct ImagePattern {
  enum class Kind { Exact, AnyTag, Prefix };
  Kind kind = Kind::Exact;
  std::string text;    // as written, for messages
  ImageRef image;      // Exact: the image; AnyTag: repository only
  std::string prefix;  // Prefix: normalised, ending in "/"
  bool matches(const ImageRef& image) const noexcept;
};

Result<ImagePattern> parse_image_pattern(std::string_view text);

// A comma-separated list of patterns (empty entries and surrounding spaces
// are ignored); the first invalid entry fails the whole list.
Result<std::vector<ImagePattern>> parse_image_patterns(std::string_view list);

bool any_pattern_matches(const std::vector<ImagePattern>& patterns, const ImageRef& image) noexcept;

}  // namespace ig::model
