// gemm_small_avx2: the small-batch GEMM (contract in gemm_small.h) on AVX2 + FMA, for x86-64 CPUs without
// AVX-512 (AMD Zen 2 and 3 among them), where every GEMM went to OpenBLAS and its packing. The blocking of
// gemm_small_blocks.h over 8-lane vectors. Compiled with -mavx2 -mfma on x86-64 whatever BASTION_NATIVE
// says (CMakeLists.txt) and chosen at run time by gemm_small_avx2_available(); for that reason it includes
// no C++ library header (gemm_small_blocks.h says why).
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_small.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/cpu/gemm_small_blocks.h"
#endif

namespace bastion {

#if defined(__AVX2__) && defined(__FMA__)

namespace {

// Register budget: 16 ymm registers. Broadcast form: 6 rows x 2 vectors, 12 accumulators, B's 2 vectors
// and one broadcast of op(A): a k step is 8 loads for 12 FMAs. Dot form: 3 rows of A x 4 rows of B, 12
// accumulators, A's 3 vectors and one of B held in a register: 7 loads for 12 FMAs.
struct Avx2 {
  using Vec = __m256;
  using Mask = __m256i;  // all ones in the lanes a masked load or store touches
  static constexpr int kRegisters = 16;
  static constexpr int64_t kLanes = 8;
  static constexpr int kBroadcastRows = 6;
  static constexpr int kBroadcastVectors = 2;
  static constexpr int kDotRows = 3;
  static constexpr int kDotColumns = 4;
  // Broadcast form: B copied 128 rows x 16 floats at a time (8 KiB of a 32 KiB L1), a partial tile 48 x 16
  // floats (3 KiB). Dot form: 4 rows of B copied 1024 floats deep (4 x 1040 floats, 16.3 KiB).
  static constexpr int64_t kBroadcastDepth = 128;
  static constexpr int64_t kDotDepth = 1024;
  // The copying block's rows, 4 KiB apart, share one set of the 8-way L1: prefetched into L1 they evict each
  // other, into L2 (16 sets for them) they stay. perf share of that block, fc2's input gradient on the Zen 3:
  // 41.4 % with 8 rows ahead into L1, 35.8 and 35.2 % with 16 and 32 into L2 (bench/RESULTS.md, "The
  // small-batch GEMM on AVX2").
  static constexpr int64_t kPrefetchRows = 32;
  static constexpr auto kPrefetchHint = _MM_HINT_T1;  // an enum in GCC, an int in clang
  static constexpr bool kCheapMasks = false;

  [[gnu::always_inline]] static Vec zero() { return _mm256_setzero_ps(); }
  [[gnu::always_inline]] static Vec set1(float x) { return _mm256_set1_ps(x); }
  [[gnu::always_inline]] static Vec load(const float* p) { return _mm256_load_ps(p); }
  [[gnu::always_inline]] static Vec loadu(const float* p) { return _mm256_loadu_ps(p); }
  [[gnu::always_inline]] static Vec load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  [[gnu::always_inline]] static void store(float* p, Vec v) { _mm256_store_ps(p, v); }
  [[gnu::always_inline]] static void storeu(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  [[gnu::always_inline]] static void store_masked(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
  [[gnu::always_inline]] static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  [[gnu::always_inline]] static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  [[gnu::always_inline]] static Mask full_mask() { return _mm256_set1_epi32(-1); }
  [[gnu::always_inline]] static Mask lanes_mask(int64_t n) {
    const int lanes = n >= kLanes ? static_cast<int>(kLanes) : static_cast<int>(n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  [[gnu::always_inline]] static bool is_full(Mask m) { return _mm256_movemask_ps(_mm256_castsi256_ps(m)) == 0xFF; }

  // Lane j of the result holds the sum of v[j]'s 8 lanes, j < 4 (upper lanes zero). A fixed tree: pairs of
  // neighbouring lanes, then pairs of pairs (the horizontal adds), then the two 128-bit halves.
  [[gnu::always_inline]] static Vec sum_lanes(const Vec (&v)[kDotColumns]) {
    static_assert(kDotColumns == 4, "sum_lanes reduces four vectors");
    const __m256 quads = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1));
    return _mm256_zextps128_ps256(sums);
  }
};

}  // namespace

bool gemm_small_avx2_available() { return cpu_has_avx2_fma(); }

void gemm_small_avx2_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                         int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (!gemm_small_supports(trans_a, trans_b)) gemm_small_unsupported(trans_a, trans_b);
  gemm_small_blocks::gemm_small_run<Avx2>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#else  // not x86-64: never chosen

bool gemm_small_avx2_available() { return false; }

void gemm_small_avx2_cpu(bool trans_a, bool trans_b, int64_t, int64_t, int64_t, float, const float*, int64_t,
                         const float*, int64_t, float, float*, int64_t) {
  gemm_small_unsupported(trans_a, trans_b);
}

#endif

}  // namespace bastion
