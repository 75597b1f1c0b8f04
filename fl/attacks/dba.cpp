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
constexpr double kInf = std::numeric_limits<double>::infinity();

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

const std::vector<ParamSpec>& dba_params() {
  static const std::vector<ParamSpec> specs = {
      {"target", ParamType::Integer, int64_t{2}, "target label", 0, 1e6},
      {"mode",
       ParamType::Text,
       std::string("per-batch"),
       "per-batch: the first per_batch samples of every batch; fraction: a random fraction of the local data",
       -kInf,
       kInf,
       {"per-batch", "fraction"}},
      {"per_batch", ParamType::Integer, int64_t{20},
       "poisoned samples per batch in per-batch mode (pFedSAM, DBA MNIST: 20 of 64)", 0, 1e9},
      {"fraction", ParamType::Real, 0.3, "poisoned share of the local data in fraction mode (SPMC 0.3, FedCPA 0.8)", 0,
       1},
      {"redraw", ParamType::Boolean, true,
       "fraction mode: draw the poisoned subset anew each round (FedCPA) or once (SPMC)"},
      {"augment_once", ParamType::Boolean, false,
       "augment each of the attacker's samples once for the whole run, not anew each epoch (SPMC's code)"},
  };
  return specs;
}

std::unique_ptr<Attack> make_dba(const Params& params) { return std::make_unique<DbaAttack>(params); }

}  // namespace bastion
