// sam: the elementwise passes of a SAM step on a CPU model (nn/optim.cpp's Sam::step), fused so that each
// reads and writes its vectors once. A SAM step of cnn-fedfsa (1.26 M parameters, 5 MB a vector, more
// than a core's L2) is memory-bound outside its GEMMs: the perturbation, the save and the restore of the
// weights and the direction's scaling were about 15 % of a FedFSA round (perf, issue 38).
//   sam_perturb_cpu:    e = scale * d;  saved = w;  w = w + e                      ASSIGNS e, saved, w
//   sam_perturb_into_cpu: e = scale * d;  out = w + e   (w unchanged)            ASSIGNS e, out
//   sam_direction_cpu:  g = alpha * g + linear   (linear null: g = alpha * g)      ASSIGNS g
//   sam_direction_norm_cpu: the same, and adds the squares of the new g to the norm lanes (vector.h's
//   vector_squared_norm_lanes_cpu at `first`), chunk by chunk while each chunk is in L1: the clip after
//   the ascent measures g without a pass of its own.
//   sam_perturb_into_zeroing_cpu: out = w + scale * d;  d = 0   (e not kept)        ASSIGNS out, d
//   the gradient's last read is this pass (its norms were measured before), so the zeroing before the
//   ascent pass's backward is done here, on lines already in cache, instead of in a fill of its own.
// d and e may be the same array (FedSMOO's direction is computed into e's buffer); the others are
// distinct. e may be null: e is then not stored (Sam keeps it only when asked or for FedSMOO's dual). Each product is rounded before it is added, exactly as the unfused passes did (a scaling
// pass, then an adding pass): sam.cpp is compiled with -ffp-contract=off, so the compiler cannot merge a
// multiply and an add into one fused multiply-add (one rounding instead of two), and the results are
// bit-identical to the unfused step's.
// No CUDA twin: the device step (Sam::step_on_device) runs the flat-vector kernels of kernels/cuda/vector.h.
// PyTorch equivalent: e = scale * d; saved = w.clone(); w.add_(e)  /  g.mul_(alpha).add_(linear)
#pragma once

#include <cstdint>

namespace bastion {

void sam_perturb_cpu(float* w, float* saved, float* e, const float* d, float scale, int64_t D);
void sam_perturb_into_cpu(float* out, const float* w, float* e, const float* d, float scale, int64_t D);
void sam_direction_cpu(float* g, const float* linear, float alpha, int64_t D);
void sam_direction_norm_cpu(float* g, const float* linear, float alpha, int64_t D, double* lanes, int64_t first);
void sam_perturb_into_zeroing_cpu(float* out, const float* w, float* d, float scale, int64_t D);
inline constexpr int64_t kSamChunk = 4096;  // 16 KiB of g: half of a Zen 4 core's 32 KiB L1d, a third of 48 KiB

}  // namespace bastion
