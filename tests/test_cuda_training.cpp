// The CUDA backend end to end: the runtime layer (caching allocator, copies), models moved to the
// device, training steps on the device against the same steps on the CPU, and `bastion train
// --device cuda`. Skipped without a device; the emulated build (-DBASTION_CUDA=EMULATE) runs them on
// CPU threads.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "cuda_test_support.h"
#include "nn/fedcr_model.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_agree;

// A few SGD steps with lr 0.05 on both devices. The devices sum in different orders (GEMM tiles,
// chunked im2col, per-channel block reductions), which moves each op's result by a few float32 ulps
// (~1e-6 relative); through two steps those differences stay far below 1e-4 of a weight's size, while
// a wrong kernel (a missed term, a wrong index) moves weights by the size of a learning-rate step.
constexpr double kStepTolerance = 1e-4;
constexpr double kWeightScaleFloor = 1e-2;  // weights near zero are compared on the scale of small weights
constexpr int kSteps = 2;

struct Batch {
  Tensor x;
  LabelTensor y;
};

Batch random_batch(int64_t n, InputShape shape, uint64_t seed) {
  Generator gen(seed);
  Batch batch{Tensor::randn({n, shape.channels, shape.height, shape.width}, gen), LabelTensor(n)};
  for (int64_t i = 0; i < n; ++i) batch.y[i] = static_cast<int32_t>(i % 10);
  return batch;
}

// Runs kSteps SGD steps (momentum 0.9) of `model` on its device; returns the losses.
std::vector<float> train_steps(Model& model, const Batch& batch) {
  Sgd sgd(model, {0.05f, 0.9f, 1e-4f, false});
  const Tensor x = batch.x.to(model.device());
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    Tensor loss = cross_entropy(model.forward(x), batch.y);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item());
  }
  return losses;
}

std::vector<float> host_state(Model& model) {
  const Tensor state = model.state_tensor().to(Device::CPU);
  return state.to_vector();
}

void expect_device_training_matches_cpu(const std::function<std::unique_ptr<Model>()>& build, InputShape shape,
                                        int64_t batch_size = 3) {
  const Batch batch = random_batch(batch_size, shape, 5);
  std::unique_ptr<Model> cpu = build(), gpu = build();
  gpu->to(Device::CUDA);
  const std::vector<float> cpu_losses = train_steps(*cpu, batch);
  const std::vector<float> gpu_losses = train_steps(*gpu, batch);
  expect_agree(gpu_losses, cpu_losses, kStepTolerance, "losses");
  expect_agree(host_state(*gpu), host_state(*cpu), kStepTolerance, "state after training", kWeightScaleFloor);
}

TEST(CudaRuntime, CachingAllocatorReusesFreedBlocks) {
  BASTION_REQUIRE_CUDA();
  void* first = cuda_allocate(1000);
  cuda_release(first);
  const CudaAllocatorStats before = cuda_allocator_stats();
  void* second = cuda_allocate(900);  // rounds to the same 1024-byte class
  const CudaAllocatorStats after = cuda_allocator_stats();
  EXPECT_EQ(second, first);
  EXPECT_EQ(after.reuses, before.reuses + 1);
  EXPECT_EQ(after.fresh_allocations, before.fresh_allocations);
  EXPECT_EQ(after.live_bytes, before.live_bytes + 1024);
  cuda_release(second);
}

// AddressSanitizer aborts on an allocation past its own limit before the emulator's cudaMalloc can fail.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// A device out of memory is one line naming the size asked for, never a crash, and the allocator still
// serves the next request. 1 PiB fits no GPU and no host's address space (the emulator's device memory).
TEST(CudaRuntime, AnAllocationPastTheDevicesMemoryIsAOneLineErrorAndTheAllocatorGoesOn) {
  BASTION_REQUIRE_CUDA();
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer aborts on a 1 PiB allocation before it can fail";
  const CudaAllocatorStats before = cuda_allocator_stats();
  testing::expect_error([] { cuda_allocate(size_t{1} << 50); },
                        {"CUDA out of memory", "1073741824.0 MiB asked for", "docs/cuda.md"});
  EXPECT_EQ(cuda_allocator_stats().live_bytes, before.live_bytes);
  const Tensor small = Tensor::full({3}, 1.5f).to(Device::CUDA);
  EXPECT_EQ(small.to_vector(), std::vector<float>(3, 1.5f));
}

TEST(CudaRuntime, TensorsCopyFillAndCloneOnTheDevice) {
  BASTION_REQUIRE_CUDA();
  const Tensor host = Tensor::from_vector({2, 3}, std::vector<float>{1, -2, 3, -4, 5, -6});
  const Tensor device = host.to(Device::CUDA);
  EXPECT_EQ(device.device(), Device::CUDA);
  EXPECT_EQ(device.clone().to_vector(), host.to_vector());
  const Tensor filled = Tensor::empty({7}, Device::CUDA);
  filled.fill(2.5f);
  EXPECT_EQ(filled.to_vector(), std::vector<float>(7, 2.5f));
  EXPECT_FLOAT_EQ(device.view({6}).slice_rows(4, 5).item(), 5.0f);
}

TEST(CudaRuntime, DeviceMismatchIsAClearError) {
  BASTION_REQUIRE_CUDA();
  const Tensor a = Tensor::zeros({4}), b = Tensor::zeros({4}, Device::CUDA);
  testing::expect_error([&] { add(a, b); }, {"different devices"});
}

TEST(CudaTraining, ModelMovesToTheDeviceAndBackUnchanged) {
  BASTION_REQUIRE_CUDA();
  std::unique_ptr<Model> model = make_model("lenet", {1, 28, 28}, 10, 3);
  const std::vector<float> before(model->flat_state().begin(), model->flat_state().end());
  model->to(Device::CUDA);
  EXPECT_EQ(model->parameters()[0].value.device(), Device::CUDA);
  EXPECT_EQ(model->parameters()[0].grad.device(), Device::CUDA);
  testing::expect_error([&] { model->flat_parameters(); }, {"to(Device::CPU)"});
  model->to(Device::CPU);
  const std::vector<float> after(model->flat_state().begin(), model->flat_state().end());
  EXPECT_EQ(after, before);
}

TEST(CudaTraining, LeNetStepsMatchTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_device_training_matches_cpu([] { return make_model("lenet", {1, 28, 28}, 10, 7); }, {1, 28, 28});
}

TEST(CudaTraining, ResNetWithBatchNormStepsMatchTheCpu) {
  BASTION_REQUIRE_CUDA();
  // Two 3x3 BasicBlock stages of width 4 cover conv, batch norm (running statistics included in the
  // compared state), the residual add, global average pooling and the linear head. Batch 12: the last
  // stage is 1x1, so its batch norm normalises over N values, and with N = 3 its backward amplified
  // float32 reorderings to 2e-4 (seen in the emulator), past the tolerance; with 12 they stay below it.
  expect_device_training_matches_cpu([] { return make_resnet(1, 4, {3, 8, 8}, 10, 9); }, {3, 8, 8}, 12);
}

// cnn-fedcr (nn/fedcr_model.h) at small widths: conv, pooling, linear layers and the Gaussian bottleneck
// (gaussian_sample, gaussian_kl, sample_mean) on the device. Models built with one seed draw the same eps
// (host draws, uploaded). Two SGD steps on the fedcr rule's loss shape, CE over the S stacked copies of the
// logits + 0.01 KL to N(0, 1), then one eval forward (the mean over S_test samples); kStepTolerance as above.
std::vector<float> fedcr_steps_and_eval(Model& model, const Batch& batch) {
  FedcrCnn* net = fedcr_network(model);
  const FedcrBottleneck& b = net->bottleneck();
  const int64_t N = batch.y.size();
  LabelTensor stacked(b.train_samples * N);  // row s*N + n has label y[n]
  for (int64_t i = 0; i < stacked.size(); ++i) stacked[i] = batch.y[i % N];
  const Device device = model.device();
  const Tensor x = batch.x.to(device), prior_mu = Tensor::zeros({N, b.latent}, device);
  const Tensor prior_sigma = Tensor::full({N, b.latent}, 1.0f).to(device);
  Sgd sgd(model, {0.05f, 0.9f, 1e-4f, false});
  model.train(true);
  std::vector<float> values;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    const Tensor logits = model.forward(x);
    Tensor loss = add(cross_entropy(logits, stacked),
                      scale(gaussian_kl(net->last_encoding(), prior_mu, prior_sigma, b.alpha), 0.01f));
    loss.backward();
    sgd.step();
    values.push_back(loss.item());
  }
  model.train(false);
  const std::vector<float> eval_logits = model.forward(x).to(Device::CPU).to_vector();
  values.insert(values.end(), eval_logits.begin(), eval_logits.end());
  return values;
}

TEST(CudaTraining, FedcrCnnStepsMatchTheCpu) {
  BASTION_REQUIRE_CUDA();
  const InputShape shape{1, 16, 16};  // 16 -> conv5 -> 12 -> pool -> 6 -> conv5 -> 2 -> pool -> 1
  const FedcrBottleneck bottleneck{7, 3, 5, 0.3f};
  const auto build = [&] { return make_fedcr_cnn("cnn-fedcr-7-3-5", shape, {3, 5, 24, 16}, 10, bottleneck, 13); };
  const Batch batch = random_batch(4, shape, 14);
  std::unique_ptr<Model> cpu = build(), gpu = build();
  gpu->to(Device::CUDA);
  const std::vector<float> cpu_values = fedcr_steps_and_eval(*cpu, batch);
  const std::vector<float> gpu_values = fedcr_steps_and_eval(*gpu, batch);
  expect_agree(gpu_values, cpu_values, kStepTolerance, "losses and eval logits", kWeightScaleFloor);
  expect_agree(host_state(*gpu), host_state(*cpu), kStepTolerance, "state after training", kWeightScaleFloor);
}

TEST(CudaTraining, StepsAfterTheFirstDoNotCallCudaMalloc) {
  BASTION_REQUIRE_CUDA();
  std::unique_ptr<Model> model = make_model("mlp", {1, 8, 8}, 10, 1);
  model->to(Device::CUDA);
  const Batch batch = random_batch(4, {1, 8, 8}, 2);
  Sgd sgd(*model, {0.1f, 0.9f, 0.0f, false});
  const Tensor x = batch.x.to(Device::CUDA);
  auto step = [&] {
    model->zero_grad();
    Tensor loss = cross_entropy(model->forward(x), batch.y);
    loss.backward();
    sgd.step();
  };
  step();
  const int64_t fresh = cuda_allocator_stats().fresh_allocations;
  step();
  step();
  EXPECT_EQ(cuda_allocator_stats().fresh_allocations, fresh);
}

double test_accuracy(const std::string& output) {
  std::smatch match;
  EXPECT_TRUE(std::regex_search(output, match, std::regex("test_acc=([0-9.]+)"))) << output;
  return match.size() > 1 ? std::stod(match[1]) : -1.0;
}

TEST(CudaTraining, CliTrainOnTheDeviceMatchesTheCpu) {
  BASTION_REQUIRE_CUDA();
  const std::string common = "train --dataset synthetic --model mlp --epochs 1 --batch 50 --limit-train 300 --seed 4";
  const testing::RunResult cpu = testing::run_bastion(common + " --device cpu");
  const testing::RunResult gpu = testing::run_bastion(common + " --device cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("device: "), std::string::npos) << gpu.output;
  // 500 test samples: one sample is 0.002; the runs differ only by float32 summation order.
  EXPECT_NEAR(test_accuracy(gpu.output), test_accuracy(cpu.output), 0.005);
}

TEST(CudaTraining, CliWithoutADeviceSaysWhy) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present (" << cuda_device_description() << ")";
  const testing::RunResult run = testing::run_bastion("train --dataset synthetic --model mlp --device cuda");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("--device cuda"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace bastion
