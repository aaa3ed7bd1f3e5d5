// What each ready replica serves, as the leader observes it: the ready
// endpoints of the webhook Service's EndpointSlices (port "https" or the
// only one), each TLS-dialled (as SERVICE.NS.svc, for at most 3 s) for the
// leaf it presents.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "controller/object_watch.h"
#include "kube/reflector.h"
#include "kube/store.h"

namespace ig::controller {

// One EndpointSlice as read: the ready endpoints' first address and the port.
struct SliceEndpoints {
  std::vector<std::string> ready;  // addresses
  std::uint16_t port = 0;          // 0: the slice names no such port
};

struct ServedObservation {
  std::vector<std::string> endpoints;  // "ADDRESS:PORT", one per ready endpoint
  std::vector<std::string> leaves;     // the leaf each presents (PEM); "" when it could not be read
  std::vector<std::string> problems;   // why, for those
};

class ServedObserver {
 public:
  ServedObserver(kube::Client& client, const std::string& ns, const std::string& service,
                 const WatchSettings& settings, std::function<void()> on_change);
  void start() { reflector_.start(); }  // stops when destroyed
  // Dials every ready endpoint now, one after the other; nullopt before the list.
  std::optional<ServedObservation> observe() const;

 private:
  const std::string server_name_;
  kube::Store<SliceEndpoints> store_;
  kube::Reflector reflector_;
};

}  // namespace ig::controller
