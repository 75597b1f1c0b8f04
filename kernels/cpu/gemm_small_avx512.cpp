// gemm_small_avx512: the small-batch GEMM (contract in gemm_small.h) on AVX-512F, the blocking of
// gemm_small_blocks.h over 16-lane vectors. This file is compiled with -mavx512f -mfma on x86-64 whatever
// BASTION_NATIVE says (CMakeLists.txt), so the code exists on every x86-64 build and
// gemm_small_avx512_available() decides at run time. For that reason it includes no C++ library header
// (gemm_small_blocks.h says why): only C headers, intrinsics and our own plain declarations.
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_small.h"

#if defined(__AVX512F__)
// GCC 12 warns inside its own _mm512_undefined_ps (GCC bug 105593, fixed in 13), which the shuffles use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/cpu/gemm_small_blocks.h"
#endif

namespace bastion {

#if defined(__AVX512F__)

namespace {

// Register budget: 24 accumulators of the 32 zmm registers, the rest for the operands of one k step.
// Broadcast form: 6 rows x 4 vectors; B's 4 vectors are loaded once and meet 6 broadcasts of op(A), so
// a k step is 10 loads for 24 FMAs. Dot form: 3 rows of A x 8 rows of B, 11 loads for 24 FMAs.
struct Avx512 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kRegisters = 32;
  static constexpr int64_t kLanes = 16;
  static constexpr int kBroadcastRows = 6;
  static constexpr int kBroadcastVectors = 4;
  static constexpr int kDotRows = 3;
  static constexpr int kDotColumns = 8;
  // Broadcast form: B is copied 128 rows at a time (128 x 64 floats = 32 KiB, L1 is 48 KiB on the Xeons);
  // a partial tile is 48 x 64 floats (12 KiB). Dot form: 8 rows of B copied 1024 floats deep (8 x 1040
  // floats = 33 KiB); each slice's dot products are summed across lanes and added to C: deeper K rounds
  // once more per slice. Stack use per thread: up to 44 KiB (broadcast) or 33 KiB (dot).
  static constexpr int64_t kBroadcastDepth = 128;
  static constexpr int64_t kDotDepth = 1024;
  static constexpr int64_t kPrefetchRows = 8;
  static constexpr auto kPrefetchHint = _MM_HINT_T0;  // an enum in GCC, an int in clang
  static constexpr bool kCheapMasks = true;

  [[gnu::always_inline]] static Vec zero() { return _mm512_setzero_ps(); }
  [[gnu::always_inline]] static Vec set1(float x) { return _mm512_set1_ps(x); }
  [[gnu::always_inline]] static Vec load(const float* p) { return _mm512_load_ps(p); }
  [[gnu::always_inline]] static Vec loadu(const float* p) { return _mm512_loadu_ps(p); }
  [[gnu::always_inline]] static Vec load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  [[gnu::always_inline]] static void store(float* p, Vec v) { _mm512_store_ps(p, v); }
  [[gnu::always_inline]] static void storeu(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  [[gnu::always_inline]] static void store_masked(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
  [[gnu::always_inline]] static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  [[gnu::always_inline]] static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  [[gnu::always_inline]] static Mask full_mask() { return Mask(0xFFFF); }
  [[gnu::always_inline]] static Mask lanes_mask(int64_t n) { return n >= kLanes ? Mask(0xFFFF) : Mask((1u << n) - 1u); }
  [[gnu::always_inline]] static bool is_full(Mask m) { return m == 0xFFFF; }

  // Lane l of the result holds the full sum of v[l], l < 8 (upper lanes: partial sums, unused). A fixed
  // tree: 512 -> 256 -> 128 bits across the vectors' quarters, then within each 128-bit quarter.
  [[gnu::always_inline]] static Vec sum_lanes(const Vec (&v)[kDotColumns]) {
    __m512 halves[4], quarters[2];
    BASTION_UNROLL(4)
    for (int p = 0; p < 4; ++p)  // quarters 0-1 of v[2p] and v[2p+1] plus their quarters 2-3
      halves[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    BASTION_UNROLL(2)
    for (int p = 0; p < 2; ++p)  // quarter q of the result: 4 partial sums of v[4p + q]
      quarters[p] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * p], halves[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(halves[2 * p], halves[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 pairs = _mm512_add_ps(_mm512_shuffle_ps(quarters[0], quarters[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_ps(quarters[0], quarters[1], _MM_SHUFFLE(3, 2, 3, 2)));
    // quarter q: lane 0 = v[q] and lane 2 = v[q + 4], each after one more pairwise add
    const __m512 sums = _mm512_add_ps(pairs, _mm512_shuffle_ps(pairs, pairs, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), sums);
  }
};

}  // namespace

bool gemm_small_avx512_available() { return cpu_has_avx512f(); }

void gemm_small_avx512_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (!gemm_small_supports(trans_a, trans_b)) gemm_small_unsupported(trans_a, trans_b);
  gemm_small_blocks::gemm_small_run<Avx512>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#else  // not x86-64: never chosen

bool gemm_small_avx512_available() { return false; }

void gemm_small_avx512_cpu(bool trans_a, bool trans_b, int64_t, int64_t, int64_t, float, const float*, int64_t,
                           const float*, int64_t, float, float*, int64_t) {
  gemm_small_unsupported(trans_a, trans_b);
}

#endif

}  // namespace bastion
