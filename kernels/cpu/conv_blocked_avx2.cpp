// conv_blocked_avx2: the register-blocked kernels of conv2d_blocked (kernels/cpu/conv_blocked.h) on AVX2 +
// FMA, for x86-64 CPUs without AVX-512 (AMD Zen 2 and 3 among them), where ResNet's 3x3 layers otherwise run
// im2col + OpenBLAS. The plan, the layouts (16 channels innermost) and the loops around the kernels are
// conv_blocked.cpp's; here a 16-lane vector is two 8-lane ymm registers (channels 0-7, 8-15), resized for 16
// registers:
//   gather (forward, grad_in)  one output block (2 ymm) x T <= 6 pixels: 12 accumulators, 2 weight vectors
//                              and one broadcast input, 8 loads for 12 FMAs a step (max_gather_kv 1)
//   weight gradient            one output block x taps 0-4 (10 accumulators), then taps 5-8 (8), each pass
//                              over the group's pixels: per pixel 2 + 2 gradient loads and 5 + 4 input
//                              broadcasts for 18 FMAs (max_weight_kv 1)
//   layout conversions         8 x 8 register transposes: O(data) against 2 * 9 * C FMAs per output
// Compiled with -mavx2 -mfma on x86-64 whatever BASTION_NATIVE says (CMakeLists.txt) and run only where
// avx2_kernels() is not null; for that reason every function here has internal linkage or is that entry
// point, and the file includes no C++ library header but <cstdint> (kernels/cpu/gemm_small_blocks.h says why).
//
// Determinism: every output sums its terms in one fixed order (gather: start value, input blocks, taps,
// channels; weight gradient: the plan's fixed chunks, groups, rows, pixels), whichever thread computes it.
#include "kernels/cpu/conv_blocked_internal.h"
#include "kernels/cpu/cpu_features.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/cpu/unroll.h"
#endif

namespace bastion::conv_blocked_detail {

#if defined(__AVX2__) && defined(__FMA__)

namespace {

constexpr int kHalf = 8;          // floats per ymm register: a 16-lane vector is two
constexpr int kMaxPixels = 6;     // 2 x 6 accumulators of the 16 ymm registers
constexpr int kAccumulators = 6;  // in 16-lane vectors
// Zen 3's L1D is 32 KiB (AVX-512's plan keeps 36 KiB of weights in a 48 KiB L1 and a 32 KiB weight group).
constexpr int64_t kL1WeightBytes = 16 * 1024;
constexpr int64_t kWeightGroupBytes = 16 * 1024;
// Rows narrower than this take flat blocks: 8 pixels make two blocks of 4 (8 accumulators), 16 three of 5-6.
constexpr int64_t kFlatBelowCols = 12;

// ---- gather passes (forward, grad_in) --------------------------------------------------------------

// Where pixel t of a block lies, in floats from the block's input and output pointers: one row's adjacent
// pixels, IS and OS pixels apart, or (Flat, on rows narrower than kFlatBelowCols, whose own blocks would
// hold 4 pixels or fewer) anywhere in the class's grid, at GatherArgs::pixel_in and pixel_out.
template <int IS, int OS, bool Flat>
struct PixelAt {
  const GatherArgs& a;
  [[gnu::always_inline]] int64_t in(int t) const { return Flat ? a.pixel_in[t] : t * IS * kLanes; }
  [[gnu::always_inline]] int64_t out(int t) const { return Flat ? a.pixel_out[t] : t * OS * kLanes; }
};

// One output block x T pixels (KV = 1): out[t] (+)= sum over the call's input blocks, the class's taps and 16
// input channels of weight vector x broadcast input, in conv_blocked_gather.cpp's order.
template <int T, int IS, int OS, bool Flat>
void gather_block(float* out, const float* in, const float* w, const float* init, const GatherArgs& a) {
  const PixelAt<IS, OS, Flat> at{a};
  __m256 lo[T], hi[T];
  BASTION_UNROLL(6)
  for (int t = 0; t < T; ++t) {
    const float* from = init ? init : out + at.out(t);
    lo[t] = _mm256_loadu_ps(from);
    hi[t] = _mm256_loadu_ps(from + kHalf);
  }
  for (int64_t cb = 0; cb < a.cbs; ++cb) {
    const float* in_cb = in + cb * a.in_cb_stride;
    const float* w_cb = w + cb * a.w_cb_stride;
    for (int tap = 0; tap < a.cls->ntaps; ++tap) {
      // A row's pixels at constant offsets from one pointer; flat blocks' pixels by a pointer each.
      const float* ip[T];
      BASTION_UNROLL(6)
      for (int t = 0; t < T; ++t) ip[t] = in_cb + a.cls->in_off[tap] + (Flat ? at.in(t) : 0);
      const float* wp = w_cb + a.cls->w_off[tap];
      BASTION_UNROLL(16)
      for (int c = 0; c < kLanes; ++c) {
        const __m256 wl = _mm256_loadu_ps(wp + c * kLanes), wh = _mm256_loadu_ps(wp + c * kLanes + kHalf);
        BASTION_UNROLL(6)
        for (int t = 0; t < T; ++t) {
          const __m256 x = _mm256_broadcast_ss(Flat ? ip[t] + c : ip[0] + at.in(t) + c);
          lo[t] = _mm256_fmadd_ps(wl, x, lo[t]);
          hi[t] = _mm256_fmadd_ps(wh, x, hi[t]);
        }
      }
    }
  }
  BASTION_UNROLL(6)
  for (int t = 0; t < T; ++t) {
    _mm256_storeu_ps(out + at.out(t), lo[t]);
    _mm256_storeu_ps(out + at.out(t) + kHalf, hi[t]);
  }
}

template <int IS, int OS, bool Flat>
GatherFn gather_for(int T) {
  static constexpr GatherFn table[] = {nullptr,
                                       gather_block<1, IS, OS, Flat>,
                                       gather_block<2, IS, OS, Flat>,
                                       gather_block<3, IS, OS, Flat>,
                                       gather_block<4, IS, OS, Flat>,
                                       gather_block<5, IS, OS, Flat>,
                                       gather_block<6, IS, OS, Flat>};
  return T >= 1 && T <= kMaxPixels ? table[T] : nullptr;
}

// KV is always 1 here (max_gather_kv): the plan asks for no other.
GatherFn gather_fn(int KV, int T, int in_col_step, int out_col_step) {
  if (KV != 1) return nullptr;
  if (in_col_step == 2) return gather_for<2, 1, false>(T);
  if (out_col_step == 2) return gather_for<1, 2, false>(T);
  return gather_for<1, 1, false>(T);
}

GatherFn gather_flat_fn(int T) { return gather_for<1, 1, true>(T); }

// ---- weight gradient --------------------------------------------------------------------------------

// totals (9 vectors of input channel c, KV = 1) += sum over the group's pixels of dy x in[c, tap] for the
// taps [Tap0, Tap0 + NTaps) (tap = 3 r + s). dy: the group's first sample, pixel (oh0, 0) (inside the
// padding); x: the same sample's input block at row oh0 * stride, column 0, plus c.
template <int Tap0, int NTaps, int IS>
void weight_taps(float* totals, const float* dy, const float* x, const WeightPass& p, int64_t samples, int64_t rows) {
  __m256 lo[NTaps], hi[NTaps];
  BASTION_UNROLL(5)
  for (int t = 0; t < NTaps; ++t) {
    lo[t] = _mm256_loadu_ps(totals + (Tap0 + t) * kLanes);
    hi[t] = _mm256_loadu_ps(totals + (Tap0 + t) * kLanes + kHalf);
  }
  const int64_t dy_sample = (p.K / kLanes) * p.dy_plane, x_sample = (p.C / kLanes) * p.x_plane;
  for (int64_t n = 0; n < samples; ++n)
    for (int64_t i = 0; i < rows; ++i) {
      const float* d = dy + n * dy_sample + i * p.dy_row;
      const float* xr = x + n * x_sample + i * IS * p.x_row;
      for (int64_t j = 0; j < p.OW; ++j, d += kLanes, xr += IS * kLanes) {
        const __m256 gl = _mm256_loadu_ps(d), gh = _mm256_loadu_ps(d + kHalf);
        BASTION_UNROLL(5)
        for (int t = 0; t < NTaps; ++t) {
          const int r = (Tap0 + t) / 3, s = (Tap0 + t) % 3;
          const __m256 b = _mm256_broadcast_ss(xr + r * p.x_row + s * kLanes);
          lo[t] = _mm256_fmadd_ps(gl, b, lo[t]);
          hi[t] = _mm256_fmadd_ps(gh, b, hi[t]);
        }
      }
    }
  BASTION_UNROLL(5)
  for (int t = 0; t < NTaps; ++t) {
    _mm256_storeu_ps(totals + (Tap0 + t) * kLanes, lo[t]);
    _mm256_storeu_ps(totals + (Tap0 + t) * kLanes + kHalf, hi[t]);
  }
}

// The 9 taps in two passes of 5 and 4 (10 and 8 accumulators: each pass keeps at least the 8 multiply-adds
// in flight that two FMA units of latency 4 need; a 6 + 3 split left the second pass at 6).
template <int IS>
void weight_block(float* totals, const float* dy, const float* x, const WeightPass& p, int64_t samples, int64_t rows) {
  weight_taps<0, 5, IS>(totals, dy, x, p, samples, rows);
  weight_taps<5, 4, IS>(totals, dy, x, p, samples, rows);
}

// KV is always 1 here (max_weight_kv).
WeightFn weight_fn(int KV, int64_t stride) {
  if (KV != 1) return nullptr;
  return stride == 2 ? weight_block<2> : weight_block<1>;
}

// ---- layout conversions -----------------------------------------------------------------------------

void fill_zero(float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = 0.0f;
}

// r[i][j] -> r[j][i] for an 8 x 8 tile in 8 registers: 32-bit interleaves, 64-bit shuffles inside each
// 128-bit lane, then the lanes exchanged.
inline void transpose8(__m256 (&r)[8]) {
  __m256 a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    b[i] = _mm256_shuffle_ps(a[i], a[i + 2], 0x44);
    b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], 0xEE);
    b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0x44);
    b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x31);
  }
}

// One sample: planes (C, H, W) -> [C / 16][H + 2 pad][W + 2 pad][16], the border ASSIGNED zero. Pixels in
// runs of 8 (a transpose per 8 channels), the last run of a plane one pixel at a time.
void to_blocked(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t pad) {
  const int64_t Hp = H + 2 * pad, Wp = W + 2 * pad, HW = H * W;
  for (int64_t cb = 0; cb < C / kLanes; ++cb) {
    float* plane = dst + cb * Hp * Wp * kLanes;
    const float* channels = src + cb * kLanes * HW;
    fill_zero(plane, pad * Wp * kLanes);
    fill_zero(plane + (Hp - pad) * Wp * kLanes, pad * Wp * kLanes);
    for (int64_t h = 0; h < H; ++h) {
      float* row = plane + (h + pad) * Wp * kLanes;
      fill_zero(row, pad * kLanes);
      fill_zero(row + (W + pad) * kLanes, pad * kLanes);
    }
    int64_t p0 = 0, h = 0, w = 0;  // (h, w): pixel p0
    for (; p0 + 8 <= HW; p0 += 8)
      for (int half = 0; half < 2; ++half) {
        __m256 r[8];
        for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(channels + (half * 8 + c) * HW + p0);
        transpose8(r);
        int64_t hh = h, ww = w;
        for (int j = 0; j < 8; ++j) {
          _mm256_storeu_ps(plane + ((hh + pad) * Wp + ww + pad) * kLanes + half * kHalf, r[j]);
          if (++ww == W) ww = 0, ++hh;
        }
        if (half == 1) h = hh, w = ww;
      }
    for (; p0 < HW; ++p0) {
      for (int64_t c = 0; c < kLanes; ++c) plane[((h + pad) * Wp + w + pad) * kLanes + c] = channels[c * HW + p0];
      if (++w == W) w = 0, ++h;
    }
  }
}

// One sample: [C / 16][P][16] -> planes (C, P), ASSIGNED; runs of 8 pixels by transposes, the rest one at
// a time.
void from_blocked(float* dst, const float* src, int64_t C, int64_t P) {
  for (int64_t cb = 0; cb < C / kLanes; ++cb) {
    const float* block = src + cb * P * kLanes;
    float* channels = dst + cb * kLanes * P;
    int64_t p0 = 0;
    for (; p0 + 8 <= P; p0 += 8)
      for (int half = 0; half < 2; ++half) {
        __m256 r[8];
        for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(block + (p0 + j) * kLanes + half * kHalf);
        transpose8(r);
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(channels + (half * 8 + c) * P + p0, r[c]);
      }
    for (; p0 < P; ++p0)
      for (int64_t c = 0; c < kLanes; ++c) channels[c * P + p0] = block[p0 * kLanes + c];
  }
}

}  // namespace

const BlockedKernels* avx2_kernels() {
  static const BlockedKernels kernels{
      .accumulators = kAccumulators,
      .max_pixels = kMaxPixels,
      .max_gather_kv = 1,
      .max_weight_kv = 1,
      .l1_weight_bytes = kL1WeightBytes,
      .weight_group_bytes = kWeightGroupBytes,
      .gather = gather_fn,
      .gather_flat = gather_flat_fn,
      .flat_below_cols = kFlatBelowCols,
      .weight = weight_fn,
      .to_blocked = to_blocked,
      .from_blocked = from_blocked,
  };
  return cpu_has_avx2_fma() ? &kernels : nullptr;
}

#else  // not x86-64: never chosen

const BlockedKernels* avx2_kernels() { return nullptr; }

#endif

}  // namespace bastion::conv_blocked_detail
