// SPMC (fl/defenses/spmc.cpp, fl/clients/spmc.cpp, fl/clients/lgalign.h): the margin-contribution weights on
// constructed uploads with hand-computed answers, LGAlign's projection per tensor, one client step checked
// against gradients computed here, the method server's weights, the rule pairing check, and short runs.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "data/loader.h"
#include "defense_test_support.h"
#include "fl/clients/lgalign.h"
#include "fl/clients/method_server.h"
#include "fl/core/checkpoint.h"
#include "fl/reproduce/preset.h"
#include "fl/reproduce/reproduce.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;
using testing::Uploads;

AggregationOutput spmc(const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return make_spmc(Params("server.spmc", spmc_params(), given))->aggregate(u.input());
}

// softmax(scores), for expected weights.
std::vector<double> softmax(const std::vector<double>& s) {
  std::vector<double> w;
  double sum = 0.0;
  for (double v : s) sum += std::exp(v);
  for (double v : s) w.push_back(std::exp(v) / sum);
  return w;
}

void expect_weights(const std::vector<double>& got, const std::vector<double>& want, double tolerance = 1e-9) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << "row " << i;
}

// W1 = (1, 0), W2 = (0, 1), W3 = (1, 1) (global 0). Coalitions: C1 = (0.5, 1), C2 = (1, 0.5), C3 = (0.5, 0.5).
Uploads three_models() { return Uploads({{1, 0}, {0, 1}, {1, 1}}); }

TEST(FlSpmcServer, HandComputedCosineWeightsAndUpdate) {
  const AggregationOutput out = spmc(three_models(), {{"eps", 0.0}});
  // cos(W1, C1) = 0.5 / (1 * sqrt(1.25)) = 1/sqrt(5) = cos(W2, C2); cos(W3, C3) = 1.
  const std::vector<double> want = softmax({1 / std::sqrt(5.0), 1 / std::sqrt(5.0), 1.0});
  expect_weights(out.weights, want);
  ASSERT_EQ(out.update.size(), 2u);
  EXPECT_NEAR(out.update[0], want[0] + want[2], 1e-6);
  EXPECT_NEAR(out.update[1], want[1] + want[2], 1e-6);
  EXPECT_TRUE(out.flagged.empty());
}

TEST(FlSpmcServer, DistanceVariantsWeighByTheNegatedDistance) {
  // Euclidean: |W - C| = sqrt(1.25), sqrt(1.25), sqrt(0.5); Chebyshev: 1, 1, 0.5;
  // Wasserstein-1 of the sorted values: {0,1} vs {0.5,1} = 0.25 twice, {1,1} vs {0.5,0.5} = 0.5.
  expect_weights(spmc(three_models(), {{"metric", std::string("euclidean")}}).weights,
                 softmax({-std::sqrt(1.25), -std::sqrt(1.25), -std::sqrt(0.5)}));
  expect_weights(spmc(three_models(), {{"metric", std::string("chebyshev")}}).weights, softmax({-1, -1, -0.5}));
  expect_weights(spmc(three_models(), {{"metric", std::string("wasserstein")}}).weights, softmax({-0.25, -0.25, -0.5}));
}

TEST(FlSpmcServer, TemperatureDividesTheScores) {
  const double c = 1 / std::sqrt(5.0);
  expect_weights(spmc(three_models(), {{"eps", 0.0}, {"temperature", 0.1}}).weights, softmax({c / 0.1, c / 0.1, 10.0}));
}

TEST(FlSpmcServer, ModelsSpaceAddsTheGlobalModelUpdatesSpaceDoesNot) {
  // Far from the origin every model points the same way: the weights come out near uniform (the code's
  // quirk, IMPLEMENTATION-FACTS §2.6); on the updates they are the hand-computed ones above.
  Uploads u = three_models();
  u.global = {100, 100};
  const std::vector<double> models = spmc(u, {{"eps", 0.0}}).weights;
  for (double w : models) EXPECT_NEAR(w, 1.0 / 3, 1e-4);
  expect_weights(spmc(u, {{"eps", 0.0}, {"space", std::string("updates")}}).weights,
                 softmax({1 / std::sqrt(5.0), 1 / std::sqrt(5.0), 1.0}));
}

TEST(FlSpmcServer, AnOutlierGetsTheSmallestWeightAndIdenticalClientsEqualWeights) {
  Uploads u = Uploads::gaussian(6, 40, 3, 0.0f, 0.05f);
  u.global.assign(40, 0.0f);
  Generator g(4);
  std::vector<float> mu(40);
  for (float& v : mu) v = static_cast<float>(g.normal());
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t d = 0; d < 40; ++d) u.row(i)[d] += i == 4 ? -mu[d] : mu[d];  // row 4 points the other way
  const std::vector<double> w = spmc(u).weights;
  EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-12);
  for (int64_t i = 0; i < 6; ++i) {
    if (i != 4) {
      EXPECT_LT(w[4], w[i]) << i;
    }
  }
  for (int64_t i = 1; i < 6; ++i) std::copy_n(u.row(0), 40, u.row(i));
  for (double v : spmc(u).weights) EXPECT_NEAR(v, 1.0 / 6, 1e-12);
}

TEST(FlSpmcServer, SampleWeightedCoalitionAndTheSingleUpload) {
  // coalition = samples with |D| = (1, 1, 3): C1 = (0 + 3, 1 + 3) / 4 = (0.75, 1); cos(W1, C1) = 0.75 / 1.25 = 0.6.
  Uploads u = three_models();
  u.samples = {1, 1, 3};
  const std::vector<double> w = spmc(u, {{"eps", 0.0}, {"coalition", std::string("samples")}}).weights;
  // C2 = (1 + 3, 3) / 4 = (1, 0.75): 0.6 as well; C3 = (1, 1) / 2 = (0.5, 0.5): cos 1.
  expect_weights(w, softmax({0.6, 0.6, 1.0}));
  const AggregationOutput one = spmc(Uploads({{2, -1}}));
  expect_weights(one.weights, {1.0});
  EXPECT_EQ(one.update, (std::vector<float>{2, -1}));
}

TEST(FlSpmcServer, UnknownOrOutOfRangeOptionsAreRefused) {
  expect_error(
      [] {
        Params("server.spmc", spmc_params(), {{"metric", std::string("manhattan")}});
      },
      {"metric", "manhattan"});
  expect_error([] { Params("server.spmc", spmc_params(), {{"temperature", 0.0}}); }, {"temperature"});
}

// ---- LGAlign ----

TEST(FlLgAlign, AConflictingTensorBecomesOrthogonalAnAgreeingOneIsUntouched) {
  // Tensor A = columns [0, 3): g . r = -2 + 0 + 1 = -1 < 0, projected; tensor B = [3, 5): g . r = 2 > 0.
  std::vector<float> g = {1, 2, 1, 1, 1};
  const std::vector<float> r = {-2, 0, 1, 1, 1};
  const std::vector<GradientGroup> tensors = {{{0, 3}}, {{3, 5}}};
  EXPECT_EQ(align_gradient(g, r, tensors, 1.0), 1);
  // g_A - (-1 / 5) r_A = (1 - 0.4, 2, 1 + 0.2).
  EXPECT_NEAR(g[0], 0.6, 1e-6);
  EXPECT_NEAR(g[1], 2.0, 1e-6);
  EXPECT_NEAR(g[2], 1.2, 1e-6);
  EXPECT_NEAR(g[0] * r[0] + g[1] * r[1] + g[2] * r[2], 0.0, 1e-6);
  EXPECT_EQ(g[3], 1.0f);
  EXPECT_EQ(g[4], 1.0f);
}

TEST(FlLgAlign, LambdaScalesTheRemovedPartAndAZeroReferenceOrAgreementKeepsG) {
  std::vector<float> g = {1, 0};
  const std::vector<float> r = {-1, 1};
  EXPECT_EQ(align_gradient(g, r, {{{0, 2}}}, 0.5), 1);  // g . r = -1: g + 0.5 * 0.5 r = (0.75, 0.25)
  EXPECT_NEAR(g[0], 0.75, 1e-7);
  EXPECT_NEAR(g[1], 0.25, 1e-7);
  std::vector<float> h = {1, 2};
  EXPECT_EQ(align_gradient(h, std::vector<float>{0, 0}, {{{0, 2}}}, 1.0), 0);
  EXPECT_EQ(align_gradient(h, std::vector<float>{1, -0.5f}, {{{0, 2}}}, 1.0), 0);  // g . r = 0: no conflict
  EXPECT_EQ(h, (std::vector<float>{1, 2}));
}

TEST(FlLgAlign, WholeModelGranularityTestsTheSumOfTheTensors) {
  // Per tensor: [0,1) conflicts (-1), [1,2) agrees (+3); as one vector g . r = 2 >= 0: nothing moves.
  std::vector<float> g = {1, 3};
  const std::vector<float> r = {-1, 1};
  EXPECT_EQ(align_gradient(g, r, {{{0, 1}, {1, 2}}}, 1.0), 0);
  EXPECT_EQ(g, (std::vector<float>{1, 3}));
  EXPECT_EQ(align_gradient(g, r, {{{0, 1}}, {{1, 2}}}, 1.0), 1);
  EXPECT_NEAR(g[0], 0.0, 1e-7);
  EXPECT_EQ(g[1], 3.0f);
}

// ---- the client rule and its server part ----

ClientMessage message_for(const MethodServer& server, int64_t client) {
  ClientMessage out;
  server.message(client, {}, out);
  return out;
}

TEST(FlSpmcClient, MethodServerSendsLastRoundsWeightsOnlyToItsAcceptedClients) {
  const auto server = client_rule("spmc", {})->make_method_server(4, 2);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(message_for(*server, 1).empty());  // round 1: the teacher is the global model
  const std::vector<int64_t> clients = {1, 3};
  const std::vector<float> uploads(4, 0.0f);
  const std::vector<double> weights = {0.25, 0.75};
  std::vector<float> update = {1, 2};
  server->after_aggregation(MethodRound{uploads.data(), 2, 2, 2, &clients, nullptr, {}, weights}, update);
  EXPECT_EQ(update, (std::vector<float>{1, 2}));  // the update is the server rule's
  EXPECT_EQ(message_for(*server, 1).at("spmc_alpha"), (std::vector<float>{0.25f}));
  EXPECT_EQ(message_for(*server, 3).at("spmc_alpha"), (std::vector<float>{0.75f}));
  EXPECT_TRUE(message_for(*server, 0).empty());
  const auto restored = client_rule("spmc", {})->make_method_server(4, 2);
  restored->load_state(server->save_state());
  EXPECT_EQ(message_for(*restored, 3), message_for(*server, 3));
  EXPECT_THROW(restored->load_state(RuleState::from_legacy({0.5f})), Error);  // pre-codec floats: one weight for 4
  const auto from_old = client_rule("spmc", {})->make_method_server(4, 2);
  from_old->load_state(RuleState::from_legacy({-1.0f, 0.25f, -1.0f, 0.75f}));  // the pre-codec float layout
  EXPECT_EQ(message_for(*from_old, 3), message_for(*server, 3));
  expect_error(
      [&] {
        server->after_aggregation(MethodRound{uploads.data(), 2, 2, 2, &clients, nullptr, {}, {}}, update);
      },
      {"aggregation weights", "spmc"});
}

TEST(FlSpmcClient, CoalitionFromTheNewGlobalIsTheWeightedMeanOfTheOthers) {
  // The server's aggregate sum_i a_i W_i, rebuilt on client k as (w_g - a_k W_k) / (1 - a_k) (eq. 5).
  Uploads u({{1, 0, 2}, {0, 1, -1}, {3, 1, 1}});
  const AggregationOutput out = spmc(u);
  std::vector<float> global(3);
  for (int d = 0; d < 3; ++d) global[d] = out.update[d];  // global 0 + update
  for (int64_t k = 0; k < 3; ++k) {
    std::vector<float> coalition(3);
    const double a = out.weights[k];
    for (int d = 0; d < 3; ++d) coalition[d] = static_cast<float>((global[d] - a * u.row(k)[d]) / (1 - a));
    for (int d = 0; d < 3; ++d) {
      double want = 0.0;
      for (int64_t j = 0; j < 3; ++j)
        if (j != k) want += out.weights[j] * u.row(j)[d] / (1 - a);
      EXPECT_NEAR(coalition[d], want, 1e-6) << "client " << k << " d " << d;
    }
  }
}

// One full-batch step of the client: w - lr * align(G_d, G_g) with G_d, G_g computed here by hand.
TEST(FlSpmcClient, OneStepUsesTheCrossEntropyGradientProjectedOffTheTeachersPerTensor) {
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto model = make_model("mlp", kInput, 10, 5);
  const auto teacher = make_model("mlp", kInput, 10, 6);
  const auto second = make_model("mlp", kInput, 10, 7);
  const std::vector<float> start = state_of(*model);
  // Stored previous model W and weight a = 0.5 make the teacher C = 2 w_g - W; choose W = 2 w_g - T.
  ClientState state;
  std::vector<float> previous(start.size());
  for (size_t d = 0; d < start.size(); ++d) previous[d] = 2 * start[d] - teacher->flat_state()[d];
  state.vectors["spmc_previous"] = previous;
  ClientMessage message{{"spmc_alpha", {0.5f}}};
  ClientTask task{*model, data, indices, identity, state, 0, 2, 11, 12};
  task.message = &message;
  task.second = second.get();
  constexpr float kLr = 0.1f;
  const auto rule = client_rule(
      "spmc",
      {{"epochs", int64_t{1}}, {"batch", int64_t{40}}, {"lr", double{kLr}}, {"momentum", 0.0}, {"weight_decay", 0.0}});
  EXPECT_EQ(rule->train(task).steps, 1);

  const auto check = make_model("mlp", kInput, 10, 5);
  BatchLoader loader(data, 40, false, 0, indices);
  Tensor x;
  LabelTensor y;
  ASSERT_TRUE(loader.next(x, y));
  check->train(true);
  check->zero_grad();
  cross_entropy(check->forward(x), y).backward();
  std::vector<float> g(check->flat_gradients().begin(), check->flat_gradients().end());
  Tensor t;
  {
    NoGradGuard no_grad;
    teacher->train(false);
    t = teacher->forward(x);
  }
  check->zero_grad();
  kl_div(check->forward(x), t, 1.0f).backward();
  const std::vector<float> r(check->flat_gradients().begin(), check->flat_gradients().end());
  std::vector<GradientGroup> tensors;
  for (const ParameterView& p : check->parameters()) tensors.push_back({{p.begin, p.end}});
  EXPECT_GT(align_gradient(g, r, tensors, 1.0), 0) << "no tensor conflicted: the test would not see the projection";
  const std::span<const float> w = model->flat_parameters();
  for (size_t d = 0; d < g.size(); ++d) EXPECT_NEAR(w[d], start[d] - kLr * g[d], 1e-6) << d;
  // The trained model is kept for the next round's coalition.
  EXPECT_EQ(state.vectors.at("spmc_previous"), state_of(*model));
}

TEST(FlSpmcClient, SamIsRefused) {
  expect_error([] { client_rule("spmc", {{"rho", 0.05}}); }, {"rho"});
}

// ---- whole runs ----

testing::TinyRun spmc_run(const std::string& server_rule) {
  return {{"rounds=3", "data.clients=5", "clients.rule=spmc", "clients.per_round=5", "clients.spmc.epochs=1",
           "clients.spmc.batch=16", "server.rule=" + server_rule, "attack.names=[\"badnets\"]",
           "attack.malicious_count=1", "attack.selection=last", "run.checkpoint_every=1"}};
}

using FlSpmcRun = testing::FlRunTest;

TEST_F(FlSpmcRun, SpmcPairsWithWeightReportingRulesAndIsThreadCountIndependent) {
  const std::vector<RunSummary> one = run(spmc_run("spmc"), "one", 1);
  const std::vector<RunSummary> two = run(spmc_run("spmc"), "two", 2);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(std::isfinite(one[0].acc));
  EXPECT_EQ(file("one", "rounds.csv"), file("two", "rounds.csv"));
  // The method server kept every client's weight of the last round (all 5 aggregated): a softmax over 5.
  const CheckpointState saved = load_checkpoint((dir_ / "one" / "checkpoint.safetensors").string());
  ASSERT_EQ(saved.method_state.reals("weights").size(), 5u);
  double sum = 0.0;
  for (double a : saved.method_state.reals("weights")) {
    EXPECT_GT(a, 0.0);
    sum += a;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);                                 // float64 now: exact up to the softmax's rounding
  EXPECT_NO_THROW(run(spmc_run("fedavg"), "lgalign-only", 1));  // Table 1's LGAlign-only ablation
  expect_error([&] { run(spmc_run("median"), "median", 1); },
               {"clients.rule = 'spmc'", "server.rule = 'median'", "fedavg, spmc"});
}

// The committed Table 1 preset at its --quick scale, cut to its SPMC row and the gamma = 0.3 columns (one
// run: the three columns share it) to keep the suite short; every cell of every SPMC preset is validated by
// CommittedConfigs.EveryConfigAndPresetLoads.
TEST_F(FlSpmcRun, QuickPresetRunsEndToEnd) {
  if (!testing::dataset_installed("mnist")) GTEST_SKIP() << "MNIST not installed";
  Preset preset = load_preset(std::string(BASTION_SOURCE_DIR) + "/configs/papers/spmc-table1.toml");
  ASSERT_EQ(preset.rows.size(), 4u);
  ASSERT_EQ(preset.columns.size(), 6u);
  preset.rows.erase(preset.rows.begin(), preset.rows.begin() + 3);
  for (PresetRow& row : preset.rows) row.paper.erase(row.paper.begin(), row.paper.begin() + 3);
  preset.columns.erase(preset.columns.begin(), preset.columns.begin() + 3);
  ReproduceOptions options;
  options.out_dir = (dir_ / "table1").string();
  options.quick = true;
  options.threads = 1;
  const ReproduceReport report = reproduce(preset, options);
  EXPECT_EQ(report.failed, 0);
  EXPECT_EQ(report.runs, 1);
  for (const CellResult& cell : report.cells.at(0)) EXPECT_TRUE(std::isfinite(cell.mean));
  // V = (A + R) / 2 in the table's own numbers.
  EXPECT_NEAR(report.cells[0][2].mean, (report.cells[0][0].mean + report.cells[0][1].mean) / 2, 1e-6);
}

}  // namespace
}  // namespace bastion
