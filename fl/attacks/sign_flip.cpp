// sign-flip: upload the negated update, u <- -factor * u (FedCAP A4 with factor 1; SPEC §5;
// IMPLEMENTATION-FACTS §§4.5, 6.7). factor > 1 also amplifies it.
// Where: Upload, on the parameter part update[0, num_parameters); BatchNorm statistics stay as trained.
// Cost: O(D).
#include "fl/attacks/attack.h"

#include "fl/attacks/attack_support.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {

class SignFlipAttack final : public Attack {
 public:
  explicit SignFlipAttack(const Params& params) : factor_(params.real("factor")) {}
  AttackKind kind() const override { return AttackKind::Upload; }

  void corrupt_upload(std::span<float> update, UploadAttackContext& context) const override {
    check_upload_context(update, context, "sign-flip");
    vector_scale_cpu(update.data(), static_cast<float>(-factor_), context.num_parameters);
  }

 private:
  double factor_;
};
}  // namespace

const std::vector<ParamSpec>& sign_flip_params() {
  static const std::vector<ParamSpec> specs = {
      {"factor", ParamType::Real, 1.0, "magnitude of the negated update", 0, 1e9},
  };
  return specs;
}

std::unique_ptr<Attack> make_sign_flip(const Params& params) { return std::make_unique<SignFlipAttack>(params); }

}  // namespace bastion
