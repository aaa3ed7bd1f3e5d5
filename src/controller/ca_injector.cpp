#include "controller/ca_injector.h"

#include "kube/object_meta.h"

namespace ig::controller {

using nlohmann::json;

CaInjector::CaInjector(kube::Client& client, const kube::Resource& kind, std::string name,
                       const WatchSettings& settings, std::function<void()> on_change)
    : client_(client), log_(settings.log), watch_(client, kind, "", std::move(name), settings, std::move(on_change)) {}

std::string CaInjector::what() const { return std::string(watch_.resource().kind) + " " + watch_.name(); }

Result<Injected> CaInjector::reconcile(const std::string& b64, std::stop_token cancel) {
  if (!watch_.synced()) return Injected{};
  const auto object = watch_.get();
  if (!object) {
    const std::string message = "certificates: waiting for the " + what() + " to exist";
    if (missing_logged_.first(message) && log_) log_("warn", message);
    return Injected{true};  // nothing the API server could call
  }
  missing_logged_.cleared();
  const std::string_view rv = kube::object_meta(*object).resource_version;
  if (!rv.empty() && rv == patched_rv_ && b64 == patched_bundle_) return Injected{true};  // our patch is on its way
  json ops = json::array();
  std::uint64_t repairs = 0;
  const auto webhooks = object->find("webhooks");
  if (webhooks != object->end() && webhooks->is_array()) {
    for (std::size_t i = 0; i < webhooks->size(); ++i) {
      const json& hook = (*webhooks)[i];
      const auto cc = hook.find("clientConfig");  // end() when the webhook is not an object
      const bool has_cc = cc != hook.end() && cc->is_object();
      if (has_cc && cc->value("caBundle", json()) == b64) continue;
      const std::string base = "/webhooks/" + std::to_string(i);
      if (auto name = hook.find("name"); name != hook.end())
        ops.push_back({{"op", "test"}, {"path", base + "/name"}, {"value", *name}});
      if (!has_cc)
        ops.push_back({{"op", "add"}, {"path", base + "/clientConfig"}, {"value", json::object()}});
      ops.push_back({{"op", "add"}, {"path", base + "/clientConfig/caBundle"}, {"value", b64}});
      ++repairs;
    }
  }
  if (repairs == 0) return Injected{true};
  auto patched = client_.patch(kube::object_path(watch_.resource(), "", watch_.name()),
                               kube::PatchType::Json, ops, cancel);
  if (!patched) {
    if (patched.failure().not_found()) return Injected{};  // deleted meanwhile: the watch says so next
    return fail("certificates: patching the caBundle of the " + what() + ": " + patched.error());
  }
  patched_rv_ = rv;
  patched_bundle_ = b64;
  if (log_)
    log_("info", "certificates: set the caBundle of " + std::to_string(repairs) + " webhook(s) of the " + what());
  return Injected{true, repairs};
}

}  // namespace ig::controller
