// dba: distributed backdoor attack (Xie et al. 2020; SPEC §5; IMPLEMENTATION-FACTS §6.2). The global
// DBA trigger is split into four local parts; malicious client j (attacker_index j in the sorted
// malicious set) plants only part j mod 4 ("dba:K", data/triggers.h), with the target label. The ASR is
// measured with the union of the four parts ("dba"), which no single attacker ever trained on.
// Where: Data (as badnets, whose poisoning options it shares: per-batch first-k rows, as the DBA code
// poisons the first 20 of every 64-batch on MNIST; or a fixed/redrawn fraction of the local data).
// DBA's model-replacement scaling is a separate Upload attack: names = ["dba", "scale"].
// Cost: as badnets.
#include "fl/attacks/attack.h"
#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {

class DbaAttack final : public Attack {
 public:
  explicit DbaAttack(const Params& params) : poisoning_(read_backdoor_poisoning(params, "dba")) {}
  AttackKind kind() const override { return AttackKind::Data; }

  void poison_loader(BatchLoader& loader, const DataAttackContext& context) const override {
    BASTION_CHECK(context.attacker_index >= 0, "attack dba: attacker_index must be >= 0, got ", context.attacker_index);
    BackdoorPoisoning local = poisoning_;
    local.trigger = "dba:" + std::to_string(context.attacker_index % 4);
    set_backdoor_poison(loader, context, local);
  }

  // The global trigger: the union of the four local parts.
  std::optional<BackdoorTest> backdoor_test(const Dataset& test, const TransformSpec& transform) const override {
    return make_backdoor_test("dba", poisoning_.target, test, transform);
  }

 private:
  BackdoorPoisoning poisoning_;  // trigger "dba"; each attacker swaps in its part
};
}  // namespace

const std::vector<ParamSpec>& dba_params() { return backdoor_poisoning_params(); }

std::unique_ptr<Attack> make_dba(const Params& params) { return std::make_unique<DbaAttack>(params); }

}  // namespace bastion
