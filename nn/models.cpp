#include "nn/models.h"

#include "nn/fedcr_model.h"
#include "nn/layers.h"

namespace bastion {

namespace {

// Spatial size after a k5 valid conv and a 2x2 max-pool.
int64_t conv5_pool2(int64_t size) { return (size - 4) / 2; }

class Mlp : public Module {  // flatten -> fc1 -> ReLU -> fc2 -> ReLU -> fc3 (FedAvg's "2NN")
 public:
  Mlp(int64_t in, int64_t hidden, int64_t classes, Generator& gen) {
    fc1 = register_module("fc1", std::make_shared<Linear>(in, hidden, gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(hidden, hidden, gen));
    fc3 = register_module("fc3", std::make_shared<Linear>(hidden, classes, gen));
  }
  Tensor forward(const Tensor& x) override { return fc3->forward(relu(fc2->forward(relu(fc1->forward(flatten(x)))))); }
  std::shared_ptr<Linear> fc1, fc2, fc3;
};

// conv1 -> ReLU -> pool -> conv2 -> ReLU -> pool -> flatten -> fc1 -> ReLU -> fc2 -> ReLU -> fc3:
// LeNet-5 (6, 16, 120, 84), FedRep's CNNCifar (64, 64, 120, 64) and FedFSA's CNNs (4/12 or 64/64 or
// 32/32 channels, 1024-wide FCs) share this shape and these names.
struct TwoConvThreeFcWidths {
  int64_t conv1, conv2, fc1, fc2;
};

class TwoConvThreeFc : public Module {
 public:
  TwoConvThreeFc(InputShape in, TwoConvThreeFcWidths w, int64_t classes, Generator& gen) {
    const int64_t h = conv5_pool2(conv5_pool2(in.height)), wd = conv5_pool2(conv5_pool2(in.width));
    conv1 = register_module("conv1", std::make_shared<Conv2d>(in.channels, w.conv1, 5, gen));
    conv2 = register_module("conv2", std::make_shared<Conv2d>(w.conv1, w.conv2, 5, gen));
    fc1 = register_module("fc1", std::make_shared<Linear>(w.conv2 * h * wd, w.fc1, gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(w.fc1, w.fc2, gen));
    fc3 = register_module("fc3", std::make_shared<Linear>(w.fc2, classes, gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d_of_relu(conv1->forward(x), 2);
    h = max_pool2d_of_relu(conv2->forward(h), 2);
    h = relu(fc1->forward(flatten(h)));
    return fc3->forward(relu(fc2->forward(h)));
  }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Linear> fc1, fc2, fc3;
};

// SPMC's simple_cnn: conv1 6, conv2 16 (k5, ReLU, pool) -> fc1 120 -> ReLU -> fc2 84 -> ReLU -> l1 84 -> ReLU
// -> l2 256 (no activation) -> cls.
class SpmcCnn : public Module {
 public:
  SpmcCnn(InputShape in, int64_t classes, Generator& gen) {
    const int64_t h = conv5_pool2(conv5_pool2(in.height)), w = conv5_pool2(conv5_pool2(in.width));
    conv1 = register_module("conv1", std::make_shared<Conv2d>(in.channels, 6, 5, gen));
    conv2 = register_module("conv2", std::make_shared<Conv2d>(6, 16, 5, gen));
    fc1 = register_module("fc1", std::make_shared<Linear>(16 * h * w, 120, gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(120, 84, gen));
    l1 = register_module("l1", std::make_shared<Linear>(84, 84, gen));
    l2 = register_module("l2", std::make_shared<Linear>(84, 256, gen));
    cls = register_module("cls", std::make_shared<Linear>(256, classes, gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d_of_relu(conv1->forward(x), 2);
    h = max_pool2d_of_relu(conv2->forward(h), 2);
    h = relu(fc2->forward(relu(fc1->forward(flatten(h)))));
    return cls->forward(l2->forward(relu(l1->forward(h))));
  }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Linear> fc1, fc2, l1, l2, cls;
};

// PFLlib's FedAvgCNN as FedCAP uses it: conv1 = Sequential(conv, ReLU, pool), conv2 likewise,
// fc1 = Sequential(Linear, ReLU), fc (head).
class FedcapCnn : public Module {
 public:
  FedcapCnn(InputShape in, int64_t c1, int64_t c2, int64_t hidden, int64_t classes, Generator& gen) {
    const int64_t h = conv5_pool2(conv5_pool2(in.height)), w = conv5_pool2(conv5_pool2(in.width));
    conv1 = register_module("conv1", block(in.channels, c1, gen));
    conv2 = register_module("conv2", block(c1, c2, gen));
    fc1 = register_module("fc1", std::make_shared<Sequential>());
    fc1->add(std::make_shared<Linear>(c2 * h * w, hidden, gen)).add(std::make_shared<ReLU>());
    fc = register_module("fc", std::make_shared<Linear>(hidden, classes, gen));
  }
  Tensor forward(const Tensor& x) override {
    return fc->forward(fc1->forward(flatten(conv2->forward(conv1->forward(x)))));
  }

 private:
  static std::shared_ptr<Sequential> block(int64_t in, int64_t out, Generator& gen) {
    auto s = std::make_shared<Sequential>();
    // Pool before ReLU: the same values and gradients as PFLlib's conv, ReLU, pool (max_pool2d_of_relu in
    // nn/layers.h says why), with a 4x smaller ReLU; parameter-free layers, so the indices still line up.
    s->add(std::make_shared<Conv2d>(in, out, 5, gen))
        .add(std::make_shared<MaxPool2d>(2, 2))
        .add(std::make_shared<ReLU>());
    return s;
  }
  std::shared_ptr<Sequential> conv1, conv2, fc1;
  std::shared_ptr<Linear> fc;
};

// BapFL's FashionmnistNet/MnistNet: conv = Sequential(conv 20, ReLU, pool, conv 50, ReLU, pool, Flatten),
// clf = Sequential(Linear 500, Linear classes) with NO activation between the two linears.
class BapflCnn : public Module {
 public:
  BapflCnn(InputShape in, int64_t classes, Generator& gen) {
    const int64_t h = conv5_pool2(conv5_pool2(in.height)), w = conv5_pool2(conv5_pool2(in.width));
    conv = register_module("conv", std::make_shared<Sequential>());
    // Each pool before its ReLU, as in FedcapCnn::block (same values and gradients, smaller ReLU).
    conv->add(std::make_shared<Conv2d>(in.channels, 20, 5, gen)).add(std::make_shared<MaxPool2d>(2, 2));
    conv->add(std::make_shared<ReLU>()).add(std::make_shared<Conv2d>(20, 50, 5, gen));
    conv->add(std::make_shared<MaxPool2d>(2, 2)).add(std::make_shared<ReLU>()).add(std::make_shared<Flatten>());
    clf = register_module("clf", std::make_shared<Sequential>());
    clf->add(std::make_shared<Linear>(50 * h * w, 500, gen)).add(std::make_shared<Linear>(500, classes, gen));
  }
  Tensor forward(const Tensor& x) override { return clf->forward(conv->forward(x)); }
  std::shared_ptr<Sequential> conv, clf;
};

// CIFAR ResNet (torchvision names): 3x3 stride-1 stem without max-pool, four stages of BasicBlocks
// (64, 128, 256, 512; strides 1, 2, 2, 2), global average pool, fc.
class ResNet : public Module {
 public:
  ResNet(InputShape in, int blocks_per_stage, int64_t base_width, int64_t classes, Generator& gen) {
    const ConvInit init = ConvInit::KaimingNormalFanOut;
    conv1 = register_module("conv1", std::make_shared<Conv2d>(in.channels, base_width, 3, gen, 1, 1, false, init));
    bn1 = register_module("bn1", std::make_shared<BatchNorm>(base_width));
    int64_t channels = base_width;
    const int64_t widths[4] = {base_width, 2 * base_width, 4 * base_width, 8 * base_width};
    for (int stage = 0; stage < 4; ++stage) {
      auto layer = std::make_shared<Sequential>();
      for (int b = 0; b < blocks_per_stage; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        layer->add(std::make_shared<BasicBlock>(channels, widths[stage], stride, gen));
        channels = widths[stage];
      }
      layers[stage] = register_module("layer" + std::to_string(stage + 1), layer);
    }
    fc = register_module("fc", std::make_shared<Linear>(8 * base_width, classes, gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn1->forward(conv1->forward(x)));
    for (auto& layer : layers) h = layer->forward(h);
    return fc->forward(flatten(global_avg_pool2d(h)));
  }
  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm> bn1;
  std::shared_ptr<Sequential> layers[4];
  std::shared_ptr<Linear> fc;
};

void check_conv_input(const std::string& name, InputShape in, int64_t min_size) {
  BASTION_CHECK(in.height >= min_size && in.width >= min_size, "model ", name, " needs inputs of at least ", min_size,
                "x", min_size, ", got ", in.height, "x", in.width);
}

std::unique_ptr<Model> wrap(const std::string& name, std::shared_ptr<Module> root, const std::string& head,
                            InputShape in, int64_t classes) {
  return std::make_unique<Model>(name, std::move(root), head, in, classes);
}

TwoConvThreeFcWidths fedfsa_widths(InputShape in) {
  if (in.channels == 1) return {4, 12, 1024, 1024};  // FMNIST_CNNs
  if (in.height >= 64) return {32, 32, 512, 1024};   // tiny_CNNs
  return {64, 64, 1024, 1024};                       // cifar10_CNNs / cifar100_CNNs
}

}  // namespace

const std::vector<ModelInfo>& model_catalog() {
  static const std::vector<ModelInfo> catalog = {
      {"mlp", "784-200-200-C MLP with ReLU (FedAvg 2NN); head fc3"},
      {"lenet", "LeNet-5: conv 6, conv 16 (k5, max-pool 2) + FC 120-84-C; 1x28x28 or 3x32x32; head fc3"},
      {"cnn-fedrep", "FedRep CNNCifar: conv 64, conv 64 (k5) + FC 120-64-C; head fc3"},
      {"cnn-fedfsa",
       "FedFSA CNNs: conv 4/12 (1 channel), 64/64 (32x32) or 32/32 (64x64) + FC 1024-1024-C (512-1024 for 64x64); head "
       "fc3"},
      {"cnn-fedcr",
       "FedCR stochastic encoder: the cnn-fedfsa trunk, fc3 -> 2 d_Z (mu, softplus sigma), z = mu + sigma eps, "
       "fc4 d_Z -> C; d_Z 512, 18 samples (train and test); cnn-fedcr-<d_Z>-<S_train>-<S_test> sets them; head fc4"},
      {"cnn-fedcap",
       "FedCAP (PFLlib) CNN: conv 32, conv 64 + FC 64 + C (3 channels), EMNIST variant conv 16, 32 + FC 128 (1 "
       "channel); head fc"},
      {"cnn-spmc", "SPMC simple_cnn: LeNet trunk + l1 84-84 + l2 84-256 + cls; head cls"},
      {"cnn-bapfl", "BapFL MNIST/FMNIST CNN: conv 20, conv 50 + FC 500 + C (no ReLU between FCs); head clf.1"},
      {"resnet10", "CIFAR ResNet10 (BasicBlock [1,1,1,1], 3x3 stem, no max-pool, BatchNorm); head fc"},
      {"resnet18", "CIFAR ResNet18 (BasicBlock [2,2,2,2], 3x3 stem, no max-pool, BatchNorm); head fc"},
  };
  return catalog;
}

std::unique_ptr<Model> make_resnet(int blocks_per_stage, int64_t base_width, InputShape in, int64_t classes,
                                   uint64_t seed) {
  BASTION_CHECK(blocks_per_stage >= 1 && base_width >= 1, "resnet: blocks per stage and width must be positive");
  Generator gen(seed);
  const std::string name = blocks_per_stage == 1 && base_width == 64   ? "resnet10"
                           : blocks_per_stage == 2 && base_width == 64 ? "resnet18"
                                                                       : "resnet-custom";
  return wrap(name, std::make_shared<ResNet>(in, blocks_per_stage, base_width, classes, gen), "fc", in, classes);
}

std::unique_ptr<Model> make_model(const std::string& name, InputShape in, int64_t classes, uint64_t seed) {
  BASTION_CHECK(classes >= 2, "model ", name, ": num_classes must be at least 2, got ", classes);
  BASTION_CHECK(in.channels >= 1, "model ", name, ": input needs at least one channel");
  Generator gen(seed);
  if (name == "mlp")
    return wrap(name, std::make_shared<Mlp>(in.channels * in.height * in.width, 200, classes, gen), "fc3", in, classes);
  if (name == "lenet" || name == "cnn-fedrep" || name == "cnn-fedfsa") {
    check_conv_input(name, in, 12);
    const TwoConvThreeFcWidths w = name == "lenet"        ? TwoConvThreeFcWidths{6, 16, 120, 84}
                                   : name == "cnn-fedrep" ? TwoConvThreeFcWidths{64, 64, 120, 64}
                                                          : fedfsa_widths(in);
    return wrap(name, std::make_shared<TwoConvThreeFc>(in, w, classes, gen), "fc3", in, classes);
  }
  if (const std::optional<FedcrBottleneck> bottleneck = parse_fedcr_name(name)) {
    check_conv_input(name, in, 12);
    const TwoConvThreeFcWidths w = fedfsa_widths(in);
    return make_fedcr_cnn(name, in, {w.conv1, w.conv2, w.fc1, w.fc2}, classes, *bottleneck, seed);
  }
  if (name == "cnn-spmc") {
    check_conv_input(name, in, 12);
    return wrap(name, std::make_shared<SpmcCnn>(in, classes, gen), "cls", in, classes);
  }
  if (name == "cnn-fedcap") {
    check_conv_input(name, in, 12);
    auto root = in.channels == 1 ? std::make_shared<FedcapCnn>(in, 16, 32, 128, classes, gen)
                                 : std::make_shared<FedcapCnn>(in, 32, 64, 64, classes, gen);
    return wrap(name, root, "fc", in, classes);
  }
  if (name == "cnn-bapfl") {
    check_conv_input(name, in, 12);
    return wrap(name, std::make_shared<BapflCnn>(in, classes, gen), "clf.1", in, classes);
  }
  if (name == "resnet10" || name == "resnet18") {
    check_conv_input(name, in, 8);
    return make_resnet(name == "resnet10" ? 1 : 2, 64, in, classes, seed);
  }
  std::string valid;
  for (const ModelInfo& m : model_catalog()) valid += (valid.empty() ? "" : ", ") + m.name;
  BASTION_FAIL("unknown model '", name, "'; valid models: ", valid);
}

}  // namespace bastion
