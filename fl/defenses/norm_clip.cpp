// norm-clip (NC): norm clipping, Sun et al. 2019, "Can You Really Backdoor Federated Learning?".
//   s_i = min(1, c / |Delta_i[0, P)|)          (|Delta_i| = 0: s_i = 1)
//   update[d] = sum_i a_i s_i Delta_i[d]       d < P (parameters)
//   update[d] = sum_i a_i     Delta_i[d]       d >= P (BatchNorm buffers: averaged like FedAvg, not clipped)
//   a_i = |D_i| / sum_j |D_j| (weighting = samples) or 1/n (uniform).
// The norm is over the P parameter columns only (SPEC notation). The paper clips each update to
// Delta / max(1, |Delta| / M), which is the same map. SPEC's settings: c in {0.5, 1.0}.
// Preconditions: n >= 1, c > 0; inputs are finite (the run loop rejects NaN/Inf before any rule).
// Flags nobody: clipping bounds every upload's influence but judges none.
// Cost: O(n D), two passes over the matrix (norms, then the weighted sum).
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class NormClip final : public ServerRule {
 public:
  explicit NormClip(const Params& p) : c_(p.real("c")), sample_weighted_(p.text("weighting") == "samples") {
    BASTION_CHECK(c_ > 0, "norm-clip: clipping norm c must be > 0, got ", c_);
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    AggregationOutput out;
    out.update = norm_clipped_mean(in, sample_weighted_, c_, "norm-clip");
    return out;
  }

 private:
  double c_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& norm_clip_params() {
  static const std::vector<ParamSpec> specs = {
      {"c", ParamType::Real, 1.0, "clip each update's parameter L2 norm to c (> 0; SPEC: 0.5 or 1.0)", 0, 1e12},
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_norm_clip(const Params& params) { return std::make_unique<NormClip>(params); }

}  // namespace bastion
