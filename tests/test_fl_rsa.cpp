// RSA (Li et al. AAAI'19): the rsa client rule (fl/clients/rsa.cpp: a persistent x_i trained with
// lambda sign(x_i - x_0)), the server rules rsa (the paper's master step) and rsa-server (SPMC's
// server-only form; its other tests: test_fl_defenses_norms.cpp), and whole runs of the pair: kill +
// resume bit for bit, any thread count.
#include <gtest/gtest.h>

#include <cmath>

#include "defense_test_support.h"
#include "fl/core/checkpoint.h"
#include "fl/core/experiment.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;
using testing::expect_near_all;
using testing::rule_params;
using testing::run_rule;
using testing::Uploads;

constexpr float kHand = 1e-6f;  // hand-computed steps of size ~1e-3 from O(1) floats, rounded to float

// ------------------------------------------------------------------------------------------ server rules

// Uploads x_i - x_0 of the constructed models x_i around x_0 (what the rsa client uploads).
Uploads uploads_of(const std::vector<std::vector<float>>& models, const std::vector<float>& global, int64_t P) {
  std::vector<std::vector<float>> rows = models;
  for (auto& row : rows)
    for (size_t d = 0; d < row.size(); ++d) row[d] -= global[d];
  Uploads u(rows);
  u.P = P;
  u.global = global;
  return u;
}

TEST(FlRsa, PaperMasterStepOnConstructedModels) {
  // Defaults alpha 0.01, lambda 0.1, weight_decay 0.01, no cap. x_0 = (1, -2, 0.5 | 4), P = 3 + 1 buffer.
  // x_0 <- x_0 - alpha (lambda sum_i sign(x_0 - x_i) + wd x_0):
  //   col 0: x_i (2, 3, 0): signs (-, -, +), sum -1: -0.01 (-0.1 + 0.01)    = +0.0009
  //   col 1: x_i (-3, -1, -5): signs (+, -, +), sum +1: -0.01 (0.1 - 0.02)  = -0.0008
  //   col 2: x_i (0.5, 0.5, 1): signs (0, 0, -), sum -1: -0.01 (-0.1 + 0.005) = +0.00095  (equal: no vote)
  //   col 3 (buffer): mean of x_i - x_0 = mean(2, -2, 3) = 1
  const std::vector<float> global = {1.0f, -2.0f, 0.5f, 4.0f};
  const Uploads u = uploads_of({{2, -3, 0.5f, 6}, {3, -1, 0.5f, 2}, {0, -5, 1, 7}}, global, 3);
  const AggregationOutput out = run_rule(make_rsa, "rsa", rsa_params(), u);
  expect_near_all(out.update, {0.0009f, -0.0008f, 0.00095f, 1.0f}, kHand);
  EXPECT_TRUE(out.flagged.empty());
}

TEST(FlRsa, RunningSumCapDiffersFromClippingTheFinalSum) {
  // alpha = lambda = 1, no decay: the update is the capped vote. Cap 3, signs per column, client order:
  //   col 0: + + + + - -   running 1 2 3 3 2 1 -> 1   (a clip of the final sum 2 would give 2)
  //   col 1: - - + + + +   running -1 -2 -1 0 1 2 -> 2 (the same as the final clip)
  //   col 2: + + + + + 0   running ... 3 3 -> 3        (the final sum 5 clipped: 3)
  const Uploads u({{1, -1, 1}, {1, -1, 1}, {1, 1, 1}, {1, 1, 1}, {-1, 1, 1}, {-1, 1, 0}});
  const std::map<std::string, ParamValue> unit = {
      {"alpha", 1.0}, {"lambda", 1.0}, {"weight_decay", 0.0}, {"cap", int64_t{3}}};
  expect_near_all(run_rule(make_rsa, "rsa", rsa_params(), u, unit).update, {1.0f, 2.0f, 3.0f}, kHand);
  // The order matters: the same rows reversed give col 0: - - + + + + -> 2 and col 1: + + + + - - -> 1.
  expect_near_all(run_rule(make_rsa, "rsa", rsa_params(), u.permuted({5, 4, 3, 2, 1, 0}), unit).update,
                  {2.0f, 1.0f, 3.0f}, kHand);
  // rsa-server (SPMC's defaults alpha 0.05, lambda 0.1, cap 3; global 0: no decay term): 0.005 * vote.
  expect_near_all(run_rule(make_rsa_server, "rsa-server", rsa_server_params(), u).update, {0.005f, 0.01f, 0.015f},
                  kHand);
  // rsa has no cap by default: the plain sums 2, 2, 5 times alpha lambda = 0.001.
  expect_near_all(run_rule(make_rsa, "rsa", rsa_params(), u).update, {0.002f, 0.002f, 0.005f}, kHand);
}

TEST(FlRsa, DefaultsAreThePapersAndSpmcsAndBadValuesAreRefused) {
  const Params paper = rule_params("rsa", rsa_params());
  EXPECT_EQ(paper.real("alpha"), 0.01);
  EXPECT_EQ(paper.real("lambda"), 0.1);
  EXPECT_EQ(paper.real("weight_decay"), 0.01);
  EXPECT_EQ(paper.integer("cap"), 0);
  const Params spmc = rule_params("rsa-server", rsa_server_params());
  EXPECT_EQ(spmc.real("alpha"), 0.05);
  EXPECT_EQ(spmc.integer("cap"), 3);
  EXPECT_EQ(spmc.real("weight_decay"), 1e-3);
  expect_error([] { rule_params("rsa", rsa_params(), {{"lambda", -1.0}}); }, {"server.rsa.lambda"});
  expect_error([] { rule_params("rsa", rsa_params(), {{"cap", 1.5}}); }, {"server.rsa.cap"});
  expect_error([] { rule_params("rsa", rsa_params(), {{"cap", int64_t{-1}}}); }, {"server.rsa.cap"});
  expect_error([] { rule_params("rsa", rsa_params(), {{"nope", 1.0}}); }, {"nope"});
  Uploads none(std::vector<std::vector<float>>{{1.0f}});
  none.n = 0;
  expect_error([&] { run_rule(make_rsa, "rsa", rsa_params(), none); }, {"rsa", "no upload"});
}

// ------------------------------------------------------------------------------------------ client rule

struct ClientSetup {
  Dataset data = synthetic_train(32);
  std::vector<int64_t> indices = first_indices(32);
  TransformSpec identity;
};

// One rsa round of `client` from x_0 = `global` (seeded model 5's layout); returns the trained model.
std::vector<float> rsa_round(const ClientSetup& s, const std::map<std::string, ParamValue>& given, ClientState& state,
                             const std::vector<float>& global, int64_t round = 1) {
  const auto model = make_model("mlp", kInput, 10, 5);
  std::copy(global.begin(), global.end(), model->flat_state().begin());
  ClientTask task{*model, s.data, s.indices, s.identity, state, 0, round, 11, 12};
  const ClientResult result = client_rule("rsa", given)->train(task);
  EXPECT_EQ(result.steps, given.count("steps") ? std::get<int64_t>(given.at("steps")) : 1);
  const std::vector<float> trained = state_of(*model);
  EXPECT_EQ(state.vectors.at("model"), trained) << "the model left for the upload is the stored x_i";
  return trained;
}

TEST(FlRsaClient, AClientAtTheGlobalModelGetsNoPenaltyGradient) {
  // First participation: x_i = x_0, so sign(x_i - x_0) = 0 on the first step and lambda changes nothing
  // (bit for bit: the gradient gets + 0).
  ClientSetup s;
  const std::vector<float> global = state_of(*make_model("mlp", kInput, 10, 5));
  ClientState with, without;
  const std::vector<float> a = rsa_round(s, {{"lambda", 0.5}, {"lr", 0.1}}, with, global);
  const std::vector<float> b = rsa_round(s, {{"lambda", 0.0}, {"lr", 0.1}}, without, global);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, global);  // it did train
}

TEST(FlRsaClient, ThePersistentModelMovesByTheSignTerm) {
  // x_i = x_0 + delta (delta = +-0.01 on every parameter): one plain SGD step with lambda moves x_i by
  // -lr lambda sign(delta) more than the same step without (the data gradient is the same at the same x_i).
  ClientSetup s;
  const auto layout = make_model("mlp", kInput, 10, 5);
  const std::vector<float> global = state_of(*layout);
  const int64_t P = static_cast<int64_t>(layout->flat_parameters().size());
  std::vector<float> own = global;
  for (int64_t d = 0; d < P; ++d) own[d] += (d % 3 == 0) ? -0.01f : 0.01f;
  constexpr double kLr = 0.1, kLambda = 0.5;
  ClientState with, without;
  with.vectors["model"] = own;
  without.vectors["model"] = own;
  const std::vector<float> a = rsa_round(s, {{"lambda", kLambda}, {"lr", kLr}}, with, global, 2);
  const std::vector<float> b = rsa_round(s, {{"lambda", 0.0}, {"lr", kLr}}, without, global, 2);
  constexpr float kStepRounding = 1e-6f;  // two float SGD steps on O(0.1) weights, differing by 0.05
  for (int64_t d = 0; d < P; ++d) {
    const float sign = (d % 3 == 0) ? -1.0f : 1.0f;
    ASSERT_NEAR(a[d] - b[d], -static_cast<float>(kLr * kLambda) * sign, kStepRounding) << "d=" << d;
  }
  for (size_t d = static_cast<size_t>(P); d < a.size(); ++d) EXPECT_EQ(a[d], b[d]);  // buffers: no penalty
}

TEST(FlRsaClient, WithoutThePenaltyTheGlobalModelDoesNotReachTheStoredModel) {
  // x_i persists: with lambda 0 a round's result does not depend on the x_0 it receives.
  ClientSetup s;
  const std::vector<float> g1 = state_of(*make_model("mlp", kInput, 10, 5));
  const std::vector<float> g2 = state_of(*make_model("mlp", kInput, 10, 6));
  ClientState first, second;
  const std::vector<float> x1 = rsa_round(s, {{"lambda", 0.0}}, first, g1);
  second = first;
  EXPECT_EQ(rsa_round(s, {{"lambda", 0.0}}, first, g1, 2), rsa_round(s, {{"lambda", 0.0}}, second, g2, 2));
  // and the client's own model is what personalised evaluation judges
  std::vector<float> out(x1.size());
  ASSERT_TRUE(client_rule("rsa", {})->personal_model(first, g1, *make_model("mlp", kInput, 10, 5), out));
  EXPECT_EQ(out, first.vectors.at("model"));
  EXPECT_FALSE(client_rule("rsa", {})->personal_model(ClientState{}, g1, *make_model("mlp", kInput, 10, 5), out));
}

TEST(FlRsaClient, DefaultsAreThePapersWorkerAndSamIsRefused) {
  const ClientRuleEntry& entry = find_client_rule("rsa");
  const Params p("clients.rsa", *entry.info.params, {});
  EXPECT_EQ(p.integer("steps"), 1);
  EXPECT_EQ(p.real("momentum"), 0.0);
  EXPECT_EQ(p.real("lambda"), 0.1);
  expect_error([] { client_rule("rsa", {{"rho", 0.05}}); }, {"clients.rsa.rho"});
  expect_error([] { client_rule("rsa", {{"lambda", -1.0}}); }, {"clients.rsa.lambda"});
}

// ------------------------------------------------------------------------------------------ whole runs

// RSA's client + server pair under BadNets, with personalised evaluation of each client's x_i.
testing::TinyRun rsa_run() {
  return {{"rounds=5", "data.clients=8", "data.local_test=like-train", "clients.rule=rsa", "clients.rsa.steps=0",
           "clients.rsa.epochs=1", "clients.rsa.lambda=0.05", "server.rule=rsa", "attack.names=[\"badnets\"]",
           "attack.malicious_count=2", "attack.malicious_per_round=1", "eval.personalized=true"}};
}

using FlRsaRun = testing::FlRunTest;

TEST_F(FlRsaRun, KilledAndResumedRunsKeepEveryClientsModelBitForBitOnAnyThreadCount) {
  expect_same_on_threads_and_resume(rsa_run(), /*stop_after=*/3);
  const CheckpointState whole = load_checkpoint((dir_ / "one" / "checkpoint.safetensors").string());
  const CheckpointState resumed = load_checkpoint((dir_ / "resumed" / "checkpoint.safetensors").string());
  EXPECT_EQ(whole.global, resumed.global);
  ASSERT_EQ(whole.clients.size(), resumed.clients.size());
  int64_t with_model = 0;
  for (size_t c = 0; c < whole.clients.size(); ++c) {
    EXPECT_EQ(whole.clients[c].vectors, resumed.clients[c].vectors) << "client " << c;
    with_model += whole.clients[c].vectors.count("model");
  }
  EXPECT_GT(with_model, 0);  // sampled clients keep their x_i
  for (const RoundRecord& r : parse_rounds_csv(file("one", "rounds.csv"))) EXPECT_GT(r.personal.acc.mean, 0.0);
}

}  // namespace
}  // namespace bastion
