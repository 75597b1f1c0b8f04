// pool_avx2: the 2x2 / stride 2 max-pool backward's row on AVX2, for CPUs without AVX-512, where the op ran
// the scalar row: 3.1 % of a FedFSA round on an AMD EPYC Zen 3 (perf, 2026-11-30). pool.cpp's AVX-512 row
// step for step on 8 windows at a time: the two input rows split into even (a, c) and odd (b, d) columns,
// the first maximum found by compares (no branches), the four gradients interleaved back; lanes past OW
// masked off on load and store. Compiled with -mavx2 -mfma on x86-64 whatever BASTION_NATIVE says
// (CMakeLists.txt) and called only where cpu_has_avx2_fma() says so; it includes no C++ library header
// (kernels/cpu/gemm_small_blocks.h says why).
#include "kernels/cpu/pool_avx2.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace bastion {

#if defined(__AVX2__) && defined(__FMA__)

namespace {

__m256i first_lanes(int64_t n) {
  const int lanes = n <= 0 ? 0 : n >= 8 ? 8 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Even and odd floats of the 16 at p (lo: the first 8, hi: the next 8).
void split_columns(__m256 lo, __m256 hi, __m256& even, __m256& odd) {
  const __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
  even = _mm256_shuffle_ps(first, second, _MM_SHUFFLE(2, 0, 2, 0));
  odd = _mm256_shuffle_ps(first, second, _MM_SHUFFLE(3, 1, 3, 1));
}

// even[j], odd[j] back to positions 2j, 2j + 1 of 16 floats (lo, hi).
void merge_columns(__m256 even, __m256 odd, __m256& lo, __m256& hi) {
  const __m256 low = _mm256_unpacklo_ps(even, odd), high = _mm256_unpackhi_ps(even, odd);
  lo = _mm256_permute2f128_ps(low, high, 0x20);
  hi = _mm256_permute2f128_ps(low, high, 0x31);
}

template <bool kTail>
void backward_windows(float* dtop, float* dbottom, const float* top, const float* bottom, const float* src, int64_t n) {
  const __m256i lo_mask = first_lanes(2 * n), hi_mask = first_lanes(2 * n - 8), out_mask = first_lanes(n);
  const auto load = [](const float* p, __m256i mask) {
    return kTail ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
  };
  const auto store = [](float* p, __m256i mask, __m256 v) {
    if (kTail)
      _mm256_maskstore_ps(p, mask, v);
    else
      _mm256_storeu_ps(p, v);
  };
  __m256 a, b, c, d;
  split_columns(load(top, lo_mask), load(top + 8, hi_mask), a, b);
  split_columns(load(bottom, lo_mask), load(bottom + 8, hi_mask), c, d);
  const __m256 grad = load(src, out_mask);
  // vmaxps, as pool.cpp's AVX-512 row: the same first maximum for every input without NaN.
  const __m256 m = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
  const __m256 a_wins = _mm256_cmp_ps(a, m, _CMP_EQ_OQ);
  const __m256 b_wins = _mm256_andnot_ps(a_wins, _mm256_cmp_ps(b, m, _CMP_EQ_OQ));
  const __m256 taken = _mm256_or_ps(a_wins, b_wins);
  const __m256 c_wins = _mm256_andnot_ps(taken, _mm256_cmp_ps(c, m, _CMP_EQ_OQ));
  const __m256 d_wins = _mm256_andnot_ps(_mm256_or_ps(taken, c_wins), _mm256_castsi256_ps(_mm256_set1_epi32(-1)));
  __m256 lo, hi;
  merge_columns(_mm256_and_ps(a_wins, grad), _mm256_and_ps(b_wins, grad), lo, hi);
  store(dtop, lo_mask, lo);
  store(dtop + 8, hi_mask, hi);
  merge_columns(_mm256_and_ps(c_wins, grad), _mm256_and_ps(d_wins, grad), lo, hi);
  store(dbottom, lo_mask, lo);
  store(dbottom + 8, hi_mask, hi);
}

}  // namespace

void max_pool_2x2_backward_row_avx2(float* dtop, float* dbottom, const float* top, const float* bottom,
                                    const float* src, int64_t OW) {
  int64_t ow = 0;
  for (; ow + 8 <= OW; ow += 8)
    backward_windows<false>(dtop + 2 * ow, dbottom + 2 * ow, top + 2 * ow, bottom + 2 * ow, src + ow, 8);
  if (ow < OW)
    backward_windows<true>(dtop + 2 * ow, dbottom + 2 * ow, top + 2 * ow, bottom + 2 * ow, src + ow, OW - ow);
}

#else  // not x86-64: never called (pool.cpp checks cpu_has_avx2_fma first)

void max_pool_2x2_backward_row_avx2(float*, float*, const float*, const float*, const float*, int64_t) {}

#endif

}  // namespace bastion
