// label-flip: label flipping on a share of the attacker's local data (SPEC §5; IMPLEMENTATION-FACTS
// §§2.8, 4.5, 5.4, 6.7). A relabelled sample keeps its image and gets label map(y):
//   shift     map(y) = (y + 1) mod C          (SPMC's PairFlip; SPEC's FedCAP wording)
//   reverse   map(y) = C - 1 - y              (FedCAP A1's code)
//   random    map = a permutation of 0..C-1 drawn once per attacker from context.client_rng (the same
//             every round), redrawn until it has no fixed point when C > 1 so every relabelled sample
//             really changes class (a derangement; rejection takes e ≈ 2.7 draws on average).
//             FedCPA's own attack resamples labels from a per-attacker Dir(0.25) distribution instead
//             (§5.4), which is not reproduced here.
// fraction: exactly round(fraction × local size) of the client's samples are relabelled (FedCAP: all,
// the default 1.0; SPMC 0.3 — its code flips each sample with probability 0.3, the same on average);
// redraw picks them from the round's rng (a new subset every round) instead of the client's fixed rng.
// Note that reverse maps the middle class of an odd C to itself, and shift with C = 1 changes nothing.
// Where: Data, through the loader's per-sample label overrides (data/loader.h); no trigger, no ASR.
// Cost: O(dataset size) per round for the override table (one int32 per dataset sample).
#include "fl/attacks/attack.h"

#include <numeric>

#include "fl/attacks/attack_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr uint64_t kPermutationStream = 0x7065726dULL;  // "perm": forks client_rng for the permutation

// A permutation of 0..C-1 without fixed points when C > 1, by rejection (uniform over derangements).
std::vector<int32_t> draw_derangement(int64_t classes, Generator rng) {
  std::vector<int32_t> map(static_cast<size_t>(classes));
  for (;;) {
    std::iota(map.begin(), map.end(), 0);
    for (size_t i = map.size(); i > 1; --i) std::swap(map[i - 1], map[rng.below(i)]);
    bool fixed_point = false;
    for (size_t y = 0; y < map.size(); ++y) fixed_point = fixed_point || map[y] == static_cast<int32_t>(y);
    if (classes <= 1 || !fixed_point) return map;
  }
}

class LabelFlipAttack final : public Attack {
 public:
  explicit LabelFlipAttack(const Params& params)
      : mode_(params.text("mode")), fraction_(params.real("fraction")), redraw_(params.boolean("redraw")) {}
  AttackKind kind() const override { return AttackKind::Data; }

  void poison_loader(BatchLoader& loader, const DataAttackContext& context) const override {
    const std::vector<int32_t> map = label_map(context);
    PoisonSpec spec;
    spec.label_override.assign(static_cast<size_t>(context.data.size()), -1);
    for (int64_t index : draw_local_subset(context, fraction_, redraw_))
      spec.label_override[index] = map[context.data.labels[index]];
    loader.set_poison(spec);
  }

 private:
  std::string mode_;
  double fraction_;
  bool redraw_;

  // map[y]: the label a relabelled sample of class y gets.
  std::vector<int32_t> label_map(const DataAttackContext& context) const {
    const int64_t classes = context.data.num_classes;
    BASTION_CHECK(classes >= 1, "attack label-flip: dataset '", context.data.name, "' has no classes");
    if (mode_ == "random") return draw_derangement(classes, context.client_rng.fork(kPermutationStream));
    std::vector<int32_t> map(static_cast<size_t>(classes));
    for (int64_t y = 0; y < classes; ++y)
      map[y] = static_cast<int32_t>(mode_ == "shift" ? (y + 1) % classes : classes - 1 - y);
    return map;
  }
};
}  // namespace

const std::vector<ParamSpec>& label_flip_params() {
  static const std::vector<ParamSpec> specs = {
      {"mode",
       ParamType::Text,
       std::string("shift"),
       "shift: y -> (y + 1) mod C; reverse: y -> C - 1 - y (FedCAP A1); random: a seeded permutation fixed per "
       "attacker (FedCPA-like)",
       -kInf,
       kInf,
       {"shift", "reverse", "random"}},
      {"fraction", ParamType::Real, 1.0, "share of the local samples relabelled (pollution ratio; SPMC 0.3)", 0, 1},
      {"redraw", ParamType::Boolean, false, "draw the relabelled subset anew each round"},
  };
  return specs;
}

std::unique_ptr<Attack> make_label_flip(const Params& params) { return std::make_unique<LabelFlipAttack>(params); }

}  // namespace bastion
