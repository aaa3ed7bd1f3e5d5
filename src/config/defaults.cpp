#include "config/defaults.h"

namespace ig::config {

std::vector<std::string> service_dns_names(std::string_view service, std::string_view ns) {
  std::string name(service);
  name += '.';
  name += ns;
  return {std::string(service), name, name + ".svc", name + ".svc.cluster.local"};
}

}  // namespace ig::config
