// lie: "A little is enough" (Baruch et al. 2019; SPEC §5; IMPLEMENTATION-FACTS §§2.8, 4.5, 6.4).
// With mu_j, sigma_j the coordinate mean and sample std (n - 1, torch.std) of the round's n_benign
// benign updates (sigma = 0 when n_benign = 1), every attacker uploads
//   out_j = mu_j - z sigma_j
// z = the parameter z when > 0, else from z_rule with m = participants, f = malicious of the round:
//   paper   s = floor(m/2 + 1) - f,  z = Φ⁻¹((m - s) / m)                     (SPEC; m=10, f=3: 0.5244)
//   fedcap  s = floor(m/2) + 1 - f,  z = Φ⁻¹((m - f - s) / (m - f))           (FedCAP's byzantine.py)
//   spmc    s as fedcap, z = exp(-s²) √(2π) / 2 and out = mu + z sigma        (SPMC's code, a QUIRK: not
//           Φ⁻¹ at all — z ≈ 1.5e-4 for m=10, f=3 — and the sign is +; kept to reproduce SPMC, and the
//           + sign is kept with an explicit z too)
// The probability given to Φ⁻¹ is clamped to [1e-6, 1 - 1e-6] (|z| <= 4.75): many attackers make s <= 0
// and the argument >= 1, and an experiment must not die mid-run on a degenerate round.
// Differences from the sources: FedCAP and the NDSS'21 notebooks take mu and sigma over all uploads
// (the attackers' honest updates included); here over the benign rows the run loop passes. SPMC's code
// also writes the vector as the model PARAMETERS rather than an update (§2.8 QUIRK); not reproduced.
// Where: Collusion (omniscient). Cost: O(n D).
#include "fl/attacks/attack.h"

#include <algorithm>
#include <cmath>

#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr double kMinProbability = 1e-6;  // Φ⁻¹ argument clamp (see the header)

class LieAttack final : public Attack {
 public:
  explicit LieAttack(const Params& params) : z_(params.real("z")), rule_(params.text("z_rule")) {}
  AttackKind kind() const override { return AttackKind::Collusion; }

  void collude(std::span<float> out, CollusionContext& context) const override {
    check_collusion_context(out, context, "lie");
    const double z = z_ > 0.0 ? z_ : z_from_rule(context.participants, context.malicious);
    const double signed_z = rule_ == "spmc" ? z : -z;
    context.resolved = {{"z", signed_z}};
    std::vector<float> sigma(static_cast<size_t>(context.D));
    coordinate_mean_std(out.data(), sigma.data(), context.benign, context.n_benign, context.D);
    for (int64_t j = 0; j < context.D; ++j) out[j] = static_cast<float>(out[j] + signed_z * sigma[j]);
  }

 private:
  double z_;
  std::string rule_;

  double z_from_rule(int64_t m, int64_t f) const {
    BASTION_CHECK(m >= 1 && f >= 0, "attack lie: needs participants >= 1 and malicious >= 0, got m = ", m, ", f = ", f);
    const int64_t s = m / 2 + 1 - f;  // floor(m/2 + 1) = floor(m/2) + 1 for m >= 0: the same s in every rule
    if (rule_ == "spmc") return std::exp(-static_cast<double>(s * s)) * std::sqrt(2.0 * M_PI) / 2.0;
    const double p = rule_ == "fedcap"
                         ? static_cast<double>(m - f - s) / static_cast<double>(std::max<int64_t>(m - f, 1))
                         : static_cast<double>(m - s) / static_cast<double>(m);
    return normal_quantile(std::clamp(p, kMinProbability, 1.0 - kMinProbability));
  }
};
}  // namespace

const std::vector<ParamSpec>& lie_params() {
  static const std::vector<ParamSpec> specs = {
      {"z", ParamType::Real, 0, "z; 0 = from z_rule", 0, 1e3},
      {"z_rule",
       ParamType::Text,
       std::string("paper"),
       "paper: z = Phi^-1((m - s) / m), s = floor(m/2 + 1) - f; fedcap: Phi^-1((m - f - s) / (m - f)); spmc: exp(-s^2) "
       "sqrt(2 pi) / 2 with + z (the SPMC code quirk)",
       -kInf,
       kInf,
       {"paper", "fedcap", "spmc"}},
  };
  return specs;
}

std::unique_ptr<Attack> make_lie(const Params& params) { return std::make_unique<LieAttack>(params); }

}  // namespace bastion
