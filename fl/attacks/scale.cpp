// scale: model replacement (Bagdasaryan et al. 2020; SPEC §5; IMPLEMENTATION-FACTS §§4.5, 6.2, 6.3,
// 6.7): upload u <- lambda * u so that, averaged with the other uploads, the attacker's model replaces
// the global one. lambda = factor, or the number of participants m of the round when factor = 0
// (FedCAP A3 multiplies by the number of uploading clients; BapFL's --scaling by clients_per_round).
// DBA's single-shot x100 is factor = 100.
// Where: Upload, on the parameter part update[0, num_parameters). Composes after a data attack
// (names = ["dba", "scale"]). Cost: O(D).
#include "fl/attacks/attack.h"

#include "fl/attacks/attack_support.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {

class ScaleAttack final : public Attack {
 public:
  explicit ScaleAttack(const Params& params) : factor_(params.real("factor")) {}
  AttackKind kind() const override { return AttackKind::Upload; }

  void corrupt_upload(std::span<float> update, UploadAttackContext& context) const override {
    check_upload_context(update, context, "scale");
    BASTION_CHECK(factor_ > 0.0 || context.participants >= 1,
                  "attack scale: factor 0 scales by the participants, but the round has ", context.participants);
    const double lambda = factor_ > 0.0 ? factor_ : static_cast<double>(context.participants);
    vector_scale_cpu(update.data(), static_cast<float>(lambda), context.num_parameters);
  }

 private:
  double factor_;
};
}  // namespace

const std::vector<ParamSpec>& scale_params() {
  static const std::vector<ParamSpec> specs = {
      {"factor", ParamType::Real, 0, "lambda; 0 = the number of participants of the round (FedCAP A3, BapFL)", 0, 1e9},
  };
  return specs;
}

std::unique_ptr<Attack> make_scale(const Params& params) { return std::make_unique<ScaleAttack>(params); }

}  // namespace bastion
