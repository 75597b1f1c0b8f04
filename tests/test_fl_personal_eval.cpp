// Personalised evaluation on constructed clients (fl/core/personal_eval.h; DESIGN.md "Personalized FL"
// hook 3): the spread over clients, own and received models, own-last, batch-mean accuracy, the tuning
// specs of fedavg-ft and the SAM rules, and like-train local test sets. The rules' personal parts:
// test_fl_personalized.cpp; whole runs: test_fl_personalized_run.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "fl/clients/local_training.h"
#include "fl/clients/post_step.h"
#include "fl/core/client_models.h"
#include "fl/core/personal_eval.h"
#include "fl/base/thread_pool.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;

TEST(FlPersonalized, ClientSpreadGivesPlainAndWeightedMeansMinMedianMax) {
  const ClientSpread s = client_spread({1.0, 0.5, 0.0, kNoValue}, {10, 20, 70, 1000});
  EXPECT_DOUBLE_EQ(s.mean, 0.5);
  EXPECT_DOUBLE_EQ(s.weighted, (10 * 1.0 + 20 * 0.5) / 100.0);  // the NaN client and its weight are skipped
  EXPECT_DOUBLE_EQ(s.min, 0.0);
  EXPECT_DOUBLE_EQ(s.median, 0.5);
  EXPECT_DOUBLE_EQ(s.max, 1.0);
  EXPECT_DOUBLE_EQ(client_spread({0.2, 0.4}, {1, 1}).median, 0.3);
  EXPECT_TRUE(std::isnan(client_spread({kNoValue}, {1}).mean));
}

// A client rule whose own models predict a fixed class per client: a client with state is judged on its
// model as that state stands, whenever it was written (stale clients); a client without state (never
// sampled) has no model of its own and is judged with the global model (which says class 0).
class ConstantClassRule final : public ClientRule {
 public:
  ClientResult train(ClientTask&) const override { return {}; }
  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    const auto found = state.scalars.find("class");
    if (found == state.scalars.end()) return false;
    write_constant_predictor(model, static_cast<int>(found->second), out);
    return true;
  }
  // The received model, when the test stored one under "received" (FedCAP's customised model).
  bool received_model(const ClientState& state, std::span<float> out) const override {
    return copy_stored(state, "received", out, "constant-class");
  }
  // Zero weights: the hidden layers output 0 and the logits are the head's bias, one-hot at `cls`.
  static void write_constant_predictor(const Model& model, int cls, std::span<float> out) {
    std::fill(out.begin(), out.end(), 0.0f);
    for (const ParameterView& view : model.parameters())
      if (view.is_head && view.name.find("bias") != std::string::npos) out[view.begin + cls] = 1.0f;
  }
};

// Test set labels 0..9 repeated; 3 clients with local test samples of known labels:
//   client 0: 1 sample of class 0 + 3 of class 1, client 1: 2 of class 2, client 2: 2 of class 0 + 2 of 5.
// The global model says class 0; two MLP replicas to evaluate on.
struct ThreeClientEval {
  DatasetSplit split;
  Partition partition;
  LocalTestSets local;
  std::vector<std::unique_ptr<Model>> replicas;
  std::vector<float> global;
  std::vector<int64_t> test_indices, none;
  TransformSpec identity;
  std::optional<PostSpec> no_post;

  ThreeClientEval() {
    SyntheticSpec spec;
    spec.train = 30;
    spec.test = 40;
    split = make_synthetic(spec);
    partition.train = {{0, 1}, {2, 3}, {4, 5}};
    local.data = &split.test;
    local.indices = {with_label(0, 1), with_label(2, 2), with_label(0, 2)};
    for (int64_t i : with_label(1, 3)) local.indices[0].push_back(i);
    for (int64_t i : with_label(5, 2)) local.indices[2].push_back(i);
    replicas.push_back(make_model("mlp", kInput, 10, 1));
    replicas.push_back(make_model("mlp", kInput, 10, 1));
    global.resize(replicas[0]->flat_state().size());
    ConstantClassRule::write_constant_predictor(*replicas[0], 0, global);
    test_indices = first_indices(split.test.size());
  }
  std::vector<int64_t> with_label(int32_t label, int64_t count) const {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < split.test.size() && static_cast<int64_t>(out.size()) < count; ++i)
      if (split.test.labels[i] == label) out.push_back(i);
    return out;
  }
  PersonalEvalInput input(const ClientRule& rule, const std::vector<ClientState>& states, bool global_acc,
                          bool received_acc) const {
    return {rule,    no_post,    global,       states,       {0, 1, 2}, local, split.train, partition, identity,
            nullptr, split.test, test_indices, nullptr,      none,      false, global_acc,  true,      1000,
            1,       1,          Generator(0), received_acc, false,     {},    false,       {}};
  }
};

TEST(FlPersonalized, PersonalEvaluationOfConstructedClientsGivesTheKnownMeans) {
  // Own models: client 0 says 1 (acc 3/4), client 1 says 2 (acc 1); client 2 was never sampled (no
  // state): the global model, which says 0 (acc 1/2).
  ThreeClientEval eval;
  std::vector<ClientState> states(3);
  states[0].scalars["class"] = 1;
  states[1].scalars["class"] = 2;
  const ConstantClassRule rule;
  const PersonalEvalInput input = eval.input(rule, states, /*global_acc=*/true, /*received_acc=*/false);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const PersonalRecord record = evaluate_personal(input, pool, eval.replicas);
    EXPECT_TRUE(record.present);
    EXPECT_EQ(record.clients, 3);
    EXPECT_DOUBLE_EQ(record.acc.mean, (0.75 + 1.0 + 0.5) / 3);
    EXPECT_DOUBLE_EQ(record.acc.weighted, (3.0 + 2.0 + 2.0) / (4 + 2 + 4));  // correct / local samples
    EXPECT_DOUBLE_EQ(record.acc.min, 0.5);
    EXPECT_DOUBLE_EQ(record.acc.median, 0.75);
    EXPECT_DOUBLE_EQ(record.acc.max, 1.0);
    EXPECT_DOUBLE_EQ(record.global_acc.mean, 0.1);  // every constant model gets its class's share: 4 of 40
    EXPECT_TRUE(std::isnan(record.asr.mean));       // no backdoor
  }
}

// eval.personal_received: each client's received model on its local test set. Client 0 received a model
// of its own that says class 0 (its local set: 1 sample of class 0, 3 of class 1: 1/4); clients 1 and 2
// received the global model, which says class 0 (client 1's 2 samples of class 2: 0; client 2: 2 of 4).
TEST(FlPersonalized, ReceivedModelsAreTheRulesOwnElseTheGlobalModel) {
  ThreeClientEval eval;
  std::vector<ClientState> states(3);
  for (int64_t k : {0, 1}) states[k].scalars["class"] = 1;  // own models say 1 (client 2 has none)
  store(states[0], "received", eval.global);                // a model of its own that also says 0
  const ConstantClassRule rule;
  ThreadPool pool(2);
  PersonalRecord record = evaluate_personal(eval.input(rule, states, false, true), pool, eval.replicas);
  EXPECT_TRUE(record.received);
  EXPECT_DOUBLE_EQ(record.acc.mean, (0.75 + 0.0 + 0.5) / 3);           // own models (client 2: global)
  EXPECT_DOUBLE_EQ(record.received_acc.mean, (0.25 + 0.0 + 0.5) / 3);  // received models
  EXPECT_DOUBLE_EQ(record.received_acc.weighted, (1.0 + 0.0 + 2.0) / (4 + 2 + 4));
  record = evaluate_personal(eval.input(rule, states, false, false), pool, eval.replicas);
  EXPECT_FALSE(record.received);
  EXPECT_TRUE(std::isnan(record.received_acc.mean));
}

// eval.personal_model = own-last on a rule without a personal model (sgd: the rule mode judges the global
// model, class 0): client 0 last trained a model that says 1 (3 of its 4 samples), client 1 never trained
// and is judged on the run's initial model, which says 2 (both samples), client 2's says 5 (2 of 4).
TEST(FlPersonalized, OwnLastJudgesEachClientsLastTrainedModelElseTheInitialModel) {
  ThreeClientEval eval;
  std::vector<float> says1(eval.global.size()), says2(eval.global.size()), says5(eval.global.size());
  ConstantClassRule::write_constant_predictor(*eval.replicas[0], 1, says1);
  ConstantClassRule::write_constant_predictor(*eval.replicas[0], 2, says2);
  ConstantClassRule::write_constant_predictor(*eval.replicas[0], 5, says5);
  std::vector<ClientState> states(3);
  store(states[0], kOwnLastKey, says1);
  store(states[2], kOwnLastKey, says5);
  const auto sgd = client_rule("sgd", {});
  PersonalEvalInput input = eval.input(*sgd, states, false, false);
  ThreadPool pool(2);
  EXPECT_DOUBLE_EQ(evaluate_personal(input, pool, eval.replicas).acc.mean, (0.25 + 0.0 + 0.5) / 3);  // the global model
  input.own_last = true;
  input.initial = says2;
  for (int threads : {1, 2}) {
    ThreadPool workers(threads);
    EXPECT_DOUBLE_EQ(evaluate_personal(input, workers, eval.replicas).acc.mean, (0.75 + 1.0 + 0.5) / 3);
  }
  // A post step this round starts from the rule's model (the global one for sgd): FedFSA's last round
  // synchronises before it tunes. A head-tune of 0 steps' worth (lr 0) leaves it unchanged.
  PostSpec frozen;
  frozen.kind = PostSpec::Kind::HeadTune;
  frozen.lr = 0.0;
  frozen.epochs = 1;
  const std::optional<PostSpec> post = frozen;
  PersonalEvalInput last{*sgd,
                         post,
                         eval.global,
                         states,
                         {0, 1, 2},
                         eval.local,
                         eval.split.train,
                         eval.partition,
                         eval.identity,
                         nullptr,
                         eval.split.test,
                         eval.test_indices,
                         nullptr,
                         eval.none,
                         false,
                         false,
                         true,
                         1000,
                         1,
                         1,
                         Generator(0),
                         false,
                         true,
                         says2,
                         false,
                         {}};
  EXPECT_DOUBLE_EQ(evaluate_personal(last, pool, eval.replicas).acc.mean, (0.25 + 0.0 + 0.5) / 3);
}

// eval.client_accuracy = batch-mean: the mean of per-batch accuracies (FedFSA's code). Client 0's local set
// in order is one sample of class 0, then three of class 1; a model that says 1 scores 3/4 per sample,
// and in batches of 3 it scores 2/3 and 1/1: (2/3 + 1) / 2 = 5/6.
TEST(FlPersonalized, BatchMeanAccuracyAveragesPerBatchAccuracies) {
  ThreeClientEval eval;
  std::vector<ClientState> states(3);
  states[0].scalars["class"] = 1;
  const ConstantClassRule rule;
  PersonalEvalInput input = eval.input(rule, states, false, false);
  input.clients = {0};
  input.batch = 3;
  ThreadPool pool(1);
  EXPECT_DOUBLE_EQ(evaluate_personal(input, pool, eval.replicas).acc.mean, 0.75);
  input.batch_mean = true;
  EXPECT_NEAR(evaluate_personal(input, pool, eval.replicas).acc.mean, 5.0 / 6.0, 1e-12);
  input.batch = 1000;  // one batch: the two definitions agree
  EXPECT_DOUBLE_EQ(evaluate_personal(input, pool, eval.replicas).acc.mean, 0.75);
}

// fedavg-ft after-local-final-head (FedFSA's code): the model after local training in every round, and in
// the last round the head of the GLOBAL model tuned (prepare_post_step puts the global model back).
TEST(FlPersonalized, FedAvgFtCodeVariantIsAfterLocalThenTunesTheGlobalHead) {
  const auto rule =
      client_rule("fedavg-ft", {{"variant", std::string("after-local-final-head")}, {"epochs", int64_t{3}}});
  const auto post = rule->post_step();
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->kind, PostSpec::Kind::HeadTune);
  EXPECT_TRUE(post->applies(5, 5));
  EXPECT_FALSE(post->applies(4, 5));
  auto model = make_model("mlp", kInput, 10, 1);
  const std::span<float> state_view = model->flat_state();
  std::vector<float> trained(state_view.size(), 0.5f), global(state_view.size(), -1.0f), out(state_view.size());
  ClientState state;
  EXPECT_FALSE(rule->personal_model(state, global, *model, out));  // never trained: the global model
  store(state, "model", trained);
  ASSERT_TRUE(rule->personal_model(state, global, *model, out));
  EXPECT_EQ(out, trained);
  ClientState unused;
  const Dataset no_data;
  const std::vector<int64_t> no_indices;
  const TransformSpec identity;
  const PostStartData start{no_data, no_indices, identity, 0};
  std::copy(trained.begin(), trained.end(), model->flat_state().begin());
  EXPECT_TRUE(rule->prepare_post_step(unused, global, *model, start));
  EXPECT_TRUE(std::equal(global.begin(), global.end(), model->flat_state().begin()));
  const auto after_local = client_rule("fedavg-ft", {});
  EXPECT_FALSE(after_local->prepare_post_step(unused, global, *model, start));  // tunes nothing: no post step
}

// The tuning keys: clip, weight decay and the client's own decayed lr (FedFSA's code for FedSpeed/FedSMOO).
TEST(FlPersonalized, TuningSpecTakesClipWeightDecayAndTheClientsDecayedLr) {
  const auto rule = client_rule("fedspeed", {{"tune", std::string("final-head")},
                                             {"tune_clip", 10.0},
                                             {"tune_weight_decay", 0.1},
                                             {"tune_lr_from", std::string("client")}});
  const auto post = rule->post_step();
  ASSERT_TRUE(post.has_value());
  EXPECT_DOUBLE_EQ(post->grad_clip, 10.0);
  EXPECT_DOUBLE_EQ(post->weight_decay, 0.1);
  EXPECT_TRUE(post->lr_from_client);
  ClientState decayed;
  decayed.scalars["lr"] = 0.05;
  EXPECT_DOUBLE_EQ(client_post_spec(*post, decayed).lr, 0.05);
  EXPECT_DOUBLE_EQ(client_post_spec(*post, ClientState{}).lr, post->lr);  // never trained: tune_lr
  const auto plain = client_rule("fedspeed", {{"tune", std::string("final-head")}})->post_step();
  EXPECT_DOUBLE_EQ(plain->grad_clip, 0.0);
  EXPECT_DOUBLE_EQ(client_post_spec(*plain, decayed).lr, plain->lr);  // tune_lr_from = tune_lr ignores it
}

TEST(FlPersonalized, LikeTrainTestSetsFollowEachClientsTrainingClassesWithoutOverlap) {
  SyntheticSpec spec;
  spec.train = 600;
  spec.test = 300;
  const DatasetSplit split = make_synthetic(spec);
  Partition partition;
  partition.train.assign(3, {});
  for (int64_t i = 0; i < split.train.size(); ++i) {
    const int32_t label = split.train.labels[i];
    partition.train[label < 3 ? 0 : label < 6 ? 1 : 2].push_back(i);  // client 0: classes 0-2, 1: 3-5, 2: 6-9
  }
  const LocalTestSets sets = make_local_test_sets("like-train", split.train, split.test, partition, 4);
  EXPECT_EQ(sets.data, &split.test);
  std::vector<int> seen(static_cast<size_t>(split.test.size()), 0);
  int64_t total = 0;
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_FALSE(sets.indices[k].empty());
    for (int64_t i : sets.indices[k]) {
      const int32_t label = split.test.labels[i];
      EXPECT_EQ(label < 3 ? 0 : label < 6 ? 1 : 2, k) << "test sample " << i;
      ++seen[i];
      ++total;
    }
  }
  EXPECT_EQ(total, split.test.size());  // each class goes wholly to the clients that train on it
  for (int count : seen) EXPECT_EQ(count, 1);
  EXPECT_EQ(make_local_test_sets("like-train", split.train, split.test, partition, 4).indices, sets.indices);
}

}  // namespace
}  // namespace bastion
