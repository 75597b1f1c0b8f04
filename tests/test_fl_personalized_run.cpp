// Personalised FL, whole runs on the synthetic set: what the server rule sees, server start states,
// bytes, the global head under FedRep, kill + resume of every personalised rule, config cross-checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "fl/core/checkpoint.h"
#include "fl/core/experiment.h"
#include "fl/clients/local_training.h"
#include "fl/clients/sam_family.h"
#include "fl_test_support.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;

// FedRep under BadNets with personalised evaluation; each test switches the rule it is about.
testing::TinyRun personal_run() {
  return {{"seed=5", "rounds=5", "data.local_test=like-train", "clients.rule=fedrep", "attack.names=[\"badnets\"]",
           "attack.malicious_count=2", "attack.malicious_per_round=1", "attack.badnets.per_batch=4",
           "eval.personalized=true"}};
}

using FlPersonalizedRun = testing::FlRunTest;

TEST_F(FlPersonalizedRun, FedRepUploadsTheBodyOnlyAndTheGlobalHeadNeverMoves) {
  const testing::TinyRun config = personal_run().with({"clients.fedrep.batch=16", "clients.fedrep.lr=0.05"});
  run(config, "two", 1, {"rounds=2"});
  run(config, "four", 2, {"rounds=4"});
  const CheckpointState two = load_checkpoint((dir_ / "two" / "checkpoint.safetensors").string());
  const CheckpointState four = load_checkpoint((dir_ / "four" / "checkpoint.safetensors").string());
  const auto model = make_model("mlp", kInput, 10, 1);
  const HeadAndBody p = parts(*model);
  EXPECT_TRUE(part_unchanged(p.head, two.global, four.global));   // nobody uploads a head
  EXPECT_FALSE(part_unchanged(p.body, two.global, four.global));  // the bodies are aggregated
  const int64_t head_size = static_cast<int64_t>(gather_head(*model, model->flat_state()).size());
  const int64_t body_bytes = (static_cast<int64_t>(model->flat_state().size()) - head_size) * 4;
  for (const RoundRecord& r : parse_rounds_csv(file("four", "rounds.csv"))) {
    EXPECT_EQ(r.bytes_up, 4 * body_bytes) << "round " << r.round;  // 4 clients x the body's floats
    EXPECT_EQ(r.bytes_down, 4 * body_bytes) << "round " << r.round;
    EXPECT_TRUE(r.personal.present);
    EXPECT_EQ(r.personal.clients, 10);  // the benign ones
    EXPECT_GT(r.personal.acc.mean, 0.0);
    EXPECT_FALSE(std::isnan(r.personal.asr.mean));
  }
  // Nine fedrep clients (of twelve) have a head after 4 rounds of 4: the run's states hold them.
  int heads = 0;
  for (const ClientState& state : four.clients) heads += state.vectors.count("head") ? 1 : 0;
  EXPECT_GT(heads, 4);
}

// A server rule that records what it is given and (optionally) sends client k a start state whose every
// shared column is k (DESIGN.md pFL hook 1), delegating the aggregation to the configured rule.
struct Observed {
  std::vector<int64_t> n, D, parameters;
  std::vector<int64_t> start_clients;
};
class ObservingRule final : public ServerRule {
 public:
  ObservingRule(std::unique_ptr<ServerRule> inner, Observed& seen, bool starts)
      : inner_(std::move(inner)), seen_(seen), starts_(starts) {}
  AggregationOutput aggregate(const AggregationInput& in) override {
    seen_.n.push_back(in.n);
    seen_.D.push_back(in.D);
    seen_.parameters.push_back(in.num_parameters);
    EXPECT_EQ(static_cast<int64_t>(in.global.size()), in.D);
    return inner_->aggregate(in);
  }
  std::optional<RoundPlan> plan_round(const RoundPlanInput& in) override {
    if (!starts_) return std::nullopt;
    const size_t width = in.global.size();
    RoundPlan plan{std::vector<float>(in.sampled->size() * width), std::vector<uint8_t>(in.sampled->size(), 1)};
    for (size_t i = 0; i < in.sampled->size(); ++i) {
      seen_.start_clients.push_back((*in.sampled)[i]);
      std::fill_n(plan.starts.begin() + i * width, width, static_cast<float>((*in.sampled)[i]));
    }
    return plan;
  }

 private:
  std::unique_ptr<ServerRule> inner_;
  Observed& seen_;
  bool starts_;
};

class FlHookRun : public testing::FlRunTest {
 protected:
  Observed seen_;
  void run_observed(const std::string& out, const std::vector<std::string>& overrides, bool starts) {
    RunOptions options;
    options.out_dir = (dir_ / out).string();
    options.threads = 2;
    options.wrap_server_rule = [&](std::unique_ptr<ServerRule> rule) -> std::unique_ptr<ServerRule> {
      return std::make_unique<ObservingRule>(std::move(rule), seen_, starts);
    };
    run_experiment(personal_run().with(overrides).config(), options);
  }
};

TEST_F(FlHookRun, TheServerRuleSeesExactlyTheSharedColumns) {
  const auto model = make_model("mlp", kInput, 10, 1);
  const int64_t D = static_cast<int64_t>(model->flat_state().size());
  const int64_t head = static_cast<int64_t>(gather_head(*model, model->flat_state()).size());
  run_observed("fedrep", {"rounds=2"}, false);  // fedrep: the bodies
  ASSERT_EQ(seen_.D.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(seen_.n[r], 4);
    EXPECT_EQ(seen_.D[r], D - head);
    EXPECT_EQ(seen_.parameters[r], model->num_parameters() - head);  // the MLP has no buffers
  }
  seen_ = {};
  run_observed("sgd", {"rounds=1", "clients.rule=sgd"}, false);  // FedAvg: every column
  ASSERT_EQ(seen_.D.size(), 1u);
  EXPECT_EQ(seen_.D[0], D);
  EXPECT_EQ(seen_.parameters[0], model->num_parameters());
}

TEST_F(FlHookRun, ServerStartStatesReachTheSampledClients) {
  // fedavg-ft (after-local) keeps the model it trained; with lr 0 that is exactly its start state.
  const std::vector<std::string> overrides = {"rounds=1", "clients.rule=fedavg-ft", "clients.fedavg-ft.lr=0"};
  run_observed("starts", overrides, true);
  ASSERT_EQ(seen_.start_clients.size(), 4u);
  const CheckpointState state = load_checkpoint((dir_ / "starts" / "checkpoint.safetensors").string());
  for (int64_t client : seen_.start_clients) {
    const std::vector<float>& trained = state.clients[client].vectors.at("model");
    EXPECT_TRUE(std::all_of(trained.begin(), trained.end(), [&](float v) { return v == static_cast<float>(client); }))
        << "client " << client;
  }
  // Uploads are relative to the start state each client received: with lr 0 every row is zero and the
  // global model stays where the same run without start states leaves it (its initial state).
  run_observed("no-starts", overrides, false);
  const CheckpointState plain = load_checkpoint((dir_ / "no-starts" / "checkpoint.safetensors").string());
  EXPECT_EQ(state.global, plain.global);
}

TEST_F(FlPersonalizedRun, ServerRulesOnTheBodyRefuseAHeadOnlySelection) {
  expect_error(
      [&] {
        run(personal_run(), "x", 1, {"server.rule=multi-krum", "server.apply_to=[\"head\"]"});
      },
      {"server.apply_to", "keeps on the clients"});
  // The robust rules run on the uploaded bodies (pFedSAM Table III's setting).
  run(personal_run(), "mk", 1, {"server.rule=multi-krum", "clients.per_round=5", "rounds=2"});
  EXPECT_EQ(parse_rounds_csv(file("mk", "rounds.csv")).size(), 2u);
}

// One test per rule (CTest runs them side by side: the 13 rules in one test took 70 s under the sanitizers).
class FlPersonalizedRunResume : public testing::FlRunTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(FlPersonalizedRunResume, KilledAndResumedRunWritesIdenticalFiles) {
  const std::string rule = GetParam();
  const std::vector<std::string> overrides = {"clients.rule=" + rule};
  run(personal_run(), rule + "-whole", 2, overrides);
  run(personal_run(), rule + "-resumed", 1, overrides, false, /*stop_after=*/3);
  run(personal_run(), rule + "-resumed", 2, overrides, /*resume=*/true);
  EXPECT_EQ(file(rule + "-whole", "rounds.csv"), file(rule + "-resumed", "rounds.csv")) << rule;
  const RunSummary whole = summarize_run(0, parse_rounds_csv(file(rule + "-whole", "rounds.csv")), {}, "last", 0);
  EXPECT_FALSE(std::isnan(whole.personal_value("p_acc"))) << rule;
  // summary.json agrees but for the wall times
  auto without_times = [](std::string text) {
    std::string out, line;
    std::istringstream in(text);
    while (std::getline(in, line))
      if (line.find("seconds_per_round") == std::string::npos) out += line + "\n";
    return out;
  };
  EXPECT_EQ(without_times(file(rule + "-whole", "summary.json")),
            without_times(file(rule + "-resumed", "summary.json")))
      << rule;
}

INSTANTIATE_TEST_SUITE_P(PersonalisedRules, FlPersonalizedRunResume,
                         ::testing::Values("fedrep", "pfedsam", "ditto", "local", "fedavg-ft", "st", "fedsam",
                                           "mofedsam", "fedfsa", "fedspeed", "fedsmoo", "fedala", "fedfomo"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// eval.personal_model = own-last (FedFSA's code): killed and resumed runs write the same files at any
// thread count; it judges other models than the rule mode (FedSAM has no personal model: the global one);
// and for fedavg-ft after-local-final-head, whose personal model IS the client's last trained model, the
// two modes judge the same models in every round, the final head-tuned one included, once every client
// trains every round (before its first training a client is judged on the global model by the rule, on
// the initial model by own-last).
TEST_F(FlPersonalizedRun, OwnLastEvaluationResumesExactlyAndJudgesEachClientsTrainedModel) {
  const std::vector<std::string> own_last = {"eval.personal_model=own-last", "eval.client_accuracy=batch-mean",
                                             "eval.batch=16"};
  for (const std::string rule : {"fedsam", "fedfsa"}) {
    std::vector<std::string> overrides = own_last;
    overrides.push_back("clients.rule=" + rule);
    run(personal_run(), rule + "-own-whole", 2, overrides);
    run(personal_run(), rule + "-own-resumed", 1, overrides, false, /*stop_after=*/3);
    run(personal_run(), rule + "-own-resumed", 2, overrides, /*resume=*/true);
    EXPECT_EQ(file(rule + "-own-whole", "rounds.csv"), file(rule + "-own-resumed", "rounds.csv")) << rule;
  }
  run(personal_run(), "fedsam-rule", 1, {"clients.rule=fedsam", "eval.client_accuracy=batch-mean", "eval.batch=16"});
  EXPECT_NE(file("fedsam-own-whole", "rounds.csv"), file("fedsam-rule", "rounds.csv"));
  const std::vector<std::string> code_ft = {
      "clients.rule=fedavg-ft", "clients.fedavg-ft.variant=after-local-final-head", "clients.fedavg-ft.tune_epochs=1",
      "clients.per_round=12", "attack.malicious_per_round=0"};
  run(personal_run(), "ft-rule", 1, code_ft);
  std::vector<std::string> code_ft_own = code_ft;
  code_ft_own.push_back("eval.personal_model=own-last");
  run(personal_run(), "ft-own", 2, code_ft_own);
  const std::vector<RoundRecord> by_rule = parse_rounds_csv(file("ft-rule", "rounds.csv"));
  const std::vector<RoundRecord> by_own = parse_rounds_csv(file("ft-own", "rounds.csv"));
  ASSERT_EQ(by_rule.size(), by_own.size());
  for (size_t r = 0; r < by_rule.size(); ++r) {
    EXPECT_DOUBLE_EQ(by_rule[r].personal.acc.mean, by_own[r].personal.acc.mean) << "round " << by_rule[r].round;
    EXPECT_DOUBLE_EQ(by_rule[r].personal.asr.mean, by_own[r].personal.asr.mean) << "round " << by_rule[r].round;
  }
}

// FedFSA writes each sampled client's Top-C tensors per round to client_notes.csv (sampled clients only,
// candidates only); a killed and resumed run writes the same file. (That the code's sensitivity picks
// different tensors for different clients: test_fl_sam_family.cpp on constructed clients.)
TEST_F(FlPersonalizedRun, FedFsaWritesEachClientsChosenTensorsAndAResumedRunTheSame) {
  const std::vector<std::string> overrides = {"clients.rule=fedfsa", "clients.fedfsa.sensitivity=code",
                                              "clients.fedfsa.top_c=1"};
  run(personal_run(), "fsa-whole", 2, overrides);
  run(personal_run(), "fsa-resumed", 1, overrides, false, /*stop_after=*/3);
  run(personal_run(), "fsa-resumed", 2, overrides, /*resume=*/true);
  EXPECT_EQ(file("fsa-whole", "client_notes.csv"), file("fsa-resumed", "client_notes.csv"));
  const std::vector<ClientNote> notes = parse_client_notes_csv(file("fsa-whole", "client_notes.csv"));
  const std::vector<RoundRecord> rounds = parse_rounds_csv(file("fsa-whole", "rounds.csv"));
  int64_t sampled = 0;
  for (const RoundRecord& r : rounds) sampled += r.sampled;
  EXPECT_EQ(static_cast<int64_t>(notes.size()), sampled);  // every round's every sampled client, once
  for (const ClientNote& note : notes) EXPECT_TRUE(fsa_candidate(note.text)) << note.text;
  run(personal_run(), "no-notes", 1, {"clients.rule=fedsam", "rounds=1"});
  EXPECT_FALSE(std::filesystem::exists(dir_ / "no-notes" / "client_notes.csv"));  // a rule that notes nothing
}

TEST_F(FlPersonalizedRun, LocalTrainingNeverUploadsAndJudgesEachClientsOwnModel) {
  run(personal_run(), "local", 1, {"clients.rule=local", "clients.local.participation=all", "rounds=2"});
  for (const RoundRecord& r : parse_rounds_csv(file("local", "rounds.csv"))) {
    EXPECT_EQ(r.bytes_up, 0);
    EXPECT_EQ(r.sampled, 12);  // every client trains every round
    EXPECT_GT(r.personal.acc.mean, 0.0);
  }
}

TEST_F(FlPersonalizedRun, PersonalSettingsAreCheckedAgainstEachOther) {
  expect_error(
      [&] {
        run(personal_run(), "a", 1, {"eval.personalized=true", "data.local_test=split"});
      },
      {"eval.personalized", "local test sets"});
  expect_error(
      [&] {
        run(personal_run(), "b", 1, {"clients.rule=st", "post.rule=st"});
      },
      {"already takes a post-training step"});
  expect_error(
      [&] {
        run(personal_run(), "c", 1, {"eval.personalized=false", "post.rule=fine-tune"});
      },
      {"post.rule", "eval.personalized"});
  expect_error([&] { run(personal_run(), "d", 1, {"data.pool_train_test=true"}); }, {"pool_train_test", "like-train"});
  expect_error([&] { run(personal_run(), "e", 1, {"data.client_test_fraction=0.2"}); }, {"client_test_fraction = 0"});
}

TEST_F(FlPersonalizedRun, APersonalSubsetCostsLessAndIsTheSameForAnyThreadCount) {
  run(personal_run(), "s1", 1, {"eval.personal_clients=3", "rounds=2"});
  run(personal_run(), "s2", 2, {"eval.personal_clients=3", "rounds=2"});
  EXPECT_EQ(file("s1", "rounds.csv"), file("s2", "rounds.csv"));
  for (const RoundRecord& r : parse_rounds_csv(file("s1", "rounds.csv"))) EXPECT_EQ(r.personal.clients, 3);
}

}  // namespace
}  // namespace bastion
