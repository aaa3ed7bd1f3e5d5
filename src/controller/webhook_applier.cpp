#include "controller/webhook_applier.h"

#include <cstdio>

#include "kube/object_meta.h"
#include "kube/resources.h"
#include "model/document.h"

namespace ig::controller {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFingerprintAnnotation = "isolation-gate.zeroroot.ai/template-fingerprint";

// FNV-1a (64 bits) in hex: a change detector for the template, not a MAC.
std::string fingerprint(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The configuration `kind` named `name` that the template ConfigMap holds
// under `key`, as it should be stored.
Result<json> configuration_from_template(const json& configmap, const std::string& key, std::string_view kind,
                                         std::string_view name, const std::string& b64) {
  const auto data = configmap.find("data");
  if (data == configmap.end() || !data->is_object() || !data->contains(key) || !(*data)[key].is_string()) {
    return fail("the template ConfigMap has no data key " + key);
  }
  auto docs = model::parse_yaml_documents((*data)[key].get_ref<const std::string&>(), key);
  if (!docs) return fail(docs.error());
  if (docs->size() != 1 || !(*docs)[0].is_object()) return fail(key + ": expected one object");
  json object = std::move((*docs)[0]);
  if (object.value("kind", json()) != kind || object.value("apiVersion", json()) != "admissionregistration.k8s.io/v1") {
    return fail(key + ": expected an admissionregistration.k8s.io/v1 " + std::string(kind));
  }
  if (!object.contains("metadata") || !object["metadata"].is_object() ||
      object["metadata"].value("name", json()) != name) {
    return fail(key + ": metadata.name must be " + std::string(name) + " (--webhook-config-name)");
  }
  if (!object.contains("webhooks") || !object["webhooks"].is_array()) {
    return fail(key + ": webhooks must be a list");
  }
  json& md = object["metadata"];
  for (const char* owned : {"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"})
    md.erase(owned);
  // Made by the leader, not by Helm: no instance label (GitOps tools would prune it).
  if (!md.contains("labels") || !md["labels"].is_object()) md["labels"] = json::object();
  md["labels"].erase("app.kubernetes.io/instance");
  md["labels"]["app.kubernetes.io/managed-by"] = "isolation-gate";
  const std::string print = fingerprint(object.dump());
  for (json& hook : object["webhooks"]) {
    if (!hook.is_object()) return fail(key + ": every webhook must be an object");
    if (!hook.contains("clientConfig") || !hook["clientConfig"].is_object()) hook["clientConfig"] = json::object();
    hook["clientConfig"]["caBundle"] = b64;
  }
  if (!md.contains("annotations") || !md["annotations"].is_object()) md["annotations"] = json::object();
  md["annotations"][std::string(kFingerprintAnnotation)] = print;
  return object;
}

}  // namespace

ConfigurationApplier::ConfigurationApplier(kube::Client& client, std::string ns, std::string configmap,
                                           const WatchSettings& settings, std::function<void()> on_change,
                                           std::function<bool()> replica_ready,
                                           std::chrono::milliseconds request_timeout)
    : client_(client),
      ns_(ns),
      log_(settings.log),
      replica_ready_(std::move(replica_ready)),
      request_timeout_(request_timeout),
      template_(client, kube::kConfigMaps, ns, std::move(configmap), settings, std::move(on_change)) {}

Applied ConfigurationApplier::waiting(PerKind& k, const std::string& what, const std::string& why) {
  if (k.waiting_logged.first(why) && log_) log_("info", "certificates: " + what + ": " + why);
  return {};
}

Result<Applied> ConfigurationApplier::reconcile(const CaInjector& target, const std::string& b64) {
  const kube::Resource& r = target.target().resource();
  const std::string& name = target.target().name();
  PerKind& k = kinds_[std::string(r.plural)];
  const std::string what = target.what();
  if (!template_.synced() || !target.target().synced()) return Applied{};
  const auto configmap = template_.get();
  if (!configmap) return waiting(k, what, "waiting for the template ConfigMap " + ns_ + "/" + template_.name());
  const bool mutating = r.plural == kube::kMutatingWebhookConfigurations.plural;
  auto desired = configuration_from_template(*configmap, mutating ? "mutating.yaml" : "validating.yaml", r.kind,
                                             name, b64);
  if (!desired) {
    k.waiting_logged.cleared();
    return fail("certificates: the template ConfigMap " + template_.name() + ": " + desired.error());
  }
  const std::uint64_t seen = target.target().changes();
  const auto live = target.target().get();
  if (live && kube::object_meta(*live).annotation(kFingerprintAnnotation) ==
                  kube::object_meta(*desired).annotation(kFingerprintAnnotation)) {
    k.waiting_logged.cleared();
    return Applied{true, false};  // as the template says; the caBundle is the injector's
  }
  if (k.written_at == seen) return Applied{};  // our write is on its way to the cache
  if (replica_ready_ && !replica_ready_()) {
    return waiting(k, what, "waiting until this replica can answer before applying the template");
  }
  if (live) (*desired)["metadata"]["resourceVersion"] = kube::object_meta(*live).resource_version;
  auto written = live ? client_.update(kube::object_path(r, "", name), *desired, request_timeout_)
                      : client_.create(kube::collection_path(r), *desired);
  if (!written) {
    const kube::ApiError& e = written.failure();
    if (e.conflict()) return Applied{};  // the watch brings the newer object, the next pass retries
    return fail("certificates: applying the template to the " + what + ": " + e.message);
  }
  k.written_at = seen;
  k.waiting_logged.cleared();
  if (log_)
    log_("info", std::string("certificates: ") + (live ? "updated" : "created") + " the " + what +
                     " from the template ConfigMap " + template_.name());
  return Applied{true, true};
}

}  // namespace ig::controller
