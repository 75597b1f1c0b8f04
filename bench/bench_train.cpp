// bench_train: one full SGD training step of a zoo model at batch 64, the unit of all FL client work.
//
//   train_step/<model>/<C>x<H>x<W>/threads:T
// One step = model->zero_grad(); loss = cross_entropy(model->forward(x), y); loss.backward(); sgd.step()
// with SGD(lr 0.01, momentum 0.9), exactly as a client trains (tests/test_nn.cpp). Inputs are N(0, 1)
// and labels uniform in [0, 10) from a fixed Generator; the same batch is reused every step.
// bench/reference/pytorch_train_step.py times the same steps in PyTorch for the side-by-side table.
//
// Counters (per repetition; bench/summarize.py takes medians):
//   samples_per_s          64 / wall time of a step
//   forward_ms, backward_ms, step_ms   wall time of the three phases of a step (manual timers; zero_grad
//                          is counted in step_ms), to see where a step goes
//   fresh_allocs_per_step  storage-pool fresh allocations during the timed steps / steps, after
//                          kWarmupSteps untimed steps: 0 means the hot loop never calls malloc for tensors
//   final_loss             the last loss, to show the run stayed finite (denormals or NaNs change timings)
// main() calls gemm_select_blas_core(argv) first, as the bastion CLI does (OPENBLAS_CORETYPE overrides).
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "autograd/ops.h"
#include "kernels/cpu/gemm.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "tensor/tensor.h"

using namespace bastion;

namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kClasses = 10;
constexpr int kWarmupSteps = 3;

struct TrainCase {
  const char* model;
  InputShape input;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void bm_train_step(benchmark::State& state, TrainCase c, int threads) {
  set_num_threads(threads);
  auto model = make_model(c.model, c.input, kClasses, /*seed=*/1);
  model->train(true);
  Sgd sgd(*model, SgdOptions{0.01f, 0.9f, 0.0f, false});
  Generator gen(2);
  Tensor x = Tensor::randn({kBatch, c.input.channels, c.input.height, c.input.width}, gen);
  LabelTensor y(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) y[i] = static_cast<int32_t>(gen.below(kClasses));

  float loss_value = 0.0f;
  auto step = [&] {
    model->zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    sgd.step();
    loss_value = loss.item();
  };
  for (int i = 0; i < kWarmupSteps; ++i) step();

  const StoragePoolStats before = storage_pool_stats();
  double forward_ms = 0.0, backward_ms = 0.0, step_ms = 0.0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    model->zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    forward_ms += ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    loss.backward();
    backward_ms += ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    sgd.step();
    step_ms += ms_since(t0);
    loss_value = loss.item();
  }
  const StoragePoolStats after = storage_pool_stats();

  const double steps = static_cast<double>(state.iterations());
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(kBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["forward_ms"] = forward_ms / steps;
  state.counters["backward_ms"] = backward_ms / steps;
  state.counters["step_ms"] = step_ms / steps;
  state.counters["fresh_allocs_per_step"] =
      static_cast<double>(after.fresh_allocations - before.fresh_allocations) / steps;
  state.counters["final_loss"] = loss_value;
}

}  // namespace

int main(int argc, char** argv) {
  const char* blas_core = gemm_select_blas_core(argv);  // may re-execute once with OPENBLAS_CORETYPE set
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("openblas_core", blas_core);
  const TrainCase cases[] = {
      {"mlp", {1, 28, 28}},
      {"lenet", {1, 28, 28}},
      {"lenet", {3, 32, 32}},
      {"cnn-fedcap", {3, 32, 32}},
  };
  for (const TrainCase& c : cases) {
    for (int threads : {1, 2}) {
      const std::string name = std::string("train_step/") + c.model + "/" + std::to_string(c.input.channels) + "x" +
                               std::to_string(c.input.height) + "x" + std::to_string(c.input.width) +
                               "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), bm_train_step, c, threads)->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
