// FedCAP (fl/defenses/fedcap.{h,cpp} server rule, fl/clients/fedcap.cpp client): customised weights
// softmax(alpha cos) with the self weight phi on hand-computed pools, recovery of uploads against the
// model each client was sent, calibration and permanent removal (never aggregated again), the request
// path, the checkpointed state, and short end-to-end runs (1 vs 2 threads, kill + resume).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

#include "defense_test_support.h"
#include "fl/defenses/fedcap.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;
using testing::Uploads;

// Weights are computed in double from float inputs: exact up to a few ulps of double.
constexpr double kWeightTolerance = 1e-12;
// Models are mixed in double and stored as float: one float rounding of values of order 1.
constexpr float kModelTolerance = 1e-6f;

std::unique_ptr<ServerRule> fedcap(const std::map<std::string, ParamValue>& given = {}) {
  return make_fedcap(Params("server.fedcap", fedcap_params(), given));
}

// One plan_round call: the plan, and which clients it asked for a request update from which base.
struct PlanCall {
  std::optional<RoundPlan> plan;
  std::vector<int64_t> asked;
  std::vector<float> base;
  std::vector<float> row(size_t i) const {
    return {plan->starts.begin() + i * 2, plan->starts.begin() + (i + 1) * 2};  // P = 2 in these tests
  }
};
// `answers`: each asked client's request update; without them the rule may ask nothing (the final
// round's "next" start states).
PlanCall plan(
    ServerRule& rule, const std::vector<int64_t>& sampled, const std::vector<float>& global,
    const std::optional<std::map<int64_t, std::vector<float>>>& answers = std::map<int64_t, std::vector<float>>{}) {
  PlanCall call;
  RequestUpdates request;
  if (answers) {
    request = [&](const std::vector<int64_t>& clients, std::span<const float> base) {
      call.asked = clients;
      call.base.assign(base.begin(), base.end());
      std::vector<float> updates;
      for (int64_t client : clients)
        updates.insert(updates.end(), answers->at(client).begin(), answers->at(client).end());
      return updates;
    };
  }
  call.plan = rule.plan_round({&sampled, global, request});
  return call;
}

// Pool rows (P = 2): e1, e2, -e1.
const std::vector<float> kPool = {1, 0, 0, 1, -1, 0};

TEST(FlFedcap, RequestWeightsAreSoftmaxOfScaledCosines) {
  const std::vector<float> request = {2, 0};  // cosines 1, 0, -1
  const std::vector<double> w = fedcap_mixture_weights(kPool.data(), 3, 2, 2, request, -1, 2.0, 0.3);
  const double z = std::exp(2.0) + 1.0 + std::exp(-2.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / z, kWeightTolerance);
  EXPECT_NEAR(w[1], 1.0 / z, kWeightTolerance);
  EXPECT_NEAR(w[2], std::exp(-2.0) / z, kWeightTolerance);  // phi applies only to an uploader's own row
}

TEST(FlFedcap, AnUploaderKeepsPhiOnItselfAndSharesTheRest) {
  // Client of row 0: its own vector e1; the others have cosines 0 and -1 with it.
  const std::vector<float> own(kPool.begin(), kPool.begin() + 2);
  const std::vector<double> w = fedcap_mixture_weights(kPool.data(), 3, 2, 2, own, 0, 10.0, 0.3);
  const double z = 1.0 + std::exp(-10.0);
  EXPECT_NEAR(w[0], 0.3, kWeightTolerance);
  EXPECT_NEAR(w[1], 0.7 / z, kWeightTolerance);
  EXPECT_NEAR(w[2], 0.7 * std::exp(-10.0) / z, kWeightTolerance);
  const std::vector<double> uniform_self = fedcap_mixture_weights(kPool.data(), 3, 2, 2, own, 0, 10.0, -1.0);
  EXPECT_NEAR(uniform_self[0], 1.0 / 3.0, kWeightTolerance);  // phi = -1: 1 / uploads
  // Alone in the pool: all weight on itself.
  EXPECT_EQ(fedcap_mixture_weights(kPool.data(), 1, 2, 2, own, 0, 10.0, 0.3), std::vector<double>{1.0});
}

TEST(FlFedcap, ZeroAndNaNVectorsFollowTorchAndFedcap) {
  const std::vector<float> zero = {0, 0};
  const std::vector<double> w = fedcap_mixture_weights(kPool.data(), 3, 2, 2, zero, -1, 5.0, 0.3);
  for (double v : w) EXPECT_NEAR(v, 1.0 / 3.0, kWeightTolerance);  // cos = 0 with every row
  const std::vector<float> pool_nan = {1, 0, NAN, 0};
  const std::vector<double> n =
      fedcap_mixture_weights(pool_nan.data(), 2, 2, 2, std::vector<float>{1, 0}, -1, 1.0, 0.3);
  EXPECT_NEAR(n[0], std::exp(1.0) / (std::exp(1.0) + std::exp(-1.0)), kWeightTolerance);  // NaN cos -> -1
  expect_error([] { fedcap_mixture_weights(kPool.data(), 3, 2, 2, std::vector<float>{1}, -1, 1, 0); },
               {"request of 1"});
}

TEST(FlFedcap, RecoversUploadsAgainstTheModelEachClientWasSent) {
  auto rule = fedcap({{"alpha", 1.0}, {"phi", 0.5}});
  // Round 1: three clients start from the global model 0 and upload e1, e2, e1 + e2 (norms <= sqrt 2).
  Uploads r1({{1, 0}, {0, 1}, {1, 1}});
  r1.samples = {100, 100, 200};
  const AggregationOutput o1 = rule->aggregate(r1.input());
  testing::expect_near_all(o1.update, {0.75f, 0.75f}, kModelTolerance);  // (e1 + e2 + 2 (e1 + e2)) / 4
  EXPECT_EQ(o1.flagged, (std::vector<uint8_t>{0, 0, 0}));
  // Round 2: client 0's customised model mixes the recovered models W = e1, e2, e1 + e2 with its u = e1.
  const std::vector<float> global = {0.75f, 0.75f};
  const PlanCall round2 = plan(*rule, {0}, global);
  ASSERT_TRUE(round2.plan && round2.plan->personal[0]);
  EXPECT_TRUE(round2.asked.empty());  // an uploader needs no request
  const std::vector<float> sent = round2.row(0);
  const std::vector<double> w = fedcap_mixture_weights(r1.data.data(), 3, 2, 2, std::vector<float>{1, 0}, 0, 1.0, 0.5);
  testing::expect_near_all(sent, {static_cast<float>(w[0] + w[2]), static_cast<float>(w[1] + w[2])}, kModelTolerance);
  // Client 0 uploads delta = (0.5, -0.5) relative to `sent`; client 1 got no customised model this round
  // (not asked), so its upload is relative to the global model.
  Uploads r2({{0.5f, -0.5f}, {0.25f, 0.25f}});
  r2.clients = {0, 1};
  r2.global = global;
  const AggregationOutput o2 = rule->aggregate(r2.input());
  const std::vector<float> W0 = {sent[0] + 0.5f, sent[1] - 0.5f}, W1 = {1.0f, 1.0f};
  testing::expect_near_all(o2.update, {(W0[0] + W1[0]) / 2 - 0.75f, (W0[1] + W1[1]) / 2 - 0.75f}, kModelTolerance);
}

TEST(FlFedcap, AnUploadOverTheNormThresholdRemovesItsClientForGood) {
  auto rule = fedcap({{"norm_threshold", 10.0}});
  Uploads r1({{1, 0}, {30, 40}, {0, 1}});  // client 1: calibrated norm 50 > 10
  const AggregationOutput o1 = rule->aggregate(r1.input());
  EXPECT_EQ(o1.flagged, (std::vector<uint8_t>{0, 1, 0}));
  testing::expect_near_all(o1.update, {0.5f, 0.5f}, kModelTolerance);  // client 1 not aggregated
  const PlanCall round2 = plan(*rule, {1}, {0.5f, 0.5f}, std::map<int64_t, std::vector<float>>{{1, {1, 0}}});
  EXPECT_FALSE(round2.plan->personal[0]);  // removed: the global model
  EXPECT_TRUE(round2.asked.empty());       // and never asked for a request
  // Round 2: client 1 now uploads a tiny update; it stays removed and is not aggregated.
  Uploads r2({{0.0f, 0.0f}, {0.01f, 0.0f}});
  r2.clients = {0, 1};
  r2.global = {0.5f, 0.5f};
  const AggregationOutput o2 = rule->aggregate(r2.input());
  EXPECT_EQ(o2.flagged, (std::vector<uint8_t>{0, 1}));
  testing::expect_near_all(o2.update, {0.0f, 0.0f}, kModelTolerance);  // only client 0 (unchanged) counts
  // Without calibration (FedCAP1/4) nobody is removed.
  auto raw = fedcap({{"calibration", false}});
  EXPECT_EQ(raw->aggregate(r1.input()).flagged, (std::vector<uint8_t>{0, 0, 0}));
}

TEST(FlFedcap, NonUploadersAreAskedForARequestUpdate) {
  auto rule = fedcap({{"alpha", 2.0}});
  Uploads r1({{1, 0}, {0, 1}});
  rule->aggregate(r1.input());
  const std::vector<float> global = {0.5f, 0.5f};
  const PlanCall unanswerable = plan(*rule, {0, 1, 5}, global, std::nullopt);
  EXPECT_TRUE(unanswerable.plan->personal[0] && unanswerable.plan->personal[1]);
  EXPECT_FALSE(unanswerable.plan->personal[2]);  // no request can be trained: the global model
  const PlanCall asked = plan(*rule, {0, 1, 5}, global, std::map<int64_t, std::vector<float>>{{5, {3, 0}}});
  EXPECT_EQ(asked.asked, std::vector<int64_t>{5});
  EXPECT_EQ(asked.base, (std::vector<float>{0, 0}));  // the global model the pool is relative to (r1's)
  ASSERT_TRUE(asked.plan->personal[2]);               // request {3, 0}: cosines 1 and 0
  const double a = std::exp(2.0) / (std::exp(2.0) + 1.0);
  testing::expect_near_all(asked.row(2), {static_cast<float>(a), static_cast<float>(1 - a)}, kModelTolerance);
  auto global_rule = fedcap({{"non_uploaders", std::string("global")}});
  global_rule->aggregate(r1.input());
  const PlanCall not_asked = plan(*global_rule, {5}, global, std::map<int64_t, std::vector<float>>{{5, {3, 0}}});
  EXPECT_TRUE(not_asked.asked.empty());
  EXPECT_FALSE(not_asked.plan->personal[0]);
  EXPECT_FALSE(fedcap({{"customise", false}})->plan_round({nullptr, global, {}}));  // FedCAP2: no plan at all
}

TEST(FlFedcap, StateRoundTripGivesTheSameCustomisedModels) {
  auto rule = fedcap();
  Uploads r1({{1, 0}, {30, 40}, {0.5f, 1}});
  rule->aggregate(r1.input());
  auto copy = fedcap();
  copy->load_state(rule->save_state());
  const PlanCall a = plan(*rule, {0, 1, 2}, r1.global), b = plan(*copy, {0, 1, 2}, r1.global);
  EXPECT_EQ(a.plan->starts, b.plan->starts);
  EXPECT_EQ(b.plan->personal, (std::vector<uint8_t>{1, 0, 1}));  // the removal of client 1 survives the checkpoint
  // A checkpoint written before the codec: [tag, R, removed, k, D, P, pool clients, w, models, updates].
  const RuleState saved = rule->save_state();
  std::vector<float> legacy = {20240.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 0.0f, 2.0f};
  for (const char* block : {"pool_base", "pool_models", "pool_updates"})
    legacy.insert(legacy.end(), saved.floats(block).begin(), saved.floats(block).end());
  auto from_old = fedcap();
  from_old->load_state(RuleState::from_legacy(legacy));
  EXPECT_EQ(from_old->save_state(), saved);
  expect_error([&] { copy->load_state(RuleState::from_legacy({1, 2, 3})); }, {"fedcap state"});  // not its tag
  expect_error([&] { fedcap({{"phi", -0.5}}); }, {"phi"});
}

// 16 clients on the synthetic set, 8 per round (the request path runs), 4 attackers uploading 100x their
// update: FedCAP removes them and the files do not depend on threads or on a kill + resume.
testing::TinyRun fedcap_run() {
  return {{"data.clients=16", "data.min_size=10", "data.local_test=split", "data.client_test_fraction=0.25",
           "clients.rule=fedcap", "clients.per_round=8", "clients.fedcap.epochs=1", "clients.fedcap.batch=16",
           "clients.fedcap.lr=0.05", "server.rule=fedcap", "attack.names=[\"scale\"]", "attack.malicious_count=4",
           "attack.scale.factor=100", "eval.personalized=true", "run.checkpoint_every=1"}};
}

using FlFedcapRun = testing::FlRunTest;

TEST_F(FlFedcapRun, RemovesScaledAttackersAndIsDeterministic) {
  const std::vector<RunSummary> summaries = expect_same_on_threads_and_resume(fedcap_run(), /*stop_after=*/2);
  ASSERT_EQ(summaries.size(), 1u);
  const std::vector<RoundRecord> records = parse_rounds_csv(file("one", "rounds.csv"));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_GT(records.back().client_detection.dacc, records.front().client_detection.dacc - 1e-9);
  EXPECT_LT(records.back().client_detection.fnr, 1.0);  // scaled attackers judged so far were removed
  EXPECT_DOUBLE_EQ(records.back().client_detection.fpr, 0.0);
  EXPECT_GT(records.back().personal.acc.mean, 0.3);
}

// FedCAP3 (no personal model): the evaluated model is the customised model last received.
TEST_F(FlFedcapRun, WithoutThePersonalModelClientsAreJudgedOnTheirCustomisedModel) {
  run(fedcap_run(), "plain", 1, {"clients.fedcap.personal=false", "rounds=2"});
  const std::vector<RoundRecord> records = parse_rounds_csv(file("plain", "rounds.csv"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_GT(records.back().personal.clients, 0);
}

// eval.personal_received: FedCAP's "g" figure, the customised models received. Without the personal model
// the received model is the client's own model, so p_racc equals p_acc in every round; with it, both are
// measured, the files stay thread- and resume-independent, and p_tacc is the better weighted figure.
TEST_F(FlFedcapRun, ReceivedCustomisedModelsGiveFedcapsTacc) {
  run(fedcap_run(), "plain", 1, {"clients.fedcap.personal=false", "rounds=2", "eval.personal_received=true"});
  for (const RoundRecord& r : parse_rounds_csv(file("plain", "rounds.csv"))) {
    EXPECT_TRUE(r.personal.received);
    EXPECT_DOUBLE_EQ(r.personal.received_acc.mean, r.personal.acc.mean) << "round " << r.round;
    EXPECT_DOUBLE_EQ(r.personal.received_acc.weighted, r.personal.acc.weighted) << "round " << r.round;
  }

  const std::vector<RunSummary> summaries =
      expect_same_on_threads_and_resume(fedcap_run().with({"eval.personal_received=true"}), /*stop_after=*/2);
  ASSERT_EQ(summaries.size(), 1u);
  const RunSummary& s = summaries[0];
  EXPECT_FALSE(std::isnan(s.personal_value("p_racc_w")));
  EXPECT_DOUBLE_EQ(s.personal_value("p_tacc"), std::max(s.personal_value("p_acc_w"), s.personal_value("p_racc_w")));
}

// eval.personal_received_final = next (FedCAP's code: after its last aggregation it sends every client
// its customised model once more and evaluates that as the final "g"): only the final round's p_racc
// changes; the earlier rounds and every p_acc are those of the default (the model received before the
// last round's training). Under mpirun the option is refused.
TEST_F(FlFedcapRun, TheFinalReceivedModelCanBeTheNextCustomisedModel) {
  const std::vector<std::string> received = {"rounds=3", "eval.personal_received=true"};
  std::vector<std::string> next = received;
  next.push_back("eval.personal_received_final=next");
  run(fedcap_run(), "received", 1, received);
  run(fedcap_run(), "next", 2, next);
  const std::vector<RoundRecord> a = parse_rounds_csv(file("received", "rounds.csv"));
  const std::vector<RoundRecord> b = parse_rounds_csv(file("next", "rounds.csv"));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t r = 0; r < a.size(); ++r) {
    EXPECT_DOUBLE_EQ(a[r].personal.acc.mean, b[r].personal.acc.mean) << "round " << a[r].round;
    if (r + 1 < a.size()) {
      EXPECT_DOUBLE_EQ(a[r].personal.received_acc.mean, b[r].personal.received_acc.mean) << "round " << a[r].round;
    }
  }
  EXPECT_NE(a.back().personal.received_acc.mean, b.back().personal.received_acc.mean);
}

// clients.<rule>.shuffle = false (FedCAP's loaders): every epoch reads the client's samples in index order,
// so the trained model no longer depends on the round's loader seed; shuffled, it does.
TEST(FlFedcap, UnshuffledLoadersDoNotDependOnTheSeed) {
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  auto trained = [&](bool shuffle, bool personal, uint64_t seed) {
    const auto model = make_model("mlp", kInput, 10, 5), second = make_model("mlp", kInput, 10, 5);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, seed, 12};
    task.second = second.get();  // the Ditto-style personal model
    client_rule("fedcap",
                {{"shuffle", shuffle}, {"personal", personal}, {"epochs", int64_t{2}}, {"batch", int64_t{16}}})
        ->train(task);
    const std::span<const float> w = model->flat_state();
    return std::vector<float>(w.begin(), w.end());
  };
  for (bool personal : {false, true}) {
    EXPECT_EQ(trained(false, personal, 1), trained(false, personal, 2)) << personal;
    EXPECT_NE(trained(true, personal, 1), trained(true, personal, 2)) << personal;
  }
}

}  // namespace
}  // namespace bastion
