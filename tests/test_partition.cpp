// Tests for data/partition.h and data/sampling.h: Gamma/Dirichlet moments, parsing, and for every
// partition the properties the FL runs rely on: no index used twice (clients, local tests, server),
// sizes, class coverage, determinism, min_size, the capping rule, heterogeneity vs beta, the options.
// Datasets are synthetic (only labels and groups matter), plus Fashion-MNIST when present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>

#include "data/dataset.h"
#include "data/partition.h"
#include "data/sampling.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

using Lists = std::vector<std::vector<int64_t>>;

// `classes` x `per_class` samples, labels shuffled (so class order != index order).
Dataset labelled_set(int64_t classes, int64_t per_class, uint64_t seed = 7) {
  Dataset d;
  d.name = "labels-only";
  d.num_classes = classes;
  std::vector<int64_t> order(static_cast<size_t>(classes * per_class));
  std::iota(order.begin(), order.end(), int64_t{0});
  Generator rng(seed);
  shuffle_indices(order, rng);
  for (int64_t v : order) d.labels.push_back(static_cast<int32_t>(v % classes));
  return d;
}

PartitionSpec spec_of(const std::string& text) { return parse_partition(text); }

// Every index in range, lists sorted, no index twice across train, test and server.
void expect_disjoint(const Dataset& d, const Partition& p) {
  std::vector<int> seen(static_cast<size_t>(d.size()), 0);
  auto visit = [&](const std::vector<int64_t>& list) {
    EXPECT_TRUE(std::is_sorted(list.begin(), list.end()));
    for (int64_t i : list) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, d.size());
      EXPECT_EQ(++seen[static_cast<size_t>(i)], 1) << "index " << i << " used twice";
    }
  };
  for (const auto& list : p.train) visit(list);
  for (const auto& list : p.test) visit(list);
  visit(p.server);
}

int64_t used_count(const Partition& p) {
  int64_t n = static_cast<int64_t>(p.server.size());
  for (const auto& list : p.train) n += static_cast<int64_t>(list.size());
  for (const auto& list : p.test) n += static_cast<int64_t>(list.size());
  return n;
}

}  // namespace

// ---------------------------------------------------------------- sampling

TEST(PartitionSampling, GammaMomentsMatchShape) {
  // Gamma(a, 1) has mean a and variance a. With n draws the sample mean's standard error is
  // sqrt(a / n); 5 standard errors (plus 5 % of the variance for its own noise, which is heavier-tailed
  // for small a) keep the test deterministic-safe while still catching a wrong boost or a wrong d.
  constexpr int kDraws = 200000;
  for (double shape : {0.05, 0.3, 1.0, 2.5, 30.0}) {
    Generator rng(11);
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < kDraws; ++i) {
      const double x = sample_gamma(rng, shape);
      ASSERT_GE(x, 0.0);
      sum += x;
      sum_sq += x * x;
    }
    const double mean = sum / kDraws, var = sum_sq / kDraws - mean * mean;
    EXPECT_NEAR(mean, shape, 5 * std::sqrt(shape / kDraws)) << "shape " << shape;
    EXPECT_NEAR(var, shape, 0.05 * shape + 5 * std::sqrt(shape / kDraws)) << "shape " << shape;
  }
  Generator rng(1);
  expect_error([&] { sample_gamma_log(rng, 0.0); }, {"gamma shape", "> 0"});
}

TEST(PartitionSampling, DirichletSumsToOneEvenForTinyBeta) {
  Generator rng(3);
  for (double beta : {1e-3, 0.1, 1.0, 100.0}) {
    for (int rep = 0; rep < 50; ++rep) {
      const std::vector<double> p = sample_dirichlet(rng, beta, 20);
      double sum = 0;
      for (double x : p) {
        ASSERT_TRUE(std::isfinite(x));
        ASSERT_GE(x, 0.0);
        sum += x;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12) << "beta " << beta;
    }
  }
}

// ---------------------------------------------------------------- parsing

TEST(PartitionParse, ValidFormsRoundTrip) {
  EXPECT_EQ(parse_partition("iid").kind, PartitionKind::kIid);
  EXPECT_EQ(parse_partition("natural").kind, PartitionKind::kNatural);
  EXPECT_EQ(parse_partition("emnist-groups").kind, PartitionKind::kEmnistGroups);
  const PartitionSpec d = parse_partition("dirichlet:0.3");
  EXPECT_EQ(d.kind, PartitionKind::kDirichlet);
  EXPECT_EQ(d.beta, 0.3);
  EXPECT_EQ(parse_partition("dirichlet:1e-1").beta, 0.1);
  const PartitionSpec s = parse_partition("pathological:15");
  EXPECT_EQ(s.kind, PartitionKind::kPathological);
  EXPECT_EQ(s.shards, 15);
  for (const std::string text :
       {"iid", "dirichlet:0.5", "dirichlet:0.1", "dirichlet:100", "pathological:2", "emnist-groups", "natural"})
    EXPECT_EQ(partition_name(parse_partition(text)), text);
}

TEST(PartitionParse, ErrorsNameTheTextAndListTheForms) {
  const std::string forms = "valid forms: iid, dirichlet:BETA";
  expect_error([] { parse_partition("dirichlett:0.5"); }, {"unknown partition 'dirichlett:0.5'", forms});
  expect_error([] { parse_partition(""); }, {"unknown partition ''", forms});
  expect_error([] { parse_partition("dirichlet"); }, {"'dirichlet'", "needs a number BETA", forms});
  expect_error([] { parse_partition("dirichlet:"); }, {"needs a number BETA", forms});
  expect_error([] { parse_partition("dirichlet:abc"); }, {"'abc'", forms});
  expect_error([] { parse_partition("dirichlet:0.5x"); }, {"'0.5x'", forms});
  expect_error([] { parse_partition("dirichlet:0"); }, {"BETA must be finite and > 0", "'0'", forms});
  expect_error([] { parse_partition("dirichlet:-1"); }, {"> 0", forms});
  expect_error([] { parse_partition("dirichlet:inf"); }, {"finite", forms});
  expect_error([] { parse_partition("pathological"); }, {"integer S", forms});
  expect_error([] { parse_partition("pathological:2.5"); }, {"'2.5'", "integer S", forms});
  expect_error([] { parse_partition("pathological:0"); }, {"S must be >= 1", forms});
  expect_error([] { parse_partition("iid:3"); }, {"'iid:3'", "takes no parameter", forms});
  expect_error([] { parse_partition("natural:"); }, {"takes no parameter", forms});
}

// ---------------------------------------------------------------- every kind

TEST(PartitionAll, NoIndexUsedTwiceWithServerAndLocalTests) {
  const Dataset ten = labelled_set(10, 300);
  Dataset grouped = ten;
  for (int64_t i = 0; i < grouped.size(); ++i) grouped.groups.push_back(static_cast<int32_t>(i % 7) * 3);
  const Dataset emnist = labelled_set(62, 50);
  PartitionSpec prior = spec_of("dirichlet:0.5");
  prior.dirichlet_client_prior = true;
  const std::vector<std::pair<PartitionSpec, const Dataset*>> cases = {{spec_of("iid"), &ten},
                                                                       {spec_of("dirichlet:0.5"), &ten},
                                                                       {prior, &ten},
                                                                       {spec_of("pathological:2"), &ten},
                                                                       {spec_of("emnist-groups"), &emnist},
                                                                       {spec_of("natural"), &grouped}};
  for (auto [spec, data] : cases) {
    spec.server_fraction = 0.1;
    spec.client_test_fraction = 0.25;
    spec.max_per_client = 200;
    const Partition p = make_partition(*data, spec, spec.kind == PartitionKind::kNatural ? 0 : 12, 5);
    SCOPED_TRACE(partition_name(spec));
    expect_disjoint(*data, p);
    // natural holds out a tenth of each of the 7 groups (428 or 429 samples: 42 each); the others a tenth of all
    const size_t server = spec.kind == PartitionKind::kNatural ? 7 * 42 : static_cast<size_t>(data->size() / 10);
    EXPECT_EQ(p.server.size(), server);
    for (size_t j = 0; j < p.train.size(); ++j) EXPECT_LE(p.train[j].size() + p.test[j].size(), 200u);
  }
}

TEST(PartitionAll, SameSeedSameResultOtherSeedDifferent) {
  const Dataset d = labelled_set(10, 300);
  PartitionSpec prior = spec_of("dirichlet:0.5");
  prior.dirichlet_client_prior = true;
  for (PartitionSpec spec : {spec_of("iid"), spec_of("dirichlet:0.5"), prior, spec_of("pathological:3")}) {
    spec.client_test_fraction = 0.3;
    const Partition a = make_partition(d, spec, 20, 42), b = make_partition(d, spec, 20, 42);
    const Partition c = make_partition(d, spec, 20, 43);
    EXPECT_EQ(a.train, b.train) << partition_name(spec);
    EXPECT_EQ(a.test, b.test) << partition_name(spec);
    EXPECT_NE(a.train, c.train) << partition_name(spec);
  }
}

TEST(PartitionAll, ImpossibleRequestsThrow) {
  const Dataset d = labelled_set(10, 3);
  expect_error([&] { make_partition(d, spec_of("iid"), 31, 1); }, {"cannot split 30 samples", "31 clients"});
  expect_error([&] { make_partition(d, spec_of("iid"), 0, 1); }, {"0 clients"});
  PartitionSpec bad = spec_of("iid");
  bad.server_fraction = 1.0;
  expect_error([&] { make_partition(d, bad, 2, 1); }, {"server_fraction must be in [0, 1)"});
  bad = spec_of("iid");
  bad.client_test_fraction = -0.1;
  expect_error([&] { make_partition(d, bad, 2, 1); }, {"client_test_fraction"});
}

// ---------------------------------------------------------------- iid

TEST(PartitionIid, NearEqualSizesAndEverySampleUsed) {
  const Dataset d = labelled_set(10, 101);  // 1010 samples over 100 clients: 10 clients get 11
  const Partition p = make_partition(d, spec_of("iid"), 100, 9);
  expect_disjoint(d, p);
  EXPECT_EQ(used_count(p), d.size());
  const PartitionStats stats = partition_stats(d, p.train);
  EXPECT_EQ(stats.min_size, 10);
  EXPECT_EQ(stats.max_size, 11);
}

// ---------------------------------------------------------------- dirichlet, class mode

TEST(PartitionDirichlet, MinSizeRespectedAndEverySampleUsed) {
  const Dataset d = labelled_set(10, 600);
  for (int64_t min_size : {1, 10, 40}) {
    PartitionSpec spec = spec_of("dirichlet:0.3");
    spec.min_size = min_size;
    const Partition p = make_partition(d, spec, 50, 2);
    expect_disjoint(d, p);
    EXPECT_EQ(used_count(p), d.size());
    EXPECT_GE(partition_stats(d, p.train).min_size, min_size);
  }
}

TEST(PartitionDirichlet, UnreachableMinSizeThrowsWithAdvice) {
  const Dataset d = labelled_set(10, 100);
  PartitionSpec spec = spec_of("dirichlet:0.01");
  spec.min_size = 15;  // 1000 samples / 50 clients = 20 each on average; beta 0.01 never gets there
  spec.max_attempts = 20;
  expect_error([&] { make_partition(d, spec, 50, 1); },
               {"dirichlet:0.01", "none of 20 draws", "min_size = 15", "larger beta", "smaller min_size"});
  spec.min_size = 21;  // 50 · 21 > 1000: refused before drawing
  expect_error([&] { make_partition(d, spec, 50, 1); }, {"need 1050 samples", "only 1000"});
}

TEST(PartitionDirichlet, HeterogeneityGrowsAsBetaShrinks) {
  const Dataset d = labelled_set(10, 6000);  // Fashion-MNIST's shape: 60000 samples, 10 classes
  double previous = 11.0;
  for (const std::string text : {"dirichlet:100", "dirichlet:1", "dirichlet:0.1"}) {
    const Partition p = make_partition(d, spec_of(text), 100, 3);
    const double classes = partition_stats(d, p.train).mean_classes;
    EXPECT_LT(classes, previous) << text;
    previous = classes;
  }
  EXPECT_LT(previous, 6.0);  // beta 0.1: measured about 4 classes per client
}

// True property of the capping rule: a client only receives samples of class k while it holds fewer
// than total/N samples, and classes are dealt in label order. So the samples a client holds from the
// classes before its last (highest-label) class number fewer than total/N.
TEST(PartitionDirichlet, CappingRuleHolds) {
  const Dataset d = labelled_set(10, 600);
  const double cap = 6000.0 / 50;
  auto worst_before_last = [&](bool capped) {
    PartitionSpec spec = spec_of("dirichlet:0.2");
    spec.dirichlet_cap = capped;
    spec.min_size = 1;
    double worst = 0;
    for (const auto& row : class_histogram(d, make_partition(d, spec, 50, 8).train)) {
      int64_t last = 9;
      while (last > 0 && row[static_cast<size_t>(last)] == 0) --last;
      worst = std::max<double>(worst, std::accumulate(row.begin(), row.begin() + last, int64_t{0}));
    }
    return worst;
  };
  EXPECT_LT(worst_before_last(true), cap);
  EXPECT_GT(worst_before_last(false), cap);  // without the cap the property fails: the test can fail
}

// ---------------------------------------------------------------- dirichlet, client-prior (FedFSA)

TEST(PartitionClientPrior, EqualSizesAndLessCoverageForSmallBeta) {
  const Dataset d = labelled_set(10, 600);
  double previous = 11.0;
  for (const std::string text : {"dirichlet:100", "dirichlet:0.5", "dirichlet:0.05"}) {
    PartitionSpec spec = spec_of(text);
    spec.dirichlet_client_prior = true;
    const Partition p = make_partition(d, spec, 100, 4);
    expect_disjoint(d, p);
    EXPECT_EQ(used_count(p), d.size()) << text;  // 6000 / 100 divides: nothing left over
    const PartitionStats stats = partition_stats(d, p.train);
    EXPECT_EQ(stats.min_size, 60);
    EXPECT_EQ(stats.max_size, 60);
    EXPECT_LT(stats.mean_classes, previous) << text;
    previous = stats.mean_classes;
  }
}

TEST(PartitionClientPrior, RemainderIsLeftOutAndUnevenClassesTerminate) {
  Dataset d = labelled_set(10, 100);
  for (size_t i = 0; i < 300; ++i) d.labels[i] = 0;  // class 0 large: other classes run out first
  PartitionSpec spec = spec_of("dirichlet:0.01");
  spec.dirichlet_client_prior = true;
  const Partition p = make_partition(d, spec, 7, 1);  // 1000 = 7 · 142 + 6
  expect_disjoint(d, p);
  EXPECT_EQ(used_count(p), 7 * 142);
  for (const auto& list : p.train) EXPECT_EQ(list.size(), 142u);
}

// ---------------------------------------------------------------- pathological

TEST(PartitionPathological, EqualSizesAndExactlySDistinctClasses) {
  const Dataset d = labelled_set(10, 600);
  for (int64_t s : {1, 2, 5, 10}) {
    const Partition p = make_partition(d, spec_of("pathological:" + std::to_string(s)), 100, 6);
    expect_disjoint(d, p);
    const int64_t shard = 6000 / (100 * s);
    for (const auto& row : class_histogram(d, p.train)) {
      EXPECT_EQ(std::count_if(row.begin(), row.end(), [](int64_t c) { return c > 0; }), s);
      for (int64_t c : row) EXPECT_TRUE(c == 0 || c == shard) << "one shard per class, S = " << s;
    }
    EXPECT_EQ(used_count(p), 100 * s * shard);
  }
}

TEST(PartitionPathological, UnevenClassesRespectCapacities) {
  // 2459 samples, 20 clients x 3: shard = floor(2459 / 60) = 40. Class k supplies floor(count_k / 40)
  // shards: 3, 3, 4, 5, 6, 7, 7, 8, 9, 9 = 61 for the 60 needed, so one shard and the odd 19 + 59 samples
  // stay unused.
  const std::vector<int64_t> counts = {120, 139, 160, 200, 240, 280, 280, 320, 360, 360};
  Dataset d;
  d.num_classes = 10;
  for (int32_t k = 0; k < 10; ++k) d.labels.insert(d.labels.end(), static_cast<size_t>(counts[k]), k);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const Partition p = make_partition(d, spec_of("pathological:3"), 20, seed);
    expect_disjoint(d, p);
    const auto hist = class_histogram(d, p.train);
    for (const auto& row : hist) EXPECT_EQ(std::count(row.begin(), row.end(), 40), 3);
    for (size_t k = 0; k < 10; ++k) {
      int64_t shards = 0;
      for (const auto& row : hist) shards += row[k] / 40;
      EXPECT_LE(shards, counts[k] / 40) << "class " << k;
    }
    EXPECT_EQ(used_count(p), 20 * 3 * 40);
  }
}

TEST(PartitionPathological, ShardShrinksWhenRoundingLeavesTooFew) {
  // 10 classes x 270, 12 clients x 2: floor(2700 / 24) = 112 gives only 2 shards per class (20 < 24);
  // 90 is the largest size with 3 per class.
  const Dataset d = labelled_set(10, 270);
  const Partition p = make_partition(d, spec_of("pathological:2"), 12, 3);
  expect_disjoint(d, p);
  for (const auto& row : class_histogram(d, p.train)) EXPECT_EQ(std::count(row.begin(), row.end(), 90), 2);
}

TEST(PartitionPathological, ImpossibleRequestsThrow) {
  const Dataset d = labelled_set(10, 600);
  expect_error([&] { make_partition(d, spec_of("pathological:11"), 10, 1); },
               {"pathological:11", "11 distinct classes", "has 10"});
  Dataset skewed;  // 10 clients x 2 classes need 20 shards: class 0 gives at most 10 (one per client), class 1 5
  skewed.num_classes = 2;
  skewed.labels.assign(1000, 0);
  skewed.labels.insert(skewed.labels.end(), 5, 1);
  expect_error([&] { make_partition(skewed, spec_of("pathological:2"), 10, 1); },
               {"need 20 shards", "supply only 15", "even with one-sample shards"});
}

// ---------------------------------------------------------------- emnist-groups

TEST(PartitionEmnistGroups, EightyPercentFromTheDominantGroup) {
  const Dataset d = labelled_set(62, 100);  // groups: 1000 digits, 2600 upper, 2600 lower
  const Partition p = make_partition(d, spec_of("emnist-groups"), 30, 2);
  expect_disjoint(d, p);
  // 10 digit clients x 80 % must fit in 1000 digits: size 125 (< 6200 / 30), 100 dominant + 25 any.
  const PartitionStats stats = partition_stats(d, p.train);
  EXPECT_EQ(stats.min_size, 125);
  EXPECT_EQ(stats.max_size, 125);
  auto group = [](int32_t label) { return label < 10 ? 0 : label < 36 ? 1 : 2; };
  for (size_t j = 0; j < p.train.size(); ++j) {
    int64_t own = 0;
    std::set<int32_t> other_classes;
    for (int64_t i : p.train[j]) {
      const int32_t label = d.labels[static_cast<size_t>(i)];
      own += group(label) == static_cast<int>(j % 3);
      if (group(label) != static_cast<int>(j % 3)) other_classes.insert(label);
    }
    // At least the 100 dominant draws; the 25 free draws land in the own group with probability about
    // its share of what is left (0 for digits, 1/2 for letters here), so 125 would mean the free draws are not free.
    EXPECT_GE(own, 100) << "client " << j;
    EXPECT_LT(own, 125) << "client " << j;
    EXPECT_GE(other_classes.size(), 5u) << "client " << j;
  }
  expect_error([&] { make_partition(labelled_set(10, 100), spec_of("emnist-groups"), 3, 1); },
               {"emnist-groups", "62 classes", "has 10"});
}

// ---------------------------------------------------------------- natural

TEST(PartitionNatural, OneClientPerGroupInIdOrder) {
  Dataset d = labelled_set(6, 50);
  for (int64_t i = 0; i < d.size(); ++i) d.groups.push_back(static_cast<int32_t>(40 - (i % 4) * 10));
  for (int64_t n : {0, 4}) {
    const Partition p = make_partition(d, spec_of("natural"), n, 1);
    ASSERT_EQ(p.num_clients(), 4);
    for (size_t j = 0; j < 4; ++j) {
      for (int64_t i : p.train[j]) EXPECT_EQ(d.groups[static_cast<size_t>(i)], 10 + 10 * static_cast<int32_t>(j));
    }
    EXPECT_EQ(used_count(p), d.size());
  }
  expect_error([&] { make_partition(d, spec_of("natural"), 5, 1); }, {"has 4 groups", "got 5"});
  expect_error([&] { make_partition(labelled_set(6, 10), spec_of("natural"), 0, 1); }, {"no group ids"});
}

// A grouped set stored user by user: the server's share comes from every group, so no user loses its
// client (the tail of the whole set would be the last user's samples; FedCAP's FLTrust row on WISDM).
TEST(PartitionNatural, ServerHoldsOutTheLastSamplesOfEachGroup) {
  Dataset d = labelled_set(4, 10);                                                          // 40 samples
  for (int64_t i = 0; i < d.size(); ++i) d.groups.push_back(i < 8 ? 7 : (i < 30 ? 3 : 5));  // sizes 8, 22, 10
  PartitionSpec spec = spec_of("natural");
  spec.server_fraction = 0.1;
  const Partition p = make_partition(d, spec, 3, 1);
  // floor(0.1 * n): group 7 (0-7) gives none, group 3 (8-29) gives 28-29, group 5 (30-39) gives 39
  EXPECT_EQ(p.server, (std::vector<int64_t>{28, 29, 39}));
  ASSERT_EQ(p.num_clients(), 3);
  EXPECT_EQ(p.train[0].size(), 20u);  // group 3 (the lowest id): 22 - 2
  EXPECT_EQ(p.train[1].size(), 9u);   // group 5: 10 - 1
  EXPECT_EQ(p.train[2].size(), 8u);   // group 7: all 8
  expect_disjoint(d, p);
  EXPECT_EQ(used_count(p), d.size());
  spec.server_fraction = 0.5;  // half of every user's samples: still one client per user
  EXPECT_EQ(make_partition(d, spec, 3, 1).num_clients(), 3);
}

// ---------------------------------------------------------------- options and stats

TEST(PartitionOptions, ServerHoldsOutTheLastSamples) {
  const Dataset d = labelled_set(10, 100);
  PartitionSpec spec = spec_of("dirichlet:0.5");
  spec.server_fraction = 0.1;
  const Partition p = make_partition(d, spec, 10, 1);
  std::vector<int64_t> tail(100);
  std::iota(tail.begin(), tail.end(), int64_t{900});
  EXPECT_EQ(p.server, tail);
  for (const auto& list : p.train) EXPECT_LT(list.back(), 900);
  EXPECT_EQ(used_count(p), 1000);
}

TEST(PartitionOptions, ClientTestFractionAndCap) {
  const Dataset d = labelled_set(10, 101);
  PartitionSpec spec = spec_of("iid");
  spec.client_test_fraction = 0.3;
  const Partition p = make_partition(d, spec, 10, 1);  // 101 per client: 30 test, 71 train
  expect_disjoint(d, p);
  for (size_t j = 0; j < 10; ++j) {
    EXPECT_EQ(p.test[j].size(), 30u);
    EXPECT_EQ(p.train[j].size(), 71u);
  }
  spec.max_per_client = 50;  // the cap comes first: 50 -> 15 test, 35 train
  const Partition capped = make_partition(d, spec, 10, 1);
  for (size_t j = 0; j < 10; ++j) {
    EXPECT_EQ(capped.test[j].size(), 15u);
    EXPECT_EQ(capped.train[j].size(), 35u);
  }
  // The options draw from their own streams: the union of a client's lists is a subset of the plain split.
  const Partition plain = make_partition(d, spec_of("iid"), 10, 1);
  for (size_t j = 0; j < 10; ++j) {
    for (int64_t i : capped.train[j]) EXPECT_TRUE(std::binary_search(plain.train[j].begin(), plain.train[j].end(), i));
  }
}

TEST(PartitionStatsTest, HandExample) {
  Dataset d;
  d.num_classes = 3;
  d.labels = {0, 1, 2, 0, 1, 2, 0};
  const Lists lists = {{0, 3, 6}, {1, 2}, {4, 5}, {}};
  EXPECT_EQ(class_histogram(d, lists), (Lists{{3, 0, 0}, {0, 1, 1}, {0, 1, 1}, {0, 0, 0}}));
  const PartitionStats s = partition_stats(d, lists);
  EXPECT_EQ(s.clients, 4);
  EXPECT_EQ(s.total, 7);
  EXPECT_EQ(s.min_size, 0);
  EXPECT_EQ(s.max_size, 3);
  EXPECT_EQ(s.median_size, 2.0);
  EXPECT_EQ(s.mean_classes, 5.0 / 4);
  EXPECT_EQ(s.min_classes, 0);
  EXPECT_EQ(s.max_classes, 2);
  expect_error([&] { class_histogram(d, {{7}}); }, {"index 7", "7 samples"});
}

// ---------------------------------------------------------------- real data

TEST(PartitionReal, FashionMnistDirichletUsesEverySampleOnce) {
  DatasetSplit split;
  try {
    split = load_dataset("fmnist", "");
  } catch (const Error& e) {
    GTEST_SKIP() << "Fashion-MNIST not found: " << e.what();
  }
  PartitionSpec spec = spec_of("dirichlet:0.5");
  spec.min_size = 10;
  const Partition p = make_partition(split.train, spec, 100, 0);
  expect_disjoint(split.train, p);
  EXPECT_EQ(used_count(p), 60000);
  EXPECT_GE(partition_stats(split.train, p.train).min_size, 10);
}
