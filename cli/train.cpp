// `bastion train`: centralized training of one model on one dataset, the engine's end-to-end check.
// Prints one progress line per epoch and, last, `test_acc=0.XXXX`. The line before it is a checksum
// of the final weights, so two runs can be compared for bit-identical results (e.g. --threads 1 vs 2).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "autograd/ops.h"
#include "cli/commands.h"
#include "data/loader.h"
#include "fl/evaluate.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/gemm.h"
#include "nn/model_file.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "tensor/safetensors.h"

namespace bastion::cli {

namespace {

struct TrainArgs {
  std::string dataset = "fmnist", model = "lenet", data_dir, save_path, init_path, optimizer = "sgd", device = "cpu";
  std::string gemm_precision = "fp32";
  bool cuda_sync = false;
  int64_t epochs = 3, batch = 64, threads = 1, limit_train = 0, lr_step = 0;
  uint64_t seed = 1;
  float lr = 0.01f, momentum = 0.9f, weight_decay = 0.0f, lr_gamma = 0.1f, rho = 0.05f;
  bool nesterov = false;
  bool save_given = false;  // --save was on the command line (so an empty path is an error, not "no save")
};

// --save is checked before training, not after it: an empty path, or a folder that is missing or not
// writable, would otherwise be found only when the trained weights are lost (issue 42 item 10).
void check_save_path(const TrainArgs& args) {
  if (!args.save_given) return;
  BASTION_CHECK(!args.save_path.empty(), "--save: the path is empty");
  const std::filesystem::path parent = std::filesystem::absolute(args.save_path).parent_path();
  std::error_code ec;
  BASTION_CHECK(std::filesystem::is_directory(parent, ec), "--save ", args.save_path, ": the folder ", parent.string(),
                " does not exist (checked before training)");
  BASTION_CHECK(::access(parent.c_str(), W_OK) == 0, "--save ", args.save_path, ": the folder ", parent.string(),
                " is not writable (checked before training)");
}

uint64_t fnv1a(std::span<const float> values) {
  uint64_t hash = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size_bytes(); ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
  return hash;
}

std::string json_array(const std::vector<float>& values) {
  std::ostringstream out;
  out.precision(4);
  out << std::fixed << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  return out.str() + "]";
}

void save_model(const Model& model, const Dataset& train, const std::string& path) {
  save_model_file(model, path,
                  {{"dataset", train.name}, {"mean", json_array(train.mean)}, {"std", json_array(train.std)}});
}

struct EpochStats {
  double loss = 0.0;
  int64_t correct = 0, samples = 0;
};

// One pass over the loader: forward, cross-entropy, backward, optimizer step, per batch.
// Batches come from the host loader and are copied to the model's device (a no-op on the CPU).
EpochStats train_epoch(Model& model, BatchLoader& loader, Sgd& sgd, Sam* sam) {
  EpochStats stats;
  Tensor x;
  LabelTensor y;
  while (loader.next(x, y)) {
    Tensor logits;
    const Tensor x_device = x.to(model.device());
    auto loss_and_backward = [&]() {
      model.zero_grad();
      logits = model.forward(x_device);
      Tensor loss = cross_entropy(logits, y);
      loss.backward();
      return loss.item();
    };
    float loss = 0.0f;
    if (sam) {
      loss = sam->step(loss_and_backward);
    } else {
      loss = loss_and_backward();
      sgd.step();
    }
    // With SAM the logits are from the perturbed pass; train accuracy is indicative only.
    const std::vector<int32_t> predicted = argmax_rows(logits.detach().to(Device::CPU));
    for (int64_t i = 0; i < x.size(0); ++i) stats.correct += predicted[i] == y[i];
    stats.loss += static_cast<double>(loss) * x.size(0);
    stats.samples += x.size(0);
  }
  return stats;
}

// --device cuda: checks that a device is there and that the options are supported on it.
Device select_device(const TrainArgs& args) {
  if (args.device == "cpu") return Device::CPU;
  BASTION_CHECK(cuda_available(), "--device cuda: ", cuda_device_description());
  BASTION_CHECK(args.optimizer != "sam",
                "--optimizer sam runs on the CPU only (its perturbation is not ported to CUDA)");
  cuda_set_debug_sync(args.cuda_sync || cuda_debug_sync());
  gemm_cuda_set_precision(args.gemm_precision == "tf32" ? GemmPrecision::TF32 : GemmPrecision::FP32);
  std::printf("device: %s%s, GEMM %s\n", cuda_device_description(), cuda_debug_sync() ? ", debug sync" : "",
              args.gemm_precision.c_str());
  return Device::CUDA;
}

int run_train(const TrainArgs& args) {
  check_save_path(args);
  set_num_threads(static_cast<int>(args.threads));
  const Device device = select_device(args);
  const auto start = std::chrono::steady_clock::now();
  const DatasetSplit split = load_dataset(args.dataset, args.data_dir);
  const Generator root(args.seed);
  std::unique_ptr<Model> model = make_model(args.model, {split.train.channels, split.train.height, split.train.width},
                                            split.train.num_classes, root.fork(1).next_u64());
  if (!args.init_path.empty()) load_model_file(*model, args.init_path);  // names and shapes checked
  model->to(device);  // before the optimizer, whose momentum buffer follows the model's device
  std::vector<int64_t> indices;
  if (args.limit_train > 0)
    for (int64_t i = 0; i < std::min(args.limit_train, split.train.size()); ++i) indices.push_back(i);
  BatchLoader loader(split.train, args.batch, /*shuffle=*/true, root.fork(2).next_u64(), indices);
  Sgd sgd(*model, {args.lr, args.momentum, args.weight_decay, args.nesterov});
  std::unique_ptr<Sam> sam = args.optimizer == "sam" ? std::make_unique<Sam>(*model, sgd, args.rho) : nullptr;
  const StepDecay decay{args.lr, args.lr_step, args.lr_gamma};
  std::printf("train %s on %s: %lld train / %lld test samples, %lld parameters, %lld thread(s), seed %llu\n",
              args.model.c_str(), args.dataset.c_str(),
              static_cast<long long>(indices.empty() ? split.train.size() : indices.size()),
              static_cast<long long>(split.test.size()), static_cast<long long>(model->num_parameters()),
              static_cast<long long>(args.threads), static_cast<unsigned long long>(args.seed));
  EvalResult test;
  for (int64_t epoch = 0; epoch < args.epochs; ++epoch) {
    sgd.set_lr(decay.lr_at(epoch));
    loader.start_epoch(epoch);
    model->train(true);
    const auto epoch_start = std::chrono::steady_clock::now();
    const EpochStats stats = train_epoch(*model, loader, sgd, sam.get());
    const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    test = evaluate(*model, split.test);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "epoch %lld/%lld  lr %.4g  loss %.6f  train_acc %.4f  test_loss %.4f  test_acc %.4f  samples/s %.0f  elapsed "
        "%.1fs\n",
        static_cast<long long>(epoch + 1), static_cast<long long>(args.epochs), sgd.lr(),
        stats.loss / std::max<int64_t>(stats.samples, 1),
        static_cast<double>(stats.correct) / std::max<int64_t>(stats.samples, 1), test.loss, test.accuracy,
        stats.samples / std::max(train_seconds, 1e-9), elapsed);
    std::fflush(stdout);
  }
  if (args.epochs == 0) {  // evaluation only: the model as initialised or loaded with --init
    test = evaluate(*model, split.test);
    std::printf("no training (--epochs 0)  test_loss %.4f  test_acc %.4f\n", test.loss, test.accuracy);
  }
  model->to(Device::CPU);  // the checkpoint and the checksum read the weights on the host
  if (!args.save_path.empty()) {
    save_model(*model, split.train, args.save_path);
    std::printf("saved %s\n", args.save_path.c_str());
  }
  std::printf("weights_fnv1a=%016llx\n", static_cast<unsigned long long>(fnv1a(model->flat_state())));
  std::printf("test_acc=%.4f\n", test.accuracy);
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* sub = app.add_subcommand("train", "Centralized training of one model on one dataset");
  sub->add_option("--dataset", args->dataset, "Dataset name (bastion list datasets)")->capture_default_str();
  sub->add_option("--model", args->model, "Model name (bastion list models)")->capture_default_str();
  sub->add_option("--data-dir", args->data_dir,
                  "Folder with the dataset files (else $BASTION_DATA, ./data, /usr/share/datasets)");
  sub->add_option("--epochs", args->epochs,
                  "Epochs (0: evaluate the model, e.g. one loaded with --init, without training)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  sub->add_option("--batch", args->batch, "Batch size")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  sub->add_option("--lr", args->lr, "Learning rate")->check(CLI::Range(0.0, 100.0))->capture_default_str();
  sub->add_option("--momentum", args->momentum, "SGD momentum")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  sub->add_option("--weight-decay", args->weight_decay, "L2 weight decay")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_flag("--nesterov", args->nesterov, "Nesterov momentum");
  sub->add_option("--lr-step", args->lr_step, "Multiply the lr by --lr-gamma every this many epochs (0 = never)")
      ->check(CLI::Range(0, 100000));
  sub->add_option("--lr-gamma", args->lr_gamma, "Step decay factor")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--optimizer", args->optimizer, "sgd or sam")
      ->check(CLI::IsMember({"sgd", "sam"}))
      ->capture_default_str();
  sub->add_option("--rho", args->rho, "SAM radius")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  sub->add_option("--init", args->init_path,
                  "Start from the weights in this .safetensors file (from --save or run --save-model)")
      ->check(CLI::ExistingFile);
  sub->add_option("--device", args->device, "cpu or cuda (the CUDA backend; see docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--gemm-precision", args->gemm_precision, "CUDA GEMM: fp32 (exact) or tf32 (tensor cores)")
      ->check(CLI::IsMember({"fp32", "tf32"}))
      ->capture_default_str();
  sub->add_flag("--cuda-sync", args->cuda_sync,
                "Synchronise after every CUDA kernel (debugging; also BASTION_CUDA_SYNC=1)");
  sub->add_option("--threads", args->threads, "Threads for kernels and BLAS")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "Seed for initialisation and shuffling")->capture_default_str();
  sub->add_option("--limit-train", args->limit_train, "Use only the first N training samples (0 = all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--save", args->save_path, "Write the trained weights as safetensors (PyTorch names)")
      ->each([args](const std::string&) { args->save_given = true; });
  return [args]() { return run_train(*args); };
}

}  // namespace bastion::cli
