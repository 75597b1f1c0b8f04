// bench_defenses: every registered server rule, one aggregation per iteration, at the model sizes the
// papers use and n in {10, 50, 100} uploads (bench/RESULTS.md, issue 5).
//
//   rule/<name>/<model>/n:<n>     the rule on an (n, D) upload matrix, f = floor((n - 3) / 4) (1, 11, 24:
//                                 the largest f for which Bulyan's n >= 4f + 3 holds, so every rule
//                                 assumes the same f), wrappers around the median
//   sgemm_gram/<model>/n:<n>      rung 0 for the distance-based rules: the Gram matrix X X^T of the
//                                 (n, P) parameter rows by gemm_cpu, the GEMM Krum's distances are made of
//
// <model>: lenet (Fashion-MNIST LeNet, D = 44,426), cnn-fedcap (3x32x32, D = 156,810) and resnet18
// (CIFAR-10 ResNet18, D = 11,183,562 incl. 9,600 BatchNorm buffer values); D and P come from the models.
// Counters: GBps = n * D * 4 bytes (the upload matrix, read at least once) per second; GFLOPS = 2 n^2 P
// (the Gram matrix) per second, for the rules built on pairwise distances (krum, multi-krum, bulyan) and
// for sgemm_gram. The rules that need server data get a stub that returns its input (train) or fixed
// scores (evaluate): their time here is the rule's own arithmetic, without the model training or the n
// evaluations on the server split, which cost what a client's training or an evaluation costs.
// Uploads: honest-looking rows (a common direction plus per-row noise), filled by a fast xorshift; the
// matrix is built once per (model, n) and shared by the rules, which run in registration order.
// Threads: a ThreadPool of BASTION_BENCH_THREADS (default 2) workers is the rules' in.pool, and gemm_cpu
// uses as many OpenMP threads.
//
// Run: bench_defenses --benchmark_min_time=0.5 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fl/base/thread_pool.h"
#include "fl/registry.h"
#include "kernels/cpu/gemm.h"
#include "nn/models.h"
#include "tensor/error.h"

namespace bastion {
namespace {

struct ModelSize {
  std::string name;
  int64_t D = 0, P = 0;
};

ModelSize model_size(const std::string& name, InputShape input) {
  const std::unique_ptr<Model> model = make_model(name, input, 10, 1);
  return {name, static_cast<int64_t>(model->flat_state().size()), model->num_parameters()};
}

int bench_threads() {
  const char* value = std::getenv("BASTION_BENCH_THREADS");
  return value != nullptr ? std::max(1, std::atoi(value)) : 2;
}

ThreadPool& pool() {
  static ThreadPool instance(bench_threads());
  return instance;
}

// The current upload matrix; rebuilt when (D, n) changes, so one ResNet18 matrix is alive at a time.
struct UploadCache {
  int64_t n = 0, D = 0;
  std::vector<float> data;
  std::vector<int64_t> samples, clients;
  std::vector<float> global;
};

const UploadCache& uploads(int64_t n, int64_t D) {
  static UploadCache cache;
  if (cache.n == n && cache.D == D) return cache;
  cache = UploadCache{};
  cache.n = n;
  cache.D = D;
  cache.data.resize(static_cast<size_t>(n * D));
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  auto uniform = [&state] {  // xorshift64: fast enough for 1e9 values, which is all it has to be
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<float>(state >> 40) * (1.0f / 16777216.0f) - 0.5f;
  };
  std::vector<float> direction(static_cast<size_t>(D));
  for (float& v : direction) v = 0.01f * uniform();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) cache.data[i * D + d] = direction[d] + 0.002f * uniform();
  cache.samples.assign(static_cast<size_t>(n), 600);
  for (int64_t i = 0; i < n; ++i) cache.clients.push_back(i);
  cache.global.assign(static_cast<size_t>(D), 0.0f);
  return cache;
}

class StubServerData final : public ServerData {
 public:
  int64_t size() const override { return 6000; }
  std::vector<float> train(std::span<const float> state, const ServerTrainSpec&) override {
    return {state.begin(), state.end()};
  }
  ServerEval evaluate(std::span<const float>) override { return {0.5, 1.0, 6000}; }
};

bool is_distance_based(const std::string& rule) { return rule == "krum" || rule == "multi-krum" || rule == "bulyan"; }

// residual-base fits a repeated-median line per coordinate, O(n^2) each: about 4e-8 s per n^2 D on the
// 2-core box (0.25 s at LeNet, n = 10), so it is skipped where one aggregation would pass a minute.
constexpr double kResidualBaseMaxN2D = 1.5e9;

void bench_rule(benchmark::State& state, const ServerRuleEntry* entry, ModelSize model, int64_t n) {
  if (entry->info.name == "residual-base" &&
      static_cast<double>(n * n) * static_cast<double>(model.D) > kResidualBaseMaxN2D) {
    state.SkipWithError("skipped: O(n^2 D) repeated-median fits, estimated over a minute per aggregation");
    return;
  }
  const UploadCache& u = uploads(n, model.D);
  std::unique_ptr<ServerRule> rule =
      make_server_rule(entry->info.name, Params("server." + entry->info.name, *entry->info.params),
                       entry->wrap ? "median" : "", Params("server.median", median_params()));
  StubServerData server;
  AggregationInput in;
  in.updates = u.data.data();
  in.n = n;
  in.D = model.D;
  in.num_parameters = model.P;
  in.num_samples = u.samples;
  in.clients = u.clients;
  in.round = 1;
  in.seed = 1;
  in.global = u.global;
  in.expected_malicious = (n - 3) / 4;
  in.server_data = &server;
  in.pool = &pool();
  try {
    for (auto _ : state) {
      AggregationOutput out = rule->aggregate(in);
      benchmark::DoNotOptimize(out.update.data());
      ++in.round;
    }
  } catch (const Error& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["GBps"] = benchmark::Counter(4.0 * n * model.D * iterations, benchmark::Counter::kIsRate);
  if (is_distance_based(entry->info.name))
    state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * n * model.P * iterations, benchmark::Counter::kIsRate);
}

void bench_sgemm_gram(benchmark::State& state, ModelSize model, int64_t n) {
  const UploadCache& u = uploads(n, model.D);
  std::vector<float> gram(static_cast<size_t>(n * n));
  for (auto _ : state) {
    gemm_cpu(false, true, n, n, model.P, 1.0f, u.data.data(), model.D, u.data.data(), model.D, 0.0f, gram.data(), n);
    benchmark::DoNotOptimize(gram.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * n * n * model.P * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void register_all() {
  const std::vector<ModelSize> models = {model_size("lenet", {1, 28, 28}), model_size("cnn-fedcap", {3, 32, 32}),
                                         model_size("resnet18", {3, 32, 32})};
  for (const ModelSize& model : models) {
    for (int64_t n : {10, 50, 100}) {
      const std::string suffix = "/" + model.name + "/n:" + std::to_string(n);
      benchmark::RegisterBenchmark(("sgemm_gram" + suffix).c_str(), bench_sgemm_gram, model, n)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      for (const ServerRuleEntry& entry : server_rule_registry())
        benchmark::RegisterBenchmark(("rule/" + entry.info.name + suffix).c_str(), bench_rule, &entry, model, n)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace bastion

int main(int argc, char** argv) {
  bastion::gemm_select_blas_core(argv);
  bastion::set_num_threads(bastion::bench_threads());
  bastion::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
