// crfl: the server side of CRFL, Xie et al. 2021, "CRFL: Certifiably Robust Federated Learning against
// Backdoor Attacks" (as SPMC's Server/CRFL.py runs it).
//   w'      = global + sum_i a_i Delta_i      (FedAvg: a_i = |D_i| / sum_j |D_j|, or 1/n with uniform)
//   rho_t   = min(clip_slope * t + clip_base, clip_max)   t = in.round - 1 (CRFL's and SPMC's epoch counter
//                                                        starts at 0: rho = 30 in the first round)
//   w'[0,P) *= min(1, rho_t / |w'[0, P)|)      clip the new global model's parameter L2 norm
//   w'[d]  += sigma * z_d, z_d ~ N(0, 1),  d < P, except in the noise-free round (below)
//   update  = w' - global                     BatchNorm buffers: plain FedAvg, neither clipped nor noised
// Defaults are SPMC's: rho_t = min(5t + 30, 100), sigma = 1e-4. Noise-free round: last_round = -1
// (default) is the run's final round (in.last_round), whose model CRFL and SPMC leave without noise;
// last_round = t > 0 is round t; 0 adds noise in every round. A caller that does not know the final
// round (in.last_round = 0) gets noise in every round with -1.
// Noise: Generator(in.seed).fork(kNoiseStream).fork(b) per fixed block b of kNoiseBlock columns, so it
// depends on (seed, round) and the column only, never on the thread count or the order of the uploads.
// Preconditions: n >= 1; inputs finite (the run loop rejects NaN/Inf first). Flags nobody.
// Cost: O(n D) for the mean, O(P) for the norm and the noise.
#include <cmath>
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {

namespace {
constexpr uint64_t kNoiseStream = 0xC8F1;  // this rule's stream off the round seed
constexpr int64_t kNoiseBlock = 1 << 16;   // columns per generator fork (fixed: thread-count independent)

class Crfl final : public ServerRule {
 public:
  explicit Crfl(const Params& p)
      : slope_(p.real("clip_slope")), base_(p.real("clip_base")), max_(p.real("clip_max")), sigma_(p.real("sigma")),
        last_round_(p.integer("last_round")), sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "crfl: no upload to aggregate");
    BASTION_CHECK(static_cast<int64_t>(in.global.size()) == in.D, "crfl: global state has ", in.global.size(),
                  " values, uploads have D = ", in.D);
    const std::vector<float> mean = mean_of_rows(in, all_rows(in.n), sample_weighted_);
    const int64_t P = in.num_parameters;
    std::vector<double> w(static_cast<size_t>(P));
    double squared = 0.0;
    for (int64_t d = 0; d < P; ++d) {
      w[d] = static_cast<double>(in.global[d]) + mean[d];
      squared += w[d] * w[d];
    }
    const double rho = std::min(slope_ * static_cast<double>(in.round - 1) + base_, max_);
    const double norm = std::sqrt(squared);
    const double scale = norm > rho ? rho / norm : 1.0;
    const int64_t noise_free = last_round_ < 0 ? in.last_round : last_round_;
    const bool noise = sigma_ > 0 && (noise_free == 0 || in.round != noise_free);
    const Generator base = Generator(in.seed).fork(kNoiseStream);
    AggregationOutput out;
    out.update = mean;  // buffers [P, D) keep the FedAvg mean
    float* update = out.update.data();
    const double sigma = sigma_;
    for_column_blocks(in, P, kNoiseBlock, [&](int64_t begin, int64_t end) {
      Generator g = base.fork(static_cast<uint64_t>(begin / kNoiseBlock));
      for (int64_t d = begin; d < end; ++d) {
        const double next = scale * w[d] + (noise ? sigma * g.normal() : 0.0);
        update[d] = static_cast<float>(next - static_cast<double>(in.global[d]));
      }
    });
    return out;
  }

 private:
  double slope_, base_, max_, sigma_;
  int64_t last_round_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& crfl_params() {
  static const std::vector<ParamSpec> specs = {
      {"clip_slope", ParamType::Real, 5.0, "rho_t = min(clip_slope * (round - 1) + clip_base, clip_max): 30 in round 1",
       0, 1e30},
      {"clip_base", ParamType::Real, 30.0, "see clip_slope", 0, 1e30},
      {"clip_max", ParamType::Real, 100.0, "largest parameter L2 norm of the global model", 0, 1e30},
      {"sigma", ParamType::Real, 1e-4, "std of the smoothing noise added to every parameter of the global model", 0,
       1e6},
      {"last_round", ParamType::Integer, int64_t{-1},
       "no noise in this round: -1 = the run's final round (CRFL, SPMC); 0 = noise in every round", -1, 1e9},
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_crfl(const Params& params) { return std::make_unique<Crfl>(params); }

}  // namespace bastion
