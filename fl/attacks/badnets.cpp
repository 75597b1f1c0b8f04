// badnets: BadNets pixel-trigger backdoor (Gu et al. 2017; SPEC §5; IMPLEMENTATION-FACTS §§2.4, 5.4, 6.1).
// A poisoned sample becomes x~ = (1 - mask) . x + mask . pattern (the trigger's pixels overwrite the
// image) with label `target`; the rest of the attacker's data is untouched.
// Where: Data. poison_loader configures the malicious client's BatchLoader for the round (the
// poisoning runs inside next(), with no extra allocation).
// Options:
//   trigger   any written trigger name (data/triggers.h); it is made for the shape it meets: the stored
//             C×H×W for raw triggers, the transformed shape for normalised ones (spmc).
//   mode      per-batch: the first per_batch rows of every batch (pFedSAM, DBA, BapFL: 20 of 64);
//             fraction: exactly round(fraction × local size) of the client's samples, drawn from the
//             round's rng when redraw (FedCPA rebuilds its poisoned loader every round) or from the
//             client's fixed rng when not (SPMC poisons a static copy once). SPMC's code poisons each
//             sample independently with probability 0.3; a fixed count is the same on average and
//             makes the poisoned share exact.
//   augment_once  every sample of the attacker (poisoned or not) keeps one draw of the train transform for
//             the whole run, seeded by (seed, client) and the sample: SPMC's code poisons a copy of the
//             training set made once after its random crop (IMPLEMENTATION-FACTS §2); off: a new draw each
//             epoch, as for benign clients. Nothing changes without a random transform.
// backdoor_test: the same trigger made for the test set's shape after `transform`, and the target.
// Cost: O(local size) per round for the subset draw (fraction mode); the poisoning itself is O(trigger
// pixels) per poisoned sample.
#include "fl/attacks/attack.h"
#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

class BadnetsAttack final : public Attack {
 public:
  explicit BadnetsAttack(const Params& params) : poisoning_(read_backdoor_poisoning(params, params.text("trigger"))) {
    check_trigger_name(poisoning_.trigger, params.scope() + ".trigger");
  }
  AttackKind kind() const override { return AttackKind::Data; }

  void poison_loader(BatchLoader& loader, const DataAttackContext& context) const override {
    set_backdoor_poison(loader, context, poisoning_);
  }

  std::optional<BackdoorTest> backdoor_test(const Dataset& test, const TransformSpec& transform) const override {
    return make_backdoor_test(poisoning_.trigger, poisoning_.target, test, transform);
  }

 private:
  BackdoorPoisoning poisoning_;
};
}  // namespace

const std::vector<ParamSpec>& badnets_params() {
  static const std::vector<ParamSpec> specs = {
      {"trigger", ParamType::Text, std::string("spmc"),
       "trigger preset (bastion list triggers): spmc, fedcpa, dba-global, bapfl, square, grid, ..."},
      {"target", ParamType::Integer, int64_t{2}, "target label (SPMC/pFedSAM 2, FedCPA 1)", 0, 1e6},
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

std::unique_ptr<Attack> make_badnets(const Params& params) { return std::make_unique<BadnetsAttack>(params); }

}  // namespace bastion
