// FedALA (fl/clients/fedala.{h,cpp}): adaptive local aggregation on constructed global and local models
// (W = 1 gives the global model, W = 0 the local one, on the last p tensors only; W stays in [0, 1]; the
// start phase's stopping rule), the method server's Θ^0 and first visits, and the client rule's rounds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fl/clients/fedala.h"
#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "fl/clients/post_step.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "tensor/random.h"

namespace bastion {
namespace {

using namespace pfl_testing;

bool near_columns(const std::vector<std::pair<int64_t, int64_t>>& ranges, const std::vector<float>& a,
                  const std::vector<float>& b, float tolerance) {
  for (const auto& [begin, end] : ranges)
    for (int64_t i = begin; i < end; ++i)
      if (std::abs(a[i] - b[i]) > tolerance) return false;
  return true;
}

struct AlaFixture {
  Dataset data = synthetic_train(60);
  std::vector<int64_t> indices = first_indices(60);
  TransformSpec identity;
  std::unique_ptr<Model> model = make_model("mlp", kInput, 10, 5);
  std::vector<float> global = state_of(*model);
  std::vector<float> local = shifted(global, 7);

  static std::vector<float> shifted(std::vector<float> v, uint64_t seed) {
    Generator gen(seed);
    for (float& x : v) x += 0.05f * static_cast<float>(gen.normal());
    return v;
  }
  AlaData ala_data(uint64_t seed = 3) const { return {data, indices, identity, seed}; }
  // The last p tensors' columns and the rest.
  std::pair<std::vector<std::pair<int64_t, int64_t>>, std::vector<std::pair<int64_t, int64_t>>> split(int64_t p) const {
    std::vector<std::pair<int64_t, int64_t>> upper, lower;
    const auto& params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      (i + static_cast<size_t>(p) >= params.size() ? upper : lower).emplace_back(params[i].begin, params[i].end);
    return {upper, lower};
  }
};

TEST(FedAla, WeightsOfOneGiveTheGlobalModelAndZeroTheLocalOneOnTheUpperTensorsOnly) {
  AlaFixture f;
  AlaOptions options;
  options.eta = 0.0;  // W does not move: the result is the mix of the given W
  for (const int64_t p : {int64_t{2}, int64_t{3}}) {
    options.upper_tensors = p;
    const auto [upper, lower] = f.split(p);
    const int64_t count = ala_weight_count(*f.model, p);
    for (const float w : {1.0f, 0.0f}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << ", W = " << w);
      std::vector<float> weights(static_cast<size_t>(count), w);
      const AlaOutcome outcome =
          adaptive_local_aggregation(*f.model, f.global, f.local, weights, false, f.ala_data(), options);
      EXPECT_FALSE(outcome.skipped);
      EXPECT_EQ(outcome.epochs, 1);
      const std::vector<float> out = state_of(*f.model);
      EXPECT_TRUE(part_unchanged(lower, out, f.global));
      // l + (g - l) * 1 is g up to one rounding of the subtraction and the addition.
      EXPECT_TRUE(near_columns(upper, out, w == 1.0f ? f.global : f.local, 1e-6));
    }
  }
}

TEST(FedAla, LearnedWeightsMoveAndStayInTheUnitInterval) {
  AlaFixture f;
  AlaOptions options;
  options.eta = 1e4;  // large steps: the clip to [0, 1] must hold them
  options.batch = 16;
  std::vector<float> weights;
  adaptive_local_aggregation(*f.model, f.global, f.local, weights, false, f.ala_data(), options);
  ASSERT_EQ(static_cast<int64_t>(weights.size()), ala_weight_count(*f.model, 2));
  int64_t moved = 0;
  for (const float w : weights) {
    EXPECT_GE(w, 0.0f);
    EXPECT_LE(w, 1.0f);
    moved += w != 1.0f;
  }
  EXPECT_GT(moved, 0);
  // The upper columns are l + (g - l) W for the learned W, up to the roundings of the subtraction, the
  // product and the sum (fused or not, as the compiler chooses): a few float epsilons of the operands'
  // size, not of the result's, which cancels towards 0 where l and (g - l) W nearly meet (with the test
  // compiled at -O1, unfused: -1.1651311e-05 here against the engine's -1.1651519e-05).
  constexpr float kRoundings = 4 * std::numeric_limits<float>::epsilon();
  const auto [upper, lower] = f.split(2);
  const std::vector<float> out = state_of(*f.model);
  size_t k = 0;
  for (const auto& [begin, end] : upper)
    for (int64_t i = begin; i < end; ++i, ++k) {
      const float step = (f.global[i] - f.local[i]) * weights[k];
      ASSERT_NEAR(out[i], f.local[i] + step, kRoundings * (std::fabs(f.local[i]) + std::fabs(step)));
    }
}

TEST(FedAla, IdenticalFirstTensorsSkipAlaAndTheStartPhaseStopsOnItsRule) {
  AlaFixture f;
  std::vector<float> weights;
  std::vector<float> same_first = f.local;
  const ParameterView& first = f.model->parameters().front();
  std::copy(f.global.begin() + first.begin, f.global.begin() + first.end, same_first.begin() + first.begin);
  AlaOptions options;
  const AlaOutcome skipped =
      adaptive_local_aggregation(*f.model, f.global, same_first, weights, true, f.ala_data(), options);
  EXPECT_TRUE(skipped.skipped);
  EXPECT_TRUE(weights.empty());
  EXPECT_EQ(state_of(*f.model), same_first);

  options.threshold = 1e9;  // any spread is small enough: stops as soon as more than `window` losses exist
  options.window = 3;
  EXPECT_EQ(adaptive_local_aggregation(*f.model, f.global, f.local, weights, true, f.ala_data(), options).epochs, 4);
  options.threshold = 0.0;  // never small enough: the bound stops it
  options.max_start_epochs = 6;
  weights.clear();
  EXPECT_EQ(adaptive_local_aggregation(*f.model, f.global, f.local, weights, true, f.ala_data(), options).epochs, 6);
  options.sample_percent = 0.5;  // 0.3 of a sample
  EXPECT_THROW(adaptive_local_aggregation(*f.model, f.global, f.local, weights, false, f.ala_data(), options), Error);
}

void begin(MethodServer& server, int64_t round, const std::vector<float>& global, const std::vector<int64_t>& sampled) {
  server.begin_round(RoundStart{round, 0, global, &sampled});
}

TEST(FedAla, TheServerSendsTheInitialModelOnlyAtFirstVisitsAfterRoundOne) {
  const auto server = client_rule("fedala", {})->make_method_server(4, 2);
  ASSERT_NE(server, nullptr);
  auto message_for = [&](int64_t client) {
    ClientMessage out;
    server->message(client, {}, out);
    return out;
  };
  const std::vector<float> initial = {1, 2}, later = {5, 6};
  begin(*server, 1, initial, {0, 1});
  EXPECT_TRUE(message_for(0).empty());  // round 1: the global model is Θ^0
  begin(*server, 2, later, {1, 2});
  EXPECT_TRUE(message_for(1).empty());  // trained before
  EXPECT_EQ(message_for(2).at("initial"), initial);
  const RuleState saved = server->save_state();
  EXPECT_EQ(saved.floats("initial"), initial);
  EXPECT_EQ(saved.ints("seen"), (std::vector<int64_t>{1, 1, 1, 0}));
  const auto restored = client_rule("fedala", {})->make_method_server(4, 2);
  restored->load_state(saved);
  begin(*restored, 3, later, {2, 3});
  ClientMessage to_2, to_3;
  restored->message(2, {}, to_2);
  restored->message(3, {}, to_3);
  EXPECT_TRUE(to_2.empty());
  EXPECT_EQ(to_3.at("initial"), initial);
  // A checkpoint written before the codec ([Θ^0, one flag per client]) loads to the same state.
  const auto from_old = client_rule("fedala", {})->make_method_server(4, 2);
  from_old->load_state(RuleState::from_legacy({1, 2, 1, 1, 1, 0}));
  EXPECT_EQ(from_old->save_state(), saved);
  EXPECT_THROW(restored->load_state(RuleState::from_legacy({1, 2, 1, 1, 1})), Error);  // a flag short
  RuleState short_model;
  short_model.put_floats("initial", {1});
  short_model.put_ints("seen", {1, 1, 1, 0});
  EXPECT_THROW(restored->load_state(short_model), Error);
  EXPECT_EQ(client_rule("fedala", {{"first_visit", std::string("global")}})->make_method_server(4, 2), nullptr);
}

TEST(FedAla, AFirstRoundIsPlainSgdAndTheLocalModelIsKeptForEvaluation) {
  AlaFixture f;
  const std::map<std::string, ParamValue> schedule = {
      {"epochs", int64_t{1}}, {"batch", int64_t{20}}, {"momentum", 0.0}};
  auto run_rule = [&](const std::string& name, ClientState& state, const ClientMessage* message) {
    std::copy(f.global.begin(), f.global.end(), f.model->flat_state().begin());
    ClientTask task{*f.model, f.data, f.indices, f.identity, state, 0, 1, 11, 12};
    task.message = message;
    client_rule(name, schedule)->train(task);
    return state_of(*f.model);
  };
  ClientState sgd_state, ala_state;
  const std::vector<float> sgd = run_rule("sgd", sgd_state, nullptr);
  EXPECT_EQ(run_rule("fedala", ala_state, nullptr), sgd);  // no local model, no Θ^0: ALA skipped
  EXPECT_EQ(ala_state.vectors.at("local"), sgd);
  EXPECT_EQ(ala_state.scalars.count("ala_started"), 0u);
  const auto rule = client_rule("fedala", schedule);
  std::vector<float> own(f.global.size());
  EXPECT_TRUE(rule->personal_model(ala_state, f.global, *f.model, own));
  EXPECT_EQ(own, sgd);

  // A first visit after round 1 runs ALA against Θ^0: the start model is no longer the global one.
  ClientState late;
  ClientMessage message;
  message["initial"] = std::vector<float>(f.local.begin(), f.local.begin() + f.model->num_parameters());
  EXPECT_NE(run_rule("fedala", late, &message), sgd);
  EXPECT_EQ(late.scalars.at("ala_started"), 1.0);
  EXPECT_EQ(static_cast<int64_t>(late.vectors.at("ala_weights").size()), ala_weight_count(*f.model, 2));
}

TEST(FedAla, ThePostStepStartsFromTheAggregatedModelOnlyForATrainedClient) {
  AlaFixture f;
  const auto rule = client_rule("fedala", {{"tune", std::string("final-head")}});
  ASSERT_TRUE(rule->post_step().has_value());
  EXPECT_EQ(rule->post_step()->kind, PostSpec::Kind::HeadTune);
  const PostStartData data{f.data, f.indices, f.identity, 9};
  ClientState fresh;
  std::copy(f.global.begin(), f.global.end(), f.model->flat_state().begin());
  EXPECT_FALSE(rule->prepare_post_step(fresh, f.global, *f.model, data));
  EXPECT_EQ(state_of(*f.model), f.global);
  ClientState trained;
  trained.vectors["local"] = f.local;
  trained.scalars["ala_started"] = 1.0;
  EXPECT_TRUE(rule->prepare_post_step(trained, f.global, *f.model, data));
  const auto [upper, lower] = f.split(2);
  const std::vector<float> out = state_of(*f.model);
  EXPECT_TRUE(part_unchanged(lower, out, f.global));
  EXPECT_FALSE(part_unchanged(upper, out, f.global));
  EXPECT_EQ(trained.vectors.count("ala_weights"), 0u);  // read-only on the client's state
}

}  // namespace
}  // namespace bastion
