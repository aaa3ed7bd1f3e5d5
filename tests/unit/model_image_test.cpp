// Image references as the runtime reads them, the binding comparison and the
// --allowed-extra-images patterns (src/model/image.h).
#include "model/image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ig::model {
namespace {

using ::testing::HasSubstr;

const std::string kSha = "sha256:" + std::string(64, 'a');
const std::string kOtherSha = "sha256:" + std::string(64, 'b');

ImageRef parsed(const std::string& s) {
  auto r = parse_image(s);
  EXPECT_TRUE(r.ok()) << s << ": " << (r.ok() ? "" : r.error());
  return r.ok() ? *r : ImageRef{};
}

bool binds(const std::string& bound, const std::string& image) {
  return image_matches(parsed(bound), parsed(image));
}

ImagePattern pattern(const std::string& s) {
  auto r = parse_image_pattern(s);
  EXPECT_TRUE(r.ok()) << s << ": " << (r.ok() ? "" : r.error());
  return r.ok() ? *r : ImagePattern{};
}

TEST(ImageRef, NormalisesDockerHubNamesExactlyAsTheRuntime) {
  struct Case {
    const char* in;
    const char* canonical;
  };
  for (const Case& c : {
           Case{"nginx", "docker.io/library/nginx:latest"},
           Case{"nginx:1.25", "docker.io/library/nginx:1.25"},
           Case{"library/nginx:1.25", "docker.io/library/nginx:1.25"},
           Case{"docker.io/nginx:1.25", "docker.io/library/nginx:1.25"},
           Case{"docker.io/library/nginx:1.25", "docker.io/library/nginx:1.25"},
           Case{"index.docker.io/nginx:1.25", "docker.io/library/nginx:1.25"},
           Case{"team/app:2", "docker.io/team/app:2"},
           Case{"team/sub/app:2", "docker.io/team/sub/app:2"},
           Case{"registry.example.com/x:1", "registry.example.com/x:1"},
           Case{"registry.example.com/x", "registry.example.com/x:latest"},
           Case{"localhost/x:1", "localhost/x:1"},
           Case{"Registry/x:1", "Registry/x:1"},  // an uppercase first element is a domain
           Case{"a-b.c-d/e__f.g-h:T_1.x", "a-b.c-d/e__f.g-h:T_1.x"},
       }) {
    EXPECT_EQ(parsed(c.in).canonical(), c.canonical) << c.in;
  }
}

// admission's binding check takes a container whose reference is the
// Component's, byte for byte, as bound without parsing it again: every valid
// reference must run what it names.
TEST(ImageRef, EveryReferenceMatchesItself) {
  const std::vector<std::string> references = {
      "nginx", "nginx:1.25", "docker.io/nginx", "index.docker.io/library/nginx:1", "reg:5000/x", "reg:5000/x:1",
      "x@" + kSha, "x:1@" + kSha, "registry.example.com/gibson/app:1.0.0", "localhost/x", "Registry/x:1",
      "a-b.c-d/e__f.g-h:T_1.x"};
  for (const std::string& r : references) {
    EXPECT_TRUE(binds(r, r)) << r;
  }
}

TEST(ImageRef, RegistriesWithPortsAreNotTags) {
  const ImageRef r = parsed("reg:5000/x:1");
  EXPECT_EQ(r.repository, "reg:5000/x");
  EXPECT_EQ(r.tag, "1");
  EXPECT_EQ(parsed("reg:5000/x").canonical(), "reg:5000/x:latest");
  EXPECT_EQ(parsed("[::1]:5000/x:1").repository, "[::1]:5000/x");
  EXPECT_EQ(parsed("10.0.0.1:5000/team/x:1").repository, "10.0.0.1:5000/team/x");
  // Without a "/", "reg:5000" is the Docker Hub image "reg" with tag 5000.
  EXPECT_EQ(parsed("reg:5000").canonical(), "docker.io/library/reg:5000");
}

TEST(ImageRef, ADigestIsWhatRunsAndNoTagMeansLatestOnlyWithoutOne) {
  const ImageRef d = parsed("reg.example/x@" + kSha);
  EXPECT_EQ(d.tag, "");
  EXPECT_EQ(d.digest, kSha);
  EXPECT_EQ(d.canonical(), "reg.example/x@" + kSha);
  const ImageRef td = parsed("reg.example/x:1@" + kSha);
  EXPECT_EQ(td.tag, "1");
  EXPECT_EQ(td.canonical(), "reg.example/x@" + kSha);
  EXPECT_EQ(parsed("x@sha512:" + std::string(128, '0')).digest, "sha512:" + std::string(128, '0'));
  EXPECT_EQ(parsed("x@sha384:" + std::string(96, 'f')).digest, "sha384:" + std::string(96, 'f'));
}

TEST(ImageRef, RefusesWhatTheRuntimeRefusesNamingTheReference) {
  for (const std::string& bad : {
           std::string(""), std::string("team/UPPER"), std::string("Nginx"), std::string("x:"),
           std::string(":1"), std::string("x:-1"), std::string("x::1"), std::string("a//b"),
           std::string("/a"), std::string("a/"), std::string("a..b"), std::string("a___b"),
           std::string("-a"), std::string("a-"), std::string("x@sha256:abc"),
           std::string("x@md5:" + std::string(32, 'a')), std::string("x@sha256:" + std::string(64, 'A')),
           std::string("x@" + kSha + "@" + kSha), std::string("x:" + std::string(129, 't')),
           std::string(64, 'a'), std::string("bad_host.example/x"), std::string("reg:port/x"),
           std::string("reg:/x"), std::string("[zz]:1/x"), std::string("a b"), std::string("x:1 "),
           std::string("reg.example/" + std::string(250, 'x')),
       }) {
    auto r = parse_image(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_THAT(r.error(), HasSubstr("is not a valid image reference")) << bad;
    }
  }
  // The longest tag is 128 characters.
  EXPECT_TRUE(parse_image("x:" + std::string(128, 't')).ok());
}

TEST(ImageMatches, SameRepositoryAndTagExactly) {
  EXPECT_TRUE(binds("registry.example.com/x:1", "registry.example.com/x:1"));
  EXPECT_FALSE(binds("registry.example.com/x:1", "registry.example.com/x:2"));
  EXPECT_FALSE(binds("registry.example.com/x:1", "registry.example.com/y:1"));
  EXPECT_FALSE(binds("registry.example.com/x:1", "evil.example.com/x:1"));
  EXPECT_FALSE(binds("registry.example.com/x:1", "registry.example.com/team/x:1"));
  EXPECT_FALSE(binds("reg:5000/x:1", "reg:5001/x:1"));
  EXPECT_FALSE(binds("reg:5000/x:1", "reg/x:1"));
  // Tags are case-sensitive, as in the registry.
  EXPECT_FALSE(binds("r.example/x:v1", "r.example/x:V1"));
}

TEST(ImageMatches, NoTagIsLatestOnBothSides) {
  EXPECT_TRUE(binds("registry.example.com/x", "registry.example.com/x:latest"));
  EXPECT_TRUE(binds("registry.example.com/x:latest", "registry.example.com/x"));
  EXPECT_FALSE(binds("registry.example.com/x", "registry.example.com/x:1"));
}

TEST(ImageMatches, DockerHubDefaultsAreTheSameImage) {
  EXPECT_TRUE(binds("nginx:1.25", "docker.io/library/nginx:1.25"));
  EXPECT_TRUE(binds("docker.io/library/nginx:1.25", "index.docker.io/nginx:1.25"));
  EXPECT_TRUE(binds("team/app:2", "docker.io/team/app:2"));
  EXPECT_FALSE(binds("nginx:1.25", "team/nginx:1.25"));
}

TEST(ImageMatches, AComponentDigestRequiresThatDigest) {
  const std::string bound = "reg.example/x:1@" + kSha;
  EXPECT_TRUE(binds(bound, "reg.example/x@" + kSha));
  EXPECT_TRUE(binds(bound, "reg.example/x:1@" + kSha));
  EXPECT_FALSE(binds(bound, "reg.example/x:1"));  // the tag may have moved
  EXPECT_FALSE(binds(bound, "reg.example/x:1@" + kOtherSha));
  EXPECT_FALSE(binds(bound, "reg.example/y@" + kSha));
  EXPECT_TRUE(binds("reg.example/x@" + kSha, "reg.example/x:anything@" + kSha));
}

TEST(ImageMatches, AContainerDigestRunsThatDigestSoATagOnlyComponentDoesNotBindIt) {
  // The runtime pulls by digest and ignores the tag: "x:1@sha256:..." may
  // be any image of the repository.
  EXPECT_FALSE(binds("reg.example/x:1", "reg.example/x:1@" + kSha));
  EXPECT_FALSE(binds("reg.example/x:1", "reg.example/x@" + kSha));
}

TEST(ImagePattern, ExactPatternsMatchLikeTheBinding) {
  const ImagePattern p = pattern("istio/proxyv2:1.20.0");
  EXPECT_EQ(p.kind, ImagePattern::Kind::Exact);
  EXPECT_TRUE(p.matches(parsed("docker.io/istio/proxyv2:1.20.0")));
  EXPECT_FALSE(p.matches(parsed("istio/proxyv2:1.20.1")));
  EXPECT_FALSE(p.matches(parsed("istio/proxyv2:1.20.0@" + kSha)));
  const ImagePattern d = pattern("reg.example/mesh@" + kSha);
  EXPECT_TRUE(d.matches(parsed("reg.example/mesh:v9@" + kSha)));
  EXPECT_FALSE(d.matches(parsed("reg.example/mesh:v9")));
}

TEST(ImagePattern, AnyTagPatternsMatchTheRepositoryOnly) {
  const ImagePattern p = pattern("reg:5000/mesh/proxy:*");
  EXPECT_EQ(p.kind, ImagePattern::Kind::AnyTag);
  EXPECT_TRUE(p.matches(parsed("reg:5000/mesh/proxy:1")));
  EXPECT_TRUE(p.matches(parsed("reg:5000/mesh/proxy")));
  EXPECT_TRUE(p.matches(parsed("reg:5000/mesh/proxy@" + kSha)));
  EXPECT_FALSE(p.matches(parsed("reg:5000/mesh/proxy2:1")));
  EXPECT_FALSE(p.matches(parsed("reg:5000/mesh/proxy/sub:1")));
  EXPECT_TRUE(pattern("envoy:*").matches(parsed("docker.io/library/envoy:v1")));
}

TEST(ImagePattern, PrefixPatternsMatchWholePathComponents) {
  const ImagePattern p = pattern("gcr.io/istio-release/*");
  EXPECT_EQ(p.kind, ImagePattern::Kind::Prefix);
  EXPECT_EQ(p.prefix, "gcr.io/istio-release/");
  EXPECT_TRUE(p.matches(parsed("gcr.io/istio-release/proxyv2:1.20.0")));
  EXPECT_TRUE(p.matches(parsed("gcr.io/istio-release/a/b@" + kSha)));
  EXPECT_FALSE(p.matches(parsed("gcr.io/istio-release-evil/proxyv2:1")));
  EXPECT_FALSE(p.matches(parsed("gcr.io/istio:1")));
  EXPECT_EQ(pattern("docker.io/istio/*").prefix, "docker.io/istio/");
  EXPECT_TRUE(pattern("docker.io/istio/*").matches(parsed("istio/proxyv2:1")));
  EXPECT_EQ(pattern("reg:5000/team/*").prefix, "reg:5000/team/");
  EXPECT_FALSE(pattern("reg:5000/team/*").matches(parsed("reg:5001/team/x:1")));
  EXPECT_EQ(pattern("index.docker.io/team/*").prefix, "docker.io/team/");
}

// A pattern that allows a whole registry, a single path segment or docker.io's
// official library lets any image with a shell run as a sidecar: refused.
TEST(ImagePattern, RefusesRegistryWidePrefixes) {
  for (const char* wide : {"docker.io/*", "ghcr.io/*", "reg:5000/*", "localhost/*", "library/*", "istio/*",
                           "docker.io/library/*", "index.docker.io/library/*"}) {
    auto r = parse_image_pattern(wide);
    EXPECT_FALSE(r.ok()) << wide;
    if (!r.ok()) {
      EXPECT_THAT(r.error(), HasSubstr("registry-wide patterns are refused")) << wide;
    }
  }
  EXPECT_TRUE(parse_image_pattern("ghcr.io/org/*").ok());
  EXPECT_TRUE(parse_image_pattern("docker.io/library/nginx:*").ok());
}

TEST(ImagePattern, RefusesAmbiguousOrMalformedPatternsNamingThem) {
  for (const char* bad : {"", "*", "/*", ":*", "istio/proxyv2", "nginx", "a*b:1", "istio/*/x",
                          "x:1*", "reg.example/x@*", "team/UPPER/*", "x:1:*", "x@" "sha256:ab:*",
                          "istio//*", "bad_host.example/*"}) {
    auto r = parse_image_pattern(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_THAT(r.error(), HasSubstr("image pattern")) << bad;
    }
  }
  auto bare = parse_image_pattern("istio/proxyv2");
  ASSERT_FALSE(bare.ok());
  EXPECT_THAT(bare.error(), HasSubstr("bare repository"));
}

TEST(ImagePatterns, ACommaListIgnoresSpacesAndEmptyEntriesAndFailsWhole) {
  auto list = parse_image_patterns(" istio/proxyv2:1.20.0 , ,gcr.io/mesh/*,");
  ASSERT_TRUE(list.ok()) << list.error();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_TRUE(any_pattern_matches(*list, parsed("gcr.io/mesh/x:1")));
  EXPECT_TRUE(any_pattern_matches(*list, parsed("istio/proxyv2:1.20.0")));
  EXPECT_FALSE(any_pattern_matches(*list, parsed("istio/proxyv2:1.21.0")));
  EXPECT_TRUE(parse_image_patterns("")->empty());
  auto bad = parse_image_patterns("istio/proxyv2:1.20.0,nginx");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error(), HasSubstr("\"nginx\""));
}

}  // namespace
}  // namespace ig::model
