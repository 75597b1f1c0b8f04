// Server-side pieces around the rules: the rules that use the server's own data (fltrust, sageflow,
// finetune) against a fake ServerData whose answers are known, the column subset (server.apply_to), the
// f the run assumes (server.expected_malicious), and the config keys of wrappers and server data.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "defense_test_support.h"
#include "fl/core/config.h"
#include "fl/core/server_side.h"
#include "fl/defenses/column_subset.h"
#include "fl/registry.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::rule_params;
using testing::Uploads;

// train(): returns state + `step` (as if the server's SGD moved every column by it) and records the
// state it was given. evaluate(): entropy = state[0], loss = state[1] (so a test controls both by
// choosing the uploads' first two columns).
class FakeServerData final : public ServerData {
 public:
  std::vector<float> step;
  std::vector<float> last_train_start;
  ServerTrainSpec last_spec;
  int64_t evaluations = 0;
  std::optional<ServerTrainSpec> clients = ServerTrainSpec{};  // the clients' schedule (client_schedule)
  mutable int64_t schedule_round = -1;                         // the round client_schedule was asked for

  int64_t size() const override { return 10; }
  std::vector<float> train(std::span<const float> state, const ServerTrainSpec& spec) override {
    last_train_start.assign(state.begin(), state.end());
    last_spec = spec;
    std::vector<float> out(state.begin(), state.end());
    for (size_t d = 0; d < out.size(); ++d) out[d] += step[d];
    return out;
  }
  std::optional<ServerTrainSpec> client_schedule(int64_t round) const override {
    schedule_round = round;
    return clients;
  }
  ServerEval evaluate(std::span<const float> state) override {
    ++evaluations;
    return {static_cast<double>(state[1]), static_cast<double>(state[0]), 10};
  }
};

constexpr float kTight = 1e-6f;  // float sums of a handful of O(1) terms

TEST(FlFlTrust, HandExampleTrustRescalingAndFlags) {
  FakeServerData data;
  data.step = {1, 0};  // g0 = (1, 0), |g0| = 1
  Uploads u({{2, 0}, {0, 3}, {-1, 0}, {3, 3}});
  u.server_data = &data;
  const AggregationOutput out = make_fltrust(rule_params("fltrust", fltrust_params()))->aggregate(u.input());
  // TS = relu(cos) = 1, 0, 0, 1/sqrt2; rescaled: (1,0), -, -, (1/sqrt2, 1/sqrt2).
  // update = (1*(1,0) + (1/sqrt2)(1/sqrt2, 1/sqrt2)) / (1 + 1/sqrt2) = (1.5, 0.5) / 1.70711
  const float s = 1.0f + 1.0f / std::sqrt(2.0f);
  EXPECT_NEAR(out.update[0], 1.5f / s, kTight);
  EXPECT_NEAR(out.update[1], 0.5f / s, kTight);
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST(FlFlTrust, RootSetUpdateRunsTheClientsScheduleByDefaultAndItsOwnAsAnOption) {
  FakeServerData data;
  data.step = {1, 0};
  ServerTrainSpec clients;
  clients.epochs = 3, clients.steps = 0, clients.batch = 16, clients.lr = 0.05, clients.momentum = 0.5;
  clients.weight_decay = 0.0, clients.drop_last = true;
  data.clients = clients;
  Uploads u({{2, 0}, {0, 3}});
  u.server_data = &data;
  u.round = 6;
  u.seed = 41;
  make_fltrust(rule_params("fltrust", fltrust_params()))->aggregate(u.input());
  EXPECT_EQ(data.schedule_round, 6);  // the clients' lr of this round
  EXPECT_EQ(data.last_spec.epochs, 3);
  EXPECT_EQ(data.last_spec.batch, 16);
  EXPECT_DOUBLE_EQ(data.last_spec.lr, 0.05);
  EXPECT_DOUBLE_EQ(data.last_spec.momentum, 0.5);
  EXPECT_DOUBLE_EQ(data.last_spec.weight_decay, 0.0);
  EXPECT_TRUE(data.last_spec.drop_last);
  EXPECT_EQ(data.last_spec.seed, 41u);
  // schedule = own: the rule's own keys (defaults 1 epoch, batch 64, lr 0.01, momentum 0.9, wd 1e-5).
  make_fltrust(rule_params("fltrust", fltrust_params(), {{"schedule", std::string("own")}, {"epochs", int64_t{10}}}))
      ->aggregate(u.input());
  EXPECT_EQ(data.last_spec.epochs, 10);
  EXPECT_EQ(data.last_spec.batch, 64);
  EXPECT_DOUBLE_EQ(data.last_spec.lr, 0.01);
  EXPECT_DOUBLE_EQ(data.last_spec.weight_decay, 1e-5);
  EXPECT_FALSE(data.last_spec.drop_last);
  // A client rule without a schedule: the default refuses and names the option.
  data.clients.reset();
  expect_error([&] { make_fltrust(rule_params("fltrust", fltrust_params()))->aggregate(u.input()); },
               {"fltrust", "schedule", "own"});
}

// The paper's ModelUpdate on the root set is the clients' local training: on a real replica the server
// takes as many SGD steps over 40 root samples as a client over 40 of its own (2 epochs of
// ceil(40 / 16) = 3 batches = 6; with steps = 5, 5), and from the same start and seed it lands on the
// client's state bit for bit. Its own schedule (1 epoch of batch 64) takes 1 step.
TEST(FlFlTrust, ServerStepCountEqualsAClientsForTheSameDataSize) {
  const Dataset data = pfl_testing::synthetic_train(100);
  std::vector<int64_t> own(40), root(40);
  std::iota(own.begin(), own.end(), int64_t{0});
  std::iota(root.begin(), root.end(), int64_t{60});
  const TransformSpec identity;
  for (const int64_t steps : {int64_t{0}, int64_t{5}}) {
    const Params schedule(
        "clients.sgd", *find_client_rule("sgd").info.params,
        {{"epochs", int64_t{2}}, {"steps", steps}, {"batch", int64_t{16}}, {"lr", 0.05}, {"momentum", 0.5}});
    const int64_t expected = steps > 0 ? steps : 6;
    const auto client_model = make_model("mlp", pfl_testing::kInput, 10, 5);
    const std::vector<float> start = pfl_testing::state_of(*client_model);
    ClientState state;
    ClientTask task{*client_model, data, own, identity, state, 3, 1, 11, 12};
    EXPECT_EQ(find_client_rule("sgd").make(schedule)->train(task).steps, expected);

    const auto replica = make_model("mlp", pfl_testing::kInput, 10, 5);
    ModelServerData server(*replica, data, root, identity, identity, 64, client_local_schedule(schedule));
    Uploads u({start, start});
    u.global = start;
    u.server_data = &server;
    make_fltrust(rule_params("fltrust", fltrust_params()))->aggregate(u.input());
    EXPECT_EQ(server.last_train_steps(), expected) << "steps = " << steps;
    make_fltrust(rule_params("fltrust", fltrust_params(), {{"schedule", std::string("own")}}))->aggregate(u.input());
    EXPECT_EQ(server.last_train_steps(), 1);

    // Same start, same samples, same seed: the server's update is a client's update.
    ClientState fresh;
    ClientTask on_root{*client_model, data, root, identity, fresh, 3, 1, u.seed, 12};
    std::copy(start.begin(), start.end(), client_model->flat_state().begin());
    find_client_rule("sgd").make(schedule)->train(on_root);
    ServerTrainSpec spec = *server.client_schedule(1);
    spec.seed = u.seed;
    EXPECT_EQ(server.train(start, spec), pfl_testing::state_of(*client_model));
  }
}

TEST(FlFlTrust, AllUploadsAgainstTheServerLeaveTheModel) {
  FakeServerData data;
  data.step = {1, 1};
  Uploads u({{-1, -2}, {-3, 0}});
  u.server_data = &data;
  const AggregationOutput out = make_fltrust(rule_params("fltrust", fltrust_params()))->aggregate(u.input());
  EXPECT_EQ(out.update, (std::vector<float>{0, 0}));
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{1, 1}));
}

TEST(FlFlTrust, RefusesWithoutServerData) {
  Uploads u({{1, 0}});
  expect_error([&] { make_fltrust(rule_params("fltrust", fltrust_params()))->aggregate(u.input()); },
               {"fltrust", "data.server_fraction"});
}

TEST(FlSageFlow, EntropyFilterAndLossWeights) {
  FakeServerData data;
  // column 0 = entropy, column 1 = loss of the client's model (global is zero).
  Uploads u({{0.5f, 1.0f, 10}, {2.5f, 0.1f, 20}, {1.0f, 3.0f, 40}});
  u.server_data = &data;
  u.samples = {100, 100, 300};
  const AggregationOutput out = make_sageflow(rule_params("sageflow", sageflow_params()))->aggregate(u.input());
  // kept 0 and 2 (entropy < 2); weights 100/1 and 300/3 -> 1/2 each.
  EXPECT_NEAR(out.update[2], 25.0f, 1e-5f);
  EXPECT_NEAR(out.update[0], 0.75f, kTight);
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(data.evaluations, 3);
}

TEST(FlSageFlow, NobodyBelowTheThresholdLeavesTheModel) {
  FakeServerData data;
  Uploads u({{3.0f, 1.0f}, {2.0f, 1.0f}});
  u.server_data = &data;
  const AggregationOutput out = make_sageflow(rule_params("sageflow", sageflow_params()))->aggregate(u.input());
  EXPECT_EQ(out.update, (std::vector<float>{0, 0}));
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{1, 1}));
}

TEST(FlFinetune, TrainsTheAggregateAndReturnsTheDifference) {
  FakeServerData data;
  data.step = {0.5f, -1.0f};
  Uploads u({{1, 2}, {3, 4}});
  u.global = {10, 20};
  u.server_data = &data;
  const AggregationOutput out =
      make_finetune(rule_params("finetune", finetune_params(), {{"rho", 0.05}, {"epochs", int64_t{3}}}))
          ->aggregate(u.input());
  EXPECT_EQ(data.last_train_start, (std::vector<float>{12, 23}));  // global + uniform mean (2, 3)
  EXPECT_EQ(out.update, (std::vector<float>{2.5f, 2.0f}));
  EXPECT_DOUBLE_EQ(data.last_spec.rho, 0.05);
  EXPECT_EQ(data.last_spec.epochs, 3);
  EXPECT_TRUE(out.flagged.empty());
}

// A rule that records what it was given and returns its first row (flagging the others).
class FirstRow final : public ServerRule {
 public:
  AggregationInput seen;
  std::vector<float> global_seen;
  AggregationOutput aggregate(const AggregationInput& in) override {
    seen = in;
    global_seen.assign(in.global.begin(), in.global.end());
    AggregationOutput out;
    out.update.assign(in.updates, in.updates + in.D);
    out.flagged.assign(static_cast<size_t>(in.n), 1);
    out.flagged[0] = 0;
    return out;
  }
};

TEST(FlColumnSubset, InnerRuleSeesOnlyTheSelectedColumnsAndTheRestIsAveraged) {
  // D = 6: parameters 0..3, buffers 4..5; subset = columns [1, 3) and buffer [5, 6).
  Uploads u({{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}});
  u.P = 4;
  u.samples = {1, 3};
  u.global = {0, 100, 200, 0, 0, 500};
  auto inner = std::make_unique<FirstRow>();
  FirstRow* spy = inner.get();
  auto rule = make_column_subset(std::move(inner), {{1, 3}, {5, 6}}, /*rest_mean=*/true);
  const AggregationOutput out = rule->aggregate(u.input());
  EXPECT_EQ(spy->seen.D, 3);
  EXPECT_EQ(spy->seen.num_parameters, 2);
  EXPECT_EQ(spy->global_seen, (std::vector<float>{100, 200, 500}));
  // selected columns from the inner rule (row 0); others: sample-weighted mean 1/4, 3/4.
  EXPECT_EQ(out.update, (std::vector<float>{5.5f, 2, 3, 8.5f, 9.5f, 6}));
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 1}));
  auto keep = make_column_subset(std::make_unique<FirstRow>(), {{1, 3}, {5, 6}}, /*rest_mean=*/false);
  EXPECT_EQ(keep->aggregate(u.input()).update, (std::vector<float>{0, 2, 3, 0, 0, 6}));
}

TEST(FlColumnSubset, ServerDataTrainsFullModelsCompletedWithTheGlobalColumns) {
  FakeServerData data;
  data.step = {1, 1, 1};
  Uploads u({{1, 2, 3}});
  u.global = {10, 20, 30};
  u.server_data = &data;
  auto rule = make_column_subset(make_finetune(rule_params("finetune", finetune_params())), {{2, 3}}, false);
  const AggregationOutput out = rule->aggregate(u.input());
  // The inner finetune sees column 2 only: start = 30 + 3; the fake trains the full state
  // (10, 20, 33) -> (11, 21, 34); the subset takes column 2 back: update 34 - 30 = 4.
  EXPECT_EQ(data.last_train_start, (std::vector<float>{10, 20, 33}));
  EXPECT_EQ(out.update, (std::vector<float>{0, 0, 4}));
}

ExperimentConfig config_with(const std::string& server) {
  return parse_config("[data]\nclients = 100\n" + server, "test.toml");
}

TEST(FlServerSide, ExpectedMaliciousFromServerOrAttack) {
  ExperimentConfig c = config_with("[server]\nexpected_malicious = 0.3\n");
  EXPECT_EQ(expected_malicious_count(c, 10), 3);
  EXPECT_EQ(expected_malicious_count(c, 7), 2);  // floor(2.1)
  c = parse_config("[data]\nclients = 100\n[attack]\nnames = [\"sign-flip\"]\nmalicious_fraction = 0.3\n", "t");
  EXPECT_EQ(expected_malicious_count(c, 10), 3);
  c = parse_config(
      "[data]\nclients = 100\n[attack]\nnames = [\"sign-flip\"]\nmalicious_count = 20\n"
      "malicious_per_round = 4\n",
      "t");
  EXPECT_EQ(expected_malicious_count(c, 10), 4);
  EXPECT_EQ(expected_malicious_count(c, 3), 3);
  EXPECT_EQ(expected_malicious_count(config_with(""), 10), 0);  // no attackers configured
}

TEST(FlServerSide, ApplyToBodyHeadAndPrefixes) {
  const auto model = make_model("lenet", {1, 28, 28}, 10, 1);
  const int64_t P = model->num_parameters();
  EXPECT_TRUE(apply_to_columns(*model, {}).empty());
  const std::vector<ColumnRange> body = apply_to_columns(*model, {"body"});
  const std::vector<ColumnRange> head = apply_to_columns(*model, {"head"});
  ASSERT_EQ(body.size(), 1u);  // LeNet: the head (fc3) is the last parameter block, no buffers
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(body[0].begin, 0);
  EXPECT_EQ(body[0].end, head[0].begin);
  EXPECT_EQ(head[0].end, P);
  const std::vector<ColumnRange> conv1 = apply_to_columns(*model, {"conv1."});
  ASSERT_EQ(conv1.size(), 1u);
  EXPECT_EQ(conv1[0].begin, 0);
  EXPECT_EQ(conv1[0].end, 6 * 1 * 5 * 5 + 6);
  expect_error([&] { apply_to_columns(*model, {"nope"}); }, {"server.apply_to", "'nope'", "conv1.weight"});
}

TEST(FlServerSide, ConfigChecksWrappersInnerRulesAndServerData) {
  expect_error([] { config_with("[server]\nrule = \"bucketing\"\n"); }, {"server.inner"});
  expect_error([] { config_with("[server]\nrule = \"median\"\ninner = \"krum\"\n"); },
               {"server.inner", "does not wrap"});
  expect_error([] { config_with("[server]\nrule = \"gas\"\ninner = \"bucketing\"\n"); }, {"cannot wrap"});
  expect_error([] { config_with("[server]\nrule = \"fltrust\"\n"); }, {"fltrust", "data.server_fraction"});
  expect_error([] { config_with("[server]\nrule = \"bucketing\"\ninner = \"median\"\n[server.krum]\nf = 1\n"); },
               {"[server.krum]"});
  const ExperimentConfig c =
      config_with("[server]\nrule = \"bucketing\"\ninner = \"trimmed-mean\"\n[server.trimmed-mean]\nf = 2\n");
  EXPECT_EQ(c.server_inner_rule.integer("f"), 2);
  const std::string toml = config_to_toml(c);
  EXPECT_NE(toml.find("[server.trimmed-mean]"), std::string::npos);
  EXPECT_EQ(config_to_toml(parse_config(toml, "round trip")), toml);
}

}  // namespace
}  // namespace bastion
