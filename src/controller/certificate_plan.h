// The leader's certificate plan (pure: no I/O, no clock; it makes keys): from
// the Secret's material, now and what the leader observed, what to write and
// when to look again. The Secret holds tls.crt, tls.key, ca.crt (every CA to
// trust) and ca.key (the newest CA's). Rules:
//  - no Secret: a CA and a leaf; expired or invalid certificates leave ca.crt;
//  - a new CA joins ca.crt when none can sign or the signer is two thirds
//    through its lifetime; the leaf is renewed at two thirds, or at once
//    when it does not verify for every name or its key does not match;
//  - the leaf switches to the new CA once every caBundle held it for `grace`;
//  - the old CA leaves once every ready replica is observed serving a leaf
//    the new CA alone verifies (wants_served: observe, plan again); an
//    expired one at once.
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
  std::optional<CertTime> bundle_confirmed_since;  // every caBundle holds this ca.crt since
  std::optional<std::vector<std::string>> served;  // each ready replica's leaf ("": unread); nullopt: not observed
};

struct CertificatePlan {
  bool write = false;          // `next` differs from the Secret's material
  SecretMaterial next;         // exists is true
  bool leaf_rotated = false;   // a new leaf (not the first)
  bool ca_rotated = false;     // a new CA (not the first)
  std::string why;             // for the log, when write
  std::optional<CertTime> wake;  // the next moment something is due
  bool wants_served = false;   // the old CA could leave: observe PlanFacts::served, plan again
};

Result<CertificatePlan> plan_secret(const SecretMaterial& secret, CertTime now, const PlanFacts& facts,
                                    const PlanSettings& settings);

}  // namespace ig::controller
