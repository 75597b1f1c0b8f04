// min-max: Min-Max (Shejwalkar & Houmansadr, NDSS 2021; SPEC §5; IMPLEMENTATION-FACTS §§2.8, 4.5, 6.6).
// With ∇b the mean of the n benign updates ∇_i and a deviation direction p, every attacker uploads
//   malicious(gamma) = ∇b - gamma p,   gamma = the largest value found with
//   max_i d(malicious, ∇_i) <= max_{i,j} d(∇_i, ∇_j)
// i.e. the malicious update is no farther from any benign update than two benign updates are apart.
// Options:
//   deviation  p = std (coordinate sample std, the notebooks' default), unit (∇b / |∇b|) or sign
//              (sign(∇b)); all three push against the benign direction.
//   gamma0, tolerance  the notebooks' halving search (attack_support.h): gamma = step = gamma0 (10),
//              stop when |gamma_succ - gamma| <= tolerance (1e-5); gamma_succ = 0 sends ∇b.
//              FedCAP uses gamma0 = 2, tolerance 0.02 and a minimum step of 0.1 (not reproduced).
//   distance   squared L2 (the notebooks) or plain l2 (FedCAP). For min-max the two give the same
//              answer (both sides of the test are maxima, and squaring is monotone); kept for symmetry
//              with min-sum.
// SPMC's code writes the vector as the model PARAMETERS rather than an update (§2.8 QUIRK); not
// reproduced. Distances come from |∇b - ∇_i|², (∇b - ∇_i).p and |p|² precomputed once, so each search step is O(n).
// Where: Collusion (omniscient). Cost: O(n² D) once for the benign pairwise distances (GEMM).
#include "fl/attacks/attack.h"

#include <algorithm>

#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

class MinMaxAttack final : public Attack {
 public:
  explicit MinMaxAttack(const Params& params)
      : deviation_(parse_deviation(params.text("deviation"))), gamma0_(params.real("gamma0")),
        tolerance_(params.real("tolerance")), squared_(params.text("distance") == "squared") {}
  AttackKind kind() const override { return AttackKind::Collusion; }

  void collude(std::span<float> out, CollusionContext& context) const override {
    check_collusion_context(out, context, "min-max");
    const DeviationGeometry g = make_deviation_geometry(context, deviation_);
    double bound = 0.0;  // max_{i,j} d(∇_i, ∇_j)
    for (int64_t i = 0; i < g.n; ++i)
      for (int64_t j = i + 1; j < g.n; ++j) bound = std::max(bound, g.pairwise(i, j, squared_));
    const auto feasible = [&](double gamma) {
      for (int64_t i = 0; i < g.n; ++i)
        if (g.distance(i, gamma, squared_) > bound) return false;
      return true;
    };
    g.write_malicious(out, halving_gamma_search(gamma0_, tolerance_, feasible));
  }

 private:
  Deviation deviation_;
  double gamma0_, tolerance_;
  bool squared_;
};
}  // namespace

const std::vector<ParamSpec>& min_max_params() {
  static const std::vector<ParamSpec> specs = {
      {"deviation",
       ParamType::Text,
       std::string("std"),
       "p: std (coordinate std), unit (mean / |mean|), sign (sign(mean))",
       -kInf,
       kInf,
       {"std", "unit", "sign"}},
      {"gamma0", ParamType::Real, 10, "initial gamma and step of the halving search", 0, 1e9},
      {"tolerance", ParamType::Real, 1e-5, "stop the search when |gamma_succ - gamma| <= this", 0, 1e3},
      {"distance",
       ParamType::Text,
       std::string("squared"),
       "squared L2 (NDSS21 code) or plain l2 (FedCAP)",
       -kInf,
       kInf,
       {"squared", "l2"}},
  };
  return specs;
}

std::unique_ptr<Attack> make_min_max(const Params& params) { return std::make_unique<MinMaxAttack>(params); }

}  // namespace bastion
