#include "controller/served_observer.h"

#include <set>

#include "kube/resources.h"
#include "tls/peer_certificate.h"

namespace ig::controller {
namespace {

constexpr std::string_view kPortName = "https";  // the webhook port
constexpr std::chrono::milliseconds kDialTimeout{3000};

Result<SliceEndpoints> decode_endpoint_slice(const nlohmann::json& slice) {
  SliceEndpoints out;
  const auto ports = slice.find("ports");
  if (ports != slice.end() && ports->is_array()) {
    for (const auto& p : *ports) {
      if (!p.is_object() || !p.contains("port") || !p["port"].is_number_integer()) continue;
      const auto number = p["port"].get<std::int64_t>();
      if (number <= 0 || number > 65535) continue;
      const auto name = p.find("name");
      const bool named = name != p.end() && name->is_string() && name->get_ref<const std::string&>() == kPortName;
      if (named || ports->size() == 1) out.port = static_cast<std::uint16_t>(number);
    }
  }
  const auto endpoints = slice.find("endpoints");
  if (endpoints == slice.end() || !endpoints->is_array()) return out;  // none (yet)
  for (const auto& e : *endpoints) {
    if (!e.is_object()) return fail("an endpoint that is not an object");
    // Ready: absent means ready (discovery.k8s.io/v1).
    if (auto c = e.find("conditions"); c != e.end() && c->is_object()) {
      if (auto r = c->find("ready"); r != c->end() && r->is_boolean() && !r->get<bool>()) continue;
    }
    const auto addresses = e.find("addresses");
    if (addresses == e.end() || !addresses->is_array() || addresses->empty() || !(*addresses)[0].is_string())
      return fail("an endpoint without addresses");
    out.ready.push_back((*addresses)[0].get<std::string>());
  }
  return out;
}

}  // namespace

ServedObserver::ServedObserver(kube::Client& client, const std::string& ns, const std::string& service,
                               const WatchSettings& settings, std::function<void()> on_change)
    : server_name_(service + "." + ns + ".svc"),
      store_(decode_endpoint_slice,
             [cb = std::move(on_change)](std::string_view) {
               if (cb) cb();
             }),
      reflector_(client, store_,
                 reflector_options("endpointslices/" + service, kube::kEndpointSlices, ns, settings, {},
                                   "kubernetes.io/service-name=" + service)) {}

std::optional<ServedObservation> ServedObserver::observe() const {
  if (!store_.synced()) return std::nullopt;
  std::set<std::pair<std::string, std::uint16_t>> endpoints;  // a replica in two slices is dialled once
  for (const auto& slice : store_.snapshot())
    for (const auto& address : slice->ready) endpoints.insert({address, slice->port});
  ServedObservation out;
  for (const auto& [address, port] : endpoints) {
    out.endpoints.push_back(address + ":" + std::to_string(port));
    if (port == 0) {
      out.leaves.emplace_back();
      out.problems.push_back(out.endpoints.back() + ": the EndpointSlice names no webhook port");
      continue;
    }
    auto leaf = tls::fetch_peer_certificate(address, port, server_name_, kDialTimeout);
    out.leaves.push_back(leaf ? *leaf : std::string{});
    out.problems.push_back(leaf ? std::string{} : leaf.error());
  }
  return out;
}

}  // namespace ig::controller
