#include "admission/namespace_guard.h"

#include <algorithm>

#include "base/quote.h"
#include "model/document.h"

namespace ig::admission {
namespace {

using nlohmann::json;
using model::Projection;

struct LabelRead {
  bool ok = true;
  std::optional<std::string> value;  // nullopt: absent
  std::string error;
};

// metadata.labels[kEnforcementLabel] of `object` (named `source`).
LabelRead read_label(const json& object, std::string_view source) {
  LabelRead out;
  auto fail = [&](std::string what) {
    out.ok = false;
    out.error = std::string(source) + what;
    return out;
  };
  auto md = object.find("metadata");
  if (md == object.end() || md->is_null()) return out;
  if (!md->is_object()) return fail(".metadata: expected a map, got " + std::string(model::json_type_phrase(*md)));
  auto labels = md->find("labels");
  if (labels == md->end() || labels->is_null()) return out;
  if (!labels->is_object()) {
    return fail(".metadata.labels: expected a map, got " + std::string(model::json_type_phrase(*labels)));
  }
  auto v = labels->find(kEnforcementLabel);
  if (v == labels->end() || v->is_null()) return out;
  if (!v->is_string()) {
    return fail(".metadata.labels[" + std::string(kEnforcementLabel) + "]: expected a string, got " +
                std::string(model::json_type_phrase(*v)));
  }
  out.value = v->get<std::string>();
  return out;
}

bool is_enforced(const std::optional<std::string>& value) { return value && *value == kEnforcedValue; }

std::string describe(const std::optional<std::string>& value) {
  return value ? quote(*value) : std::string("absent");
}

std::string namespace_name(const AdmissionRequest& r) {
  if (!r.name.empty()) return r.name;
  auto md = r.object.find("metadata");
  if (md != r.object.end() && md->is_object()) {
    auto n = md->find("name");
    if (n != md->end() && n->is_string()) return n->get<std::string>();
  }
  return {};
}

class NamespaceHandler final : public Handler {
 public:
  std::string refuses(const AdmissionRequest& r) const override {
    if (!(r.kind_group.empty() && r.kind == "Namespace")) {
      return "this endpoint admits Namespaces, got " + (r.kind_group.empty() ? "" : r.kind_group + "/") + r.kind;
    }
    if (!r.sub_resource.empty() && r.sub_resource != "status" && r.sub_resource != "finalize") {
      return "subresource " + r.sub_resource + " is not admitted here";
    }
    return {};
  }

  Answer handle(AdmissionRequest& r, const AdmissionContext& context) const override {
    if (!r.object.is_object()) return undecidable("request.object is missing or not an object");
    if (!r.old_object.is_object()) {
      return undecidable("request.oldObject is missing or not an object (an UPDATE always carries it)");
    }
    const LabelRead before = read_label(r.old_object, "request.oldObject");
    if (!before.ok) return undecidable(before.error);
    const LabelRead after = read_label(r.object, "request.object");
    if (!after.ok) return undecidable(after.error);
    const std::string ns = namespace_name(r);
    const bool was = is_enforced(before.value);
    const bool now = is_enforced(after.value);
    auto annotate = [&](Answer a) {
      a.annotate("enforcement-before", before.value.value_or(""));
      a.annotate("enforcement-after", after.value.value_or(""));
      return a;
    };
    if (was == now) {
      return annotate(allowed(Reason::EnforcementUnchanged,
                              "namespace " + quote(ns) + (was ? " stays enforced" : " stays unenforced")));
    }
    if (now) {
      return annotate(allowed(Reason::EnforcementAdded, "namespace " + quote(ns) + " is now enforced"));
    }
    const std::string change = after.value ? "changing label " + std::string(kEnforcementLabel) + " of namespace " +
                                                 quote(ns) + " from " + describe(before.value) + " to " +
                                                 describe(after.value)
                                           : "removing label " + std::string(kEnforcementLabel) + "=" +
                                                 std::string(kEnforcedValue) + " from namespace " + quote(ns);
    const std::string group(admin_group(r.groups, context.settings.enforcement_admins));
    if (!group.empty()) {
      Answer a = annotate(allowed(Reason::EnforcementRemovedByAdmin,
                                  change + " by " + quote(r.username) + " (group " + quote(group) +
                                      "): isolation-gate no longer enforces it"));
      a.annotate("enforcement-changed-by", r.username);
      a.annotate("enforcement-admin-group", group);
      a.warn("isolation-gate no longer enforces namespace " + quote(ns) + ": its pods are not isolated");
      return a;
    }
    const std::string admins = describe_admins(context.settings.enforcement_admins, "--enforcement-admins");
    Answer a = annotate(denied(
        Reason::EnforcementChangeRefused,
        "isolation-gate: " + change + " would switch isolation off for its pods, and " +
            (r.username.empty() ? std::string("the requester") : "user " + quote(r.username)) +
            " is not in an enforcement-admin group (" + admins +
            "). Ask a member of one to do it; see docs/operations.md, \"Break-glass\"."));
    a.annotate("enforcement-changed-by", r.username);
    return a;
  }
};

}  // namespace

const Projection& namespace_object_projection() {
  static const Projection projection = Projection::object({
      {"metadata", Projection::object({
                       {"name", Projection::whole()},
                       {"labels", Projection::object({{std::string(kEnforcementLabel), Projection::whole()}})},
                   })},
  });
  return projection;
}

const Handler& validate_namespaces_handler() noexcept {
  static const NamespaceHandler handler;
  return handler;
}

std::optional<GuardedChange> enforcement_change(const AdmissionRequest& r, const Answer& a) {
  if (a.reason != Reason::EnforcementAdded && a.reason != Reason::EnforcementRemovedByAdmin &&
      a.reason != Reason::EnforcementChangeRefused) {
    return std::nullopt;
  }
  const LabelRead before = read_label(r.old_object, "");
  const LabelRead after = read_label(r.object, "");
  GuardedChange c;
  c.kind = "Namespace";
  c.name = namespace_name(r);
  c.field = "label " + std::string(kEnforcementLabel);
  c.before = before.value.value_or("");
  c.after = after.value.value_or("");
  c.removed = !after.value.has_value();
  c.username = r.username;
  if (a.reason == Reason::EnforcementRemovedByAdmin) {
    for (const auto& [k, v] : a.audit)
      if (k == "enforcement-admin-group") c.admin_group = v;
  }
  return c;
}

}  // namespace ig::admission
