// The projected parser must accept exactly what nlohmann accepts and return
// exactly nlohmann's value restricted to the projection (json_projection.h).
#include <gtest/gtest.h>


#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "model/document.h"
#include "admission/review.h"
#include "model/json_projection.h"

namespace {

using nlohmann::json;
using ig::model::DecodeLimits;
using ig::model::Projection;
using ig::admission::admission_review_projection;
using ig::model::parse_projected;
using ig::model::project;

// The reference: model::parse_json (nlohmann's verdict, our depth limit, no
// repeated member name: a DOM parser, not the scanner under test) and
// project() of its value.
std::optional<json> reference(std::string_view text, const Projection& p) {
  // nlohmann takes a NUL byte for the end of the input, so it accepts
  // "{}\0garbage"; RFC 8259 does not, and neither do we.
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  auto full = ig::model::parse_json(text, "reference");
  if (!full) return std::nullopt;
  return project(*full, p);
}

// parse_captured() (capture slots, json_projection.h) against
// parse_projected() on the same text: the same verdict, the same error
// text, and slots equal to capture() of the projected DOM.
void expect_captured_agrees(std::string_view text, const Projection& p, std::size_t slot_count) {
  auto dom = parse_projected(text, p, "t");
  std::vector<ig::model::Captured> slots(slot_count);
  auto got = ig::model::parse_captured(text, p, slots, "t");
  ASSERT_EQ(dom.ok(), got.ok()) << "capture verdict differs for [" << text.substr(0, 200) << "]"
                                << (got.ok() ? std::string(" (capture accepted)") : " (capture said: " + got.error() + ")");
  if (!dom.ok()) {
    EXPECT_EQ(dom.error(), got.error()) << "[" << text.substr(0, 200) << "]";
    return;
  }
  const auto want = ig::model::capture(*dom, p, slot_count);
  for (std::size_t i = 0; i < slot_count; ++i) {
    EXPECT_TRUE(want[i] == slots[i]) << "slot " << i << " differs for [" << text.substr(0, 200) << "]: got type "
                                     << int(slots[i].type) << " text [" << slots[i].text << "] value "
                                     << slots[i].value.dump() << ", want type " << int(want[i].type) << " text ["
                                     << want[i].text << "] value " << want[i].value.dump();
  }
}

void expect_same_as_nlohmann(std::string_view text, const Projection& p = admission_review_projection()) {
  if (&p == &admission_review_projection()) {
    expect_captured_agrees(text, p, ig::admission::admission_review_slot_count());
  }
  auto expected = reference(text, p);
  auto got = parse_projected(text, p, "t");
  ASSERT_EQ(expected.has_value(), got.ok())
      << "verdicts differ for [" << text.substr(0, 200) << "]"
      << (got.ok() ? std::string(" (we accepted)") : " (we said: " + got.error() + ")");
  if (expected) {
    EXPECT_EQ(*expected, *got) << "values differ for [" << text.substr(0, 200) << "]";
  }
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> seed_documents() {
  std::vector<std::string> docs;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(IG_SOURCE_DIR) / "examples/reviews")) {
    docs.push_back(read_file(e.path()));
  }
  json pod = json::parse(docs.front());
  auto& obj = pod["request"]["object"];
  obj["spec"]["hostNetwork"] = true;
  obj["spec"]["initContainers"] = {{{"name", "init"}, {"securityContext", {{"privileged", true}}}}};
  obj["spec"]["runtimeClassName"] = "runc";
  obj["metadata"]["annotations"] = {{"gibson.zeroroot.ai/isolation", "x"}, {"a~b/c", "d"}};
  docs.push_back(pod.dump());
  json deployment = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"},
                     {"request", {{"uid", "u"}, {"kind", {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}}},
                                  {"operation", "UPDATE"}, {"namespace", "n"}, {"dryRun", true},
                                  {"object", {{"apiVersion", "apps/v1"}, {"kind", "Deployment"},
                                              {"metadata", {{"name", "d"}, {"labels", {{"x", 1}}}}},
                                              {"spec", {{"replicas", 3}, {"template", obj}}}}}}}};
  docs.push_back(deployment.dump(2));
  json component = {{"apiVersion", "admission.k8s.io/v1beta1"}, {"kind", "AdmissionReview"},
                    {"request", {{"uid", "c"}, {"object", {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"}, {"kind", "Component"},
                                                           {"metadata", {{"name", "x"}}},
                                                           {"spec", {{"kind", "tool"}, {"image", "i"}, {"policy", {{"content_trust", "maybe"}}}}}}}}}};
  docs.push_back(component.dump());
  return docs;
}

TEST(JsonProjection, AgreesWithNlohmannOnTheExampleReviews) {
  for (const auto& doc : seed_documents()) expect_same_as_nlohmann(doc);
}

TEST(JsonProjection, KeepsOnlyTheProjectedFieldsOfAPod) {
  const auto docs = seed_documents();
  json review = json::parse(docs.front());
  json& first = review["request"]["object"]["spec"]["containers"][0];
  first["ports"] = json::array({{{"containerPort", 80}}});
  first["resources"] = {{"limits", {{"cpu", "1"}}}};
  auto got = parse_projected(review.dump(), admission_review_projection(), "t");
  ASSERT_TRUE(got.ok()) << got.error();
  const json& obj = (*got)["request"]["object"];
  EXPECT_TRUE(obj["spec"].contains("containers"));
  EXPECT_TRUE(obj["spec"]["containers"][0].contains("image"));       // the image binding reads it
  EXPECT_FALSE(obj["spec"]["containers"][0].contains("ports"));      // not read by the rules
  EXPECT_FALSE(obj["spec"]["containers"][0].contains("resources"));  // not read by the rules
  // Of userInfo, only who asked (the enforcement guard reads it).
  for (const auto& [key, value] : (*got)["request"]["userInfo"].items()) {
    EXPECT_TRUE(key == "username" || key == "groups") << key;
  }
  EXPECT_EQ(obj["metadata"]["labels"].size(), 1u);
}

// sparse(): an object that keeps nothing is dropped; one_of(): a string that
// is none of the values is not kept. Both agree with project() (the
// reference), escapes and wrong types included.
TEST(JsonProjection, SparseObjectsAndOneOfStringsAreDroppedWhenTheyKeepNothing) {
  const Projection p = Projection::object({
      {"env", Projection::array(Projection::sparse({{"name", Projection::one_of({"LD_PRELOAD", "ENV"})}}))},
      {"probe", Projection::sparse({{"exec", Projection::object({{"command", Projection::whole()}})}})},
  });
  auto got = parse_projected(
      R"({"env":[{"name":"A","value":"1"},{"name":"LD_PRELOAD","value":"x"},{"value":"2"},{"name":"E\u004eV"},)"
      R"("s",{"name":5},[1]],"probe":{"httpGet":{"port":80}}})",
      p, "t");
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_EQ(*got, json::parse(R"({"env":[{"name":"LD_PRELOAD"},{"name":"ENV"},"s",[]]})"));
  for (const char* doc : {
           R"({"env":[]})", R"({"env":[{}]})", R"({"env":[{"name":null}]})", R"({"env":{"name":"ENV"}})",
           R"({"probe":{}})", R"({"probe":{"exec":{}}})", R"({"probe":[{"exec":1}]})", R"({"probe":"x"})",
           R"({"env":[{"name":"ENV\n"},{"name":"\u00e9"},{"name":"LD_PRELOAD","name":"A"}]})",
           R"({"env":[{"name":"ENV")", "{\"env\":[{\"name\":\"EN\x01V\"}]}",
           R"({"env":[{"value":"ENV","name":"x"},{"name":"x","v":{"name":"ENV"}},{"n":"ENV\"","name":"ENV"}]})",
           R"({"probe":{"x":"exec","y":{"exec":1}},"env":[{"name":"A","name":"A"}]})",
           // A list of objects without a needle is dropped whole (one scan); a non-object
           // element, a needle anywhere or an error sends it element by element.
           R"({"env":[{"name":"A","value":"1"},{"name":"B"}]})", R"({"env":[{"name":"A"},"s",{"name":"B"}]})",
           R"({"env":[{"name":"A"},{"name":"B"},]})", R"({"env":[{"name":"A"} {"name":"B"}]})",
           R"({"env":[{"name":"A","v":[[[{"x":"ENV"}]]]},{"name":"ENV"}]})", R"({"env":[{"name":"A"},1,null]})",
           R"({"env":[{"name":"A"},{"name":"B","name":"C"}]})", R"({"env":[{"name":"A"},{"name":"B"})",
           R"({"env":[{"name":"A"}],"after":[{"name":"ENV"}]})", R"({"env":[ {"name":"A"} , {"name":"B"} ]})",
           // The one-pass filter (every field a one_of): a value it may keep, spelled with an
           // escape, in a later element, after an error or with more than 16 names.
           R"({"env":[{"name":"A"},{"name":"LD_PRELOAD"}]})", R"({"env":[{"name":"A"},{"name":"EN\V"}]})",
           R"({"env":[{"name":"A"},{"name":"ENV"},{"name":"B"}]})", R"({"env":[{"name":"ENV"},{"name":"B",}]})",
           R"({"env":[{"name":"A"},{"name":"ENV"},{"name":"B","name":"B"}]})", R"({"env":[{"name":5},{"name":["ENV"]}]})",
           R"({"env":[{"name":{"name":"ENV"}},{"value":"ENV"}]})", R"({"env":[{"name":"ENV"}]})",
           R"({"env":[{"name":"A","name":"B"}]})", R"({"env":[{"name":"ENVX"},{"name":"EN"},{"name":"é"}]})",
           R"({"env":[{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,)"
           R"("n":14,"o":15,"p":16,"q":17,"name":"A","a":0}]})",
           R"({"env":[{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,)"
           R"("n":14,"o":15,"p":16,"q":17,"name":"ENV"}]})",
           R"({"env":[{"name":"A","v":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]})"}) {
    expect_same_as_nlohmann(doc, p);
  }
}

TEST(JsonProjection, AgreesWithNlohmannOnEdgeCases) {
  const std::vector<std::string> cases = {
      "", " ", "{}", "[]", "null", "true", "false", "tru", "nul", "fals", "0", "-0", "01", "1.", ".5",
      "1e", "1e+", "-", "+1", "1.5e300", "1e500", "-1e500", "1e-500", "123456789012345678901234567890",
      std::string(400, '9'), "18446744073709551615", "18446744073709551616", "-9223372036854775809",
      R"("\ud800")", R"("\ud800\udc00")", R"("\udc00")", R"("\u00e9\u0000")", R"("\uD83D\uDE00")",
      R"("\ud800\u0041")", R"("\x")", R"("\u12")", R"("\u12G4")", "\"\xc3\xa9\"", "\"\xc0\xaf\"",
      "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xf0\x9f\x98\x80\"", "\"\xe0\x80\xaf\"",
      "\"\x7f\"", "\"\x1f\"", "\"\t\"", "\"\xff\"", "\"\xc3\"", "\"abc", "\xEF\xBB\xBF{}", "\xEF\xBB{}",
      "{} x", "{}  \n", std::string("{}\0\0apiVer", 10), std::string("[1,\0]", 5), "{\"a\":1,}", "[1,]", "[,1]", "{\"a\" 1}", "{\"a\":}", "{1:2}", "[1 2]",
      R"({"kind":"AdmissionReview","kind":"Other"})",
      R"({"request":{"object":{"metadata":{"labels":{"gibson.zeroroot.ai/component":"a","gibson.zeroroot.ai/component":"b"}}}}})",
      R"({"request":{"object":{"metadata":{"labels":["x"],"annotations":"s"}}}})",
      R"({"request":{"object":{"metadata":[1,{"a":2}],"spec":{"containers":{"a":1}}}}})",
      R"({"request":{"object":{"spec":{"containers":[1,"x",null,[2],{"name":"c","securityContext":[true]}]}}}})",
      R"({"request":{"object":{"spec":{"hostNetwork":1.5e3,"hostPID":-2,"runtimeClassName":{"a":[1]}}}}})",
      R"({"request":{"uid":"\u0075\u0069d","kind":{"kind":"Pod","extra":[1,2,{"x":null}]}}})",
      R"({"re\u0071uest":{"uid":"escaped key"}})",
      R"({"request":{"object":{"metadata":{"labels":{"gibson.zeroroot.ai\/component":"escaped slash"}}}}})",
      // Repeated member names, projected or skipped, escaped or not, at any depth.
      R"({"request":{"uid":"a","uid":"b"}})",
      R"({"request":{"object":{"spec":{"unread":{"x":1,"y":2,"x":3}}}}})",
      R"({"request":{"object":{"metadata":{"n\u0061me":"a","name":"b"}}}})",
      R"({"request":{"object":{"junk":{"\u0078":1,"x":2}}}})",
      R"({"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":1}]})",
      R"({"request":{"operation":"CREATE","operation":"DELETE"}})",
  };
  for (const auto& c : cases) expect_same_as_nlohmann(c);
}

// The envelope's slots with every JSON type where each field belongs, and
// members of the transparent objects that have no slot (dropped).
TEST(JsonProjection, CaptureSlotsAgreeWithTheDomForEveryTypeOfEnvelopeField) {
  const std::vector<std::string> values = {"null", "true", "0", "-1.5e3", "\"s\"", "\"\\u00e9sc\\\"aped\"",
                                           "\"a string longer than sixteen bytes\"", "[]", "[\"a\",\"b\"]",
                                           "[\"a\",1,\"b\",null]", "[[\"x\"]]", "{}", "{\"group\":\"g\",\"x\":[1]}",
                                           "{\"kind\":\"Pod\",\"spec\":{\"hostPID\":true}}"};
  const std::vector<std::string> templates = {
      "@", "{\"apiVersion\":@}", "{\"kind\":@,\"apiVersion\":\"admission.k8s.io/v1\"}", "{\"request\":@}",
      "{\"request\":{\"uid\":@}}", "{\"request\":{\"kind\":@}}", "{\"request\":{\"kind\":{\"group\":@,\"kind\":@}}}",
      "{\"request\":{\"kind\":{\"version\":@,\"unslotted\":@}}}", "{\"request\":{\"subResource\":@,\"name\":@}}",
      "{\"request\":{\"namespace\":@,\"operation\":@,\"dryRun\":@}}", "{\"request\":{\"userInfo\":@}}",
      "{\"request\":{\"userInfo\":{\"username\":@,\"groups\":@,\"uid\":@}}}",
      "{\"request\":{\"object\":@,\"oldObject\":@}}", "{\"request\":{\"resource\":@,\"options\":@}}",
      "{\"re\\u0071uest\":{\"u\\u0069d\":@}}", "{\"request\":{\"uid\":@,\"uid\":@}}",
  };
  for (const std::string& t : templates) {
    for (const std::string& v : values) {
      std::string doc;
      for (char c : t) {
        if (c == '@') {
          doc += v;
        } else {
          doc.push_back(c);
        }
      }
      expect_same_as_nlohmann(doc);
      if (HasFailure()) return;
    }
  }
}

TEST(JsonProjection, RefusesARepeatedMemberNameInALargeObjectNamingIt) {
  // Past 16 names the check sorts; 100,000 distinct names pass, one repeat among them does not.
  std::string many = "{\"request\":{\"object\":{\"metadata\":{\"labels\":{";
  for (int i = 0; i < 100000; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
  const std::string ok = many + "}}}}}";
  expect_same_as_nlohmann(ok);
  ASSERT_TRUE(parse_projected(ok, admission_review_projection(), "t"));
  const std::string repeated = many + ",\"k77777\":\"w\"}}}}}";
  expect_same_as_nlohmann(repeated);
  auto got = parse_projected(repeated, admission_review_projection(), "t");
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().find("duplicate member name \"k77777\""), std::string::npos) << got.error();
}

TEST(JsonProjection, RefusesNestingBeyondTheLimitWithoutRecursingFurther) {
  std::string deep(100000, '[');
  auto got = parse_projected(deep, admission_review_projection(), "t");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().find("nested deeper than 128 levels"), std::string::npos);
  std::string ok = std::string(128, '[') + std::string(128, ']');
  EXPECT_TRUE(parse_projected(ok, admission_review_projection(), "t").ok());
  std::string over = std::string(129, '[') + std::string(129, ']');
  EXPECT_FALSE(parse_projected(over, admission_review_projection(), "t").ok());
}

TEST(JsonProjection, AgreesWithNlohmannOnTwentyThousandMutatedReviews) {
  const auto seeds = seed_documents();
  std::mt19937 rng(20261202);  // fixed: the test is deterministic
  const std::string specials[] = {"\"", "\\", "{", "}", "[", "]", ",", ":", "\\u", "\\ud800", "\xc3",
                                  "\xed\xa0\x80", "\xff", "\x01", "1e999", "-", "0", "null", "true",
                                  " ", "\n", "\xEF\xBB\xBF", "\"gibson.zeroroot.ai/component\"",
                                  "\"spec\":", "\"containers\":[", "\"privileged\":"};
  for (int i = 0; i < 20000; ++i) {
    std::string doc = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !doc.empty(); ++e) {
      const std::size_t pos = rng() % doc.size();
      switch (rng() % 4) {
        case 0: doc[pos] = static_cast<char>(rng() % 256); break;
        case 1: doc.insert(pos, specials[rng() % std::size(specials)]); break;
        case 2: doc.erase(pos, 1 + rng() % 8); break;
        default: {
          const std::size_t len = 1 + rng() % 16;
          doc.insert(pos, doc.substr(rng() % doc.size(), len));
        }
      }
    }
    expect_same_as_nlohmann(doc);
    if (HasFailure()) return;
  }
}

}  // namespace

// The string scan takes 16 bytes at a time (SSE2), then 8, then one: a
// special byte (quote, backslash escape, control character, UTF-8 lead,
// invalid byte) at every offset of strings up to 40 bytes, kept and skipped,
// near the end of the input and not, must give nlohmann's verdict and value.
TEST(JsonProjection, AgreesWithNlohmannOnASpecialByteAtEveryOffsetOfAString) {
  const Projection keep = Projection::object({{"k", Projection::whole()}});
  const std::string specials[] = {"\\\"", "\\\\", "\\n", "\\u00e9", "\x01", "\xc3\xa9", "\xe2\x98\x83",
                                  "\xf0\x9f\x98\x80", "\xff", "\xc3", "\xed\xa0\x80", "\""};
  for (std::size_t len = 0; len <= 40; ++len) {
    for (std::size_t at = 0; at <= len; ++at) {
      for (const std::string& special : specials) {
        const std::string s = std::string(at, 'a') + special + std::string(len - at, 'b');
        for (const char* member : {"k", "skipped"}) {
          expect_same_as_nlohmann("{\"" + std::string(member) + "\":\"" + s + "\"}", keep);
          expect_same_as_nlohmann("{\"" + std::string(member) + "\":\"" + s + "\",\"z\":[1,2,3,4,5,6,7,8,9,10,11,12,13]}", keep);
        }
      }
    }
  }
}

// A member the projection does not keep is skipped by a fast path (state in
// registers, no error text) that hands any error to the checked path to be
// worded. Every edge case, placed where it is skipped (inside an unread
// member, in an object of more than 16 names, nested), must give nlohmann's
// verdict, and an error must name the byte where it is.
TEST(JsonProjection, SkippedValuesAgreeWithNlohmannWhereverTheyAre) {
  const std::vector<std::string> values = {
      "0", "-0", "01", "1.", ".5", "1e", "1e+", "-", "+1", "1.5e300", "1e500", "-1e500", "1e-500",
      "123456789012345678", "1234567890123456789", "123456789012345678901234567890", std::string(400, '9'),
      "18446744073709551616", "-9223372036854775809", "true", "false", "null", "tru", "nul", "fals", "truex",
      R"("\ud800")", R"("\ud800\udc00")", R"("\udc00")", R"("\x")", R"("\u12G4")", "\"\xc3\xa9\"", "\"\xc0\xaf\"",
      "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\x1f\"", "\"\t\"", "\"\xff\"", "\"abc", "\"a\\\"b\"",
      "{}", "[]", "{ }", "[ ]", "{\"a\":1,}", "[1,]", "[,1]", "{\"a\" 1}", "{\"a\":}", "{1:2}", "[1 2]", "{\"a\":1 \"b\":2}",
      "{\"x\":1,\"y\":2,\"x\":3}", "{\"\\u0078\":1,\"x\":2}", "{\"x\":1,\"\\u0078\":2}", "{\"a\\\"b\":1,\"a\\u0022b\":2}",
      "{\"\\u0078\":1,\"\\u0079\":2}", "{ \"a\" : [ 1 , { \"b\" : null } ] , \"c\" : \"d\" }",
      std::string(127, '[') + std::string(127, ']'), std::string(140, '[') + std::string(140, ']'),
  };
  std::string many_names;  // 20 distinct names: the sorted check
  for (int i = 0; i < 20; ++i) many_names += "\"n" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  for (const std::string& v : values) {
    SCOPED_TRACE(v);
    expect_same_as_nlohmann(R"({"request":{"object":{"spec":{"unread":)" + v + "}}}}");
    expect_same_as_nlohmann(R"({"request":{"object":{"spec":{"unread":[1,{"a":[)" + v + "]}]}}}}");
    expect_same_as_nlohmann(R"({"skipped":{)" + many_names + R"("last":)" + v + "}}");
    expect_same_as_nlohmann(R"({"skipped":{)" + many_names + R"("n3":)" + v + "}}");  // a repeat past 16
    expect_same_as_nlohmann(R"({"skipped":{"\u0061":)" + v + R"(,"a":0}})");
    if (HasFailure()) return;
  }
}

TEST(JsonProjection, AnErrorInASkippedValueNamesItsByte) {
  struct Case {
    std::string doc;
    std::string at;  // the text the error is at (its first occurrence)
    std::string words;
  };
  const std::vector<Case> cases = {
      {R"({"skipped":[[[[1,]]]],"k":1})", "]]]]", "invalid value"},
      {R"({"skipped":{"a":{"b":tru}},"k":1})", "tru}", "invalid literal"},
      {R"({"skipped":{"a":[1,2 3]}})", "3]", "expected ',' or ']'"},
      {R"({"skipped":{"a":{"b":1 "c":2}}})", "\"c\":2", "expected ',' or '}'"},
      {"{\"skipped\":{\"a\":[\"x\x01y\"]}}", "\x01", "control character in a string"},
      {R"({"skipped":{"a":{"x":1,"\u0078":2}}})", ":2}", "duplicate member name \"x\""},
  };
  for (const Case& c : cases) {
    auto got = parse_projected(c.doc, admission_review_projection(), "t");
    ASSERT_FALSE(got.ok()) << c.doc;
    const std::string want = "at byte " + std::to_string(c.doc.find(c.at)) + ": " + c.words;
    EXPECT_NE(got.error().find(want), std::string::npos) << c.doc << "\n got: " << got.error() << "\nwant: " << want;
  }
}
