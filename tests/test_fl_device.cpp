// Federated runs on the device (run.device = "cuda", fl/core/device_replicas.h). On a GPU and on the
// emulator (-DBASTION_CUDA=EMULATE, run by CI) a tiny run of each client-rule family that trains there
// agrees with the CPU run within the tolerances below, repeats byte for byte, and a device run killed and
// resumed writes the uninterrupted run's rounds.csv. Without a device, the run says why in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "fl_test_support.h"
#include "fl/core/device_replicas.h"
#include "fl/metrics/results.h"
#include "fl/registry.h"

namespace bastion {
namespace {

using testing::TinyRun;

// CPU and CUDA sum in different orders (blocked GEMM vs tiled kernels, per-block reductions), so after
// a few SGD steps the weights differ by float roundings (CudaTraining: 1e-4 after two steps). Losses
// are means of smooth functions of the weights: kLossTolerance relative. An accuracy counts samples, and a
// sample whose top two logits are within the rounding flips: kAccuracyTolerance absolute is five samples
// of the synthetic test set (500), and about five flips over the clients' local test splits in p_acc.
constexpr double kLossTolerance = 2e-3;
constexpr double kAccuracyTolerance = 0.01;

void expect_device_close(double cpu, double cuda, double tolerance, bool relative, const std::string& what) {
  if (std::isnan(cpu)) {
    EXPECT_TRUE(std::isnan(cuda)) << what;
    return;
  }
  const double bound = relative ? tolerance * std::max(std::abs(cpu), 1e-3) : tolerance;
  EXPECT_LE(std::abs(cpu - cuda), bound) << what << ": cpu " << cpu << ", cuda " << cuda;
}

void expect_rounds_agree(const std::string& cpu_csv, const std::string& cuda_csv) {
  const std::vector<RoundRecord> cpu = parse_rounds_csv(cpu_csv), cuda = parse_rounds_csv(cuda_csv);
  ASSERT_EQ(cpu.size(), cuda.size());
  ASSERT_FALSE(cpu.empty());
  for (size_t r = 0; r < cpu.size(); ++r) {
    const std::string at = "round " + std::to_string(cpu[r].round) + " ";
    EXPECT_EQ(cpu[r].round, cuda[r].round);
    EXPECT_EQ(cpu[r].sampled, cuda[r].sampled) << at;
    EXPECT_EQ(cpu[r].bytes_up, cuda[r].bytes_up) << at;
    EXPECT_EQ(cpu[r].bytes_down, cuda[r].bytes_down) << at;
    expect_device_close(cpu[r].train_loss, cuda[r].train_loss, kLossTolerance, true, at + "train_loss");
    expect_device_close(cpu[r].loss, cuda[r].loss, kLossTolerance, true, at + "loss");
    expect_device_close(cpu[r].acc, cuda[r].acc, kAccuracyTolerance, false, at + "acc");
    expect_device_close(cpu[r].asr, cuda[r].asr, kAccuracyTolerance, false, at + "asr");
    EXPECT_EQ(cpu[r].personal.present, cuda[r].personal.present) << at;
    expect_device_close(cpu[r].personal.acc.mean, cuda[r].personal.acc.mean, kAccuracyTolerance, false, at + "p_acc");
    expect_device_close(cpu[r].personal.acc.weighted, cuda[r].personal.acc.weighted, kAccuracyTolerance, false,
                        at + "p_acc_w");
  }
}

class FlDevice : public testing::FlRunTest {
 protected:
  void run_on(const TinyRun& spec, const std::string& out, const std::string& device, bool resume = false,
              int64_t stop_after = 0, int threads = 2) {
    const ExperimentConfig config = spec.config();
    RunOptions options;
    options.out_dir = (dir_ / out).string();
    options.threads = threads;  // a device run trains its clients one after another; the server rule uses them
    options.device = device;
    options.resume = resume;
    options.stop_after_round = stop_after;
    run_experiment(config, options);
  }
  // CPU vs device within tolerance.
  void expect_rounds_agree_on(const TinyRun& spec, const std::string& name) {
    run_on(spec, name + "-cpu", "cpu");
    run_on(spec, name + "-cuda", "cuda");
    SCOPED_TRACE(name);
    expect_rounds_agree(file(name + "-cpu", "rounds.csv"), file(name + "-cuda", "rounds.csv"));
  }
  // ... and the device run twice: byte for byte.
  void expect_device_matches_cpu(const TinyRun& spec, const std::string& name) {
    expect_rounds_agree_on(spec, name);
    run_on(spec, name + "-again", "cuda");
    EXPECT_EQ(file(name + "-cuda", "rounds.csv"), file(name + "-again", "rounds.csv"))
        << name << ": the device run repeats";
  }
};

// The tiny synthetic federation (1x8x8 images, MLP) cut to what the emulator affords (it runs every CUDA
// thread as an OS thread, about 0.5 s a training step here): 6 clients of at most 16 samples, 2 a round,
// one epoch of one batch, 2 rounds, the global model evaluated after the last.
TinyRun device_run(const std::string& rule = "sgd") {
  return {{"rounds=2", "data.clients=6", "clients.per_round=2", "data.max_per_client=16", "clients.rule=" + rule,
           "clients." + rule + ".batch=16", "clients." + rule + ".epochs=1", "eval.every=2"}};
}

TEST_F(FlDevice, WithoutADeviceTheRunSaysWhyInOneLine) {
  if (cuda_available()) GTEST_SKIP() << "a device (or the emulator) is present: " << cuda_device_description();
  testing::expect_error([&] { run_on(device_run(), "x", "cuda"); },
                        {"run.device = \"cuda\"", cuda_device_description()});
}

// sgd with clipping and momentum kept across rounds in the client state: within tolerance of the CPU, the
// same bytes on a second device run, and a device run killed after round 1 and resumed writes the same file.
TEST_F(FlDevice, SgdAgreesWithTheCpuRepeatsAndResumesExactly) {
  BASTION_REQUIRE_CUDA();
  const TinyRun spec =
      device_run().with({"clients.sgd.grad_clip=0.5", "clients.sgd.keep_momentum=true", "run.checkpoint_every=1"});
  expect_device_matches_cpu(spec, "sgd");
  run_on(spec, "resumed", "cuda", false, /*stop_after=*/1);
  run_on(spec, "resumed", "cuda", /*resume=*/true);
  EXPECT_EQ(file("sgd-cuda", "rounds.csv"), file("resumed", "rounds.csv")) << "killed after round 1";
}

// A robust server rule and a backdoor data attack: the rule's math and the attack's poisoning on the host,
// the attacker's training on the device.
TEST_F(FlDevice, RobustServerRuleUnderABackdoorAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(
      device_run().with({"clients.per_round=5", "server.rule=multi-krum", "attack.names=[\"badnets\"]",
                         "attack.malicious_count=1", "attack.malicious_per_round=1", "attack.badnets.per_batch=4"}),
      "multi-krum");
}

// On a device the clients train on one worker, but the server rule's host math takes every thread
// (AggregationInput::pool): its result must not depend on how many.
TEST_F(FlDevice, TheServerRuleUsesTheRunsThreadsWithTheSameResult) {
  BASTION_REQUIRE_CUDA();
  const TinyRun spec = device_run().with({"clients.per_round=4", "server.rule=median"});
  run_on(spec, "one-thread", "cuda", false, 0, /*threads=*/1);
  run_on(spec, "three-threads", "cuda", false, 0, /*threads=*/3);
  EXPECT_EQ(file("one-thread", "rounds.csv"), file("three-threads", "rounds.csv"));
}

// MoFedSAM: SAM with the ascent scale and the server's linear term; FedFSA: per-tensor radii, its Top-C
// choice read from the trained weights, and its personalised evaluation.
TEST_F(FlDevice, SamFamilyStepsAgreeWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(device_run("mofedsam").with({"clients.mofedsam.grad_clip=2.0"}), "mofedsam");
  expect_rounds_agree_on(device_run("fedfsa").with({"clients.fedfsa.grad_clip=2.0", "eval.personalized=true",
                                                    "data.local_test=like-train", "eval.personal_global=false"}),
                         "fedfsa");
}

// FedSMOO: the dual mu_i updated on the device every step (e - s), copied back and uploaded; the server's
// correction s sent from round 2 on. Three rounds so that the clients' second participations read both.
TEST_F(FlDevice, FedsmooDualsAgreeWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(
      device_run("fedsmoo").with({"rounds=3", "eval.every=1", "clients.per_round=3", "data.clients=3"}), "fedsmoo");
}

// Personalised evaluation: fedavg-ft's stored models and its final head-tune post step, st's head
// re-initialisation, local's stored model loaded into the device replica, Ditto's second model with its
// proximal gradient on the device, FedRep's stored head and its head and body phases, FedRoD's balanced
// softmax on the device and its personal head stepped on host copies.
TEST_F(FlDevice, PersonalisedEvaluationAndPostStepsAgreeWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  for (const std::string rule : {"fedavg-ft", "st", "local", "ditto", "fedrep", "fedrod"}) {
    TinyRun spec =
        device_run(rule).with({"eval.personalized=true", "data.local_test=like-train", "eval.personal_global=false"});
    if (rule == "fedavg-ft") spec = spec.with({"clients.fedavg-ft.variant=after-local-final-head"});
    expect_rounds_agree_on(spec, rule);
  }
}

// Under mpirun, rank r of a node asks for device r: it wraps around the devices there are (the emulator
// and a one-GPU machine have device 0 only).
TEST_F(FlDevice, SelectingADeviceWrapsAroundTheDeviceCount) {
  BASTION_REQUIRE_CUDA();
  const int wrapped = cuda_select_device(1000003);
  EXPECT_GE(wrapped, 0);
  EXPECT_LT(wrapped, 1000003);
  if (cuda_emulated()) {
    EXPECT_EQ(wrapped, 0);
  }
  EXPECT_EQ(cuda_select_device(0), 0);  // the tests after this one run on device 0
  testing::expect_error([] { cuda_select_device(-1); }, {"cuda_select_device", "-1"});
}

// FedCAP: the customised model received, the request path (asked clients train on copies of their state)
// and the Ditto-style personal model, all on the device.
TEST_F(FlDevice, FedcapAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(device_run("fedcap").with({"server.rule=fedcap", "eval.personalized=true",
                                                    "data.local_test=like-train", "eval.personal_global=false"}),
                         "fedcap");
}

// FedFomo: candidate models scored on the client's validation split on the device, the mix on the host.
TEST_F(FlDevice, FedfomoAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(device_run("fedfomo").with(
                             {"eval.personalized=true", "data.local_test=like-train", "eval.personal_global=false"}),
                         "fedfomo");
}

// RSA: the worker's own x_i kept on the host, its l1 sign term added on host copies of the gradient.
TEST_F(FlDevice, RsaAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(device_run("rsa").with({"server.rule=rsa", "clients.rsa.steps=2"}), "rsa");
}

// SPMC: the coalition teacher on a second device replica, LGAlign's projection on host copies of the
// gradients, the method server's aggregation weights.
TEST_F(FlDevice, SpmcAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(device_run("spmc").with({"server.rule=spmc", "rounds=3"}), "spmc");
}

// FedALA: ALA's mix and its steps on W in host values (per step the upper tensors' gradients come down and
// their mixed values go up), the local training and the final head tuning on the device (the final ALA
// on the host replica, as every rule's post-step preparation). Three rounds of 3 of 4 clients: a client
// sampled again runs ALA against its own model, one first sampled after round 1 against the initial
// model; the start phase is cut to at most 3 epochs for the emulator.
// Local models far from the global one (lr 0.5, 3 epochs) and a large eta make W, and so the mix, move:
// with the defaults, a device run that never moved the mixed values up agreed with the CPU within the
// tolerances; with these it fails on round 2's losses.
TEST_F(FlDevice, FedalaAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(device_run("fedala").with(
                             {"rounds=3", "eval.every=1", "data.clients=4", "clients.per_round=3",
                              "clients.fedala.window=2", "clients.fedala.max_start_epochs=3", "clients.fedala.eta=100",
                              "clients.fedala.lr=0.5", "clients.fedala.epochs=3", "clients.fedala.tune=final-head",
                              "eval.personalized=true", "data.local_test=like-train", "eval.personal_global=false"}),
                         "fedala");
}

// Every registered client rule trains on the device: a rule added without device support shows up here.
// One that declares none (traits().on_device false) stops a device run with one line naming it.
class HostOnlyRule final : public ClientRule {
 public:
  ClientResult train(ClientTask&) const override { return {}; }
};

TEST(FlDeviceSupport, EveryClientRuleTrainsOnTheDeviceAndOneThatDoesNotIsRefusedByName) {
  for (const ClientRuleEntry& entry : client_rule_registry())
    EXPECT_TRUE(entry.make(Params("clients." + entry.info.name, *entry.info.params, {}))->traits().on_device)
        << entry.info.name;
  const ExperimentConfig config = device_run().config();
  testing::expect_error([&] { check_device_support(config, HostOnlyRule()); },
                        {"run.device = \"cuda\"", "'sgd'", "CPU only"});
}

// BapFL, the attack that replaces the training step: its clean step and its poison step with the frozen
// head on the device, the head's noise drawn and added on host copies. One attacker in every round.
TEST_F(FlDevice, BapflTrainingAttackAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  expect_rounds_agree_on(
      device_run().with({"clients.per_round=3", "attack.names=[\"bapfl\"]", "attack.malicious_count=1",
                         "attack.malicious_per_round=1", "attack.bapfl.per_batch=4", "attack.bapfl.trigger=grid"}),
      "bapfl");
}

}  // namespace
}  // namespace bastion
