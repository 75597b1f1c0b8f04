// Personalised FL, unit level (DESIGN.md "Personalized FL"): the client rules' personal parts (FedRep's
// head, pFedSAM's SAM body phase, Ditto's proximal personal model, Simple-Tuning's re-initialised head),
// the shared columns, and personalised evaluation on constructed clients. Whole runs:
// test_fl_personalized_run.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "fl/clients/local_training.h"
#include "fl/clients/post_step.h"
#include "fl/core/client_models.h"
#include "fl/core/personal_eval.h"
#include "fl/core/thread_pool.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;

// step counts follow ceil(samples / batch) per epoch and phase.
TEST(FlPersonalized, FedRepTrainsOnlyThePartOfEachPhaseAndCountsItsSteps) {
  const Dataset data = synthetic_train(100);
  const std::vector<int64_t> indices = first_indices(100);
  const TransformSpec identity;
  for (const auto& [head_epochs, body_epochs] : {std::pair<int64_t, int64_t>{2, 0}, {0, 3}, {2, 3}}) {
    const auto model = make_model("mlp", kInput, 10, 5);
    const std::vector<float> before = state_of(*model);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
    const auto rule = client_rule("fedrep", {{"head_epochs", head_epochs}, {"body_epochs", body_epochs},
                                             {"batch", int64_t{16}}, {"lr", 0.05}});
    const ClientResult result = rule->train(task);
    const std::vector<float> after = state_of(*model);
    const HeadAndBody p = parts(*model);
    EXPECT_EQ(part_unchanged(p.head, before, after), head_epochs == 0) << head_epochs << "+" << body_epochs;
    EXPECT_EQ(part_unchanged(p.body, before, after), body_epochs == 0) << head_epochs << "+" << body_epochs;
    EXPECT_EQ(result.head_steps, head_epochs * 7);  // ceil(100 / 16) = 7 batches per epoch
    EXPECT_EQ(result.body_steps, body_epochs * 7);
    EXPECT_EQ(result.steps, (head_epochs + body_epochs) * 7);
    // The head is kept on the client; every parameter is trainable again for the next client.
    EXPECT_EQ(state.vectors.at("head"), gather_head(*model, after));
    for (const ParameterView& view : model->parameters()) EXPECT_TRUE(view.value.requires_grad()) << view.name;
  }
}

// BapFL against FedRep: in the head phase the body is frozen and BapFL's poison step (body only) has
// nothing to train; it used to call backward on a loss that reached no parameter.
TEST(FlPersonalized, BapflAttackerUnderFedRepTrainsItsHeadOnCleanRowsInTheHeadPhase) {
  const Dataset data = synthetic_train(64);
  const std::vector<int64_t> indices = first_indices(64);
  const TransformSpec identity;
  const auto attack = testing::build_attack("bapfl", {{"per_batch", int64_t{4}}, {"trigger", std::string("spmc")}});
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before = state_of(*model);
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12, attack.get(), 0};
  const auto rule = client_rule("fedrep", {{"head_epochs", int64_t{1}}, {"body_epochs", int64_t{0}}, {"batch", int64_t{16}}});
  const ClientResult result = rule->train(task);
  EXPECT_EQ(result.head_steps, 4);
  const HeadAndBody p = parts(*model);
  EXPECT_TRUE(part_unchanged(p.body, before, state_of(*model)));
  EXPECT_FALSE(part_unchanged(p.head, before, state_of(*model)));
}

// pFedSAM = FedRep + SAM in the body phase: the head phase is FedRep's bit for bit, the body phase
// differs (SAM), the frozen head is never perturbed, and rho 0 is FedRep exactly.
TEST(FlPersonalized, PfedsamIsFedRepWithSamOnTheBodyOnly) {
  const Dataset data = synthetic_train(100);
  const std::vector<int64_t> indices = first_indices(100);
  const TransformSpec identity;
  auto trained = [&](const std::string& rule, std::map<std::string, ParamValue> given) {
    given["batch"] = int64_t{16};
    given["lr"] = 0.05;
    const auto model = make_model("mlp", kInput, 10, 5);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
    const ClientResult result = client_rule(rule, given)->train(task);
    EXPECT_EQ(result.body_steps, std::get<int64_t>(given.count("body_epochs") ? given["body_epochs"] : ParamValue(int64_t{2})) * 7);
    return state_of(*model);
  };
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before = state_of(*model);
  const HeadAndBody p = parts(*model);
  EXPECT_EQ(trained("pfedsam", {{"body_epochs", int64_t{0}}}), trained("fedrep", {{"body_epochs", int64_t{0}}}));
  const std::vector<float> sam_body = trained("pfedsam", {{"head_epochs", int64_t{0}}});
  const std::vector<float> sgd_body = trained("fedrep", {{"head_epochs", int64_t{0}}});
  EXPECT_FALSE(part_unchanged(p.body, sam_body, sgd_body));
  EXPECT_TRUE(part_unchanged(p.head, sam_body, before));  // frozen and never perturbed
  EXPECT_EQ(trained("pfedsam", {{"rho", 0.0}}), trained("fedrep", {}));
  expect_error([&] { client_rule("fedrep", {{"rho", 0.05}}); }, {"pfedsam"});
}

TEST(FlPersonalized, FedRepRestoresItsOwnHeadOverTheReceivedModel) {
  const auto model = make_model("mlp", kInput, 10, 5);
  const auto other = make_model("mlp", kInput, 10, 6);
  ClientState state;
  state.vectors["head"] = gather_head(*other, other->flat_state());
  const auto rule = client_rule("fedrep", {});
  std::vector<float> own(model->flat_state().size());
  ASSERT_TRUE(rule->personal_model(state, model->flat_state(), *model, own));
  const HeadAndBody p = parts(*model);
  EXPECT_TRUE(part_unchanged(p.body, own, state_of(*model)));  // the global body
  EXPECT_TRUE(part_unchanged(p.head, own, state_of(*other)));  // its own head
  ClientState never_sampled;
  EXPECT_FALSE(rule->personal_model(never_sampled, model->flat_state(), *model, own));  // = the global model
}

TEST(FlPersonalized, SharedColumnsOfTheBodyLeaveOutTheHeadAndKeepModelOrder) {
  const auto model = make_model("mlp", kInput, 10, 5);
  const int64_t D = static_cast<int64_t>(model->flat_state().size());
  const std::vector<float> head = gather_head(*model, model->flat_state());
  const SharedColumns all = shared_columns(*model, SharedPart::All), body = shared_columns(*model, SharedPart::Body),
                      none = shared_columns(*model, SharedPart::None);
  EXPECT_TRUE(all.all);
  EXPECT_EQ(all.width, D);
  EXPECT_EQ(body.width, D - static_cast<int64_t>(head.size()));
  EXPECT_EQ(body.parameters, model->num_parameters() - static_cast<int64_t>(head.size()));
  EXPECT_EQ(none.width, 0);
  // An upload is trained - start over exactly the shared columns, in order.
  std::vector<float> start(static_cast<size_t>(D)), trained(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) start[d] = static_cast<float>(d), trained[d] = static_cast<float>(3 * d);
  std::vector<float> row(static_cast<size_t>(body.width));
  body.difference(trained, start, row.data());
  int64_t k = 0;
  for (const ParameterView& view : model->parameters()) {
    if (view.is_head) continue;
    for (int64_t d = view.begin; d < view.end; ++d, ++k) ASSERT_EQ(row[k], 2.0f * d) << view.name;
  }
  EXPECT_EQ(k, body.width);
  // server.apply_to ranges are renumbered into the row; head columns fall away.
  const auto [head_begin, head_end] = head_columns(*model).front();
  EXPECT_TRUE(ranges_within_shared({{head_begin, head_end}}, body).empty());
  const std::vector<ColumnRange> first = ranges_within_shared({{0, 10}}, body);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].begin, 0);
  EXPECT_EQ(first[0].end, 10);
}

// Ditto's personal step: d/dv [CE(f_v(x), y) + (lambda/2)||v - w||^2] against central differences in double.
TEST(FlPersonalized, DittoProximalGradientMatchesFiniteDifferences) {
  const auto model = make_model("mlp", {1, 2, 3}, 4, 9);
  Generator rng(3);
  std::vector<float> reference(model->flat_parameters().size());
  for (float& r : reference) r = static_cast<float>(rng.normal() * 0.1);
  const std::vector<float> pixels = {0.1f, -0.2f, 0.3f, 0.5f, -0.4f, 0.2f, 0.7f, 0.1f, -0.3f, 0.2f,
                                                            0.6f, -0.1f, 0.4f, 0.3f, -0.5f, 0.9f, 0.2f, 0.1f, -0.7f, 0.8f,
                                                            0.3f, -0.6f, 0.5f, 0.1f, 0.2f, -0.3f, 0.4f, 0.6f, 0.1f, -0.2f};
  const Tensor x = Tensor::from_vector(Shape{5, 1, 2, 3}, pixels);
  const LabelTensor y = LabelTensor::from_vector({0, 3, 1, 2, 3});
  constexpr double kLambda = 0.7;
  auto objective = [&]() {
    NoGradGuard no_grad;
    return static_cast<double>(cross_entropy(model->forward(x), y).item()) + proximal_term(*model, reference, kLambda);
  };
  model->zero_grad();
  cross_entropy(model->forward(x), y).backward();
  add_proximal_gradient(*model, reference, kLambda);
  const std::vector<float> analytic(model->flat_gradients().begin(), model->flat_gradients().end());
  // Float32 forwards: a step of 1e-3 keeps round-off (~1e-7 of a loss near 2, over 2h) far below the
  // tolerance, which a missing or doubled lambda term (lambda |w - ref| ~ 0.05) exceeds. The MLP has
  // ReLU kinks: a coordinate whose one-sided slopes disagree straddles one and is skipped.
  constexpr double kStep = 1e-3, kRtol = 1e-2, kAtol = 1e-3;
  const std::span<float> w = model->flat_parameters();
  const double centre = objective();
  int checked = 0;
  for (size_t i = 0; i < w.size(); i += 7) {
    const float saved = w[i];
    w[i] = saved + static_cast<float>(kStep);
    const double plus = objective();
    w[i] = saved - static_cast<float>(kStep);
    const double minus = objective();
    w[i] = saved;
    if (std::fabs((plus - centre) - (centre - minus)) / kStep > kAtol) continue;  // a kink between the two sides
    const double numeric = (plus - minus) / (2 * kStep);
    EXPECT_NEAR(analytic[i], numeric, kAtol + kRtol * std::fabs(numeric)) << "parameter column " << i;
    const double prox = kLambda * (static_cast<double>(w[i]) - reference[i]);
    if (std::fabs(prox) > 10 * kAtol) ++checked;  // columns where the proximal term decides the outcome
  }
  EXPECT_GT(checked, 100);
}

TEST(FlPersonalized, DittoKeepsItsPersonalModelAndUploadsOnlyTheGlobalCopy) {
  const Dataset data = synthetic_train(64);
  const std::vector<int64_t> indices = first_indices(64);
  const TransformSpec identity;
  for (const char* order : {"sequential", "interleaved"}) {
    const auto model = make_model("mlp", kInput, 10, 5), second = make_model("mlp", kInput, 10, 1);
    const std::vector<float> received = state_of(*model);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12, nullptr, 0, second.get()};
    const auto rule = client_rule("ditto", {{"order", std::string(order)}, {"epochs", int64_t{1}}, {"batch", int64_t{16}},
                                            {"lr", 0.05}, {"lambda", 1.0}});
    const ClientResult result = rule->train(task);
    EXPECT_EQ(result.steps, 4) << order;
    EXPECT_EQ(result.personal_steps, 4) << order;
    const std::vector<float>& personal = state.vectors.at("personal");
    EXPECT_NE(personal, state_of(*model)) << order;  // two different models were trained
    EXPECT_NE(personal, received) << order;
    std::vector<float> own(received.size());
    ASSERT_TRUE(rule->personal_model(state, received, *model, own));
    EXPECT_EQ(own, personal);
  }
}

// Ditto's personal learning rate is its own (decaying with the schedule), not a ratio to lr: lr 0 trains
// the personal model only (a ratio made it 0/0 = NaN).
TEST(FlPersonalized, DittoPersonalLearningRateDoesNotDependOnTheGlobalOne) {
  const Dataset data = synthetic_train(32);
  const std::vector<int64_t> indices = first_indices(32);
  const TransformSpec identity;
  const auto model = make_model("mlp", kInput, 10, 5), second = make_model("mlp", kInput, 10, 1);
  const std::vector<float> received = state_of(*model);
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 3, 11, 12, nullptr, 0, second.get()};
  client_rule("ditto", {{"lr", 0.0}, {"personal_lr", 0.1}, {"lr_decay", 0.5}, {"batch", int64_t{16}}})->train(task);
  EXPECT_EQ(state_of(*model), received);  // lr 0: the uploaded copy did not move
  const std::vector<float>& personal = state.vectors.at("personal");
  EXPECT_NE(personal, received);
  EXPECT_TRUE(std::all_of(personal.begin(), personal.end(), [](float v) { return std::isfinite(v); }));
}

// Simple-Tuning: the body stays bit-identical; the head is re-initialised from its seed, then trained.
TEST(FlPersonalized, SimpleTuningKeepsTheBodyAndReinitialisesTheHeadFromItsSeed) {
  const Dataset data = synthetic_train(64);
  const std::vector<int64_t> indices = first_indices(64);
  const TransformSpec identity;
  PostSpec spec;
  spec.kind = PostSpec::Kind::SimpleTuning;
  spec.epochs = 1;
  spec.batch = 16;
  spec.lr = 0.0;  // no step: the head must be exactly the seed's initial head
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before = state_of(*model);
  apply_post_step(spec, *model, data, indices, identity, /*seed=*/3, /*init_seed=*/77);
  const auto fresh = make_model("mlp", kInput, 10, 77);
  const HeadAndBody p = parts(*model);
  EXPECT_TRUE(part_unchanged(p.body, before, state_of(*model)));
  EXPECT_TRUE(part_unchanged(p.head, state_of(*fresh), state_of(*model)));
  EXPECT_FALSE(part_unchanged(p.head, before, state_of(*model)));

  spec.lr = 0.1;  // now trained: the head moves away from its initial value, the body still does not
  const auto tuned = make_model("mlp", kInput, 10, 5);
  apply_post_step(spec, *tuned, data, indices, identity, 3, 77);
  EXPECT_TRUE(part_unchanged(p.body, before, state_of(*tuned)));
  EXPECT_FALSE(part_unchanged(p.head, state_of(*fresh), state_of(*tuned)));
  for (const ParameterView& view : tuned->parameters()) EXPECT_TRUE(view.value.requires_grad()) << view.name;
}

TEST(FlPersonalized, FedAvgFtVariantsAndStTakeTheirPostSteps) {
  EXPECT_FALSE(client_rule("fedavg-ft", {})->post_step().has_value());  // after-local: the kept model itself
  const auto final_head = client_rule("fedavg-ft", {{"variant", std::string("final-head")}, {"epochs", int64_t{3}}})->post_step();
  ASSERT_TRUE(final_head.has_value());
  EXPECT_EQ(final_head->kind, PostSpec::Kind::HeadTune);
  EXPECT_EQ(final_head->epochs, 3);  // tune_epochs 0 = the training epochs (FedFSA's local_ep)
  EXPECT_FALSE(final_head->applies(4, 5));
  EXPECT_TRUE(final_head->applies(5, 5));
  const auto before_eval = client_rule("fedavg-ft", {{"variant", std::string("before-eval")}, {"tune_lr", 0.02}})->post_step();
  ASSERT_TRUE(before_eval.has_value());
  EXPECT_EQ(before_eval->kind, PostSpec::Kind::FineTune);
  EXPECT_DOUBLE_EQ(before_eval->lr, 0.02);
  EXPECT_TRUE(before_eval->applies(1, 5));  // before every evaluation
  const auto st = client_rule("st", {})->post_step();
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->kind, PostSpec::Kind::SimpleTuning);
  EXPECT_EQ(st->epochs, 5);
  EXPECT_FALSE(client_rule("sgd", {})->post_step().has_value());
}

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
    return {rule,     no_post,    global,       states,  {0, 1, 2}, local, split.train, partition, identity,
            nullptr,  split.test, test_indices, nullptr, none,      false, global_acc,  true,      1000,
            1,        1,          Generator(0), received_acc, false, {}, false, {}};
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
    EXPECT_TRUE(std::isnan(record.asr.mean));      // no backdoor
  }
}

// eval.personal_received: each client's received model on its local test set. Client 0 received a model
// of its own that says class 0 (its local set: 1 sample of class 0, 3 of class 1: 1/4); clients 1 and 2
// received the global model, which says class 0 (client 1's 2 samples of class 2: 0; client 2: 2 of 4).
TEST(FlPersonalized, ReceivedModelsAreTheRulesOwnElseTheGlobalModel) {
  ThreeClientEval eval;
  std::vector<ClientState> states(3);
  for (int64_t k : {0, 1}) states[k].scalars["class"] = 1;  // own models say 1 (client 2 has none)
  store(states[0], "received", eval.global);               // a model of its own that also says 0
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
  PersonalEvalInput last{*sgd, post, eval.global, states, {0, 1, 2}, eval.local, eval.split.train, eval.partition,
                         eval.identity, nullptr, eval.split.test, eval.test_indices, nullptr, eval.none, false, false,
                         true, 1000, 1, 1, Generator(0), false, true, says2, false, {}};
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
  const auto rule = client_rule("fedavg-ft", {{"variant", std::string("after-local-final-head")}, {"epochs", int64_t{3}}});
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
  const auto rule = client_rule("fedspeed", {{"tune", std::string("final-head")}, {"tune_clip", 10.0},
                                             {"tune_weight_decay", 0.1}, {"tune_lr_from", std::string("client")}});
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
