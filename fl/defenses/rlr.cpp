// rlr: robust learning rate, Ozdayi et al. 2021, "Defending against Backdoors in Federated Learning with
// Robust Learning Rate" (as SPMC's Server/RLR.py runs it).
//   s_d   = |sum_i sign(Delta_i[d])|                 sign(0) = 0 (torch.sign)
//   eta_d = +eta if s_d >= threshold, else -eta     per parameter coordinate d < P
//   update[d] = eta_d * sum_i a_i Delta_i[d]         d < P
//   update[d] = sum_i a_i Delta_i[d]                 d >= P (BatchNorm buffers: FedAvg mean, no sign vote)
//   a_i = |D_i| / sum_j |D_j| (weighting = samples, SPMC) or 1/n (uniform).
// Coordinates where too few clients agree on the direction are stepped against the mean: a backdoor
// pushed by a minority is unlearned. Defaults are SPMC's: threshold 4 (robustLR_threshold), eta 1.
// Preconditions: n >= 1 and threshold <= n (otherwise every coordinate is negated and the server ascends
// the honest loss: refused); inputs finite (the run loop rejects NaN/Inf first). Flags nobody.
// Cost: O(n D), one pass over the matrix in fixed column blocks (thread-count independent).
#include <cmath>
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr int64_t kBlock = 2048;  // columns per block: the double sums and sign counts stay in L1

class Rlr final : public ServerRule {
 public:
  explicit Rlr(const Params& p)
      : threshold_(p.real("threshold")), eta_(p.real("eta")), sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "rlr: no upload to aggregate");
    BASTION_CHECK(threshold_ <= static_cast<double>(in.n), "rlr: threshold ", threshold_, " exceeds the ", in.n,
                  " uploads: every coordinate would be negated");
    const std::vector<double> a = row_weights(in, all_rows(in.n), sample_weighted_, "rlr");
    AggregationOutput out;
    out.update.resize(static_cast<size_t>(in.D));
    const int64_t P = in.num_parameters;
    for_column_blocks(in, in.D, kBlock, [&](int64_t begin, int64_t end) {
      double sum[kBlock] = {};
      int64_t votes[kBlock] = {};
      for (int64_t i = 0; i < in.n; ++i) {
        const float* row = in.updates + i * in.D;
        for (int64_t d = begin; d < end; ++d) {
          sum[d - begin] += a[i] * row[d];
          votes[d - begin] += (row[d] > 0.0f) - (row[d] < 0.0f);
        }
      }
      for (int64_t d = begin; d < end; ++d) {
        double lr = 1.0;
        if (d < P) lr = std::abs(static_cast<double>(votes[d - begin])) >= threshold_ ? eta_ : -eta_;
        out.update[d] = static_cast<float>(lr * sum[d - begin]);
      }
    });
    return out;
  }

 private:
  double threshold_, eta_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& rlr_params() {
  static const std::vector<ParamSpec> specs = {
      {"threshold", ParamType::Real, 4.0,
       "theta: a parameter coordinate keeps +eta when |sum_i sign(Delta_i)| >= theta, else -eta (<= n)", 0, 1e9},
      {"eta", ParamType::Real, 1.0, "server learning rate magnitude", 0, 1e6},
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_rlr(const Params& params) { return std::make_unique<Rlr>(params); }

}  // namespace bastion
