// `isolation-gate certs`: writes a CA and a serving certificate for the
// webhook's Service (for `--cert-mode files`, tests and benchmarks).
#include <filesystem>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/defaults.h"
#include "tls/certificates.h"

namespace ig::cli {
namespace {

struct CertsOptions {
  std::string out_dir;
  std::string service = std::string(config::kDefaultServiceName);
  std::string ns = std::string(config::kDefaultNamespace);
  std::vector<std::string> extra_dns;
  std::vector<std::string> ips;
  unsigned days = 365;
};

int fail_with(const std::string& message, int code) {
  std::cerr << "isolation-gate certs: " << message << "\n";
  return code;
}

}  // namespace

int run_certs(const std::vector<std::string>& args) {
  CertsOptions o;
  auto app = make_app("certs", "Writes a CA and a serving certificate (PEM) for the webhook's Service.");
  app->add_option("--out-dir", o.out_dir, "where to write ca.crt, ca.key, tls.crt, tls.key (keys mode 0600)")
      ->required()
      ->type_name("DIR");
  app->add_option("--service-name", o.service, "the webhook's Service")->type_name("NAME");
  app->add_option("--namespace", o.ns, "the Service's namespace")->type_name("NS");
  app->add_option("--dns", o.extra_dns, "more DNS names for the certificate")
      ->delimiter(',')
      ->type_name("NAME,...")
      ->default_str("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--ip", o.ips, "IP addresses for the certificate")
      ->delimiter(',')
      ->type_name("ADDR,...")
      ->default_str("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--days", o.days, "validity of the CA and the certificate")
      ->check(CLI::Range(1u, 99999u).description(""))
      ->type_name("N");
  app->footer("The certificate names NAME, NAME.NS, NAME.NS.svc and NAME.NS.svc.cluster.local\n"
              "plus every --dns and --ip.");
  if (auto exit_code = parse(*app, args)) return *exit_code;

  std::vector<std::string> dns = config::service_dns_names(o.service, o.ns);
  for (auto& extra : o.extra_dns)
    if (!extra.empty()) dns.push_back(extra);
  std::erase(o.ips, std::string());

  auto chain = tls::make_serving_chain(dns, o.ips, std::chrono::hours(24) * o.days);
  if (!chain) return fail_with(chain.error(), kExitBadInput);
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return fail_with(o.out_dir + ": " + ec.message(), kExitFailure);
  const std::pair<const char*, std::pair<const std::string*, mode_t>> files[] = {
      {"ca.crt", {&chain->ca_cert_pem, 0644}},
      {"ca.key", {&chain->ca_key_pem, 0600}},
      {"tls.crt", {&chain->cert_pem, 0644}},
      {"tls.key", {&chain->key_pem, 0600}},
  };
  for (const auto& [name, content] : files) {
    const std::string path = o.out_dir + "/" + name;
    if (auto written = tls::write_file_atomically(path, *content.first, content.second); !written)
      return fail_with(written.error(), kExitFailure);
  }
  std::cout << "wrote " << o.out_dir << "/{ca.crt,ca.key,tls.crt,tls.key} for";
  for (const auto& d : dns) std::cout << " " << d;
  for (const auto& i : o.ips) std::cout << " " << i;
  std::cout << "\n";
  return kExitAllowed;
}

}  // namespace ig::cli
