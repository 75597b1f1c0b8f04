// Sample transforms: the per-sample pipeline that turns a stored sample into the model's float input,
// with seeded augmentation (SPEC §2; IMPLEMENTATION-FACTS §§1.1, 2.3, 3.2, 5.3).
//
// Pipeline for one sample, in this fixed order (torchvision's order in the papers' loaders):
//   1. read: pixels/255 (image sets) or values (float sets) into a float (C, H, W) image in [0, 1] units
//   2. raw-space trigger, if any (FedCPA pastes its patch before augmentation)       — data/triggers.h
//   3. resize to resize×resize (bilinear, half-pixel centres = F.interpolate(mode="bilinear",
//      align_corners=False, antialias=False); SPMC's 28→32 for the digit sets). When upscaling this is
//      the same weighting as PIL's bilinear Resize (which torchvision applies to PIL images), but PIL
//      works on uint8 and rounds to a whole pixel value after each of its two 1-D passes, so PIL's
//      result can differ from ours by up to about 1/255 (two roundings of 0.5/255). Downscaling does not
//      antialias (PIL does), so it differs from PIL by more; no paper downscales.
//   4. random crop back to the current size after padding `crop_padding` on each side, zero or reflect
//      padding (torchvision RandomCrop(size, padding) pads zeros; FedCPA reflect-pads). Reflect is
//      numpy/torch 'reflect' (the edge pixel is not repeated: padded[-1] = x[1]) and needs
//      crop_padding < the current height and width.
//   5. horizontal flip with probability 1/2
//   6. channel replication 1→`replicate_channels` (SPMC feeds digits to 3-channel CNNs)
//   7. normalise per channel: (x - mean[c]) / std[c] (the dataset's, replicated with the channels)
//   8. normalised-space trigger, if any (SPMC writes 1.0 after normalisation into channel 0)
// Randomness: steps 4 and 5 draw from the Generator passed in, in this order and only when the step is
// on: crop top = rng.below(2p + 1), crop left = rng.below(2p + 1) (torchvision draws i then j), then
// flip when rng.uniform() < 0.5. The output pixel (r, c) is padded-input pixel (r + top, c + left), so
// top = left = p is the un-shifted image. The loader derives the Generator from
// (seed, epoch, position in the epoch) so a client's augmentation is the same on any thread count.
// Without augmentation and triggers the result equals normalize_into() bit for bit (same float
// operations: pixel / 255.0f, then (x - mean) / std).
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "data/triggers.h"
#include "tensor/random.h"

namespace bastion {

enum class PadMode { kZero, kReflect };

struct TransformSpec {
  int64_t resize = 0;        // 0 = keep H×W; else resize to resize×resize (square)
  int64_t crop_padding = 0;  // 0 = no random crop
  PadMode pad_mode = PadMode::kZero;
  bool horizontal_flip = false;
  int64_t replicate_channels = 0;  // 0 = keep C; else C must be 1 and becomes this
};

// The default training augmentation of SPEC §2: cifar10/cifar100/svhn/tinyimagenet get crop 4 (zero) +
// flip (no seed paper's code flips SVHN digits — IMPLEMENTATION-FACTS §§2.3, 5.3 — so paper presets that
// reproduce those codes turn the flip off; docs/decisions.md); the digit sets, unknown names and float
// sets get none.
// `resize`/`replicate` stay 0 (SPMC's digit pipeline sets them explicitly).
TransformSpec default_train_transform(const std::string& dataset_name);

// True when `spec` changes nothing (no resize, crop, flip or replication): the loader's plain
// normalisation path is then equivalent and faster.
inline bool is_identity_transform(const TransformSpec& spec) {
  return spec.resize == 0 && spec.crop_padding == 0 && !spec.horizontal_flip && spec.replicate_channels == 0;
}

// Output shape of the pipeline for `d` under `spec`: {C', H', W'}.
struct SampleShape {
  int64_t channels, height, width;
  int64_t numel() const { return channels * height * width; }
};
// Throws when the spec does not apply to `d` (negative sizes, replicate on a set with C != 1, reflect
// padding >= the image size, mean/std sizes that do not match C).
SampleShape transformed_shape(const Dataset& d, const TransformSpec& spec);

// The image shape a trigger acting in `space` meets: the stored C×H×W for raw triggers (step 2), the
// transformed shape for normalised ones (step 8). Make triggers for this shape (data/triggers.h).
SampleShape trigger_stage_shape(const Dataset& d, const TransformSpec& spec, TriggerSpace space);

// Runs the pipeline on sample `index` of `d`, writing transformed_shape(d, spec).numel() floats to out.
// `trigger` may be null; it is applied at step 2 or 8 according to its space, and must have been made
// for the shape at that step: (C, H, W) of `d` for a raw trigger, transformed_shape for a normalised
// one (throws otherwise). `rng` is used only when the spec crops or flips.
void transform_sample_into(float* out, const Dataset& d, int64_t index, const TransformSpec& spec,
                           const Trigger* trigger, Generator& rng);

// The same with caller-owned scratch of transform_scratch_numel(d, spec) floats, so a caller that
// transforms many samples (BatchLoader::next) does not allocate; the overload above allocates its own.
int64_t transform_scratch_numel(const Dataset& d, const TransformSpec& spec);
void transform_sample_into(float* out, const Dataset& d, int64_t index, const TransformSpec& spec,
                           const Trigger* trigger, Generator& rng, float* scratch);

// Named normalisation presets that papers use in place of a set's own statistics
// (IMPLEMENTATION-FACTS): "dataset" (keep), "mnist" (0.1307/0.3081 on every channel: SPMC's digit sets),
// "imagenet" (0.485,0.456,0.406 / 0.229,0.224,0.225), "half" (0.5/0.5: FedFSA FMNIST, FedCPA Tiny),
// "none" (0/1: BapFL and DBA feed [0, 1] pixels). Sets mean/std on `d` (one entry per channel of `d`;
// a later replicate_channels reuses channel 0's); throws on an unknown name (listing the valid ones) or
// "imagenet" on a set that is not 3-channel.
void apply_normalization_preset(Dataset& d, const std::string& preset);

}  // namespace bastion
