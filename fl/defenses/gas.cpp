// gas: gradient splitting (Liu, Gong, Chen et al., "Byzantine-Robust Learning on Heterogeneous Data via
// Gradient Splitting", ICML 2023; FedCAP's --gas --gas_p 1000).
//   split the P parameter coordinates into p groups G_1..G_p (p > P -> p = P), sizes as numpy's
//     array_split: the first P mod p groups hold one coordinate more
//   for each group g: a_g = inner rule on the (n, |G_g|) sub-matrix (its own AggregationInput with
//     D = num_parameters = |G_g|, global restricted to G_g, everything else unchanged)
//   score_i = sum_g |Delta_i[G_g] - a_g|   (Euclidean, not squared)
//   keep the n - f clients with the lowest score (ties: lower client id first); update = mean of the
//   kept uploads over all D columns (weighting = uniform, FedCAP's plain mean; or samples)
// Split: random (FedCAP; a permutation of [0, P) from the round's seed, then array_split) or contiguous.
// Flags: the f dropped clients. State: exactly the inner rule's save_state (GAS keeps nothing). The inner
// rule is called p times a round on different sub-problems, so a rule with per-client memory
// (foolsgold) is not meaningful inside GAS.
// Preconditions: n >= 1, 0 <= f < n, P >= 1. Cost: O(n P) to gather the groups plus p inner calls.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {

namespace {
class Gas final : public ServerRule {
 public:
  Gas(const Params& p, std::unique_ptr<ServerRule> inner)
      : params_(p), groups_(p.integer("p")), random_(p.text("split") == "random"),
        sample_weighted_(p.text("weighting") == "samples"), inner_(std::move(inner)) {
    BASTION_CHECK(inner_ != nullptr, "gas: no inner rule");
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    const int64_t n = in.n, P = in.num_parameters;
    BASTION_CHECK(n >= 1, "gas: no upload to aggregate");
    BASTION_CHECK(P >= 1, "gas: no parameter column to split");
    const int64_t f = resolved_f(params_, in);
    BASTION_CHECK(f >= 0 && f < n, "gas: f = ", f, " must satisfy 0 <= f < n = ", n);
    std::vector<int64_t> columns(static_cast<size_t>(P));
    std::iota(columns.begin(), columns.end(), int64_t{0});
    if (random_) {
      Generator g(in.seed);
      for (int64_t i = P - 1; i > 0; --i)  // Fisher-Yates
        std::swap(columns[i], columns[static_cast<int64_t>(g.below(static_cast<uint64_t>(i + 1)))]);
    }
    const int64_t p = std::min(groups_, P), base = P / p, extra = P % p;
    std::vector<double> score(static_cast<size_t>(n), 0.0);
    std::vector<float> block, global;
    int64_t start = 0;
    for (int64_t g = 0; g < p; ++g) {
      const int64_t width = base + (g < extra ? 1 : 0);
      const int64_t* cols = columns.data() + start;
      start += width;
      block.resize(static_cast<size_t>(n * width));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < width; ++c) block[i * width + c] = in.updates[i * in.D + cols[c]];
      global.assign(static_cast<size_t>(width), 0.0f);
      if (!in.global.empty())
        for (int64_t c = 0; c < width; ++c) global[c] = in.global[cols[c]];
      AggregationInput sub = in;
      sub.updates = block.data();
      sub.D = sub.num_parameters = width;
      sub.global = global;
      sub.weight_columns = {};  // a random column group has no tensor layout
      const AggregationOutput agg = inner_->aggregate(sub);
      BASTION_CHECK(static_cast<int64_t>(agg.update.size()) == width, "gas: inner rule returned ", agg.update.size(),
                    " values for a group of ", width);
      for (int64_t i = 0; i < n; ++i) {
        double sq = 0.0;
        for (int64_t c = 0; c < width; ++c) {
          const double diff = static_cast<double>(block[i * width + c]) - agg.update[c];
          sq += diff * diff;
        }
        score[i] += std::sqrt(sq);
      }
    }
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      if (score[a] != score[b]) return score[a] < score[b];
      return in.clients.empty() ? a < b : in.clients[a] < in.clients[b];
    });
    std::vector<int64_t> kept(order.begin(), order.begin() + (n - f));
    return mean_of_kept(in, std::move(kept), sample_weighted_);
  }

  RuleState save_state() const override { return inner_->save_state(); }
  void load_state(const RuleState& state) override { inner_->load_state(state); }

 private:
  Params params_;
  int64_t groups_;
  bool random_, sample_weighted_;
  std::unique_ptr<ServerRule> inner_;
};
}  // namespace

const std::vector<ParamSpec>& gas_params() {
  static const double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      {"p", ParamType::Integer, int64_t{1000}, "groups of parameter coordinates (p > P: one per coordinate)", 1, 1e12},
      {"split",
       ParamType::Text,
       std::string("random"),
       "random: coordinates permuted by the round's seed (FedCAP); contiguous: consecutive ranges",
       -inf,
       inf,
       {"random", "contiguous"}},
      weighting_param("uniform"),
      f_param(),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_gas(const Params& params, std::unique_ptr<ServerRule> inner) {
  return std::make_unique<Gas>(params, std::move(inner));
}

}  // namespace bastion
