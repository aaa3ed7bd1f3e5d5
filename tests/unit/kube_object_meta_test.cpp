// kube::object_meta (src/kube/object_meta.h): the one lenient reader of an
// object's metadata.
#include "kube/object_meta.h"

#include <gtest/gtest.h>

namespace ig::kube {

TEST(ObjectMeta, ReadsTheFieldsAsViewsIntoTheObject) {
  const auto pod = nlohmann::json::parse(R"({"metadata": {"name": "p", "namespace": "team-a", "uid": "u-1",
      "resourceVersion": "42", "generation": 3, "deletionTimestamp": "2026-01-01T00:00:00Z",
      "labels": {"app": "x"}, "annotations": {"note": "y", "n": 1}}})");
  const ObjectMeta m = object_meta(pod);
  EXPECT_TRUE(m.present);
  EXPECT_EQ(m.name, "p");
  EXPECT_EQ(m.namespace_, "team-a");
  EXPECT_EQ(m.uid, "u-1");
  EXPECT_EQ(m.resource_version, "42");
  EXPECT_EQ(m.generation, 3);
  EXPECT_TRUE(m.deleting);
  EXPECT_EQ(m.label("app"), "x");
  EXPECT_EQ(m.label("none"), "");
  EXPECT_EQ(m.annotation("note"), "y");
  EXPECT_EQ(m.annotation("n"), "");  // not a string
  EXPECT_EQ(m.name.data(), pod["metadata"]["name"].get_ref<const std::string&>().data());  // a view, no copy
}

TEST(ObjectMeta, WhatIsAbsentOrOfAnotherTypeReadsAsEmpty) {
  for (const char* text : {R"(null)", R"([])", R"({})", R"({"metadata": null})", R"({"metadata": "x"})",
                           R"({"metadata": {"name": 1, "namespace": null, "generation": "2", "labels": [],
                                            "annotations": "a", "deletionTimestamp": null}})"}) {
    const auto object = nlohmann::json::parse(text);
    const ObjectMeta m = object_meta(object);
    EXPECT_EQ(m.present, object.is_object() && object.contains("metadata") && object["metadata"].is_object())
        << text;
    EXPECT_EQ(m.name, "") << text;
    EXPECT_EQ(m.namespace_, "") << text;
    EXPECT_EQ(m.generation, 0) << text;
    EXPECT_FALSE(m.deleting) << text;
    EXPECT_EQ(m.labels, nullptr) << text;
    EXPECT_EQ(m.annotations, nullptr) << text;
    EXPECT_EQ(m.label("a"), "") << text;
  }
}

}  // namespace ig::kube
