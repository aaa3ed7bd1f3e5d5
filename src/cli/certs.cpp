// `isolation-gate certs`: writes a CA and a serving certificate for the
// webhook's Service (for `--cert-mode files`, tests and benchmarks).
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "tls/certificates.h"

namespace ig::cli {
namespace {

constexpr const char* kUsage =
    "usage: isolation-gate certs --out-dir DIR [--service-name NAME] [--namespace NS]\n"
    "                            [--dns NAME,...] [--ip ADDR,...] [--days N]\n"
    "  Writes DIR/ca.crt, DIR/ca.key, DIR/tls.crt, DIR/tls.key (keys mode 0600).\n"
    "  The certificate names NAME, NAME.NS, NAME.NS.svc and NAME.NS.svc.cluster.local\n"
    "  (default isolation-gate in isolation-gate-system) plus every --dns and --ip.\n";

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int run_certs(const std::vector<std::string>& args) {
  auto flags = parse_flags(args, {{"out-dir", "service-name", "namespace", "dns", "ip", "days"}, {"help"}});
  if (flags.has("help")) {
    std::cout << kUsage;
    return kExitAllowed;
  }
  if (!flags.error.empty()) {
    std::cerr << "isolation-gate certs: " << flags.error << "\n" << kUsage;
    return kExitBadInput;
  }
  const auto out_dir = flags.get("out-dir");
  if (!out_dir) {
    std::cerr << "isolation-gate certs: --out-dir is required\n" << kUsage;
    return kExitBadInput;
  }
  const std::string days_text = flags.get_or("days", "365");
  if (days_text.empty() || days_text.size() > 5 ||
      days_text.find_first_not_of("0123456789") != std::string::npos || std::stoul(days_text) == 0) {
    std::cerr << "isolation-gate certs: --days: expected a number of days from 1 to 99999\n";
    return kExitBadInput;
  }
  const std::string service = flags.get_or("service-name", "isolation-gate");
  const std::string ns = flags.get_or("namespace", "isolation-gate-system");
  std::vector<std::string> dns = {service, service + "." + ns, service + "." + ns + ".svc",
                                  service + "." + ns + ".svc.cluster.local"};
  for (auto& extra : split_list(flags.get_or("dns", ""))) dns.push_back(extra);
  const auto ips = split_list(flags.get_or("ip", ""));

  std::string error;
  auto chain = tls::make_serving_chain(dns, ips, std::chrono::hours(24) * std::stoul(days_text), error);
  if (!chain) {
    std::cerr << "isolation-gate certs: " << error << "\n";
    return kExitBadInput;
  }
  std::error_code ec;
  std::filesystem::create_directories(*out_dir, ec);
  if (ec) {
    std::cerr << "isolation-gate certs: " << *out_dir << ": " << ec.message() << "\n";
    return kExitFailure;
  }
  const std::pair<const char*, std::pair<const std::string*, mode_t>> files[] = {
      {"ca.crt", {&chain->ca_cert_pem, 0644}},
      {"ca.key", {&chain->ca_key_pem, 0600}},
      {"tls.crt", {&chain->cert_pem, 0644}},
      {"tls.key", {&chain->key_pem, 0600}},
  };
  for (const auto& [name, content] : files) {
    const std::string path = *out_dir + "/" + name;
    if (!tls::write_file_atomically(path, *content.first, content.second, error)) {
      std::cerr << "isolation-gate certs: " << error << "\n";
      return kExitFailure;
    }
  }
  std::cout << "wrote " << *out_dir << "/{ca.crt,ca.key,tls.crt,tls.key} for";
  for (const auto& d : dns) std::cout << " " << d;
  for (const auto& i : ips) std::cout << " " << i;
  std::cout << "\n";
  return kExitAllowed;
}

}  // namespace ig::cli
