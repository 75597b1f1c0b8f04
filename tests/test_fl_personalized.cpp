// Personalised FL, unit level (DESIGN.md "Personalized FL"): the client rules' personal parts (FedRep's
// head, pFedSAM's SAM body phase, Ditto's proximal personal model, Simple-Tuning's re-initialised head),
// the shared columns. Personalised evaluation on constructed clients: test_fl_personal_eval.cpp; whole runs:
// test_fl_personalized_run.cpp.
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
    const auto rule = client_rule(
        "fedrep", {{"head_epochs", head_epochs}, {"body_epochs", body_epochs}, {"batch", int64_t{16}}, {"lr", 0.05}});
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
  const auto rule =
      client_rule("fedrep", {{"head_epochs", int64_t{1}}, {"body_epochs", int64_t{0}}, {"batch", int64_t{16}}});
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
    EXPECT_EQ(result.body_steps,
              std::get<int64_t>(given.count("body_epochs") ? given["body_epochs"] : ParamValue(int64_t{2})) * 7);
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
  const std::vector<float> pixels = {0.1f, -0.2f, 0.3f, 0.5f, -0.4f, 0.2f,  0.7f, 0.1f, -0.3f, 0.2f,
                                     0.6f, -0.1f, 0.4f, 0.3f, -0.5f, 0.9f,  0.2f, 0.1f, -0.7f, 0.8f,
                                     0.3f, -0.6f, 0.5f, 0.1f, 0.2f,  -0.3f, 0.4f, 0.6f, 0.1f,  -0.2f};
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
    const auto rule = client_rule(
        "ditto",
        {{"order", std::string(order)}, {"epochs", int64_t{1}}, {"batch", int64_t{16}}, {"lr", 0.05}, {"lambda", 1.0}});
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
  const auto final_head =
      client_rule("fedavg-ft", {{"variant", std::string("final-head")}, {"epochs", int64_t{3}}})->post_step();
  ASSERT_TRUE(final_head.has_value());
  EXPECT_EQ(final_head->kind, PostSpec::Kind::HeadTune);
  EXPECT_EQ(final_head->epochs, 3);  // tune_epochs 0 = the training epochs (FedFSA's local_ep)
  EXPECT_FALSE(final_head->applies(4, 5));
  EXPECT_TRUE(final_head->applies(5, 5));
  const auto before_eval =
      client_rule("fedavg-ft", {{"variant", std::string("before-eval")}, {"tune_lr", 0.02}})->post_step();
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

}  // namespace
}  // namespace bastion
