// bench_train: one full SGD training step of a zoo model at batch 64 (cnn-fedfsa: 48, FedFSA's batch),
// the unit of all FL client work. The models the seed papers train on CPU: mlp (pFedSAM), lenet,
// cnn-fedcap (FedCAP), cnn-fedfsa 1x28x28 (FedFSA), cnn-spmc (SPMC), cnn-fedrep (pFedSAM's CIFAR-10 presets),
// resnet18 and resnet10 (3 steps each).
//
//   train_step/<model>/<C>x<H>x<W>/threads:T
//   fedfsa_step/{plain,sam}/threads:T   FedFSA Table 1's local step on cnn-fedfsa (below): the SAM / plain
//                          ratio of cpu_time is issue 38's "SAM step <= 2.1x a plain step"
// One step = model->zero_grad(); loss = cross_entropy(model->forward(x), y); loss.backward(); sgd.step()
// with SGD(lr 0.01, momentum 0.9), exactly as a client trains (tests/test_nn.cpp). Inputs are N(0, 1)
// and labels uniform in [0, 10) from a fixed Generator; the same batch is reused every step.
// bench/reference/pytorch_train_step.py times the same steps in PyTorch for the side-by-side table.
//
// Counters (per repetition; bench/summarize.py takes medians):
//   samples_per_s          batch / wall time of a step
//   forward_ms, backward_ms, step_ms   wall time of the three phases of a step (manual timers; zero_grad
//                          is in forward_ms), to see where a step goes
//   gflop_per_step         linear and conv2d flops of one step, forward and backward (autograd/flops.h:
//                          2 per multiply-add; element-wise ops not counted), counted over the timed steps
//   gflop_per_s            gflop_per_step / wall time of a step: divide by bench_peak's FP32 peak for "% of peak"
//   fresh_allocs_per_step  storage-pool fresh allocations during the timed steps / steps, after
//                          kWarmupSteps untimed steps: 0 means the hot loop never calls malloc for tensors
//   final_loss             the last loss, to show the run stayed finite (denormals or NaNs change timings)
// main() calls gemm_select_blas_core(argv) first, as the bastion CLI does (OPENBLAS_CORETYPE overrides).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>

#include "autograd/flops.h"
#include "autograd/ops.h"
#include "fl/base/thread_pool.h"
#include "fl/evaluate.h"
#include "kernels/cpu/gemm.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "tensor/tensor.h"

using namespace bastion;

namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kFedfsaBatch = 48;  // FedFSA's FMNIST batch size (IMPLEMENTATION-FACTS §3)
constexpr int64_t kClasses = 10;
constexpr int kWarmupSteps = 3;
constexpr int kFedfsaBatches = 64;  // fedfsa_step: random batches taken in turn

struct TrainCase {
  const char* model;
  InputShape input;
  int64_t batch;
  int iterations;  // 0: Google Benchmark decides; ResNet18 is timed over a fixed few steps (seconds each)
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
  Tensor x = Tensor::randn({c.batch, c.input.channels, c.input.height, c.input.width}, gen);
  LabelTensor y(c.batch);
  for (int64_t i = 0; i < c.batch; ++i) y[i] = static_cast<int32_t>(gen.below(kClasses));

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
  const int64_t flops_before = thread_flops();
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
      benchmark::Counter(static_cast<double>(c.batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["forward_ms"] = forward_ms / steps;
  state.counters["backward_ms"] = backward_ms / steps;
  state.counters["step_ms"] = step_ms / steps;
  const double gflop_per_step = static_cast<double>(thread_flops() - flops_before) / steps / 1e9;
  state.counters["gflop_per_step"] = gflop_per_step;
  state.counters["gflop_per_s"] = benchmark::Counter(gflop_per_step, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fresh_allocs_per_step"] =
      static_cast<double>(after.fresh_allocations - before.fresh_allocations) / steps;
  state.counters["final_loss"] = loss_value;
}

// fedfsa_step/plain and fedfsa_step/sam: one local step of fedfsa-table1's rows on cnn-fedfsa at batch 48,
// with the preset's schedule (SGD lr 0.1, no momentum, the gradient's global norm clipped to 10).
//   plain: zero_grad, forward, backward, clip, SGD step (FedAvg-FT's step);
//   sam:   FedFSA's Sam::step (fl/clients/sam_family.cpp): radius 0.1, 0.2 on the two Top-C tensors
//          (fc1.weight and fc2.weight, what the code's sensitivity picks on FMNIST), alpha 0.1, the linear term
//          (1 - alpha) m of a round after the first (P values), clipped before the ascent and after it.
// 64 random batches in turn. Under load read cpu_time: one thread does all the work.
void bm_fedfsa_step(benchmark::State& state, bool sam_step, int threads) {
  constexpr float kLr = 0.1f, kRho = 0.1f, kRhoLarger = 0.2f, kAlpha = 0.1f;
  constexpr double kClip = 10.0;
  set_num_threads(threads);
  const InputShape input{1, 28, 28};
  auto model = make_model("cnn-fedfsa", input, kClasses, /*seed=*/1);
  model->train(true);
  Sgd sgd(*model, SgdOptions{kLr, 0.0f, 0.0f, false});
  Generator gen(2);
  // Batches in turn, not one: on a single batch the plain step drives the loss to ~1e-3 within the
  // warm-up and timing, and the SAM step does not, so the two would run on gradients of different scales.
  std::vector<Tensor> xs;
  std::vector<LabelTensor> ys;
  for (int b = 0; b < kFedfsaBatches; ++b) {
    xs.push_back(Tensor::randn({kFedfsaBatch, input.channels, input.height, input.width}, gen));
    ys.emplace_back(kFedfsaBatch);
    for (int64_t i = 0; i < kFedfsaBatch; ++i) ys.back()[i] = static_cast<int32_t>(gen.below(kClasses));
  }
  size_t batch = 0;
  std::vector<float> linear(static_cast<size_t>(model->num_parameters()));
  for (float& v : linear) v = 1e-3f * static_cast<float>(gen.normal());
  SamOptions options;
  options.rho = kRho;
  options.clip_before = options.clip_after = kClip;
  options.ascent_scale = kAlpha;
  options.linear_term = linear;
  for (const ParameterView& p : model->parameters())
    options.tensor_rho.push_back(p.name == "fc1.weight" || p.name == "fc2.weight" ? kRhoLarger : kRho);
  Sam sam(*model, sgd, options);

  float loss_value = 0.0f;
  auto loss_and_backward = [&] {
    model->zero_grad();
    Tensor loss = cross_entropy(model->forward(xs[batch]), ys[batch]);
    loss.backward();
    return loss.item();
  };
  auto step = [&] {
    if (sam_step) {
      loss_value = sam.step(loss_and_backward);
    } else {
      loss_value = loss_and_backward();
      clip_gradient_norm(*model, kClip);
      sgd.step();
    }
    batch = (batch + 1) % xs.size();
  };
  for (int i = 0; i < kWarmupSteps; ++i) step();
  for (auto _ : state) step();
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(kFedfsaBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["final_loss"] = loss_value;
}

// evaluate/MODEL/CxHxW/IMAGES/threads:T: the global-model evaluation of every FL round, done as
// SeedRun::evaluate_global does it: chunks of `chunk` images (eval.batch) as tasks of a T-worker ThreadPool,
// each worker with its own model replica and single-threaded kernels, each chunk through fl/evaluate.h's
// evaluate() (no graph). LeNet on a test set the size of Fashion-MNIST's (10,000 random 28x28 images,
// chunks of 1000); ResNet18 on 512 random 32x32x3 images in chunks of 128 (its images/s beside PyTorch's
// `pytorch_train_step.py --eval`); cnn-fedfsa on 2,560 images in chunks of 128, FedFSA Table 1's eval.batch
// (its personalised evaluation judges another model per client, so its weights come from memory where
// this one model's stay in cache). The wall time of one iteration is the time of one evaluation.
struct EvalCase {
  const char* model;
  InputShape input;
  int64_t images, chunk;
};

Dataset random_images(const InputShape& input, int64_t images) {
  Dataset data;
  data.name = "synthetic";
  data.channels = input.channels;
  data.height = input.height;
  data.width = input.width;
  data.num_classes = kClasses;
  data.mean.assign(static_cast<size_t>(input.channels), 0.0f);
  data.std.assign(static_cast<size_t>(input.channels), 1.0f);
  Generator gen(3);
  data.pixels.resize(static_cast<size_t>(images * data.sample_numel()));
  for (uint8_t& p : data.pixels) p = static_cast<uint8_t>(gen.below(256));
  data.labels.resize(static_cast<size_t>(images));
  for (int32_t& label : data.labels) label = static_cast<int32_t>(gen.below(kClasses));
  return data;
}

void bm_evaluate(benchmark::State& state, EvalCase c, int threads) {
  set_num_threads(1);  // threads = 1 runs the tasks inline on this thread: single-threaded kernels too
  const Dataset data = random_images(c.input, c.images);
  std::vector<std::unique_ptr<Model>> replicas;
  for (int w = 0; w < threads; ++w) replicas.push_back(make_model(c.model, c.input, kClasses, /*seed=*/1));
  ThreadPool pool(threads);
  const int64_t chunks = c.images / c.chunk;
  std::vector<int64_t> correct(static_cast<size_t>(chunks));
  auto evaluate_all = [&] {
    pool.run(chunks, [&](int64_t k, int worker) {
      std::vector<int64_t> part(static_cast<size_t>(c.chunk));
      for (int64_t i = 0; i < c.chunk; ++i) part[i] = k * c.chunk + i;
      correct[k] = evaluate(*replicas[worker], data, c.chunk, part).correct;
    });
  };
  evaluate_all();  // warm-up: the storage pool's first allocations
  for (auto _ : state) evaluate_all();
  int64_t total = 0;
  for (int64_t n : correct) total += n;
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(c.images), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["accuracy"] = static_cast<double>(total) / static_cast<double>(c.images);
}

}  // namespace

int main(int argc, char** argv) {
  const char* blas_core = gemm_select_blas_core(argv);  // may re-execute once with OPENBLAS_CORETYPE set
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("openblas_core", blas_core);
  const TrainCase cases[] = {
      {"mlp", {1, 28, 28}, kBatch, 0},
      {"lenet", {1, 28, 28}, kBatch, 0},
      {"lenet", {3, 32, 32}, kBatch, 0},
      {"cnn-fedcap", {3, 32, 32}, kBatch, 0},
      {"cnn-fedfsa", {1, 28, 28}, kFedfsaBatch, 0},
      {"cnn-spmc", {3, 32, 32}, kBatch, 0},
      {"cnn-fedrep", {3, 32, 32}, kBatch, 0},
      {"resnet18", {3, 32, 32}, kBatch, 3},
      {"resnet10", {3, 32, 32}, kBatch, 3},
  };
  for (const TrainCase& c : cases) {
    for (int threads : {1, 2}) {
      const std::string name = std::string("train_step/") + c.model + "/" + std::to_string(c.input.channels) + "x" +
                               std::to_string(c.input.height) + "x" + std::to_string(c.input.width) +
                               "/threads:" + std::to_string(threads);
      auto* bench = benchmark::RegisterBenchmark(name.c_str(), bm_train_step, c, threads)->UseRealTime();
      if (c.iterations > 0) bench->Iterations(c.iterations);
    }
  }
  for (bool sam_step : {false, true})
    for (int threads : {1, 2}) {
      const std::string name =
          std::string("fedfsa_step/") + (sam_step ? "sam" : "plain") + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), bm_fedfsa_step, sam_step, threads)->UseRealTime();
    }
  const EvalCase evaluations[] = {{"lenet", {1, 28, 28}, 10000, 1000},
                                  {"resnet18", {3, 32, 32}, 512, 128},
                                  {"resnet10", {3, 32, 32}, 512, 128},
                                  {"cnn-fedfsa", {1, 28, 28}, 2560, 128}};
  for (const EvalCase& c : evaluations) {
    for (int threads : {1, 2}) {
      const std::string name = std::string("evaluate/") + c.model + "/" + std::to_string(c.input.channels) + "x" +
                               std::to_string(c.input.height) + "x" + std::to_string(c.input.width) + "/" +
                               std::to_string(c.images) + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), bm_evaluate, c, threads)->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
