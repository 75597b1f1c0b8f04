// gaussian: upload Gaussian noise instead of the trained update (SPEC §5; IMPLEMENTATION-FACTS §§4.5,
// 5.4, 6.7). Every parameter coordinate u_j is replaced by s * N(0, 1), drawn from context.rng:
//   fixed       s = sigma                                     (SPEC: sigma = 0.05)
//   update-std  s = std(u), the population std of the client's own trained update, in double
//               (FedCAP A2: noise as large as an honest update)
//   global-std  s = sigma * std(global parameters), population std in double. FedCPA's attacker uploads
//               the MODEL global + 0.05 std(global) N(0, I); as an update that is the noise itself.
//               FedCPA takes the std over the whole state dict (buffers included); here the parameter
//               part only, so BatchNorm statistics do not set the scale.
// Population and sample std differ by a factor sqrt(D / (D - 1)), nothing at model sizes.
// Where: Upload, on update[0, num_parameters); BatchNorm statistics stay as trained.
// Cost: O(D) normal draws (Box-Muller).
#include "fl/attacks/attack.h"

#include <cmath>

#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// Population standard deviation of x, two passes in double.
double population_std(const float* x, int64_t n) {
  if (n == 0) return 0.0;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double squares = 0.0;
  for (int64_t i = 0; i < n; ++i) squares += (x[i] - mean) * (x[i] - mean);
  return std::sqrt(squares / static_cast<double>(n));
}

class GaussianAttack final : public Attack {
 public:
  explicit GaussianAttack(const Params& params) : sigma_(params.real("sigma")), mode_(params.text("mode")) {}
  AttackKind kind() const override { return AttackKind::Upload; }

  void corrupt_upload(std::span<float> update, UploadAttackContext& context) const override {
    check_upload_context(update, context, "gaussian");
    const int64_t D = context.num_parameters;
    const double scale = noise_scale(update.data(), context);
    for (int64_t j = 0; j < D; ++j) update[j] = static_cast<float>(scale * context.rng.normal());
  }

 private:
  double sigma_;
  std::string mode_;

  double noise_scale(const float* update, const UploadAttackContext& context) const {
    if (mode_ == "update-std") return population_std(update, context.num_parameters);
    if (mode_ == "global-std") {
      BASTION_CHECK(static_cast<int64_t>(context.global_state.size()) >= context.num_parameters,
                    "attack gaussian: global-std needs the global state (", context.global_state.size(), " values for ",
                    context.num_parameters, " parameters)");
      return sigma_ * population_std(context.global_state.data(), context.num_parameters);
    }
    return sigma_;
  }
};
}  // namespace

const std::vector<ParamSpec>& gaussian_params() {
  static const std::vector<ParamSpec> specs = {
      {"sigma", ParamType::Real, 0.05, "standard deviation (fixed mode) or multiplier (global-std mode)", 0, 1e9},
      {"mode",
       ParamType::Text,
       std::string("fixed"),
       "fixed: N(0, sigma^2); update-std: N(0, std(own update)^2) (FedCAP A2); global-std: sigma * std(global) * N(0, "
       "1) (FedCPA)",
       -kInf,
       kInf,
       {"fixed", "update-std", "global-std"}},
  };
  return specs;
}

std::unique_ptr<Attack> make_gaussian(const Params& params) { return std::make_unique<GaussianAttack>(params); }

}  // namespace bastion
