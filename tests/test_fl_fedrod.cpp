// FedRoD (fl/clients/fedrod.cpp): the sum identity its personal model rests on (for every model of the
// catalog), both steps against hand-written references on a one-step round, the shared/personal split,
// data attacks counted into the prior, and whole runs through the registry (deterministic, resumable).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "fl/attacks/attack.h"
#include "fl/clients/local_training.h"
#include "fl/core/checkpoint.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;

// Float forwards of the same model on the same input, differing only in summation order of a few
// O(1)-sized terms: a few float roundings of the logits' scale.
constexpr double kLogitTolerance = 1e-4;

std::vector<float> random_values(size_t n, uint64_t seed, float scale) {
  Generator gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * static_cast<float>(2.0 * gen.uniform() - 1.0);
  return v;
}

std::vector<float> logits_of(Model& model, std::span<const float> state, const Tensor& x) {
  std::copy(state.begin(), state.end(), model.flat_state().begin());
  return model.forward(x).to_vector();
}

// For every model: forward(global with head W_g + W_p) = forward(global) + forward(global body, head W_p),
// i.e. the output is affine in the head and nothing follows it, which personal_model relies on.
TEST(FlFedRod, PersonalModelLogitsAreGenericPlusPersonalForEveryModel) {
  const auto rule = client_rule("fedrod", {});
  for (const ModelInfo& info : model_catalog()) {
    std::unique_ptr<Model> model;
    InputShape input;
    for (InputShape candidate : {InputShape{1, 28, 28}, InputShape{3, 32, 32}}) {
      try {
        model = make_model(info.name, candidate, 10, 3);
        input = candidate;
        break;
      } catch (const Error&) {
      }
    }
    ASSERT_TRUE(model) << info.name;
    model->train(false);  // BatchNorm on running statistics: a fixed function of the input
    const std::vector<float> global = state_of(*model);
    const size_t head_size = gather_head(*model, global).size();
    ClientState state;
    state.vectors["personal_head"] = random_values(head_size, 4, 0.5f);
    std::vector<float> personal(global.size());
    ASSERT_TRUE(rule->personal_model(state, global, *model, personal)) << info.name;
    std::vector<float> head_only = global;  // the global body with the personal head alone
    scatter_head(*model, state.vectors["personal_head"], head_only);
    Generator gen(5);
    const Tensor x = Tensor::randn({2, input.channels, input.height, input.width}, gen);
    const std::vector<float> sum = logits_of(*model, personal, x), generic = logits_of(*model, global, x),
                             own = logits_of(*model, head_only, x);
    for (size_t i = 0; i < sum.size(); ++i)
      ASSERT_NEAR(sum[i], generic[i] + own[i], kLogitTolerance * std::max(1.0f, std::abs(sum[i])))
          << info.name << " " << i;
    // The body columns of the personal model are the global ones.
    for (const auto& [begin, end] : parts(*model).body)
      EXPECT_TRUE(same_columns(personal, global, begin, end)) << info.name;
  }
}

TEST(FlFedRod, ANeverTrainedClientIsJudgedOnTheGlobalModel) {
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> global = state_of(*model);
  std::vector<float> out(global.size());
  EXPECT_FALSE(client_rule("fedrod", {})->personal_model(ClientState{}, global, *model, out));
}

// The MLP's features by hand: z = relu(fc2(relu(fc1(flatten(x))))).
Tensor mlp_features(const Model& model, const Tensor& x) {
  const auto& p = model.parameters();  // fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias
  return relu(linear(relu(linear(flatten(x), p[0].value.detach(), p[1].value.detach())), p[2].value.detach(),
                     p[3].value.detach()));
}

// One step (the whole client set as one batch, momentum 0): the uploaded model is one balanced-softmax SGD
// step, and the personal head one SGD step on CE(o_g + W_p z + b_p) computed on leaf tensors.
TEST(FlFedRod, OneStepMatchesHandWrittenGenericAndPersonalSteps) {
  const Dataset data = synthetic_train(60);
  const std::vector<int64_t> indices = first_indices(60);
  const TransformSpec identity;
  const float lr = 0.1f;
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> start = state_of(*model);
  const std::vector<float> p0 = random_values(gather_head(*model, start).size(), 6, 0.3f);
  ClientState state;
  state.vectors["personal_head"] = p0;
  ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
  const auto rule =
      client_rule("fedrod", {{"steps", int64_t{1}}, {"batch", int64_t{60}}, {"lr", double{lr}}, {"momentum", 0.0}});
  rule->train(task);

  // The batch: all 60 samples in the rule's order (its loader: shuffled with task.seed 11, epoch 0), so the
  // sums run in the same order and the generic step comes out bit-identical.
  BatchLoader loader(data, 60, true, 11, indices);
  Tensor x;
  LabelTensor y;
  ASSERT_TRUE(loader.next(x, y));
  std::vector<int64_t> counts(10, 0);
  for (int64_t i : indices) ++counts[static_cast<size_t>(data.labels[static_cast<size_t>(i)])];
  const auto reference = make_model("mlp", kInput, 10, 5);
  // Generic: one balanced-softmax SGD step.
  Sgd sgd(*reference, SgdOptions{lr, 0.0f, 0.0f, false});
  reference->zero_grad();
  balanced_softmax_cross_entropy(reference->forward(x), y, balanced_softmax_log_prior(counts)).backward();
  // Personal: leaves W_p, b_p on the features of the starting model.
  const Tensor z = mlp_features(*reference, x);
  const auto& p = reference->parameters();
  const Tensor o_g = linear(z, p[4].value.detach(), p[5].value.detach());
  const int64_t C = 10, H = p[4].value.size(1);
  Tensor w_p = Tensor::from_vector({C, H}, std::span<const float>(p0.data(), static_cast<size_t>(C * H)))
                   .set_requires_grad(true);
  Tensor b_p = Tensor::from_vector({C}, std::span<const float>(p0.data() + C * H, static_cast<size_t>(C)))
                   .set_requires_grad(true);
  cross_entropy(add(o_g, linear(z, w_p, b_p)), y).backward();
  sgd.step();
  EXPECT_EQ(state_of(*model), state_of(*reference));  // same ops in the same order: bit-identical
  std::vector<float> want = p0;
  const std::vector<float> gw = w_p.grad().to_vector(), gb = b_p.grad().to_vector();
  for (size_t i = 0; i < gw.size(); ++i) want[i] -= lr * gw[i];
  for (size_t i = 0; i < gb.size(); ++i) want[gw.size() + i] -= lr * gb[i];
  const std::vector<float>& got = state.vectors.at("personal_head");
  ASSERT_EQ(got.size(), want.size());
  double moved = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6) << i;  // gradients ~1e-2, times lr: float roundings far below 1e-6
    moved = std::max(moved, static_cast<double>(std::abs(got[i] - p0[i])));
  }
  EXPECT_GT(moved, 1e-4);  // the personal head did move
}

// The upload (the trained model) does not depend on the personal head, and the personal head is not in it.
TEST(FlFedRod, ThePersonalHeadNeverReachesTheUpload) {
  const Dataset data = synthetic_train(80);
  const std::vector<int64_t> indices = first_indices(80);
  const TransformSpec identity;
  const auto rule = client_rule("fedrod", {{"epochs", int64_t{2}}, {"batch", int64_t{16}}, {"lr", 0.05}});
  EXPECT_EQ(rule->traits().shared, SharedPart::All);
  EXPECT_FALSE(rule->traits().second_model);
  std::vector<std::vector<float>> uploads, heads;
  std::vector<float> start;
  for (uint64_t seed : {7, 8}) {
    const auto model = make_model("mlp", kInput, 10, 5);
    start = state_of(*model);
    ClientState state;
    state.vectors["personal_head"] = random_values(gather_head(*model, start).size(), seed, 0.5f);
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
    const ClientResult result = rule->train(task);
    EXPECT_EQ(result.steps, 10);  // 2 epochs x ceil(80 / 16)
    EXPECT_EQ(result.personal_steps, 10);
    uploads.push_back(state_of(*model));
    heads.push_back(state.vectors.at("personal_head"));
    for (const ParameterView& view : model->parameters()) EXPECT_TRUE(view.value.requires_grad()) << view.name;
  }
  EXPECT_EQ(uploads[0], uploads[1]);  // bit-identical whatever p_i was
  EXPECT_NE(heads[0], heads[1]);
  const auto model = make_model("mlp", kInput, 10, 5);
  const HeadAndBody p = parts(*model);
  EXPECT_FALSE(part_unchanged(p.body, start, uploads[0]));  // the body and the generic head are trained
  EXPECT_FALSE(part_unchanged(p.head, start, uploads[0]));
  EXPECT_NE(gather_head(*model, uploads[0]), heads[0]);
}

// A BadNets attacker none of whose samples has the target class 2: its poisoned batches carry label 2, so
// the prior must count the labels trained on (clean counts would give class 2 log 0 = -inf and the op would
// refuse the batch).
TEST(FlFedRod, ADataAttackersPriorCountsItsPoisonedLabels) {
  const Dataset data = synthetic_train(200);
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < data.size() && indices.size() < 48; ++i)
    if (data.labels[static_cast<size_t>(i)] != 2) indices.push_back(i);
  const TransformSpec identity;
  const auto attack = testing::build_attack("badnets", {{"per_batch", int64_t{4}}, {"target", int64_t{2}}});
  const auto model = make_model("mlp", kInput, 10, 5);
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12, attack.get(), 0};
  const ClientResult result = client_rule("fedrod", {{"epochs", int64_t{2}}, {"batch", int64_t{16}}})->train(task);
  EXPECT_EQ(result.steps, 6);
  EXPECT_TRUE(std::isfinite(result.train_loss));
}

TEST(FlFedRod, FirstParticipationCopiesTheReceivedHeadOrZeros) {
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  for (const std::string init : {"received", "zero"}) {
    const auto model = make_model("mlp", kInput, 10, 5);
    const std::vector<float> received = gather_head(*model, model->flat_state());
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
    client_rule("fedrod", {{"steps", int64_t{1}}, {"batch", int64_t{40}}, {"lr", 0.0}, {"personal_init", init}})
        ->train(task);
    const std::vector<float>& head = state.vectors.at("personal_head");  // lr 0: still the initial value
    const std::vector<float> want = init == "received" ? received : std::vector<float>(received.size(), 0.0f);
    EXPECT_EQ(head, want) << init;
  }
}

TEST(FlFedRod, RefusesOptionsItDoesNotImplement) {
  testing::expect_error([] { client_rule("fedrod", {{"rho", 0.05}}); }, {"rho"});
  testing::expect_error([] { client_rule("fedrod", {{"keep_momentum", true}}); }, {"keep_momentum"});
  testing::expect_error(
      [] {
        client_rule("fedrod", {{"lr_decay_scope", std::string("client-epoch")}});
      },
      {"lr_decay_scope"});
  testing::expect_error([] { client_rule("fedrod", {{"personal_init", std::string("initial")}}); }, {"personal_init"});
}

testing::TinyRun fedrod_run() {
  return {{"seed=5", "data.partition=dirichlet:0.3", "data.clients=10", "data.local_test=like-train",
           "clients.rule=fedrod", "clients.fedrod.batch=16", "clients.fedrod.lr=0.05", "clients.fedrod.momentum=0",
           "attack.names=[\"badnets\"]", "attack.malicious_count=2", "attack.malicious_per_round=1",
           "attack.badnets.per_batch=4", "eval.personalized=true"}};
}

using FlFedRodRun = testing::FlRunTest;

// Non-IID clients (Dirichlet 0.3: many lack classes, so -inf priors occur) with a backdoor attacker whose
// target class may be absent from its own data: the run finishes, is the same for 1 and 2 threads, and a
// killed and resumed run writes the same rounds.
TEST_F(FlFedRodRun, RunsThroughTheRegistryDeterministicallyAndResumes) {
  expect_same_on_threads_and_resume(fedrod_run(), /*stop_after=*/2);
  const std::vector<RoundRecord> rounds = parse_rounds_csv(file("one", "rounds.csv"));
  ASSERT_EQ(rounds.size(), 4u);
  for (const RoundRecord& r : rounds) {
    EXPECT_TRUE(r.personal.present);
    EXPECT_GT(r.personal.acc.mean, 0.0);
    EXPECT_TRUE(std::isfinite(r.train_loss)) << "round " << r.round;
  }
  const CheckpointState final_state = load_checkpoint((dir_ / "one" / "checkpoint.safetensors").string());
  int heads = 0;
  for (const ClientState& s : final_state.clients) heads += s.vectors.count("personal_head") ? 1 : 0;
  EXPECT_GT(heads, 3);
}

}  // namespace
}  // namespace bastion
