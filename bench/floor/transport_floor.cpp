// The transport's floor: isolation-gate's own HTTPS server (src/server over
// src/tls, the same listener options, I/O threads and TLS context as
// `serve`) with a handler that does no admission work. Every request is read
// whole, exactly as the webhook's are; every POST is answered 200 with the
// same bytes, the real webhook's answer to the case being measured. What this
// process costs per request is what isolation-gate would cost with a handler
// of zero cost: the most any parser, rule or encoder work could ever save
// (docs/decisions/0011-transport-floor.md).
//
// Run by bench/ab.py as binary B, in place of isolation-gate:
//   bench/ab.py --a build-bench/isolation-gate --b build-bench/transport_floor
//       --b-env IG_FLOOR_RESPONSE=FILE --b-env MALLOC_ARENA_MAX=4 ... --with-nginx
// It takes the command line bench/bench.py gives isolation-gate and reads only
// --tls-cert, --tls-key, --listen and --metrics-listen (HOST:PORT); the
// metrics address answers GET /readyz with 200. IG_FLOOR_RESPONSE names the
// file whose bytes every POST gets. IG_FLOOR_SPIN_NS=N (optional) makes the
// handler spin for N ns before answering: a handler of known cost, to see how
// the process's CPU per review grows with it (system time included). A bench
// tool, not part of the product.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "server/https_server.h"
#include "tls/server_context.h"

namespace {

bool split_host_port(const std::string& text, ig::server::ListenerOptions& out) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  out.host = text.substr(0, colon);
  out.port = static_cast<uint16_t>(std::atoi(text.c_str() + colon + 1));
  return out.port != 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cert, key, listen, metrics;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--tls-cert") cert = argv[++i];
    else if (flag == "--tls-key") key = argv[++i];
    else if (flag == "--listen") listen = argv[++i];
    else if (flag == "--metrics-listen") metrics = argv[++i];
  }
  const char* response_path = std::getenv("IG_FLOOR_RESPONSE");
  ig::server::ListenerOptions webhook_listener, probe_listener;
  probe_listener.tls = false;
  if (cert.empty() || key.empty() || response_path == nullptr || !split_host_port(listen, webhook_listener) ||
      !split_host_port(metrics, probe_listener)) {
    std::fprintf(stderr,
                 "usage: IG_FLOOR_RESPONSE=FILE transport_floor --tls-cert C --tls-key K "
                 "--listen HOST:PORT --metrics-listen HOST:PORT\n");
    return 2;
  }
  std::ifstream in(response_path, std::ios::binary);
  const std::string canned{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "transport_floor: cannot read %s\n", response_path);
    return 2;
  }

  const char* spin_text = std::getenv("IG_FLOOR_SPIN_NS");
  const long long spin_ns = spin_text ? std::atoll(spin_text) : 0;

  auto log = [](std::string_view level, std::string_view msg) {
    if (level != "debug") std::fprintf(stderr, "%.*s\n", static_cast<int>(msg.size()), msg.data());
  };
  auto tls = ig::tls::ReloadingTlsContext::from_files(cert, key, log);
  if (!tls.ok()) {
    std::fprintf(stderr, "transport_floor: %s\n", tls.error().c_str());
    return 1;
  }
  ig::server::HttpServer https(
      [&canned, spin_ns](ig::server::Request&& r) {
        if (spin_ns > 0) {
          // The monotonic clock is read in user space (vDSO): the spin is user
          // time. (CLOCK_THREAD_CPUTIME_ID is a syscall: its spin was mostly
          // system time.)
          const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
          while (std::chrono::steady_clock::now() < until) {
          }
        }
        ig::server::Response response;
        response.status = r.method == "POST" ? 200 : 405;
        if (response.status == 200) response.body = canned;
        return response;
      },
      **tls, log);
  ig::server::HttpServer probes([](ig::server::Request&& r) {
    ig::server::Response response;
    response.status = r.target == "/readyz" ? 200 : 404;
    response.body = "{}";
    return response;
  });
  for (auto* pair : {&webhook_listener, &probe_listener}) {
    auto& server = pair == &webhook_listener ? https : probes;
    if (auto bound = server.add_listener(*pair); !bound.ok()) {
      std::fprintf(stderr, "transport_floor: %s\n", bound.error().c_str());
      return 1;
    }
  }
  // SIGTERM (bench.py's stop) ends the process by its default action.
  probes.start(1);
  https.run(0);
  return 0;
}
