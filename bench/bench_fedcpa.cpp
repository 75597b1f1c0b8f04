// bench_fedcpa: one FedCPA server step (fl/defenses/fedcpa.cpp) at CIFAR-10 ResNet18 size, n = 10 uploads
// (the paper's 10 clients per round), with the model's real conv/linear weight layout (server_side.h,
// weight_columns: K = 11,164,352 of the P = 11,173,962 parameters), so k = 111,643 per set.
//
//   fedcpa/resnet18/n:10/<correlation>/first    round 1 (first_round = skip: n importance vectors)
//   fedcpa/resnet18/n:10/<correlation>/steady   later rounds (n + 1 vectors: the global term too)
//   fedavg/resnet18/n:10                        rung 0: the plain weighted sum of the same rows
//
// What one step costs: n (+1) importance passes over K (double products), two std::nth_element passes per
// vector, O(n^2 k log k) set similarities, and one weighted sum over the (n, D) matrix. Uploads are
// honest-looking rows (a common direction plus per-row noise, xorshift); the global model is small noise.
// Threads: a ThreadPool of BASTION_BENCH_THREADS (default 2) workers is in.pool (one client per task).
//
// Run: bench_fedcpa --benchmark_repetitions=5 --benchmark_min_time=0.2 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fl/core/client_models.h"
#include "fl/core/server_side.h"
#include "fl/base/thread_pool.h"
#include "fl/registry.h"
#include "kernels/cpu/gemm.h"
#include "nn/models.h"

namespace bastion {
namespace {

constexpr int64_t kClients = 10;

int bench_threads() {
  const char* value = std::getenv("BASTION_BENCH_THREADS");
  return value != nullptr ? std::max(1, std::atoi(value)) : 2;
}

struct Round {
  int64_t D = 0, P = 0;
  std::vector<ColumnRange> weights;
  std::vector<float> data, global;
  std::vector<int64_t> samples, clients;
};

const Round& resnet18_round() {
  static const Round round = [] {
    Round r;
    const std::unique_ptr<Model> model = make_model("resnet18", {3, 32, 32}, 10, 1);
    r.D = static_cast<int64_t>(model->flat_state().size());
    r.P = model->num_parameters();
    r.weights = weight_columns(*model, shared_columns(*model, SharedPart::All));
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    auto uniform = [&state] {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return static_cast<float>(state >> 40) * (1.0f / 16777216.0f) - 0.5f;
    };
    std::vector<float> direction(static_cast<size_t>(r.D));
    for (float& v : direction) v = 0.01f * uniform();
    r.data.resize(static_cast<size_t>(kClients * r.D));
    for (int64_t i = 0; i < kClients; ++i)
      for (int64_t d = 0; d < r.D; ++d) r.data[i * r.D + d] = direction[d] + 0.002f * uniform();
    r.global.resize(static_cast<size_t>(r.D));
    for (float& v : r.global) v = 0.05f * uniform();
    r.samples.assign(kClients, 600);
    for (int64_t i = 0; i < kClients; ++i) r.clients.push_back(i);
    return r;
  }();
  return round;
}

ThreadPool& pool() {
  static ThreadPool instance(bench_threads());
  return instance;
}

AggregationInput input_of(const Round& r) {
  AggregationInput in;
  in.updates = r.data.data();
  in.n = kClients;
  in.D = r.D;
  in.num_parameters = r.P;
  in.num_samples = r.samples;
  in.clients = r.clients;
  in.round = 1;
  in.global = r.global;
  in.pool = &pool();
  in.weight_columns = r.weights;
  return in;
}

// steady: one untimed step first, so every timed step has a previous global model (the global term).
void bench_fedcpa(benchmark::State& state, std::string correlation, bool steady) {
  const Round& r = resnet18_round();
  const AggregationInput in = input_of(r);
  const Params params("server.fedcpa", *find_server_rule("fedcpa").info.params, {{"correlation", correlation}});
  std::unique_ptr<ServerRule> rule = make_server_rule("fedcpa", params, "", Params());
  if (steady) rule->aggregate(in);
  const RuleState fresh = rule->save_state();
  for (auto _ : state) {
    AggregationOutput out = rule->aggregate(in);
    benchmark::DoNotOptimize(out.update.data());
    state.PauseTiming();
    rule->load_state(fresh);  // the same round every iteration (first: no state; steady: the primed one)
    state.ResumeTiming();
  }
  int64_t K = 0;
  for (const ColumnRange& c : r.weights) K += c.end - c.begin;
  state.counters["K"] = static_cast<double>(K);
  state.counters["GBps"] =
      benchmark::Counter(4.0 * kClients * r.D * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void bench_fedavg(benchmark::State& state) {
  const Round& r = resnet18_round();
  const AggregationInput in = input_of(r);
  std::unique_ptr<ServerRule> rule = make_server_rule("fedavg", Params("server.fedavg", fedavg_params()), "", Params());
  for (auto _ : state) {
    AggregationOutput out = rule->aggregate(in);
    benchmark::DoNotOptimize(out.update.data());
  }
}

void register_all() {
  const std::string prefix = "fedcpa/resnet18/n:" + std::to_string(kClients) + "/";
  for (const char* correlation : {"spearman", "pearson"})
    for (const bool steady : {false, true})
      benchmark::RegisterBenchmark((prefix + correlation + (steady ? "/steady" : "/first")).c_str(), bench_fedcpa,
                                   std::string(correlation), steady)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  benchmark::RegisterBenchmark(("fedavg/resnet18/n:" + std::to_string(kClients)).c_str(), bench_fedavg)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace
}  // namespace bastion

int main(int argc, char** argv) {
  bastion::set_num_threads(bastion::bench_threads());
  bastion::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
