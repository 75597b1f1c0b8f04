// rsa: the master step of RSA, Li et al. AAAI'19, "RSA: Byzantine-Robust Stochastic Aggregation Methods for
// Distributed Learning from Heterogeneous Datasets" (l1-norm penalty, Algorithm 1):
//   x_0 <- x_0 - alpha (grad f_0(x_0) + lambda sum_i sign(x_0 - x_i)),   f_0(x) = (weight_decay/2)||x||^2
// The uploads are Delta_i = x_i - x_0 (the rsa client rule uploads its own model x_i that way, a plain
// client its trained copy of x_0), so sign(x_0 - x_i) = -sign(Delta_i) and, per parameter coordinate d < P:
//   update[d] = alpha * lambda * V[d] - alpha * weight_decay * global[d],   V[d] = sum_i sign(Delta_i[d])
//   update[d] = (1/n) sum_i Delta_i[d]          d >= P (BatchNorm buffers: plain mean)
// sign(0) = 0. cap > 0 bounds V the way SPMC's code does: the running sum is clipped to [-cap, cap] after
// each client, in upload (client-id) order, V <- clip(V + sign(Delta_i)) -- not a clip of the final sum
// (votes +1 x4 then -1 x2 with cap 3 give 1, not 2). The paper has no cap (cap = 0, the default of rsa).
// Two registered names share this code with different defaults:
//   rsa         the paper's master, for the rsa client rule: alpha 0.01 (the client's lr: the paper uses
//               one step size for both), lambda 0.1, weight_decay 0.01, cap 0 (docs/decisions.md)
//   rsa-server  SPMC's server-only RSA on plain (sgd) clients' models: alpha 0.05, lambda 0.1, cap 3,
//               weight_decay 1e-3 (RobustFederation/Server/RSA.py)
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
      : alpha_(p.real("alpha")), lambda_(p.real("lambda")), cap_(p.integer("cap")), decay_(p.real("weight_decay")) {}

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
          int64_t& vote = votes[d - begin];
          vote += (row[d] > 0.0f) - (row[d] < 0.0f);
          if (cap_ > 0) vote = std::clamp(vote, -cap_, cap_);  // SPMC: the running sum, client by client
        }
      }
      for (int64_t d = begin; d < end; ++d) {
        if (d >= P) {
          out.update[d] = static_cast<float>(sum[d - begin] / static_cast<double>(in.n));
          continue;
        }
        const double vote = static_cast<double>(votes[d - begin]);
        out.update[d] = static_cast<float>(alpha_ * (lambda_ * vote - decay_ * static_cast<double>(in.global[d])));
      }
    });
    return out;
  }

 private:
  double alpha_, lambda_;
  int64_t cap_;
  double decay_;
};
}  // namespace

namespace {
std::vector<ParamSpec> rsa_specs(double alpha, double lambda, int64_t cap, double weight_decay) {
  return {
      {"alpha", ParamType::Real, alpha, "server step size (rsa: set it to the clients' lr, as the paper does)", 0, 1e6},
      {"lambda", ParamType::Real, lambda,
       "weight of the l1 consensus penalty (step per agreeing client; rsa: the clients' lambda)", 0, 1e6},
      {"cap", ParamType::Integer, cap,
       "clip the running per-coordinate sign sum to [-cap, cap] after each client (SPMC); 0 = no cap", 0, 1e9},
      {"weight_decay", ParamType::Real, weight_decay,
       "the master's regulariser f_0 = (weight_decay/2)||x_0||^2 on the parameters", 0, 1e6},
  };
}
}  // namespace

const std::vector<ParamSpec>& rsa_params() {
  static const std::vector<ParamSpec> specs = rsa_specs(0.01, 0.1, 0, 0.01);
  return specs;
}

std::unique_ptr<ServerRule> make_rsa(const Params& params) { return std::make_unique<Rsa>(params); }

const std::vector<ParamSpec>& rsa_server_params() {
  static const std::vector<ParamSpec> specs = rsa_specs(0.05, 0.1, 3, 1e-3);
  return specs;
}

std::unique_ptr<ServerRule> make_rsa_server(const Params& params) { return std::make_unique<Rsa>(params); }

}  // namespace bastion
