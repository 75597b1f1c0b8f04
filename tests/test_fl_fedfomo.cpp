// FedFomo (fl/clients/fedfomo.cpp, fedfomo_server.cpp): the weights on constructed candidates whose
// validation losses are known to be lower or higher, the normalisation, the e-greedy offer, the affinity
// update, aggregate = false, the server state's checkpoint, the train/validation split, and whole runs
// through the registry (deterministic for any thread count, resumable, the global model never moves).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "fl/clients/fedfomo.h"
#include "fl/clients/local_training.h"
#include "fl/core/checkpoint.h"
#include "fl/core/experiment.h"
#include "fl/evaluate.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;

// Relative float tolerance of the weighted sum of two models: each value is a double sum of two float
// products rounded once to float (half an ulp, 6e-8 relative), so 1e-6 absolute on O(1) weights.
constexpr double kMixTolerance = 1e-6;

// ---- the math on constructed numbers ----

TEST(FedFomoMath, WeightIsTheLossDropOverTheDistance) {
  const std::vector<float> a = {1, 2, 3}, b = {1, 0, 3 + 1.5f};  // differences 0, 2, -1.5
  EXPECT_DOUBLE_EQ(fomo_distance(a, b, false), 2.5);             // sqrt(4 + 2.25)
  EXPECT_DOUBLE_EQ(fomo_distance(a, b, true), 3.5);
  EXPECT_DOUBLE_EQ(fomo_weight(2.0, 1.0, 2.5, 0.0), 0.4);   // lower loss: positive
  EXPECT_DOUBLE_EQ(fomo_weight(1.0, 2.0, 2.5, 0.0), -0.4);  // higher loss: negative
  EXPECT_DOUBLE_EQ(fomo_weight(1.0, 1.0, 0.0, 1e-5), 0.0);  // the reference itself
}

TEST(FedFomoMath, MixingWeightsDropNonPositiveAndBrokenOnesAndSumToOne) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> w = fomo_mixing_weights({0.5, -1.0, 1.5, nan, inf, 0.0});
  ASSERT_EQ(w.size(), 6u);
  EXPECT_DOUBLE_EQ(w[0], 0.25);
  EXPECT_DOUBLE_EQ(w[2], 0.75);
  EXPECT_EQ(w[1] + w[3] + w[4] + w[5], 0.0);
  EXPECT_TRUE(fomo_mixing_weights({-1.0, 0.0, -0.5}).empty());  // nobody helps: the caller keeps a model
  EXPECT_TRUE(fomo_mixing_weights({}).empty());
}

TEST(FedFomoMath, AffinityAddsTheRawWeightsOrNVlabsNormalisedOnes) {
  EXPECT_EQ(fomo_affinity_increments({1.0, -3.0}, false), (std::vector<double>{1.0, -3.0}));
  EXPECT_EQ(fomo_affinity_increments({1.0, -3.0}, true), (std::vector<double>{0.5, -1.5}));  // / |sum| = 2
  EXPECT_EQ(fomo_affinity_increments({std::nan(""), 2.0}, false), (std::vector<double>{0.0, 2.0}));
}

TEST(FedFomoMath, EpsilonDecaysPerRoundFromNVlabsFirstFederatedRound) {
  EXPECT_NEAR(fomo_epsilon(0.3, 0.05, 1), 0.3, 1e-12);
  EXPECT_NEAR(fomo_epsilon(0.3, 0.05, 2), 0.25, 1e-12);
  EXPECT_NEAR(fomo_epsilon(0.3, 0.05, 6), 0.05, 1e-12);
  EXPECT_EQ(fomo_epsilon(0.3, 0.05, 8), 0.0);
}

TEST(FedFomoChoose, GreedyTakesTheLargestAffinityAndExplorationIsSeededAndExplores) {
  std::vector<float> affinity(20, 0.0f);
  std::vector<int64_t> pool;
  for (int64_t c = 0; c < 20; ++c) pool.push_back(c);
  affinity[7] = 3.0f, affinity[2] = 2.0f, affinity[11] = 1.0f, affinity[4] = -1.0f;
  for (uint64_t seed = 0; seed < 20; ++seed) {  // epsilon 0: the top three, best first, whatever the seed
    Generator rng(seed);
    EXPECT_EQ(fomo_choose(affinity, pool, 3, 0.0, rng), (std::vector<int64_t>{7, 2, 11}));
  }
  Generator a(5), b(5);
  EXPECT_EQ(fomo_choose(affinity, pool, 4, 0.5, a), fomo_choose(affinity, pool, 4, 0.5, b));  // same seed, same offer
  // epsilon 0.3: some offers leave a top-3 client out; epsilon 1: most do (a uniform 3 of 20 holds all of
  // the top three with probability 1/1140).
  auto non_top_offers = [&](double epsilon) {
    int count = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      Generator rng(seed);
      const std::vector<int64_t> offer = fomo_choose(affinity, pool, 3, epsilon, rng);
      EXPECT_EQ(std::set<int64_t>(offer.begin(), offer.end()).size(), 3u);  // distinct
      count += std::set<int64_t>(offer.begin(), offer.end()) != std::set<int64_t>{7, 2, 11};
    }
    return count;
  };
  const int some = non_top_offers(0.3), most = non_top_offers(1.0);
  EXPECT_GT(some, 20);  // P(all three slots greedy) = 0.7^3 = 0.34: about 130 of 200 explore
  EXPECT_LT(some, most);
  EXPECT_GT(most, 190);
  Generator rng(1);
  EXPECT_EQ(fomo_choose(affinity, {3, 9}, 4, 0.3, rng).size(), 2u);  // never more than the pool
}

// ---- the server part ----

std::vector<float> affinity_of(const MethodServer& server, int64_t N) {
  const std::vector<float> affinity = server.save_state().floats("affinity");  // P, N x N
  EXPECT_EQ(static_cast<int64_t>(affinity.size()), N * N);
  return affinity;
}

void server_round(MethodServer& server, const std::vector<int64_t>& clients, const std::vector<float>& uploads,
                  const std::vector<std::vector<float>>& extra, const std::vector<float>& global,
                  std::vector<float>& update) {
  std::vector<std::span<const float>> spans(extra.begin(), extra.end());
  const int64_t D = static_cast<int64_t>(global.size());
  const MethodRound round{uploads.data(), static_cast<int64_t>(clients.size()), D, D, &clients, &spans, global};
  server.after_aggregation(round, update);
}

ClientMessage message_for(MethodServer& server, int64_t round, int64_t client) {
  server.begin_round(RoundStart{round, 77, {}, nullptr});
  ClientMessage out;
  server.message(client, {}, out);
  return out;
}

TEST(FedFomoServer, StoresUploadedModelsOffersLastRoundsUploadersAndAddsWeightsToP) {
  for (const bool normalised : {false, true}) {
    SCOPED_TRACE(normalised);
    const auto rule = client_rule("fedfomo", {{"affinity", std::string(normalised ? "normalised" : "raw")}});
    const auto server = rule->make_method_server(4, 2);
    EXPECT_TRUE(message_for(*server, 1, 0).empty());  // nobody has uploaded
    const std::vector<float> global = {1, 1};
    std::vector<float> update = {5, 5};
    // Clients 1 and 2 upload models (2, 3) and (0, 1); client 1 found 2 helpful, client 2 found 1 harmful.
    server_round(*server, {1, 2}, {1, 2, -1, 0}, {{1, 0, 2, 0.5f}, {2, 0, 1, -0.25f}}, global, update);
    EXPECT_EQ(update, (std::vector<float>{0, 0}));  // no global model
    const std::vector<float> P = affinity_of(*server, 4);
    EXPECT_FLOAT_EQ(P[1 * 4 + 2], normalised ? 1.0f : 0.5f);
    EXPECT_FLOAT_EQ(P[2 * 4 + 1], normalised ? -1.0f : -0.25f);
    EXPECT_FLOAT_EQ(P[0 * 4 + 0], 1.0f);  // identity elsewhere
    EXPECT_FLOAT_EQ(P[1 * 4 + 1], 1.0f);
    const ClientMessage to_0 = message_for(*server, 2, 0);  // both uploaders, M - 1 = 4 >= 2
    ASSERT_EQ(to_0.at(kFomoIds).size(), 2u);
    const int64_t first = static_cast<int64_t>(to_0.at(kFomoIds)[0]);
    const std::vector<float> first_model(to_0.at(kFomoModels).begin(), to_0.at(kFomoModels).begin() + 2);
    EXPECT_EQ(first_model, first == 1 ? (std::vector<float>{2, 3}) : (std::vector<float>{0, 1}));
    const ClientMessage to_1 = message_for(*server, 2, 1);  // never its own model
    EXPECT_EQ(to_1.at(kFomoIds), (std::vector<float>{2}));
    EXPECT_EQ(to_1.at(kFomoModels), (std::vector<float>{0, 1}));
    // A malformed weight upload (an id outside the population) changes nothing.
    server_round(*server, {3}, {0, 0}, {{9, 1.0f}}, global, update);
    EXPECT_EQ(affinity_of(*server, 4), P);
    EXPECT_EQ(message_for(*server, 3, 0).at(kFomoIds), (std::vector<float>{3}));  // the pool is the last round's
  }
}

TEST(FedFomoServer, PoolAllOffersEveryStoredModelAndTheStateSurvivesACheckpoint) {
  const auto rule = client_rule("fedfomo", {{"pool", std::string("all")}, {"models", int64_t{2}}, {"epsilon", 0.0}});
  const auto server = rule->make_method_server(5, 2);
  const std::vector<float> global = {0, 0};
  std::vector<float> update = {0, 0};
  server_round(*server, {0, 1}, {1, 1, 2, 2}, {{0, 0, 1, 0.2f}, {}}, global, update);
  server_round(*server, {3}, {3, 3}, {{3, 0, 0, 0.1f, 1, 0.9f}}, global, update);
  // Client 3 prefers 1 (0.9 > 0.1); M = 2 sends one model; client 4 has P = 0 for all: a seeded tie-break.
  EXPECT_EQ(message_for(*server, 3, 3).at(kFomoIds), (std::vector<float>{1}));
  const RuleState saved = server->save_state();
  const auto restored = rule->make_method_server(5, 2);
  restored->load_state(saved);
  EXPECT_EQ(restored->save_state(), saved);
  for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(message_for(*restored, 3, c), message_for(*server, 3, c)) << c;
  // A checkpoint written before the codec: [N, D, P, count, last ids, count, (id, D values) records].
  std::vector<float> legacy = {5.0f, 2.0f};
  legacy.insert(legacy.end(), saved.floats("affinity").begin(), saved.floats("affinity").end());
  legacy.push_back(static_cast<float>(saved.ints("last").size()));
  for (int64_t id : saved.ints("last")) legacy.push_back(static_cast<float>(id));
  legacy.push_back(static_cast<float>(saved.ints("models_ids").size()));
  for (size_t k = 0; k < saved.ints("models_ids").size(); ++k) {
    legacy.push_back(static_cast<float>(saved.ints("models_ids")[k]));
    legacy.insert(legacy.end(), saved.floats("models").begin() + 2 * k, saved.floats("models").begin() + 2 * (k + 1));
  }
  const auto from_old = rule->make_method_server(5, 2);
  from_old->load_state(RuleState::from_legacy(legacy));
  EXPECT_EQ(from_old->save_state(), saved);
  legacy.pop_back();
  EXPECT_THROW(restored->load_state(RuleState::from_legacy(legacy)), Error);  // truncated
  EXPECT_THROW(rule->make_method_server(6, 2)->load_state(saved), Error);     // another population
}

TEST(FedFomoServer, AggregateFalseKeepsNoModelsAndSendsNothing) {
  const auto server = client_rule("fedfomo", {{"aggregate", false}})->make_method_server(3, 2);
  std::vector<float> update = {1, 1};
  server_round(*server, {0, 1}, {1, 1, 2, 2}, {{}, {}}, {0, 0}, update);
  EXPECT_EQ(update, (std::vector<float>{0, 0}));
  EXPECT_TRUE(message_for(*server, 2, 2).empty());
  EXPECT_EQ(server->save_state().ints("last").size(), 2u);       // the 2 last uploaders
  EXPECT_TRUE(server->save_state().ints("models_ids").empty());  // no model kept
}

// ---- the client on constructed candidates ----

struct ClientFixture {
  Dataset data = synthetic_train(200);
  std::vector<int64_t> indices = first_indices(100);  // 80 train, the last 20 validate
  std::vector<int64_t> validation = std::vector<int64_t>(indices.begin() + 80, indices.end());
  TransformSpec identity;
  std::unique_ptr<Model> model = make_model("mlp", kInput, 10, 3);
  std::vector<float> initial = state_of(*model);

  double validation_loss(const std::vector<float>& state) {
    std::copy(state.begin(), state.end(), model->flat_state().begin());
    return evaluate(*model, data, 50, validation).loss;
  }
  // A better model: the initial one after SGD on all 100 samples (validation included).
  std::vector<float> trained(uint64_t seed) {
    std::copy(initial.begin(), initial.end(), model->flat_state().begin());
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, seed, 1};
    client_rule("sgd", {{"epochs", int64_t{5}}, {"lr", 0.1}, {"batch", int64_t{20}}})->train(task);
    return state_of(*model);
  }
  // A worse one: the initial model plus large noise.
  std::vector<float> noisy() {
    std::vector<float> v = initial;
    Generator rng(4);
    for (float& x : v) x += static_cast<float>(3.0 * rng.normal());
    return v;
  }
  // One participation of client 0 (lr 0: SGD leaves the model bit for bit, so it keeps the mix itself).
  ClientResult participate(const std::map<std::string, ParamValue>& params, const std::vector<int64_t>& ids,
                           const std::vector<std::vector<float>>& offered, ClientState& state) {
    ClientMessage message;
    for (size_t k = 0; k < ids.size(); ++k) {
      message[kFomoIds].push_back(static_cast<float>(ids[k]));
      message[kFomoModels].insert(message[kFomoModels].end(), offered[k].begin(), offered[k].end());
    }
    std::map<std::string, ParamValue> given = {{"epochs", int64_t{1}}, {"lr", 0.0}};
    for (const auto& [key, value] : params) given[key] = value;
    std::copy(initial.begin(), initial.end(), model->flat_state().begin());  // the run loop's start state
    ClientTask task{*model, data, indices, identity, state, 0, 2, 21, 22};
    task.message = &message;
    return client_rule("fedfomo", given)->train(task);
  }
};

TEST(FedFomoClient, AHelpfulCandidateGetsAPositiveWeightAHarmfulOneNoneAndTheMixIsTheHelpfulModel) {
  ClientFixture f;
  const std::vector<float> good = f.trained(1), bad = f.noisy();
  ASSERT_LT(f.validation_loss(good), f.validation_loss(f.initial));  // the premise of the test
  ASSERT_GT(f.validation_loss(bad), f.validation_loss(f.initial));
  ClientState state;
  const ClientResult result = f.participate({}, {3, 4}, {good, bad}, state);
  // (id, w) pairs: own first (its model is the reference: w = 0), then the offered ones.
  ASSERT_EQ(result.extra_upload.size(), 6u);
  EXPECT_EQ(result.extra_upload[0], 0.0f);
  EXPECT_EQ(result.extra_upload[1], 0.0f);
  EXPECT_EQ(result.extra_upload[2], 3.0f);
  EXPECT_GT(result.extra_upload[3], 0.0f);
  EXPECT_EQ(result.extra_upload[4], 4.0f);
  EXPECT_LT(result.extra_upload[5], 0.0f);
  const double expected = (f.validation_loss(f.initial) - f.validation_loss(good)) /
                          (fomo_distance(std::span<const float>(good).first(f.model->num_parameters()),
                                         std::span<const float>(f.initial).first(f.model->num_parameters()), false) +
                           1e-5);
  EXPECT_NEAR(result.extra_upload[3], expected, 1e-6 * std::abs(expected));
  EXPECT_EQ(state.vectors.at("model"), good);      // weight 1 on the helpful model: bit for bit
  EXPECT_EQ(state.vectors.at("reference"), good);  // the next participation's theta_ref
  std::vector<float> personal(f.initial.size());
  EXPECT_TRUE(client_rule("fedfomo", {})->personal_model(state, {}, *f.model, personal));
  EXPECT_EQ(personal, good);
}

TEST(FedFomoClient, WhenNoCandidateHelpsTheOwnModelIsKeptOrNVlabsReferenceRestored) {
  ClientFixture f;
  const std::vector<float> bad = f.noisy();
  ClientState fresh;
  f.participate({}, {4}, {bad}, fresh);
  EXPECT_EQ(fresh.vectors.at("model"), f.initial);  // all weights <= 0: own model, bit for bit
  // A client whose own model (here: the helpful one) differs from its reference (the initial model):
  // the own model has weight > 0 against the reference, so it is kept as the mix ...
  ClientState state;
  state.vectors["model"] = f.trained(1);
  state.vectors["reference"] = f.initial;
  f.participate({}, {4}, {bad}, state);
  EXPECT_EQ(state.vectors.at("model"), f.trained(1));
  // ... and when the own model is the worse one, fallback = reference goes back to the reference.
  ClientState worse;
  worse.vectors["model"] = bad;
  worse.vectors["reference"] = f.initial;
  f.participate({{"fallback", std::string("reference")}}, {}, {}, worse);
  EXPECT_EQ(worse.vectors.at("model"), f.initial);
  ClientState kept = worse;
  kept.vectors["model"] = bad;
  f.participate({}, {}, {}, kept);
  EXPECT_EQ(kept.vectors.at("model"), bad);  // fallback own
}

TEST(FedFomoClient, TwoHelpfulCandidatesAreMixedWithWeightsThatSumToOne) {
  ClientFixture f;
  const std::vector<float> a = f.trained(1), b = f.trained(2);
  ClientState state;
  const ClientResult result = f.participate({}, {5, 6}, {a, b}, state);
  const double wa = result.extra_upload[3], wb = result.extra_upload[5];
  ASSERT_GT(wa, 0.0);
  ASSERT_GT(wb, 0.0);
  const std::vector<float>& mixed = state.vectors.at("model");
  for (size_t j = 0; j < mixed.size(); j += 97)
    EXPECT_NEAR(mixed[j], (wa * a[j] + wb * b[j]) / (wa + wb), kMixTolerance * (1 + std::abs(a[j]))) << j;
}

TEST(FedFomoClient, AggregateFalseIgnoresTheOfferAndTrainsOnlyOnTheTrainSplit) {
  ClientFixture f;
  ClientState state;
  const ClientResult ignored = f.participate({{"aggregate", false}}, {3}, {f.trained(1)}, state);
  EXPECT_TRUE(ignored.extra_upload.empty());
  EXPECT_EQ(state.vectors.at("model"), f.initial);  // lr 0: untouched, the offer unused
  EXPECT_EQ(state.vectors.count("reference"), 0u);
  // With training: exactly the sgd client's run on the first 80 samples (same schedule, same seed).
  const std::map<std::string, ParamValue> schedule = {
      {"epochs", int64_t{2}}, {"lr", 0.05}, {"batch", int64_t{16}}, {"momentum", 0.0}, {"lr_decay", 1.0}};
  for (const bool aggregate : {false, true}) {
    ClientState own;
    std::map<std::string, ParamValue> given = schedule;
    given["aggregate"] = aggregate;
    f.participate(given, {}, {}, own);  // first participation, nothing offered: the mix is the own model
    std::copy(f.initial.begin(), f.initial.end(), f.model->flat_state().begin());
    const std::vector<int64_t> train(f.indices.begin(), f.indices.begin() + 80);
    ClientState sgd_state;
    ClientTask task{*f.model, f.data, train, f.identity, sgd_state, 0, 2, 21, 22};
    client_rule("sgd", schedule)->train(task);
    EXPECT_EQ(own.vectors.at("model"), state_of(*f.model)) << aggregate;
  }
}

// ---- whole runs through the registry ----

testing::TinyRun fomo_run() {
  return {{"data.clients=10", "data.min_size=10", "data.local_test=like-train", "clients.rule=fedfomo",
           "clients.fedfomo.epochs=1", "clients.fedfomo.batch=16", "clients.fedfomo.lr=0.05",
           "clients.fedfomo.models=3", "eval.personalized=true"}};
}

using FedFomoRun = testing::FlRunTest;

TEST_F(FedFomoRun, IsTheSameForAnyThreadCountResumesBitForBitAndNeverMovesTheGlobalModel) {
  expect_same_on_threads_and_resume(fomo_run(), /*stop_after=*/3);
  const std::vector<RoundRecord> rows = parse_rounds_csv(file("one", "rounds.csv"));
  ASSERT_EQ(rows.size(), 4u);
  const auto model = make_model("mlp", kInput, 10, 1);
  const int64_t model_bytes = static_cast<int64_t>(model->flat_state().size()) * 4;
  for (const RoundRecord& r : rows) {
    EXPECT_EQ(r.acc, rows[0].acc) << r.round;  // the global model stays the initial one
    EXPECT_GT(r.personal.acc.mean, 0.0);
    // Round 1 offers nothing; from round 2 each of 4 clients gets up to M - 1 = 2 of the 4 last uploaders.
    const int64_t down = r.bytes_down - 4 * model_bytes;
    if (r.round == 1)
      EXPECT_EQ(down, 0);
    else
      EXPECT_EQ(down, 4 * 2 * (model_bytes + 4)) << r.round;  // 2 models and their ids each
  }
  const CheckpointState last = load_checkpoint((dir_ / "one" / "checkpoint.safetensors").string());
  EXPECT_FALSE(last.method_state.empty());
  int trained = 0;
  for (const ClientState& s : last.clients) trained += s.vectors.count("model") ? 1 : 0;
  EXPECT_GT(trained, 4);
}

TEST_F(FedFomoRun, FedCapsVariantWithoutAggregationRunsAndUploadsNoWeights) {
  run(fomo_run(), "isolated", 1, {"clients.fedfomo.aggregate=false", "rounds=2"});
  for (const RoundRecord& r : parse_rounds_csv(file("isolated", "rounds.csv"))) {
    const auto model = make_model("mlp", kInput, 10, 1);
    const int64_t model_bytes = static_cast<int64_t>(model->flat_state().size()) * 4;
    EXPECT_EQ(r.bytes_down, 4 * model_bytes);  // no offers
    EXPECT_EQ(r.bytes_up, 4 * model_bytes);    // no weight pairs
    EXPECT_GT(r.personal.acc.mean, 0.0);
  }
}

}  // namespace
}  // namespace bastion
