// normal: standard normal floats from uniform pairs by Box-Muller, bit for bit the scalar formula
//   r = sqrt(-2 log u1[i]),  a = 2 pi u2[i],  out[2i] = float(r cos a),  out[2i + 1] = float(r sin a)
// evaluated in double with the C library's log, cos and sin (the formula FedCR's noise was drawn with
// before this kernel, so runs keep their draws).
// u1: (pairs) in (0, 1); u2: (pairs) in [0, 1); out: (count) floats, count <= 2 * pairs (an odd count
// drops the last pair's sine).
// How (AVX-512): eight pairs at a time with vector log, cos and sin (polynomials in double, accurate to
// a few units in the last place of the double, tests/test_kernels_cpu_normal.cpp); a lane whose double
// result lies within 2^12 double ulps of a float rounding midpoint, or whose cosine or sine is below
// 2^-10, is recomputed with the C library, so every float equals the scalar formula's. Without AVX-512,
// the same algorithm four pairs at a time where the CPU has AVX2 and FMA (normal_avx2.cpp, chosen at run
// time), else the scalar formula. There is no CUDA twin: the noise is drawn on the host (docs/decisions.md).
// PyTorch equivalent: none (torch.randn uses its own generator).
#pragma once

#include <cstdint>

namespace bastion {

void box_muller_cpu(float* out, const double* u1, const double* u2, int64_t count);

// The scalar formula for pair i: what box_muller_cpu must reproduce, and its fallback. sine may be null.
void box_muller_pair_scalar(float* cosine, float* sine, double u1, double u2);

// The vector path's doubles x = r cos a, y = r sin a before any check (the scalar formula's doubles
// without a vector path): for the test of its error bound, on which the fallback's margin rests.
void box_muller_doubles_cpu(double* x, double* y, const double* u1, const double* u2, int64_t pairs);

// The AVX2 + FMA path itself, compiled on every x86-64 build so the tests can reach it on any CPU that
// has it (box_muller_cpu takes it only where AVX-512 was not compiled in). Call only when available.
bool box_muller_avx2_available();
void box_muller_avx2_cpu(float* out, const double* u1, const double* u2, int64_t count);
void box_muller_doubles_avx2_cpu(double* x, double* y, const double* u1, const double* u2, int64_t pairs);

}  // namespace bastion
