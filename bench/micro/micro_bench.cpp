// Microbenchmarks of the webhook's request path, without HTTP or TLS, on each
// AdmissionReview of the benchmark corpus (bench/corpus/gen.py).
//
// Corpus: $IG_BENCH_CORPUS, or the directory bench/run.sh generates
// (build-bench/corpus, compiled in as IG_BENCH_CORPUS_DIR). Run by
// bench/run.sh; by hand:
//   build-bench/micro_bench --benchmark_filter='serve/' --benchmark_min_time=0.2
//
// Stages (each named STAGE/CASE; CASE is SIZE-DECISION, e.g. pod-typical-RequireSetec):
//   decode  admission::decode_review(body): JSON parse (with the depth
//           pre-scan) and the request fields
//   facts   model::locate_pod + model::read_pod_facts on the decoded object
//   podtext model::read_pod_text on request.object's text (the handlers'
//           fast path for the same facts)
//   decide  admission::admit_pod(Stage::Workload): catalog lookup, the gate
//           (policy::decide), message, warnings, audit; no patch
//   patch   admission::admit_pod(Stage::Mutate) and the dump of the patch
//           (the patch-building path of /mutate/pods)
//   encode  admission::encode_response of the case's response
//   review  Webhook::review on a decoded request (facts + decide + patch)
//   serve   Webhook::serve: the whole handler the HTTPS server calls
//           (routing, decode, review, encode, metrics); includes one copy
//           of the body per call, as the server moves its body in
//   policy_decide            policy::decide alone
//   serve_catalog/N          serve of pod-typical-RequireSetec with N
//                            Components in the catalog (10 and 100000)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "admission/catalog.h"
#include "admission/pod_rules.h"
#include "admission/review.h"
#include "admission/webhook.h"
#include "config/defaults.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"
#include "model/pod_text.h"
#include "policy/gate.h"

#ifndef IG_BENCH_CORPUS_DIR
#define IG_BENCH_CORPUS_DIR "build-bench/corpus"
#endif

namespace {

using namespace ig;
using nlohmann::json;

struct Case {
  std::string name;
  std::string endpoint;
  std::string size;
  bool sandbox_available = false;
  std::string body;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "micro_bench: cannot read " << path << "\n";
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const admission::Route& route_of(const std::string& path) {
  const admission::Route* r = admission::find_route(path);
  if (r == nullptr) {
    std::cerr << "micro_bench: no route " << path << "\n";
    std::exit(2);
  }
  return *r;
}

admission::GateSettings default_settings() {
  admission::GateSettings s;
  s.runtime_class = std::string(config::kDefaultRuntimeClass);
  s.own_namespace = std::string(config::kDefaultNamespace);
  return s;
}

struct World {
  admission::GateSettings settings = default_settings();
  admission::StaticCatalog catalog;
  admission::FixedSandbox available{policy::SandboxAvailability::Available};
  admission::FixedSandbox unavailable{policy::SandboxAvailability::Unavailable};
  std::unique_ptr<admission::Webhook> webhook_available, webhook_unavailable;

  const admission::SandboxView& sandbox(const Case& c) const {
    return c.sandbox_available ? static_cast<const admission::SandboxView&>(available) : unavailable;
  }
  admission::Webhook& webhook(const Case& c) const {
    return c.sandbox_available ? *webhook_available : *webhook_unavailable;
  }
};

World* g_world = nullptr;

admission::AdmissionRequest must_decode(const Case& c) {
  auto d = admission::decode_review(c.body);
  if (d.kind != admission::DecodedReview::Kind::Ok) {
    std::cerr << "micro_bench: " << c.name << ": " << d.error << "\n";
    std::exit(2);
  }
  return std::move(d.request);
}

void BM_Decode(benchmark::State& state, const Case* c) {
  for (auto _ : state) {
    auto d = admission::decode_review(c->body);
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(c->body.size()));
}

void BM_Facts(benchmark::State& state, const Case* c) {
  const auto request = must_decode(*c);
  for (auto _ : state) {
    auto where = model::locate_pod(request.object, "request.object");
    auto facts = model::read_pod_facts(request.object, *where, "request.object");
    benchmark::DoNotOptimize(facts);
  }
}

void BM_PodText(benchmark::State& state, const Case* c) {
  const auto d = admission::decode_review(c->body, admission::ObjectRead::Text);
  const auto& r = d.request;
  std::string api = r.kind_group.empty() ? r.kind_version : r.kind_group + "/" + r.kind_version;
  if (d.kind != admission::DecodedReview::Kind::Ok || !model::read_pod_text(r.object_text, r.kind, api)) {
    state.SkipWithError("not read as text");
    return;
  }
  for (auto _ : state) {
    auto facts = model::read_pod_text(r.object_text, r.kind, api);
    benchmark::DoNotOptimize(facts);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(r.object_text.size()));
}

void run_admit(benchmark::State& state, const Case* c, admission::Stage stage, bool dump) {
  const auto request = must_decode(*c);
  auto where = model::locate_pod(request.object, "request.object");
  auto facts = model::read_pod_facts(request.object, *where, "request.object");
  if (!where || !facts) {
    state.SkipWithError("not a pod");
    return;
  }
  const admission::AdmissionContext context{g_world->settings, g_world->catalog,
                                            g_world->sandbox(*c)};
  for (auto _ : state) {
    auto v = admission::admit_pod(*facts, *where, request.namespace_, context, stage);
    if (dump) {
      std::string patch = std::move(v.patch);
      benchmark::DoNotOptimize(patch);
    }
    benchmark::DoNotOptimize(v);
  }
}

void BM_Decide(benchmark::State& state, const Case* c) {
  run_admit(state, c, admission::Stage::Workload, false);
}
void BM_Patch(benchmark::State& state, const Case* c) {
  run_admit(state, c, admission::Stage::Mutate, true);
}

void BM_Encode(benchmark::State& state, const Case* c) {
  auto request = must_decode(*c);
  const auto answer = g_world->webhook(*c).review(route_of(c->endpoint), request);
  for (auto _ : state) {
    auto body = admission::encode_response(request, answer);
    benchmark::DoNotOptimize(body);
  }
}

void BM_Review(benchmark::State& state, const Case* c) {
  auto request = must_decode(*c);
  const auto& route = route_of(c->endpoint);
  for (auto _ : state) {
    auto out = g_world->webhook(*c).review(route, request);
    benchmark::DoNotOptimize(out);
  }
}

void serve_loop(benchmark::State& state, admission::Webhook& webhook, const Case& c) {
  for (auto _ : state) {
    auto response = webhook.serve({"POST", c.endpoint + "?timeout=10s", "application/json", c.body});
    if (response.status != 200) {
      state.SkipWithError("status is not 200");
      break;
    }
    benchmark::DoNotOptimize(response);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(c.body.size()));
}

void BM_Serve(benchmark::State& state, const Case* c) { serve_loop(state, g_world->webhook(*c), *c); }

void BM_PolicyDecide(benchmark::State& state) {
  unsigned i = 0;
  for (auto _ : state) {
    ++i;
    auto d = policy::decide(policy::SandboxAvailability(i & 1), policy::ContentTrust(i % 3),
                            policy::DeploymentShape((i >> 2) & 1));
    benchmark::DoNotOptimize(d);
  }
}

// The typical pod against a catalog of N Components: the 10 of the corpus
// plus N - 10 generated ones in other namespaces (as gen.py --catalog makes).
void BM_ServeCatalog(benchmark::State& state, const Case* c) {
  const auto n = static_cast<std::size_t>(state.range(0));
  static std::map<std::size_t, std::unique_ptr<admission::StaticCatalog>> catalogs;
  auto& catalog = catalogs[n];
  if (!catalog) {
    const auto dir = std::string(std::getenv("IG_BENCH_CORPUS") ? std::getenv("IG_BENCH_CORPUS")
                                                                : IG_BENCH_CORPUS_DIR);
    auto loaded = admission::StaticCatalog::load_directory(dir + "/components", "default");
    catalog = std::make_unique<admission::StaticCatalog>(std::move(*loaded));
    const char* trusts[] = {"trusted", "untrusted"};
    for (std::size_t i = catalog->size(); i < n; ++i) {
      model::Component comp;
      comp.name = "catalog-" + std::to_string(i);
      comp.namespace_ = "tenant-" + std::to_string(i % 1000);
      comp.kind = "tool";
      comp.image = "registry.example.com/gibson/" + comp.name + ":1.0.0";
      comp.set_trust_raw(std::string(trusts[i % 2]));
      catalog->add(std::move(comp), "default");
    }
  }
  admission::Webhook webhook(admission::AdmissionContext{g_world->settings, *catalog, g_world->sandbox(*c)});
  serve_loop(state, webhook, *c);
  state.counters["components"] = double(catalog->size());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir =
      std::getenv("IG_BENCH_CORPUS") ? std::getenv("IG_BENCH_CORPUS") : IG_BENCH_CORPUS_DIR;
  static World world;
  g_world = &world;
  auto catalog = admission::StaticCatalog::load_directory(dir + "/components", "default");
  if (!catalog) {
    std::cerr << "micro_bench: " << catalog.error()
              << "\n(generate the corpus first: python3 bench/corpus/gen.py --out " << dir << ")\n";
    return 2;
  }
  world.catalog = std::move(*catalog);
  world.webhook_available =
      std::make_unique<admission::Webhook>(
          admission::AdmissionContext{world.settings, world.catalog, world.available});
  world.webhook_unavailable =
      std::make_unique<admission::Webhook>(
          admission::AdmissionContext{world.settings, world.catalog, world.unavailable});

  static std::vector<Case> cases;
  const auto index = json::parse(read_file(dir + "/cases.json"));
  for (const auto& e : index) {
    Case c;
    c.name = e.at("name").get<std::string>();
    c.endpoint = e.at("endpoint").get<std::string>();
    c.size = e.at("size").get<std::string>();
    c.sandbox_available = e.at("sandbox").get<std::string>() == "available";
    c.body = read_file(e.at("file").get<std::string>());
    cases.push_back(std::move(c));
  }

  benchmark::RegisterBenchmark("policy_decide", BM_PolicyDecide);
  const Case* typical = nullptr;
  for (const auto& c : cases) {
    const bool pod_like = c.endpoint != "/validate/components";
    benchmark::RegisterBenchmark(("decode/" + c.name).c_str(), BM_Decode, &c);
    if (pod_like) {
      benchmark::RegisterBenchmark(("facts/" + c.name).c_str(), BM_Facts, &c);
      benchmark::RegisterBenchmark(("podtext/" + c.name).c_str(), BM_PodText, &c);
      benchmark::RegisterBenchmark(("decide/" + c.name).c_str(), BM_Decide, &c);
    }
    if (c.endpoint == "/mutate/pods") {
      benchmark::RegisterBenchmark(("patch/" + c.name).c_str(), BM_Patch, &c);
    }
    benchmark::RegisterBenchmark(("encode/" + c.name).c_str(), BM_Encode, &c);
    benchmark::RegisterBenchmark(("review/" + c.name).c_str(), BM_Review, &c);
    benchmark::RegisterBenchmark(("serve/" + c.name).c_str(), BM_Serve, &c);
    if (c.name == "pod-typical-RequireSetec") typical = &c;
  }
  if (typical) {
    benchmark::RegisterBenchmark("serve_catalog/pod-typical-RequireSetec", BM_ServeCatalog, typical)
        ->Arg(10)
        ->Arg(100000);
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
