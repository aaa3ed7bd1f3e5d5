#include "controller/certificate_plan.h"

#include <algorithm>

#include "tls/certificates.h"

namespace ig::controller {
namespace {

using Seconds = std::chrono::seconds;

// Two thirds of the way from issue to notAfter.
CertTime renewal_due(const tls::CertificateInfo& c) {
  return c.issued_at() + (c.not_after - c.issued_at()) * 2 / 3;
}

void wake_at(CertificatePlan& plan, CertTime t) { plan.wake = plan.wake ? std::min(*plan.wake, t) : t; }

}  // namespace

Result<CertificatePlan> plan_secret(const SecretMaterial& in, CertTime now, const PlanFacts& facts,
                                    const PlanSettings& settings) {
  CertificatePlan plan;
  plan.next.exists = true;
  SecretMaterial& out = plan.next;
  auto sign_leaf = [&](const std::string& ca_pem, const std::string& ca_key, CertTime ca_not_after) -> Result<void> {
    Seconds validity = std::min(settings.cert_validity, std::chrono::duration_cast<Seconds>(ca_not_after - now));
    if (validity < Seconds(1)) validity = Seconds(1);
    auto leaf = tls::make_serving_certificate(ca_pem, ca_key, settings.names, {}, validity, now);
    if (!leaf) return fail("signing the serving certificate: " + leaf.error());
    out.tls_crt = std::move(leaf->cert_pem);
    out.tls_key = std::move(leaf->key_pem);
    return {};
  };

  out.tls_crt = in.tls_crt;
  out.tls_key = in.tls_key;
  out.ca_key = in.ca_key;
  std::vector<tls::CertificateInfo> all_cas, cas;
  if (auto read = tls::read_certificate_bundle(in.ca_crt); read) all_cas = std::move(*read);
  for (const auto& c : all_cas)
    if (c.is_ca && c.not_before <= now && now < c.not_after) cas.push_back(c);
  const tls::CertificateInfo* signer = nullptr;
  for (const auto& c : cas)
    if (tls::key_matches_certificate(c.pem, out.ca_key)) signer = &c;  // the last one matching

  auto leaf_problem = [&](const std::string& bundle) -> std::optional<std::string> {
    if (out.tls_crt.empty()) return "no serving certificate";
    if (auto m = tls::key_matches_certificate(out.tls_crt, out.tls_key); !m) return m.error();
    if (bundle.empty()) return "no valid CA";
    for (const auto& n : settings.names)
      if (auto v = tls::verifies(out.tls_crt, bundle, n, now); !v) return v.error();
    return std::nullopt;
  };
  std::string valid_bundle;
  for (const auto& c : cas) valid_bundle += c.pem;
  const std::optional<std::string> leaf_bad = leaf_problem(valid_bundle);

  // A new CA: there is no Secret, none can sign, or the signing one is two thirds through.
  if (signer == nullptr || now >= renewal_due(*signer)) {
    const auto stamp = std::chrono::duration_cast<Seconds>(now.time_since_epoch()).count();
    auto ca = tls::make_ca("isolation-gate-ca-" + std::to_string(stamp), settings.ca_validity, now);
    if (!ca) return fail("making the CA: " + ca.error());
    out.ca_crt = valid_bundle + ca->ca_cert_pem;
    out.ca_key = ca->ca_key_pem;
    plan.write = true;
    plan.ca_rotated = in.exists;
    plan.why = !in.exists          ? "created the CA and the serving certificate"
               : signer == nullptr ? "no CA of ca.crt matches ca.key (or none is valid): added a new CA"
                                   : "the CA is two thirds through its lifetime: added a new CA next to it";
    if (leaf_bad) {  // always without a Secret
      // Nothing valid is served: nothing to keep verifiable.
      if (auto s = sign_leaf(ca->ca_cert_pem, ca->ca_key_pem, now + settings.ca_validity); !s)
        return fail(s.error());
      plan.leaf_rotated = in.exists;
      if (in.exists) plan.why += "; issued a serving certificate (" + *leaf_bad + ")";
    }
    return plan;
  }

  out.ca_crt = in.ca_crt;
  if (cas.size() != all_cas.size()) {
    out.ca_crt = valid_bundle;
    plan.write = true;
    plan.why = "dropped expired or invalid certificates from ca.crt";
  }
  auto also = [&](std::string what) {
    plan.why = plan.why.empty() ? std::move(what) : plan.why + "; " + what;
    plan.write = true;
  };

  auto leaf = tls::read_certificate_bundle(out.tls_crt);
  const bool by_signer = !leaf_bad && tls::verifies(out.tls_crt, signer->pem, settings.names.front(), now).ok();
  const auto& confirmed = facts.bundle_confirmed_since;
  std::string reissue;  // why the signer signs a new leaf
  if (leaf_bad) {
    reissue = "issued a serving certificate (" + *leaf_bad + ")";
  } else if (!by_signer) {
    // The switch to the new CA: once every caBundle has held it for the grace.
    if (confirmed && now >= *confirmed + settings.grace) {
      reissue = "switched the serving certificate to the new CA";
    } else if (confirmed) {
      wake_at(plan, *confirmed + settings.grace);
    }
  } else if (leaf && now >= renewal_due(leaf->front())) {
    reissue = "renewed the serving certificate at two thirds of its lifetime";
  } else if (leaf) {
    wake_at(plan, renewal_due(leaf->front()));
    if (cas.size() > 1) {
      auto on_signer = [&](const std::string& served) {
        return !served.empty() && tls::verifies(served, signer->pem, settings.names.front(), now).ok();
      };
      if (!facts.served) {
        plan.wants_served = true;
      } else if (!facts.served->empty() && std::all_of(facts.served->begin(), facts.served->end(), on_signer)) {
        out.ca_crt = signer->pem;
        also("dropped the old CA from ca.crt (every ready replica serves a leaf of the new one)");
      }
    }
  }
  if (!reissue.empty()) {
    if (auto s = sign_leaf(signer->pem, out.ca_key, signer->not_after); !s) return fail(s.error());
    plan.leaf_rotated = true;
    also(std::move(reissue));
  }
  wake_at(plan, renewal_due(*signer));
  for (const auto& c : cas) wake_at(plan, c.not_after);
  return plan;
}

}  // namespace ig::controller
