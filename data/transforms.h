// Sample transforms: the per-sample pipeline that turns a stored sample into the model's float input,
// with seeded augmentation (SPEC §2; IMPLEMENTATION-FACTS §§1.1, 2.3, 3.2, 5.3).
//
// Pipeline for one sample, in this fixed order (torchvision's order in the papers' loaders):
//   1. read: pixels/255 (image sets) or values (float sets) into a float (C, H, W) image in [0, 1] units
//   2. raw-space trigger, if any (FedCPA pastes its patch before augmentation)       — data/triggers.h
//   3. resize to resize×resize (bilinear, half-pixel centres: PIL/torchvision Resize when upscaling;
//      SPMC's 28→32 for the digit sets)
//   4. random crop back to the current size after padding `crop_padding` on each side, zero or reflect
//      padding (torchvision RandomCrop(size, padding) pads zeros; FedCPA reflect-pads)
//   5. horizontal flip with probability 1/2
//   6. channel replication 1→`replicate_channels` (SPMC feeds digits to 3-channel CNNs)
//   7. normalise per channel: (x - mean[c]) / std[c] (the dataset's, replicated with the channels)
//   8. normalised-space trigger, if any (SPMC writes 1.0 after normalisation into channel 0)
// Randomness: steps 4 and 5 draw from the Generator passed in; the loader derives it from
// (seed, epoch, position in the epoch) so a client's augmentation is the same on any thread count.
// Without augmentation and triggers the result equals normalize_into() bit for bit.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "tensor/random.h"

namespace bastion {

struct Trigger;  // data/triggers.h

enum class PadMode { kZero, kReflect };

struct TransformSpec {
  int64_t resize = 0;              // 0 = keep H×W; else resize to resize×resize (square)
  int64_t crop_padding = 0;        // 0 = no random crop
  PadMode pad_mode = PadMode::kZero;
  bool horizontal_flip = false;
  int64_t replicate_channels = 0;  // 0 = keep C; else C must be 1 and becomes this
};

// The augmentation the papers use by default for a dataset: cifar10/cifar100/svhn/tinyimagenet get
// crop 4 (zero) + flip; the digit sets and float sets get none (SPEC §2). `resize`/`replicate` stay 0.
TransformSpec default_train_transform(const std::string& dataset_name);

// Output shape of the pipeline for `d` under `spec`: {C', H', W'}.
struct SampleShape {
  int64_t channels, height, width;
  int64_t numel() const { return channels * height * width; }
};
SampleShape transformed_shape(const Dataset& d, const TransformSpec& spec);

// Runs the pipeline on sample `index` of `d`, writing transformed_shape(d, spec).numel() floats to out.
// `trigger` may be null; it is applied at step 2 or 8 according to its space. `rng` is used only when
// the spec crops or flips.
void transform_sample_into(float* out, const Dataset& d, int64_t index, const TransformSpec& spec,
                           const Trigger* trigger, Generator& rng);

// Named normalisation presets that papers use in place of a set's own statistics
// (IMPLEMENTATION-FACTS): "dataset" (keep), "mnist" (0.1307/0.3081 on every channel: SPMC's digit sets),
// "imagenet" (0.485,0.456,0.406 / 0.229,0.224,0.225), "half" (0.5/0.5: FedFSA FMNIST, FedCPA Tiny),
// "none" (0/1: BapFL and DBA feed [0, 1] pixels). Sets mean/std on `d`; throws on an unknown name or
// "imagenet" on a set that is not 3-channel.
void apply_normalization_preset(Dataset& d, const std::string& preset);

}  // namespace bastion
