// A guarded change: an admission that switches isolation off or loosens it
// for others (a namespace's enforcement label, a Component's content trust).
// Only an admin group may make one; every one, allowed or refused, is handed
// to the webhook's observer to be logged and recorded as an Event.
#pragma once

#include <optional>
#include <string>

namespace ig::admission {

struct GuardedChange {
  std::string kind;        // "Namespace" or "Component"
  std::string namespace_;  // the Component's namespace; "" for a Namespace
  std::string name;        // the object's name
  std::string field;       // "label gibson.zeroroot.ai/isolation", "spec.policy.content_trust"
  std::string before;      // the field's value; "" when absent
  std::string after;
  bool removed = false;     // after: the field is gone (not merely changed)
  std::string username;
  std::string admin_group;  // the group that allowed a loosening; "" otherwise
};

}  // namespace ig::admission
