// The layout conversions of conv2d_blocked (kernels/cpu/conv_blocked.h): planes to and from 16-channel
// blocks on AVX-512 (a 16 x 16 register transpose per block of 16 pixels; AVX2's are in
// conv_blocked_avx2.cpp) and the packing of the weights for the gather passes, for every instruction set.
// Declared in conv_blocked_internal.h; conv_blocked.cpp runs them chunk by chunk.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv_blocked_internal.h"
#include "kernels/cpu/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>

namespace bastion::conv_blocked_detail {

namespace {

// r[i][j] -> r[j][i] for a 16 x 16 tile held in 16 registers: 32-bit, then 64-bit interleaves inside each
// 128-bit lane, then two 128-bit lane shuffles. The all-ones masked forms compile to the plain instructions;
// GCC 12's unmasked ones pass an undefined vector that trips -Wmaybe-uninitialized.
inline __m512 unpack_lo32(__m512 a, __m512 b) { return _mm512_mask_unpacklo_ps(a, 0xFFFF, a, b); }
inline __m512 unpack_hi32(__m512 a, __m512 b) { return _mm512_mask_unpackhi_ps(a, 0xFFFF, a, b); }
inline __m512 unpack_lo64(__m512 a, __m512 b) {
  const __m512d x = _mm512_castps_pd(a);
  return _mm512_castpd_ps(_mm512_mask_unpacklo_pd(x, 0xFF, x, _mm512_castps_pd(b)));
}
inline __m512 unpack_hi64(__m512 a, __m512 b) {
  const __m512d x = _mm512_castps_pd(a);
  return _mm512_castpd_ps(_mm512_mask_unpackhi_pd(x, 0xFF, x, _mm512_castps_pd(b)));
}
template <int Imm>
inline __m512 shuffle128(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, 0xFFFF, a, b, Imm);
}

inline void transpose16(__m512 (&r)[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = unpack_lo32(r[i], r[i + 1]);
    a[i + 1] = unpack_hi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    b[i] = unpack_lo64(a[i], a[i + 2]);          // lane L: column 4L + 0 of rows i..i+3
    b[i + 1] = unpack_hi64(a[i], a[i + 2]);      // 4L + 1
    b[i + 2] = unpack_lo64(a[i + 1], a[i + 3]);  // 4L + 2
    b[i + 3] = unpack_hi64(a[i + 1], a[i + 3]);  // 4L + 3
  }
  for (int m = 0; m < 4; ++m) {
    const __m512 c0 = shuffle128<0x44>(b[m], b[4 + m]), c1 = shuffle128<0x44>(b[8 + m], b[12 + m]);
    const __m512 c2 = shuffle128<0xEE>(b[m], b[4 + m]), c3 = shuffle128<0xEE>(b[8 + m], b[12 + m]);
    r[m] = shuffle128<0x88>(c0, c1);
    r[4 + m] = shuffle128<0xDD>(c0, c1);
    r[8 + m] = shuffle128<0x88>(c2, c3);
    r[12 + m] = shuffle128<0xDD>(c2, c3);
  }
}

__mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

}  // namespace

// One sample: planes (C, H, W) -> [C / 16][H + 2 pad][W + 2 pad][16], the border ASSIGNED zero.
void avx512_to_blocked(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t pad) {
  const int64_t Hp = H + 2 * pad, Wp = W + 2 * pad, HW = H * W;
  for (int64_t cb = 0; cb < C / kLanes; ++cb) {
    float* plane = dst + cb * Hp * Wp * kLanes;
    if (pad > 0) {
      std::fill_n(plane, pad * Wp * kLanes, 0.0f);
      std::fill_n(plane + (Hp - pad) * Wp * kLanes, pad * Wp * kLanes, 0.0f);
      for (int64_t h = pad; h < Hp - pad; ++h) {
        std::fill_n(plane + h * Wp * kLanes, pad * kLanes, 0.0f);
        std::fill_n(plane + ((h + 1) * Wp - pad) * kLanes, pad * kLanes, 0.0f);
      }
    }
    const float* channels = src + cb * kLanes * HW;
    int64_t h = 0, w = 0;  // of pixel p0
    for (int64_t p0 = 0; p0 < HW; p0 += kLanes) {
      const int64_t n = std::min(kLanes, HW - p0);
      const __mmask16 mask = first_lanes(n);
      __m512 r[16];
      for (int c = 0; c < 16; ++c) r[c] = _mm512_maskz_loadu_ps(mask, channels + c * HW + p0);
      transpose16(r);
      for (int64_t j = 0; j < n; ++j) {
        _mm512_storeu_ps(plane + ((h + pad) * Wp + w + pad) * kLanes, r[j]);
        if (++w == W) w = 0, ++h;
      }
    }
  }
}

// One sample: [C / 16][P][16] -> planes (C, P), ASSIGNED.
void avx512_from_blocked(float* dst, const float* src, int64_t C, int64_t P) {
  for (int64_t cb = 0; cb < C / kLanes; ++cb) {
    const float* block = src + cb * P * kLanes;
    float* channels = dst + cb * kLanes * P;
    for (int64_t p0 = 0; p0 < P; p0 += kLanes) {
      const int64_t n = std::min(kLanes, P - p0);
      __m512 r[16];
      for (int64_t j = 0; j < 16; ++j) r[j] = j < n ? _mm512_loadu_ps(block + (p0 + j) * kLanes) : _mm512_setzero_ps();
      transpose16(r);
      const __mmask16 mask = first_lanes(n);
      for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(channels + c * P + p0, mask, r[c]);
    }
  }
}

}  // namespace bastion::conv_blocked_detail

#endif  // __AVX512F__

namespace bastion::conv_blocked_detail {

// forward: packed[k / (16 KV)][c / 16][tap][c % 16][(k / 16) % KV][k % 16] = weight[k, c, tap]: the KV
// weight vectors one broadcast input meets are adjacent. transposed (grad_in): the roles of k and c swapped,
// packed[c / (16 KV)][k / 16][tap][k % 16][(c / 16) % KV][c % 16] = weight[k, c, tap] (the taps are
// flipped by the gather's input offsets, not here). Written in order, one output group per thread.
void pack_weights(float* packed, const float* weight, int64_t K, int64_t C, int KV, bool transposed, int threads) {
  const int64_t outs = transposed ? C : K, ins = transposed ? K : C, groups = outs / (kLanes * KV);
  const int64_t group_floats = ins * kTaps * kLanes * KV;
#pragma omp parallel for schedule(static) num_threads(threads) if (K * C * kTaps >= kParallelMinWork)
  for (int64_t gi = 0; gi < groups; ++gi) {
    float* dst = packed + gi * group_floats;
    for (int64_t ib = 0; ib < ins / kLanes; ++ib)
      for (int64_t t = 0; t < kTaps; ++t)
        for (int64_t il = 0; il < kLanes; ++il)
          for (int64_t o = gi * kLanes * KV; o < (gi + 1) * kLanes * KV; ++o) {
            const int64_t i = ib * kLanes + il;
            *dst++ = transposed ? weight[(i * C + o) * kTaps + t] : weight[(o * C + i) * kTaps + t];
          }
  }
}

}  // namespace bastion::conv_blocked_detail
