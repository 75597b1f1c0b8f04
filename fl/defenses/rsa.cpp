// rsa: the server step of RSA, Li et al. 2019, "RSA: Byzantine-Robust Stochastic Aggregation Methods for
// Distributed Learning from Heterogeneous Datasets" (l1-penalised consensus), in SPMC's form:
//   w <- w - alpha * (lambda * clip(sum_i sign(w - w_i), +-cap) + weight_decay * w),   w_i = w + Delta_i
// so, per parameter coordinate d < P, since sign(w - w_i) = -sign(Delta_i):
//   update[d] = alpha * lambda * clip(sum_i sign(Delta_i[d]), +-cap) - alpha * weight_decay * global[d]
//   update[d] = (1/n) sum_i Delta_i[d]          d >= P (BatchNorm buffers: plain mean)
// sign(0) = 0; cap = 0: no clipping. Defaults are SPMC's: alpha 0.05, lambda 0.1, cap 3, weight_decay 1e-3.
// Each client moves the global by at most alpha * lambda per coordinate, whatever its magnitude, so an
// upload's size cannot be used against the server; the price is that the step ignores magnitudes: n
// identical uploads Delta give alpha * lambda * min(n, cap) * sign(Delta) - alpha * wd * w, not Delta.
// SPMC computes sign(w - w_i) on the models; we use -sign(Delta_i), the same except where Delta_i is below
// half an ulp of w (float(w + Delta_i) == w), where the model difference rounds to 0.
// Preconditions: n >= 1; inputs finite (the run loop rejects NaN/Inf first). Flags nobody.
// Cost: O(n D), one pass over the matrix in fixed column blocks (thread-count independent).
#include <algorithm>
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr int64_t kBlock = 2048;  // columns per block: the sums and sign counts stay in L1

class Rsa final : public ServerRule {
 public:
  explicit Rsa(const Params& p)
      : alpha_(p.real("alpha")), lambda_(p.real("lambda")), cap_(p.real("cap")), decay_(p.real("weight_decay")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "rsa: no upload to aggregate");
    BASTION_CHECK(static_cast<int64_t>(in.global.size()) == in.D, "rsa: global state has ", in.global.size(),
                  " values, uploads have D = ", in.D);
    const int64_t P = in.num_parameters;
    AggregationOutput out;
    out.update.resize(static_cast<size_t>(in.D));
    for_column_blocks(in, in.D, kBlock, [&](int64_t begin, int64_t end) {
      double sum[kBlock] = {};
      int64_t votes[kBlock] = {};
      for (int64_t i = 0; i < in.n; ++i) {
        const float* row = in.updates + i * in.D;
        for (int64_t d = begin; d < end; ++d) {
          sum[d - begin] += row[d];
          votes[d - begin] += (row[d] > 0.0f) - (row[d] < 0.0f);
        }
      }
      for (int64_t d = begin; d < end; ++d) {
        if (d >= P) {
          out.update[d] = static_cast<float>(sum[d - begin] / static_cast<double>(in.n));
          continue;
        }
        double vote = static_cast<double>(votes[d - begin]);
        if (cap_ > 0) vote = std::clamp(vote, -cap_, cap_);
        out.update[d] = static_cast<float>(alpha_ * (lambda_ * vote - decay_ * static_cast<double>(in.global[d])));
      }
    });
    return out;
  }

 private:
  double alpha_, lambda_, cap_, decay_;
};
}  // namespace

const std::vector<ParamSpec>& rsa_params() {
  static const std::vector<ParamSpec> specs = {
      {"alpha", ParamType::Real, 0.05, "server step size", 0, 1e6},
      {"lambda", ParamType::Real, 0.1, "weight of the l1 consensus penalty (step per agreeing client)", 0, 1e6},
      {"cap", ParamType::Real, 3.0, "clip the per-coordinate sign sum to [-cap, cap]; 0 = no clipping", 0, 1e9},
      {"weight_decay", ParamType::Real, 1e-3, "server weight decay on the global parameters", 0, 1e6},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_rsa(const Params& params) { return std::make_unique<Rsa>(params); }

}  // namespace bastion
