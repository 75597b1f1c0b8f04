// Backdoor triggers (SPEC §5 badnets/dba/bapfl; IMPLEMENTATION-FACTS §§2.4, 5.4, 6.1–6.3): where the
// pixels go, what value they take, and in which space (raw [0, 1] pixel units before augmentation, or
// normalised units after normalisation).
//
// Written names (CLI --trigger, configs):
//   spmc          12 px on rows 0 and 2, columns 0–2 and 4–6, channel 0 only, value 1.0 in
//                 NORMALISED space (SPMC's code; the paper text says a 2×6 block top-left)
//   fedcpa        5×5 patch at the bottom-right corner (rows H-5..H-1, cols W-5..W-1), every channel,
//                 raw value 1.0 (white, 255), before augmentation
//   bapfl         16 px on rows 0 and 3, columns 0–3 and 6–9, every channel, raw value 1.0 (the same pixels
//                 as DBA's 28-pixel union, used by BapFL at every image size; BapFL writes 0 instead of 1
//                 on FEMNIST, whose digits are dark on white — not a registered set here)
//   dba           the union of the four DBA local parts (the global test trigger); also `dba-global`
//   dba:K         DBA local part K in 0..3 (malicious client j uses part j mod 4); per dataset geometry:
//                 28-pixel sets (MNIST family): 1×4 bars, rows {0, 3}, cols {0–3, 6–9};
//                 32-pixel sets (CIFAR, SVHN): 1×6 bars, rows {0, 4}, cols {0–5, 9–14};
//                 64-pixel sets (TinyImageNet): 2×10 bars, rows {0–1, 4–5}, cols {0–9, 12–21};
//                 part order: (top, left), (top, right), (bottom, left), (bottom, right). Raw value 1.0,
//                 every channel.
//   square        FederatedScope squareTrigger: white floor(0.1H)×floor(0.1W) square whose bottom-right
//                 pixel sits at (H-2, W-2) (distance 1 from the corner), raw value 1.0, every channel
//                 (32×32: rows/cols 28..30; 28×28: 2×2 at rows/cols 25..26)
//   grid          FederatedScope gridTrigger (`_gridTriger`): 3×3 black/white pattern in the bottom-right
//                 corner, every channel, raw. With (r, c) = (row - (H-3), col - (W-3)) in 0..2, a pixel is
//                 white (1.0) when r+c is even, black (0.0) when odd — EXCEPT (0, 0), i.e. (H-3, W-3),
//                 which the code sets black: 4 white pixels (H-3,W-1), (H-2,W-2), (H-1,W-3), (H-1,W-1)
//                 and 5 black ones. Black pixels are written too (they overwrite the image).
// Raw-space triggers write the value into the [0, 1] image BEFORE resize/crop/flip/normalise; normalised
// triggers write after normalisation (transforms.h). Geometry is resolved against the sample's H×W at
// the point of application (for SPMC's digit pipeline that is the resized 32×32 image).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bastion {

enum class TriggerSpace { kRaw, kNormalized };

struct TriggerPixel {
  int64_t channel;  // -1 = every channel
  int64_t row, col;
  float value;
};

struct Trigger {
  std::string name;  // the written form, e.g. "dba:2"
  TriggerSpace space = TriggerSpace::kRaw;
  std::vector<TriggerPixel> pixels;             // resolved for a concrete C×H×W
  int64_t channels = 0, height = 0, width = 0;  // the C×H×W it was resolved for (apply_trigger checks)
};

// The space a written name's trigger acts in (kNormalized for spmc, kRaw for the rest), without resolving
// its geometry: callers use it to pick the image size to resolve against (raw triggers meet the stored
// size, normalised ones the transformed size).
TriggerSpace trigger_space(const std::string& name);

// Every accepted written name (for error messages and `bastion list`).
std::vector<std::string> trigger_names();

// Resolves a written name for samples of C×H×W (after any resize). `dba`/`dba:K` pick their geometry
// from H (28 → MNIST bars, 32 → CIFAR bars, 64 → TinyImageNet bars; other sizes throw). Throws on an
// unknown name (listing the valid ones), K outside 0..3, or a pattern that does not fit in H×W.
// Pixels are listed once each; for `dba` the union is part 0, 1, 2, 3 in that order.
Trigger make_trigger(const std::string& name, int64_t channels, int64_t height, int64_t width);

// Writes the trigger's pixels into one (C, H, W) float image in place (assigns, does not blend). C, H, W
// must be those the trigger was made for; throws naming both shapes otherwise.
void apply_trigger(float* image, int64_t channels, int64_t height, int64_t width, const Trigger& trigger);

}  // namespace bastion
