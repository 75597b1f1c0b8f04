// add-noise (AD): weak differential privacy, Sun et al. 2019, "Can You Really Backdoor Federated Learning?".
//   s_i = min(1, clip / |Delta_i[0, P)|)  when clip > 0, else s_i = 1 (no clipping)
//   update[d] = sum_i a_i s_i Delta_i[d] + sigma * z_d,   z_d ~ N(0, 1) i.i.d.,   d < P
//   update[d] = sum_i a_i Delta_i[d]                      d >= P (BatchNorm buffers: FedAvg, no noise)
//   a_i = |D_i| / sum_j |D_j| (weighting = samples) or 1/n (uniform).
// The paper adds the noise to the aggregated model; adding it to the update the server adds to the global
// model is the same thing. SPEC's settings: sigma in {1e-5, 5e-4}; clip > 0 gives the paper's combination
// "norm clipping + weak DP".
// Noise: z comes from Generator(in.seed).fork(kNoiseStream).fork(b) for the fixed column block b of
// kNoiseBlock columns, so the draw depends on (seed, round) and the column only, never on the thread count
// or on the order of the uploads.
// Preconditions: n >= 1, sigma >= 0, clip >= 0; inputs finite (the run loop rejects NaN/Inf first).
// Flags nobody. Cost: O(n D) for the mean plus O(P) normal draws.
#include <algorithm>
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {

namespace {
constexpr uint64_t kNoiseStream = 0xAD;   // this rule's stream off the round seed
constexpr int64_t kNoiseBlock = 1 << 16;  // columns per generator fork (fixed: thread-count independent)

class AddNoise final : public ServerRule {
 public:
  explicit AddNoise(const Params& p)
      : sigma_(p.real("sigma")), clip_(p.real("clip")), sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    AggregationOutput out;
    out.update = norm_clipped_mean(in, sample_weighted_, clip_, "add-noise");
    if (sigma_ > 0) {
      const Generator base = Generator(in.seed).fork(kNoiseStream);
      float* update = out.update.data();
      const double sigma = sigma_;
      for_column_blocks(in, in.num_parameters, kNoiseBlock, [&](int64_t begin, int64_t end) {
        Generator g = base.fork(static_cast<uint64_t>(begin / kNoiseBlock));
        for (int64_t d = begin; d < end; ++d) update[d] = static_cast<float>(update[d] + sigma * g.normal());
      });
    }
    return out;
  }

 private:
  double sigma_, clip_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& add_noise_params() {
  static const std::vector<ParamSpec> specs = {
      {"sigma", ParamType::Real, 5e-4,
       "std of the Gaussian noise added to each parameter of the aggregate "
       "(SPEC: 1e-5 or 5e-4)",
       0, 1e6},
      {"clip", ParamType::Real, 0.0, "> 0: first clip each update's parameter L2 norm to this (norm-clip); 0 = off", 0,
       1e12},
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_add_noise(const Params& params) { return std::make_unique<AddNoise>(params); }

}  // namespace bastion
