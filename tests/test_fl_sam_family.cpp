// FedFSA's Top-C choice on constructed weights, and the SAM family's server and client parts
// (fl/clients/sam_family.cpp) on constructed uploads, checked against hand computations. The SAM step
// itself is tested in test_sam_step.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "fl/clients/sam_family.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "personalized_test_support.h"
#include "tensor/random.h"

namespace bastion {
namespace {

using namespace pfl_testing;

TEST(FedFsaTopC, PicksTheMostChangedWeightTensorsAndNeverABias) {
  EXPECT_TRUE(fsa_candidate("fc2.weight"));
  for (const char* name :
       {"fc2.bias", "layer1.0.bn1.weight", "layer2.0.downsample.0.weight", "shortcut.weight", "norm.weight"})
    EXPECT_FALSE(fsa_candidate(name)) << name;
  auto model = small_mlp();  // fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  const std::span<float> w = model->flat_parameters();
  const std::vector<ParameterView>& p = model->parameters();
  const double shift[] = {0.5, 9.0, 1.0, 9.0, 0.1, 9.0};  // per-element change; the biases change most
  for (size_t k = 0; k < p.size(); ++k)
    for (int64_t i = p[k].begin; i < p[k].end; ++i) w[i] += static_cast<float>(shift[k]);
  // paper: ||change||^2 = shift^2 x size: fc2.weight 40000, fc1.weight 50, fc3.weight 4 (sizes 40000, 200, 400)
  const std::vector<double> paper = fsa_sensitivity(*model, before, false);
  EXPECT_EQ(fsa_top_c(paper, 2), (std::vector<size_t>{2, 0}));
  EXPECT_EQ(fsa_top_c(paper, 5), (std::vector<size_t>{2, 0, 4}));  // only three candidates
  EXPECT_NEAR(paper[0], 0.25 * 200, 1e-3);
  // code: min-max normalisation makes a uniform shift invisible; a reordering of fc3.weight is seen.
  std::swap(w[p[4].begin], w[p[4].end - 1]);
  const std::vector<double> code = fsa_sensitivity(*model, before, true);
  EXPECT_NEAR(code[0], 0.0, 1e-9);
  EXPECT_NEAR(code[2], 0.0, 1e-9);
  EXPECT_GT(code[4], 1e-4);
  EXPECT_EQ(fsa_top_c(code, 1), (std::vector<size_t>{4}));
}

// The two sensitivities on two constructed clients trained from one model: both shift every weight of the
// large fc2 by 0.2 (the paper's squared change is 40000 x 0.04 = 1600 there; reversing fc1.weight's 200
// values of U(-1, 1) changes it by about 200 x 2/3), client A reverses fc1.weight's order and client B
// fc3.weight's. The paper's form picks fc2
// for both; the code's min-max normalised form cannot see a uniform shift and picks each client's own
// reordered tensor: the per-client choice that is the method.
TEST(FedFsaTopC, CodeSensitivityPicksDifferentTensorsForDifferentClients) {
  auto model = small_mlp();  // fc1.weight (200), fc1.bias, fc2.weight (40000), fc2.bias, fc3.weight (400), fc3.bias
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  const std::vector<ParameterView>& p = model->parameters();
  auto trained = [&](size_t reversed) {
    std::vector<float> after = before;
    for (int64_t i = p[2].begin; i < p[2].end; ++i) after[i] += 0.2f;
    std::reverse(after.begin() + p[reversed].begin, after.begin() + p[reversed].end);
    std::copy(after.begin(), after.end(), model->flat_parameters().begin());
  };
  trained(0);
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, false), 1), (std::vector<size_t>{2}));
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, true), 1), (std::vector<size_t>{0}));
  trained(4);
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, false), 1), (std::vector<size_t>{2}));
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, true), 1), (std::vector<size_t>{4}));
}

// Feeds a method server one round: the accepted clients' uploads (rows of P values) and extra uploads.
void server_round(MethodServer& server, const std::vector<int64_t>& clients, const std::vector<float>& uploads,
                  const std::vector<std::vector<float>>& extra, std::vector<float>& update) {
  std::vector<std::span<const float>> extra_spans(extra.begin(), extra.end());
  extra_spans.resize(clients.size());
  const int64_t P = static_cast<int64_t>(update.size());
  const MethodRound round{uploads.data(), static_cast<int64_t>(clients.size()), P, P, &clients, &extra_spans};
  server.after_aggregation(round, update);
}

ClientMessage message_for(const MethodServer& server, int64_t client) {
  ClientMessage out;
  server.message(client, {}, out);
  return out;
}

TEST(SamFamilyServer, MoFedSamSendsTheMeanOfTheAcceptedUpdatesAndLeavesTheUpdateAlone) {
  const auto server = client_rule("mofedsam", {})->make_method_server(5, 3);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(message_for(*server, 0).empty());  // round 1: m = 0
  std::vector<float> update = {1, 2, 3};
  server_round(*server, {0, 3}, {1, 2, 3, 3, -2, 5}, {}, update);
  EXPECT_EQ(update, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(message_for(*server, 4).at("mean_update"), (std::vector<float>{2, 0, 4}));
  EXPECT_EQ(client_rule("fedsam", {})->make_method_server(5, 3), nullptr);
}

TEST(SamFamilyServer, FedSpeedAndFedSmooStateAfterTwoRoundsMatchesAHandComputation) {
  for (const std::string rule : {"fedspeed", "fedsmoo"}) {
    SCOPED_TRACE(rule);
    const auto server = client_rule(rule, {{"rho", 0.1}})->make_method_server(3, 2);
    // Round 1: clients 0, 1 upload (1, 2), (3, 4); mu (3, 0), (1, 0). h0 = (1, 2), h1 = (3, 4).
    std::vector<float> update = {10, 20};
    server_round(*server, {0, 1}, {1, 2, 3, 4}, {{3, 0}, {1, 0}}, update);
    EXPECT_NEAR(update[0], 10 + 4.0 / 3, 1e-5);  // + mean over all 3 clients of h
    EXPECT_NEAR(update[1], 20 + 6.0 / 3, 1e-5);
    // Round 2: clients 1, 2 upload (1, 1), (2, 0); client 2's mu is not finite and is left out of s.
    update = {0, 0};
    const float nan = std::numeric_limits<float>::quiet_NaN();
    server_round(*server, {1, 2}, {1, 1, 2, 0}, {{0, 3}, {nan, 1}}, update);
    EXPECT_NEAR(update[0], 7.0 / 3, 1e-5);  // h = (1, 2), (4, 5), (2, 0)
    EXPECT_NEAR(update[1], 7.0 / 3, 1e-5);
    EXPECT_EQ(message_for(*server, 1).at("h"), (std::vector<float>{4, 5}));
    EXPECT_EQ(message_for(*server, 2).at("h"), (std::vector<float>{2, 0}));
    const ClientMessage to_0 = message_for(*server, 0);
    if (rule == "fedsmoo") {
      EXPECT_EQ(to_0.at("mu"), (std::vector<float>{3, 0}));
      EXPECT_EQ(message_for(*server, 1).at("mu"), (std::vector<float>{0, 3}));
      EXPECT_EQ(message_for(*server, 2).count("mu"), 0u);
      EXPECT_NEAR(to_0.at("s")[0], 0.0, 1e-7);  // s = 0.1 (0, 3) / 3
      EXPECT_NEAR(to_0.at("s")[1], 0.1, 1e-6);
    } else {
      EXPECT_EQ(to_0.count("mu") + to_0.count("s"), 0u);
    }
    // The state survives a checkpoint; a truncated one is refused.
    const RuleState saved = server->save_state();
    const auto restored = client_rule(rule, {{"rho", 0.1}})->make_method_server(3, 2);
    restored->load_state(saved);
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(message_for(*restored, c), message_for(*server, c));
    // A checkpoint written before the codec: [P, size + mean update, size + s, count + (id, h), count + (id, mu)].
    std::vector<float> legacy = {2.0f};
    for (const char* block : {"mean_update", "s"}) {
      legacy.push_back(static_cast<float>(saved.floats(block).size()));
      legacy.insert(legacy.end(), saved.floats(block).begin(), saved.floats(block).end());
    }
    for (const std::string per_client : {"h", "mu"}) {
      const std::vector<int64_t>& ids = saved.ints(per_client + "_ids");
      legacy.push_back(static_cast<float>(ids.size()));
      for (size_t k = 0; k < ids.size(); ++k) {
        legacy.push_back(static_cast<float>(ids[k]));
        legacy.insert(legacy.end(), saved.floats(per_client).begin() + 2 * k,
                      saved.floats(per_client).begin() + 2 * (k + 1));
      }
    }
    const auto from_old = client_rule(rule, {{"rho", 0.1}})->make_method_server(3, 2);
    from_old->load_state(RuleState::from_legacy(legacy));
    EXPECT_EQ(from_old->save_state(), saved);
    legacy.pop_back();
    EXPECT_THROW(restored->load_state(RuleState::from_legacy(legacy)), Error);  // truncated
  }
}

TEST(SamFamilyClient, MoFedSamWithAlphaZeroRepeatsTheServersMeanUpdate) {
  // alpha 0 drops the SAM gradient: one step of lr 0.1 along m = -u / (K lr0) with K = 1 moves w by u.
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  ClientMessage message;
  message["mean_update"] = normal_values(before.size(), 9);
  for (float& v : message["mean_update"]) v *= 0.01f;
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 2, 11, 12};
  task.message = &message;
  const auto rule =
      client_rule("mofedsam", {{"alpha", 0.0}, {"grad_clip", 0.0}, {"epochs", int64_t{1}}, {"batch", int64_t{40}}});
  EXPECT_EQ(rule->train(task).steps, 1);
  const std::span<const float> w = model->flat_parameters();
  for (size_t i = 0; i < before.size(); i += 211) EXPECT_NEAR(w[i] - before[i], message["mean_update"][i], 1e-6) << i;
}

TEST(SamFamilyClient, MoFedSamByDefaultTakesNoSgdMomentumSoKStepsRepeatTheMeanUpdateOnce) {
  // FedFSA's code steps plain SGD (momentumForSGD = 0). With alpha 0 the direction is the constant m, so
  // K = 2 steps move w by exactly u; an SGD momentum of 0.9 would move it by 2.9 u / 2.
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  ClientMessage message;
  message["mean_update"] = normal_values(before.size(), 19);
  for (float& v : message["mean_update"]) v *= 0.01f;
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 2, 11, 12};
  task.message = &message;
  const auto rule =
      client_rule("mofedsam", {{"alpha", 0.0}, {"grad_clip", 0.0}, {"epochs", int64_t{1}}, {"batch", int64_t{20}}});
  EXPECT_EQ(rule->train(task).steps, 2);
  const std::span<const float> w = model->flat_parameters();
  for (size_t i = 0; i < before.size(); i += 211) EXPECT_NEAR(w[i] - before[i], message["mean_update"][i], 1e-6) << i;
}

TEST(SamFamilyClient, FedSmooUploadsItsDualFedSpeedDecaysItsOwnLrAndFedFsaKeepsItsLayers) {
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  for (const std::string rule : {"fedsmoo", "fedspeed", "fedfsa"}) {
    SCOPED_TRACE(rule);
    const auto model = make_model("mlp", kInput, 10, 5);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
    const ClientResult result = client_rule(rule, {{"epochs", int64_t{2}}, {"batch", int64_t{16}}})->train(task);
    EXPECT_EQ(result.steps, 6);
    EXPECT_EQ(result.extra_upload.size(), rule == "fedsmoo" ? static_cast<size_t>(model->num_parameters()) : 0u);
    if (rule != "fedfsa") {  // lr 0.1 (a float) decayed in double after each of the 2 epochs
      EXPECT_NEAR(state.scalars.at("lr"), static_cast<double>(0.1f) * 0.998 * 0.998, 1e-12);
    }
    if (rule == "fedfsa") {
      const std::vector<float>& layers = state.vectors.at("fsa_layers");
      ASSERT_EQ(layers.size(), 2u);
      for (float k : layers) EXPECT_TRUE(fsa_candidate(model->parameters()[static_cast<size_t>(k)].name));
    }
  }
}

}  // namespace
}  // namespace bastion
