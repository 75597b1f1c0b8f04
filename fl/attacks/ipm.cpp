// ipm: inner product manipulation (Xie et al. 2020; SPEC §5; IMPLEMENTATION-FACTS §§4.5, 6.7). Every
// attacker uploads out = -epsilon * mean(benign updates), so the inner product of the aggregate with the
// true gradient turns negative once epsilon outweighs the benign share. epsilon = the parameter, or the
// number of participants m of the round when 0 (FedCAP A8's "large epsilon"; SPEC's default is 0.1).
// Where: Collusion (omniscient). Cost: O(n D).
#include "fl/attacks/attack.h"

#include "fl/attacks/attack_support.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {

class IpmAttack final : public Attack {
 public:
  explicit IpmAttack(const Params& params) : epsilon_(params.real("epsilon")) {}
  AttackKind kind() const override { return AttackKind::Collusion; }

  void collude(std::span<float> out, CollusionContext& context) const override {
    check_collusion_context(out, context, "ipm");
    BASTION_CHECK(epsilon_ > 0.0 || context.participants >= 1,
                  "attack ipm: epsilon 0 uses the participants, but the round has ", context.participants);
    const double epsilon = epsilon_ > 0.0 ? epsilon_ : static_cast<double>(context.participants);
    vector_mean_rows_cpu(out.data(), context.benign, context.n_benign, context.D);
    vector_scale_cpu(out.data(), static_cast<float>(-epsilon), context.D);
  }

 private:
  double epsilon_;
};
}  // namespace

const std::vector<ParamSpec>& ipm_params() {
  static const std::vector<ParamSpec> specs = {
      {"epsilon", ParamType::Real, 0.1, "epsilon; 0 = the number of participants (FedCAP A8: large epsilon)", 0, 1e9},
  };
  return specs;
}

std::unique_ptr<Attack> make_ipm(const Params& params) { return std::make_unique<IpmAttack>(params); }

}  // namespace bastion
