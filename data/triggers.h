// Backdoor triggers (SPEC §5 badnets/dba/bapfl; IMPLEMENTATION-FACTS §§2.4, 5.4, 6.1–6.3): where the
// pixels go, what value they take, and in which space (raw [0, 1] pixel units before augmentation, or
// normalised units after normalisation).
//
// Written names (CLI --trigger, configs):
//   spmc          12 px on rows 0 and 2, columns 0–2 and 4–6, channel 0 only, value 1.0 in
//                 NORMALISED space (SPMC's code; the paper text says a 2×6 block top-left)
//   fedcpa        5×5 patch at the bottom-right corner (rows H-5..H-1, cols W-5..W-1), every channel,
//                 raw value 1.0 (white, 255), before augmentation
//   bapfl         16 px on rows 0 and 3, columns 0–3 and 6–9, every channel, raw value 1.0
//   dba           the union of the four DBA local parts (the global test trigger); also `dba-global`
//   dba:K         DBA local part K in 0..3 (malicious client j uses part j mod 4); per dataset geometry:
//                 28-pixel sets (MNIST family): 1×4 bars, rows {0, 3}, cols {0–3, 6–9};
//                 32-pixel sets (CIFAR, SVHN): 1×6 bars, rows {0, 4}, cols {0–5, 9–14};
//                 64-pixel sets (TinyImageNet): 2×10 bars, rows {0–1, 4–5}, cols {0–9, 12–21};
//                 part order: (top, left), (top, right), (bottom, left), (bottom, right). Raw value 1.0,
//                 every channel.
//   square        FederatedScope squareTrigger: white floor(0.1H)×floor(0.1W) square whose bottom-right
//                 pixel sits at (H-2, W-2) (distance 1 from the corner), raw value 1.0, every channel
//   grid          FederatedScope gridTrigger: 3×3 checkerboard in the bottom-right corner, (H-3+r, W-3+c)
//                 white (1.0) when r+c is even, black (0.0) otherwise, every channel, raw
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
  std::vector<TriggerPixel> pixels;  // resolved for a concrete C×H×W
};

// Every accepted written name (for error messages and `bastion list`).
std::vector<std::string> trigger_names();

// Resolves a written name for samples of C×H×W (after any resize). `dba`/`dba:K` pick their geometry
// from H (28 → MNIST bars, 32 → CIFAR bars, 64 → TinyImageNet bars; other sizes throw). Throws on an
// unknown name, K outside 0..3, or a pattern that does not fit in H×W.
Trigger make_trigger(const std::string& name, int64_t channels, int64_t height, int64_t width);

// Writes the trigger's pixels into one (C, H, W) float image in place. C, H, W must be those the
// trigger was made for.
void apply_trigger(float* image, int64_t channels, int64_t height, int64_t width, const Trigger& trigger);

}  // namespace bastion
