// The leader's certificate plan: from the Secret's material, the clock's now
// and what the leader has observed, what to write into the Secret and when
// to look again. Pure: no I/O, no clock, no globals (it does make keys).
//
// The rules (the Secret holds tls.crt, tls.key, ca.crt: every CA to trust,
// ca.key: the key of the newest CA):
//  - no Secret: a CA and a leaf signed by it;
//  - expired or invalid certificates leave ca.crt;
//  - a new CA joins ca.crt when none can sign or the signing one is two
//    thirds through its lifetime (the leaf stays: the bundle grows first);
//  - the leaf is renewed at two thirds of its lifetime, or at once when it
//    does not verify for every name against ca.crt or its key does not match;
//  - the leaf switches to the new CA only once every caBundle has held the
//    new ca.crt for `grace` (bundle_confirmed_since);
//  - the old CA leaves once the leaf is signed by the new one and every
//    ready replica is observed serving a leaf that the new CA alone verifies
//    (PlanFacts::served: an observation, not a timer); until then it stays,
//    as it does when no ready replica is observed at all. A plan that could
//    drop it but has no observation says wants_served. An expired CA leaves
//    at once, observed or not.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace ig::controller {

using CertTime = std::chrono::system_clock::time_point;

// The Secret's four data fields, decoded; exists false: there is no Secret.
struct SecretMaterial {
  bool exists = false;
  std::string tls_crt, tls_key, ca_crt, ca_key;
};

struct PlanSettings {
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365)};
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 365 * 10)};
  std::chrono::seconds grace{std::chrono::minutes(2)};  // bundle confirmed -> the leaf switches
  std::vector<std::string> names;  // every name the leaf must verify for; not empty
};

// What the leader has seen of the world besides the Secret.
struct PlanFacts {
  // Since when every webhook configuration has held base64(ca.crt) of this
  // very Secret; nullopt: not (yet) seen.
  std::optional<CertTime> bundle_confirmed_since;
  // The leaf each ready replica serves, observed just now: one PEM per ready
  // replica, "" for one that could not be read; nullopt: not observed.
  std::optional<std::vector<std::string>> served;
};

struct CertificatePlan {
  bool write = false;          // `next` differs from the Secret's material
  SecretMaterial next;         // exists is true
  bool leaf_rotated = false;   // a new leaf (not the first)
  bool ca_rotated = false;     // a new CA (not the first)
  std::string why;             // for the log, when write
  std::optional<CertTime> wake;  // the next moment something is due
  // The old CA could leave if every ready replica served a leaf of the new
  // one: observe (PlanFacts::served) and plan again.
  bool wants_served = false;
};

Result<CertificatePlan> plan_secret(const SecretMaterial& secret, CertTime now, const PlanFacts& facts,
                                    const PlanSettings& settings);

}  // namespace ig::controller
