// The DOM-free pod reader (src/model/pod_text.h) against the DOM path it
// stands in for (tests/fuzz/pod_text_check.h), on the examples, the fuzz
// seeds and generated variations of a pod with every field the facts read:
// the same facts and location wherever it reads, never facts where the DOM
// path fails, and the usual shapes read (not declined).
#include "model/pod_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../fuzz/pod_text_check.h"
#include "model/document.h"

#ifndef IG_SOURCE_DIR
#error "IG_SOURCE_DIR must name the repository root"
#endif

namespace ig::model {
namespace {

using json = nlohmann::json;
using pod_text_check::Outcome;

struct PodTextKind {
  std::string kind, api_version;
};

const std::vector<PodTextKind>& pod_text_kinds() {
  static const std::vector<PodTextKind> kinds = {
      {"Pod", "v1"},        {"Deployment", "apps/v1"}, {"StatefulSet", "apps/v1"}, {"DaemonSet", "apps/v1"},
      {"ReplicaSet", "apps/v1"}, {"Job", "batch/v1"},  {"CronJob", "batch/v1"},    {"Pod", "apps/v1"}};
  return kinds;
}

std::string file_text(const std::filesystem::path& path) {
  auto text = read_text_file(path.string());
  return text ? *text : std::string();
}

// Compares; returns the outcome and fails the test on a disagreement.
Outcome check_text(const std::string& text, const PodTextKind& k) {
  std::string disagreement;
  const Outcome o = pod_text_check::compare(text, k.kind, k.api_version, disagreement);
  EXPECT_EQ(disagreement, "") << k.kind << " " << k.api_version << "\n" << text;
  return o;
}

json rich_pod() {
  return json::parse(R"({"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"rich","namespace":"team-a",
      "labels":{"gibson.zeroroot.ai/component":"report-parser","app":"x"},
      "annotations":{"io.katacontainers.z":"1","a":"b","gibson.zeroroot.ai/isolation":"setec","io.katacontainers.b":"2"}},
    "spec":{"runtimeClassName":"kata-fc","hostNetwork":false,"hostPID":null,"hostIPC":true,
      "containers":[{"name":"c","image":"registry.example.com/x:1","command":["/bin/x"],"args":[],
        "env":[{"name":"LD_PRELOAD","value":"/a.so"},{"name":"A"},{"name":"PYTHONPATH","valueFrom":{}}],
        "envFrom":[{"configMapRef":{"name":"m"}}],
        "lifecycle":{"postStart":{"exec":{"command":["sh","-c","true"]}},"preStop":{"httpGet":{"port":80}}},
        "livenessProbe":{"exec":{}},"readinessProbe":{"tcpSocket":{"port":1}},"startupProbe":{"exec":{"command":null}},
        "securityContext":{"privileged":true,"capabilities":{"add":["NET_ADMIN","CHOWN","cap_sys_admin"]}},
        "ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}},
       {"image":"b:1","securityContext":{"runAsUser":1000}}],
      "initContainers":[{"name":"i","image":"registry.example.com/x:1","command":["migrate"],"args":["--up"]},{}],
      "ephemeralContainers":[{"name":"dbg","image":"busybox","securityContext":{"privileged":false}}],
      "volumes":[{"name":"h","hostPath":{"path":"/"}},{"name":"img","image":{"reference":"r:1"}},
                 {"name":"cm","configMap":{"name":"m"}},{"image":{}},{"name":7,"emptyDir":{}}]}})");
}

TEST(PodText, ReadsTheUsualShapesAsTheDomPathDoes) {
  const json pod = rich_pod();
  EXPECT_EQ(check_text(pod.dump(), pod_text_kinds()[0]), Outcome::Same);
  EXPECT_EQ(check_text(pod.dump(2), pod_text_kinds()[0]), Outcome::Same);
  EXPECT_EQ(check_text("\xEF\xBB\xBF \n" + pod.dump(), pod_text_kinds()[0]), Outcome::Same);
  json bare = pod;
  bare.erase("kind");
  bare["apiVersion"] = nullptr;
  EXPECT_EQ(check_text(bare.dump(), pod_text_kinds()[0]), Outcome::Same);
  const json tmpl = {{"metadata", pod["metadata"]}, {"spec", pod["spec"]}};
  for (std::size_t i = 1; i < 6; ++i) {
    const auto& k = pod_text_kinds()[i];
    const json w = {{"apiVersion", k.api_version}, {"kind", k.kind},
                    {"metadata", {{"generateName", "w-"}, {"namespace", "team-a"}}},
                    {"spec", {{"replicas", 2}, {"template", tmpl}}}};
    EXPECT_EQ(check_text(w.dump(), k), Outcome::Same) << k.kind;
  }
  const json cron = {{"apiVersion", "batch/v1"}, {"kind", "CronJob"}, {"metadata", {{"name", "c"}}},
                     {"spec", {{"schedule", "* * * * *"}, {"jobTemplate", {{"spec", {{"template", tmpl}}}}}}}};
  EXPECT_EQ(check_text(cron.dump(), pod_text_kinds()[6]), Outcome::Same);
  // The facts themselves, spot-checked (the DOM path's reading is model_pod_test's).
  auto read = read_pod_text(pod.dump(), "Pod", "v1");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->facts.kata_annotations, (std::vector<std::string>{"io.katacontainers.b", "io.katacontainers.z"}));
  ASSERT_EQ(read->facts.containers.size(), 5u);
  EXPECT_EQ(read->facts.containers[0].exec.size(), 3u);
  EXPECT_EQ(read->facts.containers[0].loader_env, (std::vector<std::string>{"LD_PRELOAD", "PYTHONPATH"}));
  EXPECT_EQ(read->facts.containers[3].name, "init:#1");
  EXPECT_EQ(read->facts.containers[4].name, "ephemeral:dbg");
  EXPECT_EQ(read->facts.privileged_containers, (std::vector<std::string>{"c"}));
  EXPECT_EQ(read->facts.volumes.size(), 3u);
}

TEST(PodText, ExamplesAndFuzzSeedsAgree) {
  const std::filesystem::path root(IG_SOURCE_DIR);
  std::size_t same = 0, checked = 0;
  // Admission reviews: request.object with request.kind.
  std::vector<std::string> reviews;
  for (const auto& e : std::filesystem::directory_iterator(root / "examples/reviews")) reviews.push_back(file_text(e.path()));
  for (const auto& e : std::filesystem::directory_iterator(root / "tests/fuzz/corpus/admission_review_fuzz")) {
    const std::string t = file_text(e.path());
    if (!t.empty()) reviews.push_back(t.substr(1));
  }
  for (const auto& body : reviews) {
    const json r = json::parse(body, nullptr, false);
    if (!r.is_object() || !r.contains("request") || !r["request"].is_object()) continue;
    const json& req = r["request"];
    if (!req.contains("object") || !req.contains("kind") || !req["kind"].is_object()) continue;
    const std::string group = req["kind"].value("group", ""), version = req["kind"].value("version", "");
    const PodTextKind k{req["kind"].value("kind", ""), group.empty() ? version : group + "/" + version};
    ++checked;
    if (check_text(req["object"].dump(), k) == Outcome::Same) ++same;
  }
  // The example manifests, each with its own kind.
  for (const auto& e : std::filesystem::directory_iterator(root / "examples/pods")) {
    auto docs = parse_yaml_documents(file_text(e.path()), e.path().string());
    ASSERT_TRUE(docs) << docs.error();
    for (const auto& d : *docs) {
      ++checked;
      EXPECT_EQ(check_text(d.dump(), {d.value("kind", ""), d.value("apiVersion", "")}), Outcome::Same) << e.path();
      ++same;
    }
  }
  // The fuzzer's own seeds (byte 0: the kind).
  for (const auto& e : std::filesystem::directory_iterator(root / "tests/fuzz/corpus/pod_text_fuzz")) {
    const std::string t = file_text(e.path());
    ASSERT_FALSE(t.empty());
    ++checked;
    check_text(t.substr(1), pod_text_kinds()[static_cast<unsigned char>(t[0]) % pod_text_kinds().size()]);
  }
  EXPECT_GT(checked, 30u);
  EXPECT_GT(same, 10u);
}

// The values the reader skips (skip(): 16 bytes at a time, strings found
// by the quotes' parity, a block with a backslash byte by byte): brackets
// and escaped quotes inside strings, at every offset from a block's start,
// change neither what is read after them nor where the value ends.
TEST(PodText, SkippedValuesWithBracketsAndEscapesInStrings) {
  // JSON string contents as the text has them (escapes not decoded).
  const std::string tricky[] = {"}", "]", "{[", R"(\"})", R"(\\)", R"(\\\"])", R"(a\\\\\"}{)", R"(\u00e9])", R"(\n})"};
  std::size_t same = 0;
  for (const std::string& t : tricky) {
    for (std::size_t pad = 0; pad < 40; ++pad) {
      const std::string s = "\"" + std::string(pad, 'x') + t + "\"";
      const std::string skipped = "{\"a\":[" + s + ",{\"b\":" + s + "},[" + s + "]]," + s + ":" + s + "}";
      json pod = rich_pod();
      pod["spec"]["containers"][0]["ports"] = json::parse(skipped);
      pod["spec"]["containers"][0]["env"][1]["valueFrom"] = json::parse(skipped);
      pod["spec"]["volumes"][2]["configMap"] = json::parse(skipped);
      pod["metadata"]["ownerReferences"] = json::array({json::parse(skipped)});
      // dump() writes the quotes and backslashes escaped again: the text has them as above.
      std::string text = pod.dump();
      if (check_text(text, pod_text_kinds()[0]) == Outcome::Same) ++same;
      auto read = read_pod_text(text, "Pod", "v1");
      ASSERT_TRUE(read) << text;
      EXPECT_EQ(read->facts.containers.size(), 5u);
      EXPECT_EQ(read->facts.containers[0].loader_env, (std::vector<std::string>{"LD_PRELOAD", "PYTHONPATH"}));
      EXPECT_EQ(read->facts.volumes.size(), 3u);
    }
  }
  EXPECT_EQ(same, std::size(tricky) * 40);
}

// Text the projected parser refuses is never read, wherever the fault is:
// in a part the reader reads itself or in a value it hands to the
// validator (read_pod_text validates what it reads: decode_review hands it
// a pod's text unvalidated, admission/review.h).
TEST(PodText, TextThatIsNotJsonIsNeverRead) {
  const std::string good = rich_pod().dump();
  ASSERT_TRUE(read_pod_text(good, "Pod", "v1"));
  // (what to find in the text, what to put there instead)
  const std::pair<std::string, std::string> faults[] = {
      {R"("kind":"Pod")", R"("kind":"Pod","kind":"Pod")"},               // a repeated name, at the top
      {R"("name":"c",)", R"("name":"c","name":"c",)"},                   // in a container
      {R"("limits":{"cpu":"1"})", R"("limits":{"cpu":"1","cpu":"2"})"},  // in a skipped object
      {R"("app":"x")", R"("app":"x","a1":0,"a2":0,"a3":0,"a4":0,"a5":0,"a6":0,"a7":0,"a8":0,"a9":0,)"
                       R"("b1":0,"b2":0,"b3":0,"b4":0,"b5":0,"b6":0,"b7":0,"b8":0,"b9":0,"a5":1)"},  // past 16
      {R"("containerPort":80)", R"("containerPort":080)"},  // numbers
      {R"("containerPort":80)", R"("containerPort":8.)"},
      {R"("containerPort":80)", R"("containerPort":-)"},
      {R"("hostNetwork":false)", R"("hostNetwork":fals)"},  // a literal it reads
      {R"("hostPID":null)", R"("hostPID":nul)"},
      {R"("runAsUser":1000)", R"("runAsUser":tru)"},  // a literal it skips
      {R"("cpu":"1")", std::string("\"cpu\":\"1\x01\"")},       // a control character
      {R"("cpu":"1")", std::string("\"cpu\":\"\xC3\x28\"")},    // invalid UTF-8
      {R"("cpu":"1")", R"("cpu":"\x")"},                        // an invalid escape
      {R"("ports":[{"containerPort":80}])", R"("ports":[{"containerPort":80},])"},  // a trailing comma
      {R"("ports":[{"containerPort":80}])", R"("ports":[{"containerPort":80}}])"},  // mismatched brackets
      {R"("args":[])", R"("args":[,])"},
      {R"("app":"x")", R"("app" "x")"},                              // no colon
      {R"("app":"x")", std::string("\"app\":\"x\"\0", 10)},          // NUL
  };
  for (const auto& [find, replace] : faults) {
    std::string text = good;
    const auto at = text.find(find);
    ASSERT_NE(at, std::string::npos) << find;
    text.replace(at, find.size(), replace);
    EXPECT_FALSE(parse_projected(text, admission::admission_object_projection(), "t")) << text;
    EXPECT_FALSE(read_pod_text(text, "Pod", "v1")) << replace;
  }
  EXPECT_FALSE(read_pod_text(good + " x", "Pod", "v1"));  // content after the value
  EXPECT_FALSE(read_pod_text(good.substr(0, good.size() - 1), "Pod", "v1"));
  // Nesting: 6 containers around "cpu"'s value, and the limit counts those
  // around the text's value too.
  const std::size_t limit = DecodeLimits{}.max_depth;
  std::string deep = good;
  const std::string cpu = R"("cpu":"1")";
  deep.replace(deep.find(cpu), cpu.size(), "\"cpu\":" + std::string(limit - 6, '[') + std::string(limit - 6, ']'));
  EXPECT_TRUE(parse_projected(deep, admission::admission_object_projection(), "t"));
  EXPECT_TRUE(read_pod_text(deep, "Pod", "v1"));
  EXPECT_FALSE(read_pod_text(deep, "Pod", "v1", 2));  // inside an AdmissionReview: too deep
}

// decode_review(ObjectRead::Text) reads a pod's text in its pass (the
// reader validating it, the parser validating what it declines): on
// reviews with random faults it answers as the projected decode does (the
// same kind and error), and what it read is the DOM path's facts.
TEST(PodText, TheDecodesReadOfAPodAnswersAsTheProjectedDecode) {
  const std::filesystem::path root(IG_SOURCE_DIR);
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(root / "examples/reviews"))
    seeds.push_back(file_text(e.path()));
  for (const auto& e : std::filesystem::directory_iterator(root / "tests/fuzz/corpus/admission_review_fuzz")) {
    const std::string t = file_text(e.path());
    if (t.size() > 1) seeds.push_back(t.substr(1));  // byte 0: the fuzzer's request line
  }
  std::sort(seeds.begin(), seeds.end());  // the directory's order is not fixed
  std::mt19937 rng(20261206);  // fixed: the test is deterministic
  const std::string specials[] = {"\"", "\\", "{", "}", "[", "]", ",", ":", "\\u", "\xc3", "\xff", "\x01",
                                  "1e999", "-", "0", "null", "true", " ", "\"name\":\"x\",", "\"image\":"};
  std::size_t read = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string doc = seeds[rng() % seeds.size()];
    const int edits = static_cast<int>(rng() % 3);  // some reviews unchanged
    for (int e = 0; e < edits && !doc.empty(); ++e) {
      const std::size_t pos = rng() % doc.size();
      switch (rng() % 3) {
        case 0: doc[pos] = static_cast<char>(rng() % 256); break;
        case 1: doc.insert(pos, specials[rng() % std::size(specials)]); break;
        default: doc.erase(pos, 1 + rng() % 8);
      }
    }
    const auto as_text = admission::decode_review(doc, admission::ObjectRead::Text);
    const auto projected = admission::decode_review(doc, admission::ObjectRead::Projected);
    ASSERT_EQ(as_text.kind, projected.kind) << doc;
    ASSERT_EQ(as_text.error, projected.error) << doc;
    const auto& r = as_text.request;
    const std::string api = r.kind_group.empty() ? r.kind_version : r.kind_group + "/" + r.kind_version;
    for (auto [text, pod] : {std::pair{r.object_text, &r.object_pod}, {r.old_object_text, &r.old_object_pod}}) {
      if (!pod->has_value()) continue;
      ++read;
      ASSERT_EQ(check_text(std::string(text), {r.kind, api}), Outcome::Same) << doc;
      const auto again = read_pod_text(text, r.kind, api);
      ASSERT_TRUE(again && pod_text_check::same_facts(again->facts, (*pod)->facts)) << doc;
    }
  }
  EXPECT_GT(read, 500u);
}

// Every field the facts read, given every JSON type (and a few values that
// matter): where the DOM path fails, the text never gives facts.
TEST(PodText, VariationsOfEveryFieldAgree) {
  const json values[] = {nullptr, true, false, 0, -1.5, "", "x", "LD_PRELOAD", "a\"b", "\u00e9",
                         json::array(), json::array({"a"}), json::array({1}), json::array({json::object()}),
                         json::object(), json::object({{"exec", json::object()}}),
                         json::object({{"command", json::array({"a"})}}), json::object({{"add", json::array({"SYS_ADMIN"})}}),
                         json::object({{"reference", 1}}), json::object({{"name", "LD_AUDIT"}})};
  const char* pointers[] = {
      "/kind", "/apiVersion", "/metadata", "/metadata/name", "/metadata/generateName", "/metadata/namespace",
      "/metadata/labels", "/metadata/labels/gibson.zeroroot.ai~1component", "/metadata/annotations",
      "/metadata/annotations/gibson.zeroroot.ai~1isolation", "/metadata/annotations/io.katacontainers.q",
      "/spec", "/spec/runtimeClassName", "/spec/hostNetwork", "/spec/hostPID", "/spec/hostIPC",
      "/spec/containers", "/spec/containers/0", "/spec/containers/0/name", "/spec/containers/0/image",
      "/spec/containers/0/command", "/spec/containers/0/args", "/spec/containers/0/command/0",
      "/spec/containers/0/lifecycle", "/spec/containers/0/lifecycle/postStart",
      "/spec/containers/0/lifecycle/postStart/exec", "/spec/containers/0/lifecycle/postStart/exec/command",
      "/spec/containers/0/livenessProbe", "/spec/containers/0/livenessProbe/exec",
      "/spec/containers/0/readinessProbe", "/spec/containers/0/startupProbe/exec/command",
      "/spec/containers/0/env", "/spec/containers/0/env/0", "/spec/containers/0/env/0/name", "/spec/containers/0/env/1",
      "/spec/containers/0/envFrom", "/spec/containers/0/securityContext",
      "/spec/containers/0/securityContext/privileged", "/spec/containers/0/securityContext/capabilities",
      "/spec/containers/0/securityContext/capabilities/add", "/spec/containers/0/securityContext/capabilities/add/0",
      "/spec/initContainers", "/spec/initContainers/1", "/spec/ephemeralContainers", "/spec/ephemeralContainers/0/name",
      "/spec/volumes", "/spec/volumes/0", "/spec/volumes/0/hostPath", "/spec/volumes/0/name", "/spec/volumes/1/image",
      "/spec/volumes/1/image/reference", "/spec/volumes/2/name", "/spec/volumes/4/name", "/spec/volumes/4/hostPath",
      "/spec/template", "/spec/jobTemplate"};
  std::size_t counts[4] = {};
  for (const char* pointer : pointers) {
    for (const json& v : values) {
      for (int form = 0; form < 2; ++form) {
        json pod = rich_pod();
        try {
          pod[json::json_pointer(pointer)] = v;
        } catch (const json::exception&) {
          continue;  // a parent that is not a container
        }
        if (form == 1) {
          // As a workload's template, the same change.
          pod = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"name", "d"}}},
                 {"spec", {{"template", {{"metadata", pod.value("metadata", json())}, {"spec", pod.value("spec", json())}}}}}};
        }
        const auto& k = pod_text_kinds()[form == 0 ? 0 : 1];
        ++counts[static_cast<int>(check_text(pod.dump(), k))];
      }
    }
    json removed = rich_pod();
    try {
      json::json_pointer ptr(pointer);
      removed[ptr.parent_pointer()].erase(ptr.back());
    } catch (const json::exception&) {
      continue;
    }
    ++counts[static_cast<int>(check_text(removed.dump(), pod_text_kinds()[0]))];
  }
  // Every kind of outcome is reached: the variations exercise both paths.
  EXPECT_GT(counts[static_cast<int>(Outcome::DomFails)], 100u);
  EXPECT_GT(counts[static_cast<int>(Outcome::TextDeclines)], 20u);
  EXPECT_GT(counts[static_cast<int>(Outcome::Same)], 300u);
}

}  // namespace
}  // namespace ig::model
