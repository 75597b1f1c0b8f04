// fl/core building blocks: client sampling (forced attackers), the thread pool, FedAvg's math.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "fl/core/sampling.h"
#include "fl/base/thread_pool.h"
#include "fl/registry.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

TEST(FlSampling, RoundsAreDistinctSortedAndDeterministic) {
  for (uint64_t round = 0; round < 50; ++round) {
    const std::vector<int64_t> a = sample_round(100, 10, {}, 0, Generator(3).fork(round));
    ASSERT_EQ(a.size(), 10u);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 10u);
    EXPECT_EQ(a, sample_round(100, 10, {}, 0, Generator(3).fork(round)));
  }
}

TEST(FlSampling, UniformSamplingReachesEveryClientEvenly) {
  std::vector<int64_t> counts(20, 0);
  for (uint64_t round = 0; round < 4000; ++round)
    for (int64_t c : sample_round(20, 5, {}, 0, Generator(1).fork(round))) ++counts[c];
  // Expected 1000 each; binomial std ~27, so +-150 is > 5 sigma.
  for (int64_t count : counts) EXPECT_NEAR(count, 1000, 150);
}

TEST(FlSampling, ForcedAttackersAreExactlyKEveryRound) {
  const std::vector<int64_t> malicious = {3, 17, 42, 77, 90};
  std::vector<int64_t> attacker_counts(100, 0);
  for (uint64_t round = 0; round < 1000; ++round) {
    const std::vector<int64_t> sampled = sample_round(100, 10, malicious, 3, Generator(9).fork(round));
    ASSERT_EQ(sampled.size(), 10u);
    int64_t attackers = 0;
    for (int64_t c : sampled) {
      const bool bad = std::binary_search(malicious.begin(), malicious.end(), c);
      attackers += bad;
      if (bad) ++attacker_counts[c];
    }
    EXPECT_EQ(attackers, 3);
  }
  // Every attacker takes its turn: 3/5 of 1000 rounds = 600 expected, std ~15.
  for (int64_t c : malicious) EXPECT_NEAR(attacker_counts[c], 600, 100);
}

TEST(FlSampling, MaliciousSetRandomOrLast) {
  EXPECT_EQ(choose_malicious(10, 3, "last", Generator(1)), (std::vector<int64_t>{7, 8, 9}));
  const std::vector<int64_t> random = choose_malicious(100, 30, "random", Generator(1));
  EXPECT_EQ(random.size(), 30u);
  EXPECT_TRUE(std::is_sorted(random.begin(), random.end()));
  EXPECT_NE(random, choose_malicious(100, 30, "random", Generator(2)));
  expect_error([] { sample_round(10, 5, {1, 2}, 3, Generator(0)); }, {"cannot force 3"});
  expect_error([] { sample_round(10, 11, {}, 0, Generator(0)); }, {"clients per round 11"});
}

TEST(FlThreadPool, RunsEveryTaskOnceAndRethrows) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<std::atomic<int>> hits(101);
      pool.run(101, [&](int64_t task, int worker) {
        EXPECT_GE(worker, 0);
        EXPECT_LT(worker, threads);
        ++hits[task];
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
    expect_error([&] { pool.run(7, [](int64_t task, int) { BASTION_CHECK(task != 4, "task four failed"); }); },
                 {"task four failed"});
    pool.run(0, [](int64_t, int) { FAIL() << "no task to run"; });
  }
}

AggregationOutput fedavg(const std::vector<float>& rows, int64_t D, std::vector<int64_t> samples,
                         const std::string& weighting, double lr) {
  const std::vector<ParamSpec>& specs = fedavg_params();
  const Params params("server.fedavg", specs, {{"weighting", weighting}, {"lr", lr}});
  std::vector<int64_t> clients(samples.size());
  AggregationInput input;
  input.updates = rows.data();
  input.n = static_cast<int64_t>(samples.size());
  input.D = input.num_parameters = D;
  input.num_samples = samples;
  input.clients = clients;
  input.round = 1;
  return make_fedavg(params)->aggregate(input);
}

TEST(FlFedAvg, SampleWeightedUniformAndServerLearningRate) {
  const std::vector<float> rows = {1, 2, 3, 5, 6, 7};
  // weights 1/4 and 3/4
  EXPECT_EQ(fedavg(rows, 3, {10, 30}, "samples", 1.0).update, (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(fedavg(rows, 3, {10, 30}, "uniform", 1.0).update, (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(fedavg(rows, 3, {10, 30}, "uniform", 0.5).update, (std::vector<float>{1.5f, 2, 2.5f}));
  EXPECT_TRUE(fedavg(rows, 3, {10, 30}, "uniform", 1.0).flagged.empty());
}

TEST(FlRegistry, EveryUnitHasAParameterTableAndUnknownNamesListTheValidOnes) {
  for (const ClientRuleEntry& e : client_rule_registry()) EXPECT_NE(e.make(Params("c", *e.info.params)), nullptr);
  for (const ServerRuleEntry& e : server_rule_registry()) {
    const Params params("s", *e.info.params);
    const std::string inner = e.wrap ? "fedavg" : "";
    EXPECT_NE(make_server_rule(e.info.name, params, inner, Params("i", fedavg_params())), nullptr) << e.info.name;
    EXPECT_NE(static_cast<bool>(e.make), static_cast<bool>(e.wrap)) << e.info.name << ": make xor wrap";
  }
  EXPECT_EQ(
      server_rule_registry().size(),
      26u);  // fedavg + the 21 classical defenses of issue 5 + fedcpa + rsa-server (SPMC) + fedcap + spmc (SPMC's MCAgg)
  expect_error([] { find_server_rule("krumm"); }, {"unknown server rule 'krumm'", "fedavg"});
  expect_error([] { find_client_rule("sgdd"); }, {"unknown client rule", "sgd"});
  expect_error([] { find_attack("badnet"); }, {"unknown attack 'badnet'", "badnets", "min-max"});
}

}  // namespace
}  // namespace bastion
