// bench_train_step: one SGD training step of a zoo model on the GPU, the end-to-end check of the CUDA
// backend against PyTorch eager (bench/reference/pytorch_cuda_train_step.py times the same step).
//
//   bench_train_step [model=resnet18] [batch=128] [steps=30] [fp32|tf32]
// One step = zero_grad; loss = cross_entropy(forward(x), y); loss.backward(); sgd.step() with
// SGD(lr 0.01, momentum 0.9, weight decay 5e-4) on CIFAR-shaped input (3x32x32, 10 classes), the same
// random batch every step. Timed with CUDA events around each step on the engine stream (host-side
// autograd overhead included, as in eager PyTorch), after 5 warm-up steps; prints the median and the
// minimum step time, samples/s, and cudaMalloc calls during the timed steps (0 = the caching allocator
// serves the whole loop).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autograd/ops.h"
#include "bench/cuda/bench_cuda_support.h"
#include "kernels/cuda/gemm.h"
#include "nn/models.h"
#include "nn/optim.h"

using namespace bastion;

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "resnet18";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 128;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 30;
  const bool tf32 = argc > 4 && std::string(argv[4]) == "tf32";
  try {
    bench::print_device_banner();
    gemm_cuda_set_precision(tf32 ? GemmPrecision::TF32 : GemmPrecision::FP32);
    const InputShape input{3, 32, 32};
    std::unique_ptr<Model> model = make_model(name, input, 10, 1);
    model->to(Device::CUDA);
    Sgd sgd(*model, {0.01f, 0.9f, 5e-4f, false});
    Generator gen(2);
    const Tensor x = Tensor::randn({batch, input.channels, input.height, input.width}, gen).to(Device::CUDA);
    LabelTensor y(batch);
    for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(gen.below(10));
    Tensor loss;
    auto step = [&] {
      model->zero_grad();
      loss = cross_entropy(model->forward(x), y);
      loss.backward();
      sgd.step();
    };
    for (int i = 0; i < 5; ++i) step();
    const int64_t fresh_before = cuda_allocator_stats().fresh_allocations;
    const bench::Timing t = bench::time_with_events(step, cuda_stream(), 0, steps);
    std::printf(
        "train_step %s batch %lld %s: median %.3f ms  min %.3f ms  %.0f samples/s  cudaMalloc calls %lld  "
        "final loss %.4f\n",
        name.c_str(), static_cast<long long>(batch), tf32 ? "tf32" : "fp32", t.median_ms, t.min_ms,
        batch / (t.median_ms * 1e-3), static_cast<long long>(cuda_allocator_stats().fresh_allocations - fresh_before),
        loss.item());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
