// The AVX-512 kernels of conv2d_blocked (kernels/cpu/conv_blocked.h): the gather blocks of the forward and
// grad_in (KV vectors of 16 output channels x T pixels of one row, KV * T <= 24 of the 32 zmm registers) and
// the AVX-512 entry of BlockedKernels, which conv_blocked.cpp's plan runs; the weight-gradient blocks are in
// conv_blocked_weight.cpp, the layout conversions in conv_blocked_layout.cpp, AVX2's set in
// conv_blocked_avx2.cpp. Compiled with the build's flags: empty in a build without AVX-512.
#include <cstdint>
#include <utility>

#include "kernels/cpu/conv_blocked_internal.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include "kernels/cpu/unroll.h"

namespace bastion {

namespace conv_blocked_detail {

namespace {

constexpr int kAccumulators = 24;  // of the 32 zmm registers; the rest hold weights and a broadcast
// Pixels per register block: at most 12 (with one output vector a block of 12 still hides the FMA
// latency; wider blocks would only add template instances).
constexpr int kMaxPixels = 12;

// KV x T register block: out[kv][t] (+)= sum over the call's input blocks, the class's taps and 16 input
// channels of weight vector x broadcast input. init: the start values (bias or zeros, KV x 16 floats), or
// null to continue from the values in out.
template <int KV, int T, int IS, int OS>
void gather_block(float* out, const float* in, const float* w, const float* init, const GatherArgs& a) {
  __m512 acc[KV][T];
  BASTION_UNROLL(24)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(24)
    for (int t = 0; t < T; ++t)
      acc[kv][t] =
          init ? _mm512_loadu_ps(init + kv * kLanes) : _mm512_loadu_ps(out + kv * a.out_group_stride + t * OS * kLanes);
  }
  for (int64_t cb = 0; cb < a.cbs; ++cb) {
    const float* in_cb = in + cb * a.in_cb_stride;
    const float* w_cb = w + cb * a.w_cb_stride;
    for (int tap = 0; tap < a.cls->ntaps; ++tap) {
      const float* ip = in_cb + a.cls->in_off[tap];
      const float* wp = w_cb + a.cls->w_off[tap] * KV;
      BASTION_UNROLL(16)
      for (int c = 0; c < kLanes; ++c) {
        __m512 wv[KV];
        BASTION_UNROLL(4)
        for (int kv = 0; kv < KV; ++kv) wv[kv] = _mm512_loadu_ps(wp + (c * KV + kv) * kLanes);
        BASTION_UNROLL(24)
        for (int t = 0; t < T; ++t) {
          const __m512 x = _mm512_set1_ps(ip[t * IS * kLanes + c]);
          BASTION_UNROLL(4)
          for (int kv = 0; kv < KV; ++kv) acc[kv][t] = _mm512_fmadd_ps(wv[kv], x, acc[kv][t]);
        }
      }
    }
  }
  BASTION_UNROLL(24)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(24)
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + kv * a.out_group_stride + t * OS * kLanes, acc[kv][t]);
  }
}

template <int KV, int IS, int OS, int... T>
GatherFn gather_for(int t, std::integer_sequence<int, T...>) {
  static constexpr GatherFn table[] = {nullptr, gather_block<KV, T + 1, IS, OS>...};
  return table[t];
}

template <int IS, int OS>
GatherFn gather_fn_strides(int KV, int T) {
  switch (KV) {
    case 4:
      return gather_for<4, IS, OS>(T, std::make_integer_sequence<int, kAccumulators / 4>{});
    case 2:
      return gather_for<2, IS, OS>(T, std::make_integer_sequence<int, kAccumulators / 2>{});
    default:
      return gather_for<1, IS, OS>(T, std::make_integer_sequence<int, kMaxPixels>{});
  }
}

GatherFn gather_fn(int KV, int T, int in_col_step, int out_col_step) {
  if (in_col_step == 2) return gather_fn_strides<2, 1>(KV, T);
  if (out_col_step == 2) return gather_fn_strides<1, 2>(KV, T);
  return gather_fn_strides<1, 1>(KV, T);
}

}  // namespace

const BlockedKernels& avx512_kernels() {
  static const BlockedKernels kernels{
      .accumulators = kAccumulators,
      .max_pixels = kMaxPixels,
      .max_gather_kv = 4,
      .max_weight_kv = 2,
      .l1_weight_bytes = 36 * 1024,
      .weight_group_bytes = 32 * 1024,
      .gather = gather_fn,
      .gather_flat = nullptr,  // rows of 4 pixels take KV = 4 blocks of 24 accumulators instead
      .flat_below_cols = 0,
      .weight = avx512_weight_fn,
      .to_blocked = avx512_to_blocked,
      .from_blocked = avx512_from_blocked,
  };
  return kernels;
}

}  // namespace conv_blocked_detail

}  // namespace bastion

#endif  // __AVX512F__
