// Models out and in (issue 41 item 3): `run --save-model` writes the final global model (and the clients'
// personal models when the rule keeps them) as .safetensors with PyTorch names; `model.init` and
// `train --init` start from such a file, with names, shapes and the architecture checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fl/core/checkpoint.h"
#include "fl/core/run_setup.h"
#include "fl/evaluate.h"
#include "fl/metrics/results.h"
#include "fl_test_support.h"
#include "nn/model_file.h"
#include "nn/models.h"
#include "tensor/safetensors.h"

namespace bastion {
namespace {

using testing::TinyRun;

class FlModelFiles : public testing::FlRunTest {
 protected:
  void run_saving(const TinyRun& spec, const std::string& out) {
    RunOptions options;
    options.out_dir = (dir_ / out).string();
    options.threads = 1;
    options.save_model = true;
    run_experiment(spec.config(), options);
  }
  std::string path(const std::string& out, const std::string& name) const { return (dir_ / out / name).string(); }
};

TinyRun two_rounds() { return {{"rounds=2"}}; }

// rounds.csv rounds accuracies to 6 significant digits.
constexpr double kCsvRounding = 1e-6;

TEST_F(FlModelFiles, TheSavedGlobalModelLoadsBackToTheRunsFinalAccuracy) {
  run_saving(two_rounds(), "a");
  const ExperimentConfig config = two_rounds().config();
  const SharedData shared = load_shared_data(config);
  std::unique_ptr<Model> model = make_model("mlp", shared.input, shared.train.num_classes, /*seed=*/999);
  load_model_file(*model, path("a", "model.safetensors"));
  const std::vector<RoundRecord> records = parse_rounds_csv(file("a", "rounds.csv"));
  ASSERT_FALSE(records.empty());
  EXPECT_NEAR(evaluate(*model, shared.test, config.eval.integer("batch")).accuracy, records.back().acc, kCsvRounding);
  const SafetensorsFile saved = load_safetensors(path("a", "model.safetensors"));
  EXPECT_EQ(saved.metadata.at("model"), "mlp");
  EXPECT_EQ(saved.metadata.at("dataset"), "synthetic");
  ASSERT_NE(saved.find("fc1.weight"), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path("a", "personal-models.safetensors")));  // sgd keeps none
}

// With lr 0 nothing moves: a run started from the saved model evaluates, after its first round, exactly as
// the saving run did after its last.
TEST_F(FlModelFiles, ModelInitStartsTheRunFromTheFile) {
  run_saving(two_rounds(), "a");
  run(two_rounds(), "b", 1, {"rounds=1", "clients.sgd.lr=0", "model.init=" + path("a", "model.safetensors")});
  EXPECT_EQ(parse_rounds_csv(file("b", "rounds.csv")).back().acc, parse_rounds_csv(file("a", "rounds.csv")).back().acc);
  EXPECT_NE(file("b", "config.toml").find("init = \"" + path("a", "model.safetensors") + "\""), std::string::npos);
}

TEST_F(FlModelFiles, AnInitFileOfAnotherModelOrWithATensorMissingIsRefusedByName) {
  run_saving(two_rounds(), "a");
  SafetensorsFile saved = load_safetensors(path("a", "model.safetensors"));
  saved.metadata["model"] = "lenet";
  save_safetensors(path("a", "lenet.safetensors"), saved);
  testing::expect_error([&] { run(two_rounds(), "b", 1, {"model.init=" + path("a", "lenet.safetensors")}); },
                        {"lenet.safetensors", "'lenet' model, not 'mlp'"});
  saved = load_safetensors(path("a", "model.safetensors"));
  saved.f32.erase(saved.f32.begin());
  const std::string missing_name = load_safetensors(path("a", "model.safetensors")).f32.front().first;
  save_safetensors(path("a", "short.safetensors"), saved);
  testing::expect_error([&] { run(two_rounds(), "c", 1, {"model.init=" + path("a", "short.safetensors")}); },
                        {"short.safetensors", missing_name});
  testing::expect_error([&] { run(two_rounds(), "d", 1, {"model.init=" + path("a", "absent.safetensors")}); },
                        {"absent.safetensors"});
}

// fedavg-ft (after-local) keeps each trained client's model: the personal file holds exactly those, under
// "clients.<k>.", equal to the client state the checkpoint keeps.
TEST_F(FlModelFiles, PersonalModelsAreSavedUnderEachClientsName) {
  const TinyRun spec = two_rounds().with(
      {"clients.rule=fedavg-ft", "eval.personalized=true", "data.local_test=like-train", "run.checkpoint_every=1"});
  run_saving(spec, "p");
  const SafetensorsFile personal = load_safetensors(path("p", "personal-models.safetensors"));
  const CheckpointState checkpoint = load_checkpoint(path("p", "checkpoint.safetensors"));
  int saved_clients = 0;
  for (size_t k = 0; k < checkpoint.clients.size(); ++k) {
    const auto stored = checkpoint.clients[k].vectors.find("model");
    const Tensor* weight = personal.find("clients." + std::to_string(k) + ".fc1.weight");
    ASSERT_EQ(stored != checkpoint.clients[k].vectors.end(), weight != nullptr) << "client " << k;
    if (weight == nullptr) continue;
    ++saved_clients;
    const std::vector<float> values = weight->to_vector();
    EXPECT_TRUE(std::equal(values.begin(), values.end(), stored->second.begin())) << "client " << k;  // fc1 comes first
  }
  EXPECT_GT(saved_clients, 0);
}

TEST_F(FlModelFiles, TrainInitRefusesAFileOfAnotherArchitecture) {
  run_saving(two_rounds(), "a");
  SafetensorsFile saved = load_safetensors(path("a", "model.safetensors"));
  saved.metadata["model"] = "lenet";
  save_safetensors(path("a", "lenet.safetensors"), saved);
  const testing::RunResult result =
      testing::run_bastion("train --dataset synthetic --model mlp --epochs 1 --init " + path("a", "lenet.safetensors"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("'lenet' model, not 'mlp'"), std::string::npos) << result.output;
  const testing::RunResult fine =
      testing::run_bastion("train --dataset synthetic --model mlp --epochs 1 --init " + path("a", "model.safetensors"));
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
}

// train --epochs 0 evaluates without training: a model saved by train --save, loaded back, gives the
// saving run's test accuracy and the same weights; without --init it evaluates the initialised model.
TEST_F(FlModelFiles, TrainWithZeroEpochsEvaluatesTheLoadedModel) {
  const auto last_line = [](const std::string& output, const std::string& prefix) {
    const size_t at = output.rfind(prefix);
    return at == std::string::npos ? std::string() : output.substr(at, output.find('\n', at) - at);
  };
  const testing::RunResult trained = testing::run_bastion("train --dataset synthetic --model mlp --epochs 1 --save " +
                                                          (dir_ / "m.safetensors").string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const testing::RunResult loaded = testing::run_bastion("train --dataset synthetic --model mlp --epochs 0 --init " +
                                                         (dir_ / "m.safetensors").string());
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_NE(loaded.output.find("no training (--epochs 0)"), std::string::npos) << loaded.output;
  EXPECT_EQ(loaded.output.find("epoch 1/"), std::string::npos) << loaded.output;
  EXPECT_EQ(last_line(loaded.output, "test_acc="), last_line(trained.output, "test_acc="));
  EXPECT_EQ(last_line(loaded.output, "weights_fnv1a="), last_line(trained.output, "weights_fnv1a="));
  EXPECT_FALSE(last_line(loaded.output, "test_acc=").empty());
}

}  // namespace
}  // namespace bastion
