// min-sum: Min-Sum (Shejwalkar & Houmansadr, NDSS 2021; SPEC §5; IMPLEMENTATION-FACTS §§2.8, 4.5, 6.6).
// As min-max (same ∇b, p, halving search and options), but the malicious update's summed distance to
// the benign updates is bounded by a benign update's:
//   sum_i d(malicious, ∇_i) <= bound,   bound = max_i sum_j d(∇_i, ∇_j)   (bound = max: SPEC, FedCAP)
//                                       bound = min_i sum_j d(∇_i, ∇_j)   (bound = min: the NDSS'21 code, SPMC)
// d = squared L2 (NDSS'21) or plain l2 (FedCAP). With squared distances gamma = 0 is always feasible
// (the mean minimises the sum of squares); with l2 and bound min it may not be, and the search then
// returns gamma_succ = 0: the attackers send the benign mean.
// Where: Collusion (omniscient). Cost: O(n² D) once for the benign pairwise distances (GEMM), O(n) per
// search step.
#include "fl/attacks/attack.h"

#include <algorithm>
#include <limits>

#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

class MinSumAttack final : public Attack {
 public:
  explicit MinSumAttack(const Params& params)
      : deviation_(parse_deviation(params.text("deviation"))), gamma0_(params.real("gamma0")),
        tolerance_(params.real("tolerance")), squared_(params.text("distance") == "squared"),
        bound_max_(params.text("bound") == "max") {}
  AttackKind kind() const override { return AttackKind::Collusion; }

  void collude(std::span<float> out, CollusionContext& context) const override {
    check_collusion_context(out, context, "min-sum");
    const DeviationGeometry g = make_deviation_geometry(context, deviation_);
    const double bound = benign_bound(g);
    const auto feasible = [&](double gamma) {
      double sum = 0.0;
      for (int64_t i = 0; i < g.n; ++i) sum += g.distance(i, gamma, squared_);
      return sum <= bound;
    };
    g.write_malicious(out, halving_gamma_search(gamma0_, tolerance_, feasible));
  }

 private:
  Deviation deviation_;
  double gamma0_, tolerance_;
  bool squared_, bound_max_;

  // max_i or min_i of sum_j d(∇_i, ∇_j).
  double benign_bound(const DeviationGeometry& g) const {
    double bound = bound_max_ ? 0.0 : std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < g.n; ++i) {
      double score = 0.0;
      for (int64_t j = 0; j < g.n; ++j) score += g.pairwise(i, j, squared_);
      bound = bound_max_ ? std::max(bound, score) : std::min(bound, score);
    }
    return bound;
  }
};
}  // namespace

const std::vector<ParamSpec>& min_sum_params() {
  static const std::vector<ParamSpec> specs = {
      {"deviation", ParamType::Text, std::string("std"), "p: std, unit or sign", -kInf, kInf, {"std", "unit", "sign"}},
      {"gamma0", ParamType::Real, 10, "initial gamma and step of the halving search", 0, 1e9},
      {"tolerance", ParamType::Real, 1e-5, "stop the search when |gamma_succ - gamma| <= this", 0, 1e3},
      {"distance",
       ParamType::Text,
       std::string("squared"),
       "squared L2 (NDSS21 code) or plain l2 (FedCAP)",
       -kInf,
       kInf,
       {"squared", "l2"}},
      {"bound",
       ParamType::Text,
       std::string("max"),
       "compare with the max (SPEC, FedCAP) or min (NDSS21 code) benign sum of distances",
       -kInf,
       kInf,
       {"max", "min"}},
  };
  return specs;
}

std::unique_ptr<Attack> make_min_sum(const Params& params) { return std::make_unique<MinSumAttack>(params); }

}  // namespace bastion
