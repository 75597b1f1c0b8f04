// libFuzzer target: model names (nn/models.h make_model, with cnn-fedcr-<d_Z>-<S_train>-<S_test> parsed
// from the name: issue 42's exit-139 crash came from this parser without bounds).
// Input: byte 0 picks the input shape from the datasets' shapes and one too small for the CNNs, byte 1 is
// the class count, the rest is the name. bastion::Error is a correct answer; anything else is a bug.
// Properties of a model that builds: its class count is the one asked for, it has parameters, and in
// eval mode a batch of one sample gives one row of finite logits.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "nn/fedcr_model.h"
#include "nn/models.h"
#include "tensor/error.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr bastion::InputShape kShapes[] = {{1, 28, 28}, {3, 32, 32}, {1, 12, 12}, {3, 8, 8}, {1, 6, 6}};

// The resnets come from fixed code, not from the name, and take long to build under ASan: skipped so the
// fuzzer's time goes to the parser. A cnn-fedcr latent above this builds a fc3 of up to 0.5 GB (a valid
// model, but past the fuzzer's memory limit once ASan's shadow is counted): parsed, not built.
constexpr int64_t kMaxBuiltLatent = 4096;
// A forward of S samples x d_Z latent: kept small so every input runs in milliseconds.
constexpr int64_t kMaxForwardNoise = 1 << 16;

bool skipped_for_speed(const std::string& name) { return name == "resnet10" || name == "resnet18"; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bastion::InputShape shape = kShapes[data[0] % (sizeof kShapes / sizeof kShapes[0])];
  const int64_t classes = data[1];
  const std::string name(reinterpret_cast<const char*>(data + 2), size - 2);
  if (skipped_for_speed(name)) return 0;
  int64_t forward_noise = 0;
  try {
    if (const auto bottleneck = bastion::parse_fedcr_name(name)) {
      FUZZ_EXPECT(bottleneck->latent >= 1 && bottleneck->train_samples >= 1 && bottleneck->test_samples >= 1);
      if (bottleneck->latent > kMaxBuiltLatent) return 0;
      forward_noise = bottleneck->latent * bottleneck->test_samples;
    }
  } catch (const bastion::Error&) {
    return 0;
  }
  std::unique_ptr<bastion::Model> model;
  try {
    model = bastion::make_model(name, shape, classes, 1);
  } catch (const bastion::Error&) {
    return 0;
  }
  FUZZ_EXPECT(model->num_classes() == classes && model->num_parameters() > 0);
  if (forward_noise > kMaxForwardNoise) return 0;
  model->train(false);
  const bastion::Tensor logits =
      model->forward(bastion::Tensor::full({1, shape.channels, shape.height, shape.width}, 0.5f));
  FUZZ_EXPECT(logits.rank() == 2 && logits.size(0) == 1 && logits.size(1) == classes);
  const float* values = logits.data();
  for (int64_t c = 0; c < classes; ++c) FUZZ_EXPECT(std::isfinite(values[c]));
  return 0;
}
