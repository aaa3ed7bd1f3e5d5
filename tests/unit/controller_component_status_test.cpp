// The Component status the operator writes (src/controller/component_status.h)
// and the drift rule (src/controller/drift.h): pure functions, as tables.
#include "controller/component_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "controller/drift.h"

namespace ig::controller {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using policy::Decision;
using policy::DeploymentShape;
using policy::SandboxAvailability;

json component(std::optional<std::string> trust, json status = nullptr) {
  json c = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
            {"kind", "Component"},
            {"metadata", {{"name", "c"}, {"namespace", "team-a"}, {"uid", "u-1"}, {"generation", 3}}},
            {"spec", {{"kind", "tool"}}}};
  if (trust) c["spec"]["policy"]["content_trust"] = *trust;
  if (!status.is_null()) c["status"] = status;
  return c;
}

ComponentRecord record(std::optional<std::string> trust, json status = nullptr) {
  auto r = decode_component_record(component(std::move(trust), std::move(status)));
  EXPECT_TRUE(r.ok()) << r.error();
  return std::move(r).value();
}

const json* condition(const json& status, std::string_view type) {
  for (const auto& c : status["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

// The status writer's test of "nothing to write": the record's status
// already carries exactly `desired`'s fields and conditions.
bool holds_status(const ComponentRecord& record, const json& desired) {
  return record.status_fingerprint != 0 && record.status_fingerprint == status_fingerprint(desired);
}

StatusInputs inputs(SandboxAvailability s, DeploymentShape shape = DeploymentShape::SetecOnly,
                    std::size_t drifted = 0) {
  StatusInputs in;
  in.sandbox = s;
  in.shape = shape;
  in.runtime_class = "kata-fc";
  in.drifted_pods = drifted;
  in.now = 1'790'000'000;
  return in;
}

TEST(ObjectUid, GivesBackTheTextExactly) {
  for (const char* text : {"", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "u-1", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0",
                           "00000000-0000-0000-0000-000000000000", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f", "0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0",
                           "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg"}) {
    ObjectUid uid(text);
    EXPECT_EQ(uid.str(), text);
    EXPECT_EQ(uid.empty(), std::string(text).empty()) << text;
    const ObjectUid moved = std::move(uid);  // records move into the cache, never copied
    EXPECT_EQ(moved.str(), text);
  }
  EXPECT_LE(sizeof(ObjectUid), 24u);
  EXPECT_EQ(sizeof(ConditionMark), 8u);
}

TEST(ComponentStatus, EveryFieldFollowsTheGate) {
  struct Row {
    std::optional<std::string> trust;
    SandboxAvailability sandbox;
    DeploymentShape shape;
    std::string isolation, admitted, admitted_reason, trust_declared_reason;
  };
  const Row rows[] = {
      {"untrusted", SandboxAvailability::Available, DeploymentShape::SetecOnly, "RequireSetec", "True",
       "SandboxAvailable", "Declared"},
      {"trusted", SandboxAvailability::Available, DeploymentShape::SetecOnly, "RequireSetec", "True",
       "SandboxAvailable", "Declared"},
      {"untrusted", SandboxAvailability::Unavailable, DeploymentShape::SetecOnly, "Deny", "False",
       "SandboxUnavailable", "Declared"},
      {std::nullopt, SandboxAvailability::Unavailable, DeploymentShape::SetecOnly, "AllowInProcess", "True",
       "TrustedInProcess", "Omitted"},
      {"untrusted", SandboxAvailability::Unavailable, DeploymentShape::CustomerIsolation, "AllowInProcess",
       "True", "CustomerIsolation", "Declared"},
      {"maybe", SandboxAvailability::Unavailable, DeploymentShape::SetecOnly, "Deny", "False",
       "SandboxUnavailable", "Invalid"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.trust.value_or("(omitted)") + " " + row.isolation);
    const json s = desired_status(record(row.trust), inputs(row.sandbox, row.shape));
    EXPECT_EQ(s["observedGeneration"], 3);
    EXPECT_EQ(s["isolation"], row.isolation);
    EXPECT_EQ(s.contains("runtimeClassName"), row.isolation == "RequireSetec");
    if (row.isolation == "RequireSetec") {
      EXPECT_EQ(s["runtimeClassName"], "kata-fc");
    }
    EXPECT_EQ(s["contentTrust"], row.trust == "trusted" || !row.trust ? "trusted" : "untrusted");
    EXPECT_EQ(s["trustDeclared"], row.trust == "trusted" || row.trust == "untrusted");
    EXPECT_EQ(s["driftedPods"], 0);
    ASSERT_EQ(s["conditions"].size(), 4u);
    EXPECT_EQ((*condition(s, "Admitted"))["status"], row.admitted);
    EXPECT_EQ((*condition(s, "Admitted"))["reason"], row.admitted_reason);
    EXPECT_EQ((*condition(s, "TrustDeclared"))["reason"], row.trust_declared_reason);
    EXPECT_EQ((*condition(s, "Drifted"))["status"], "False");
    EXPECT_EQ((*condition(s, "BoundOutsideMicroVM"))["status"], "True");
    EXPECT_EQ((*condition(s, "BoundOutsideMicroVM"))["reason"],
              row.isolation == "RequireSetec" ? "PodsBound" : "NotInMicroVM");
    for (const auto& c : s["conditions"]) {
      EXPECT_EQ(c["observedGeneration"], 3);
      EXPECT_EQ(c["lastTransitionTime"], "2026-09-21T14:13:20Z");
      EXPECT_FALSE(c["message"].get<std::string>().empty());
    }
  }
}

TEST(ComponentStatus, OmittedTrustTellsTheAuthorToDeclareIt) {
  const json s = desired_status(record(std::nullopt), inputs(SandboxAvailability::Available));
  const json& c = *condition(s, "TrustDeclared");
  EXPECT_EQ(c["status"], "False");
  EXPECT_EQ(c["reason"], "Omitted");
  EXPECT_THAT(c["message"].get<std::string>(), HasSubstr("declare it"));
}

TEST(ComponentStatus, DriftIsCountedAndConditioned) {
  const json s = desired_status(record("untrusted"), inputs(SandboxAvailability::Available,
                                                              DeploymentShape::SetecOnly, 2));
  EXPECT_EQ(s["driftedPods"], 2);
  EXPECT_EQ((*condition(s, "Drifted"))["status"], "True");
  EXPECT_EQ((*condition(s, "Drifted"))["reason"], "PodsDrifted");
  EXPECT_THAT((*condition(s, "Drifted"))["message"].get<std::string>(), HasSubstr("2 running pods"));
}

// BoundOutsideMicroVM: True while every running pod on the sandbox runs only
// what its Component declares; False names the count and one pod; True
// NotInMicroVM whenever the decision is not RequireSetec (counted or not).
TEST(ComponentStatus, PodsUnboundOutsideTheMicroVMAreCountedWithAnExample) {
  struct Row {
    SandboxAvailability sandbox;
    std::size_t count;
    std::string status, reason, message;
  };
  const Row rows[] = {
      {SandboxAvailability::Available, 0, "True", "PodsBound", "runs only what it declares"},
      {SandboxAvailability::Available, 1, "False", "PodsUnboundOutsideMicroVM",
       "1 running pod runs what the Component does not declare (pod \"web-0\": container \"app\" sets args "
       "[\"--x\"] where the Component declares spec.args none (the image's CMD)): they run in the microVM now but "
       "would be denied if the sandbox went away; declare spec.command/spec.args/spec.exec in the Component "
       "(docs/components.md) or remove it from the pod"},
      {SandboxAvailability::Available, 3, "False", "PodsUnboundOutsideMicroVM", "3 running pods run what"},
      {SandboxAvailability::Unavailable, 0, "True", "NotInMicroVM", "(Deny)"},
      {SandboxAvailability::Unavailable, 2, "True", "NotInMicroVM", "(Deny)"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.reason + " " + std::to_string(row.count));
    StatusInputs in = inputs(row.sandbox);
    in.unbound = {row.count, "web-0", "container \"app\" sets args [\"--x\"] where the Component declares spec.args none (the image's CMD)"};
    if (row.count == 0) in.unbound = {};
    const json s = desired_status(record("untrusted"), in);
    const json& c = *condition(s, "BoundOutsideMicroVM");
    EXPECT_EQ(c["status"], row.status);
    EXPECT_EQ(c["reason"], row.reason);
    EXPECT_THAT(c["message"].get<std::string>(), HasSubstr(row.message));
    EXPECT_EQ(s["conditions"].back()["type"], "BoundOutsideMicroVM");  // the fourth, last
  }
}

// The fourth condition is read back (its mark, its transition time) and
// counted in the fingerprint like the other three.
TEST(ComponentStatus, TheFourthConditionIsDecodedAndFingerprinted) {
  StatusInputs in = inputs(SandboxAvailability::Available);
  const json bound = desired_status(record("untrusted"), in);
  const ComponentRecord held = record("untrusted", bound);
  EXPECT_EQ(held.conditions.size(), 4u);
  EXPECT_EQ(held.conditions[static_cast<std::size_t>(ConditionType::BoundOutsideMicroVM)].status,
            ConditionStatus::True);
  EXPECT_EQ(held.conditions[static_cast<std::size_t>(ConditionType::BoundOutsideMicroVM)].last_transition,
            static_cast<std::uint32_t>(in.now));
  EXPECT_TRUE(holds_status(held, desired_status(held, in)));
  StatusInputs later = in;
  later.now += 60;
  later.unbound = {1, "web-0", "container \"app\" takes envFrom (its keys cannot be checked)"};
  const json unbound = desired_status(held, later);
  EXPECT_FALSE(holds_status(held, unbound));
  EXPECT_EQ((*condition(unbound, "BoundOutsideMicroVM"))["lastTransitionTime"], format_time(later.now));
  EXPECT_EQ((*condition(unbound, "Drifted"))["lastTransitionTime"], format_time(in.now));
  const ComponentRecord flipped = record("untrusted", unbound);
  EXPECT_EQ(flipped.conditions[static_cast<std::size_t>(ConditionType::BoundOutsideMicroVM)].status,
            ConditionStatus::False);
  // Another example pod is another message: a change, the transition time kept.
  const std::time_t flipped_at = later.now;
  later.unbound.example_pod = "web-1";
  later.now += 60;
  const json other = desired_status(flipped, later);
  EXPECT_FALSE(holds_status(flipped, other));
  EXPECT_EQ((*condition(other, "BoundOutsideMicroVM"))["lastTransitionTime"], format_time(flipped_at));
}

TEST(ComponentStatus, WhatTheApiHoldsIsRecognisedSoNothingIsRewritten) {
  const StatusInputs in = inputs(SandboxAvailability::Available);
  const json first = desired_status(record("untrusted"), in);
  // The API server now holds exactly that: the record's fingerprint matches.
  const ComponentRecord held = record("untrusted", first);
  EXPECT_EQ(held.status_fingerprint, status_fingerprint(first));
  // Later, with nothing changed, the desired status is the same, transition
  // times kept from what the API holds (not "now").
  StatusInputs later = in;
  later.now += 3600;
  const json again = desired_status(held, later);
  EXPECT_EQ(again, first);
  EXPECT_EQ(status_fingerprint(again), held.status_fingerprint);
  // Fields others write do not count.
  json with_extra = first;
  with_extra["somebodyElse"] = "x";
  EXPECT_EQ(record("untrusted", with_extra).status_fingerprint, held.status_fingerprint);
}

TEST(ComponentStatus, AConditionThatFlipsTakesANewTransitionTimeTheOthersKeepTheirs) {
  const json first = desired_status(record("untrusted"), inputs(SandboxAvailability::Available));
  const ComponentRecord held = record("untrusted", first);
  StatusInputs flipped = inputs(SandboxAvailability::Unavailable);
  flipped.now += 60;
  const json next = desired_status(held, flipped);
  EXPECT_NE(status_fingerprint(next), held.status_fingerprint);
  EXPECT_EQ(next["isolation"], "Deny");
  EXPECT_FALSE(next.contains("runtimeClassName"));
  EXPECT_EQ((*condition(next, "Admitted"))["lastTransitionTime"], format_time(flipped.now));
  EXPECT_EQ((*condition(next, "TrustDeclared"))["lastTransitionTime"], "2026-09-21T14:13:20Z");
  // A message-only change (the shape's phrase) is a change too, but keeps
  // the transition time of a condition whose status stayed.
}

TEST(ComponentStatus, ATrustChangeIsAChange) {
  const json first = desired_status(record("trusted"), inputs(SandboxAvailability::Unavailable));
  const ComponentRecord now_untrusted = record("untrusted", first);
  const json next = desired_status(now_untrusted, inputs(SandboxAvailability::Unavailable));
  EXPECT_EQ(next["isolation"], "Deny");
  EXPECT_NE(status_fingerprint(next), now_untrusted.status_fingerprint);
}

// The apply configuration: the object's identity and only the gate's status
// (runtimeClassName left out unless RequireSetec, so server-side apply
// removes it).
TEST(ComponentStatus, TheApplyConfigurationNamesTheObjectAndCarriesOnlyOurStatus) {
  for (SandboxAvailability sandbox : {SandboxAvailability::Available, SandboxAvailability::Unavailable}) {
    const ComponentRecord r = record("untrusted");
    const json status = desired_status(r, inputs(sandbox));
    const json config = apply_configuration(r, status);
    EXPECT_EQ(config, (json{{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
                            {"kind", "Component"},
                            {"metadata", {{"name", "c"}, {"namespace", "team-a"}}},
                            {"status", status}}));
    EXPECT_EQ(config["status"].contains("runtimeClassName"), sandbox == SandboxAvailability::Available);
  }
  EXPECT_EQ(kFieldManager, "isolation-gate");
}

// holds_status(): "the cached object already holds exactly our fields and our
// conditions", whatever other managers add: the reconciler writes only on a
// real difference.
TEST(ComponentStatus, HoldsStatusIgnoresOtherManagersAndSeesEveryChangeOfOurs) {
  const StatusInputs in = inputs(SandboxAvailability::Available);
  const json ours = desired_status(record("untrusted"), in);
  const json theirs = {{"type", "Ready"}, {"status", "False"}, {"reason", "Theirs"}, {"message", "m"},
                       {"lastTransitionTime", "2026-01-01T00:00:00Z"}};
  struct Row {
    const char* what;
    std::function<void(json&)> edit;  // of the status the API server holds
    bool write;
  };
  const Row rows[] = {
      {"exactly ours", [](json&) {}, false},
      {"another manager's condition first", [&](json& s) { s["conditions"].insert(s["conditions"].begin(), theirs); },
       false},
      {"another manager's condition last", [&](json& s) { s["conditions"].push_back(theirs); }, false},
      {"another manager's field", [](json& s) { s["replicas"] = 3; }, false},
      {"our conditions in another order",
       [](json& s) { std::reverse(s["conditions"].begin(), s["conditions"].end()); }, false},
      {"our condition's transition time differs", [](json& s) { s["conditions"][0]["lastTransitionTime"] =
                                                                    "2026-01-01T00:00:00Z"; },
       false},
      {"our condition's status changed", [](json& s) { s["conditions"][0]["status"] = "False"; }, true},
      {"our condition's message changed", [](json& s) { s["conditions"][1]["message"] = "old words"; }, true},
      {"our condition missing", [](json& s) { s["conditions"].erase(s["conditions"].begin() + 2); }, true},
      {"our fourth condition missing", [](json& s) { s["conditions"].erase(s["conditions"].begin() + 3); }, true},
      {"our condition replaced by another manager's",
       [&](json& s) { s["conditions"][2] = theirs; }, true},
      {"our field changed", [](json& s) { s["isolation"] = "Deny"; }, true},
      {"our field missing", [](json& s) { s.erase("driftedPods"); }, true},
      {"our count changed", [](json& s) { s["driftedPods"] = 1; }, true},
      {"no status at all", [](json& s) { s = json::object(); }, true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    json held = ours;
    row.edit(held);
    const ComponentRecord cached = record("untrusted", held);
    const json desired = desired_status(cached, in);
    EXPECT_EQ(!holds_status(cached, desired), row.write);
  }
  // runtimeClassName held while the decision no longer wants one: a write.
  json held = desired_status(record("trusted"), in);
  const ComponentRecord cached = record("trusted", held);
  const json without = desired_status(cached, inputs(SandboxAvailability::Unavailable));
  EXPECT_FALSE(without.contains("runtimeClassName"));
  EXPECT_FALSE(holds_status(cached, without));
}

// The fields the answer to an apply still holds though the gate left them
// out (co-owned by an earlier version's merge patches): removed by a merge
// patch; nobody else's fields are touched.
TEST(ComponentStatus, LeftoverFieldsAreRemovedByAMergePatchOnlyWhenHeld) {
  const json deny = desired_status(record("untrusted"), inputs(SandboxAvailability::Unavailable));
  ASSERT_FALSE(deny.contains("runtimeClassName"));
  json held = deny;
  EXPECT_TRUE(leftover_fields_patch(deny, held).is_null());
  held["runtimeClassName"] = "kata-fc";
  held["theirs"] = "x";
  EXPECT_EQ(leftover_fields_patch(deny, held), (json{{"status", {{"runtimeClassName", nullptr}}}}));
  const json setec = desired_status(record("untrusted"), inputs(SandboxAvailability::Available));
  EXPECT_TRUE(leftover_fields_patch(setec, held).is_null());
  EXPECT_TRUE(leftover_fields_patch(deny, json()).is_null());
}

// lastTransitionTime is kept from what the API server holds while a
// condition's status is unchanged, another manager's condition among ours
// or not; a flipped one takes `now`.
TEST(ComponentStatus, TransitionTimesAreKeptBesideAnotherManagersCondition) {
  const StatusInputs in = inputs(SandboxAvailability::Available);
  json held = desired_status(record("untrusted"), in);
  held["conditions"].insert(held["conditions"].begin() + 1,
                            json{{"type", "Ready"}, {"status", "True"}, {"reason", "R"}, {"message", "m"},
                                 {"lastTransitionTime", "2020-01-01T00:00:00Z"}});
  StatusInputs later = in;
  later.now += 3600;
  const ComponentRecord cached = record("untrusted", held);
  const json again = desired_status(cached, later);
  for (const auto& c : again["conditions"]) EXPECT_EQ(c["lastTransitionTime"], format_time(in.now)) << c;
  EXPECT_TRUE(holds_status(cached, again));
  later.drifted_pods = 1;
  const json drifted = desired_status(cached, later);
  EXPECT_EQ((*condition(drifted, "Drifted"))["lastTransitionTime"], format_time(later.now));
  EXPECT_EQ((*condition(drifted, "Admitted"))["lastTransitionTime"], format_time(in.now));
  EXPECT_FALSE(holds_status(cached, drifted));
}

TEST(ComponentStatus, TimesRoundTripAndBadOnesReadAsZero) {
  EXPECT_EQ(format_time(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(parse_time("2026-12-02T21:00:00Z"), 1796245200);
  EXPECT_EQ(parse_time(format_time(1796245200)), 1796245200);
  EXPECT_EQ(parse_time("2026-12-02T21:00:00.123456Z"), 1796245200);
  EXPECT_EQ(parse_time("2026-12-02T23:00:00+02:00"), 1796245200);
  for (const char* bad : {"", "yesterday", "2026-12-02 21:00:00Z", "2026-12-02T21:00:00", "2026-12-02T21:00:00Zjunk"}) {
    EXPECT_EQ(parse_time(bad), 0) << bad;
  }
}

TEST(DriftRule, LessSafeOnlyWhenThePodIsOutsideTheSandboxThatTheGateNowRequiresOrDenies) {
  EXPECT_EQ(classify_drift(Decision::RequireSetec, true), Drift::None);
  EXPECT_EQ(classify_drift(Decision::RequireSetec, false), Drift::LessSafe);
  EXPECT_EQ(classify_drift(Decision::Deny, false), Drift::LessSafe);
  EXPECT_EQ(classify_drift(Decision::Deny, true), Drift::Elsewhere);
  EXPECT_EQ(classify_drift(Decision::AllowInProcess, true), Drift::Elsewhere);
  EXPECT_EQ(classify_drift(Decision::AllowInProcess, false), Drift::None);
}

TEST(DriftRule, APodKeepsOnlyWhatTheAuditReads) {
  json pod = {{"metadata",
               {{"name", "p"},
                {"namespace", "team-a"},
                {"uid", "u"},
                {"labels", {{"gibson.zeroroot.ai/component", "c"}}}}},
              {"spec", {{"runtimeClassName", "kata-fc"}, {"containers", json::array()}}},
              {"status", {{"phase", "Running"}}}};
  auto p = decode_pod_placement(pod);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->component, "c");
  EXPECT_EQ(p->runtime_class, "kata-fc");
  EXPECT_TRUE(p->running);
  ASSERT_TRUE(p->facts);  // what admission reads, while it runs (decode_audit_pod's)
  EXPECT_EQ(p->facts->object_name, "p");
  EXPECT_EQ(p->facts->runtime_class, "kata-fc");
  pod["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(decode_pod_placement(pod)->running);
  EXPECT_FALSE(decode_pod_placement(pod)->facts);
  pod["status"]["phase"] = "Running";
  pod["metadata"]["deletionTimestamp"] = "2026-12-02T21:00:00Z";
  EXPECT_FALSE(decode_pod_placement(pod)->running);
  EXPECT_FALSE(decode_pod_placement(json::array()).ok());
}

}  // namespace
}  // namespace ig::controller
