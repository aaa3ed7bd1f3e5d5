#include "controller/secret_source.h"

#include <algorithm>

#include "kube/resources.h"
#include "kube/tls_material.h"
#include "tls/certificates.h"

namespace ig::controller {
namespace {

std::string data_field(const nlohmann::json& secret, std::string_view key) {
  const auto data = secret.find("data");
  if (data == secret.end() || !data->is_object()) return {};
  const auto it = data->find(std::string(key));
  if (it == data->end() || !it->is_string()) return {};
  auto decoded = kube::decode_base64(it->get<std::string>(), key);
  return decoded ? std::move(*decoded) : std::string{};
}

}  // namespace

SecretMaterial secret_material(const nlohmann::json& secret) {
  return {.exists = true,
          .tls_crt = data_field(secret, "tls.crt"),
          .tls_key = data_field(secret, "tls.key"),
          .ca_crt = data_field(secret, "ca.crt"),
          .ca_key = data_field(secret, "ca.key")};
}

SecretSource::SecretSource(kube::Client& client, tls::ReloadingTlsContext& serving, std::string ns,
                           std::string name, const WatchSettings& settings, std::function<void()> on_change,
                           std::function<void(const std::string&)> on_error)
    : serving_(serving),
      what_("the Secret " + ns + "/" + name),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)),
      log_(settings.log),
      watch_(client, kube::kSecrets, ns, name, settings, [this] { on_secret_changed(); }) {}

std::optional<CertTime> SecretSource::ca_not_after() const {
  std::lock_guard lock(mu_);
  return ca_not_after_;
}

void SecretSource::on_secret_changed() {
  if (auto secret = watch_.get()) {
    const SecretMaterial m = secret_material(*secret);
    std::optional<CertTime> earliest;
    if (auto cas = tls::read_certificate_bundle(m.ca_crt); cas && !cas->empty())
      earliest = std::ranges::min_element(*cas, {}, &tls::CertificateInfo::not_after)->not_after;
    bool try_pair = false;
    {
      std::lock_guard lock(mu_);
      ca_not_after_ = earliest;
      if (!m.tls_crt.empty() && !m.tls_key.empty() && last_tried_pair_ != m.tls_crt + m.tls_key) {
        last_tried_pair_ = m.tls_crt + m.tls_key;  // served already, or reported once
        try_pair = true;
      }
    }
    if (try_pair) {
      if (auto replaced = serving_.replace_pem(m.tls_crt, m.tls_key); !replaced) {
        if (on_error_) on_error_(what_ + " holds no usable serving certificate: " + replaced.error());
      } else if (!loaded_.exchange(true, std::memory_order_acq_rel) && log_) {
        log_("info", "serving the certificate of " + what_);
      }
    }
  }
  if (on_change_) on_change_();
}

}  // namespace ig::controller
