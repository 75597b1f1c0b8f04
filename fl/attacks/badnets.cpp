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
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> list = {
        {"trigger", ParamType::Text, std::string("spmc"),
         "trigger preset (bastion list triggers): spmc, fedcpa, dba-global, bapfl, square, grid, ..."}};
    for (const ParamSpec& spec : backdoor_poisoning_params()) list.push_back(spec);
    return list;
  }();
  return specs;
}

std::unique_ptr<Attack> make_badnets(const Params& params) { return std::make_unique<BadnetsAttack>(params); }

}  // namespace bastion
