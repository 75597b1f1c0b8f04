// gemm_small: the register-blocked AVX-512 GEMM for small-batch linear layers (contract in gemm_small.h).
// This file is compiled with -mavx512f -mfma on x86-64 whatever BASTION_NATIVE says (CMakeLists.txt), so
// the code exists on every x86-64 build and gemm_small_available() decides at run time. For that reason
// it includes no C++ library header: an inline function instantiated here would carry AVX-512
// instructions, and the linker may keep this copy for the whole program, which then faults on a CPU
// without AVX-512. Only C headers, intrinsics and our own plain declarations.
#include "kernels/cpu/gemm_small.h"
#include "kernels/cpu/unroll.h"

#include <cstdio>
#include <cstdlib>

#if defined(__AVX512F__)
// GCC 12 warns inside its own _mm512_undefined_ps (GCC bug 105593, fixed in 13), which the shuffles use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace bastion {

namespace {

[[noreturn]] void unsupported(bool trans_a, bool trans_b) {
  std::fprintf(stderr, "bastion internal error: gemm_small_cpu called for trans_a %d trans_b %d\n", trans_a, trans_b);
  std::abort();
}

}  // namespace

bool gemm_small_supports(bool trans_a, bool trans_b) { return !(trans_a && trans_b); }

#if defined(__AVX512F__)

namespace {

constexpr int64_t kLanes = 16;

// Register budget: 24 accumulators of the 32 zmm registers, the rest for the operands of one k step.
// Broadcast form: 6 rows x 4 vectors; B's 4 vectors are loaded once and meet 6 broadcasts of op(A), so
// a k step is 10 loads for 24 FMAs. Dot form: 3 rows of A x 8 rows of B, 11 loads for 24 FMAs.
constexpr int kBroadcastRows = 6;
constexpr int kBroadcastVectors = 4;
constexpr int64_t kBroadcastColumns = kBroadcastVectors * kLanes;
constexpr int kDotRows = 3;
constexpr int kDotColumns = 8;

// Why copy at all: the operands' rows are 4 KiB apart for 1024-wide layers, so every row of a B panel
// falls into the same few sets of the 12-way L1 (and 1/16 of L2's sets): a 64-column panel of B keeps
// 12 rows in L1 at most, and the blocks that reuse it re-read it from L2 or L3. Copied contiguous (broadcast
// form) or with rows padded by one cache line (dot form), the panel stays in L1 for every block that uses it.
// A copy costs a load and a store per element, repaid when at least kMinBlocksToCopy blocks reuse it.
constexpr int64_t kMinBlocksToCopy = 4;
// Broadcast form: B is copied kBroadcastDepth rows at a time (128 x 64 floats = 32 KiB, L1 is 48 KiB);
// when K is deeper, a block's sums wait between slices in a tile of kPartialRows x 64 floats (12 KiB).
// Stored and reloaded as floats, a partial sum is exactly the register it came from: results do not
// depend on the slicing.
constexpr int64_t kBroadcastDepth = 128;
constexpr int64_t kPartialRows = 8 * kBroadcastRows;
constexpr int64_t kSingleSliceRows = 40 * kBroadcastRows;  // rows per work item when K fits one slice
// Dot form: 8 rows of B are copied kDotDepth floats deep (8 x 1040 floats = 33 KiB). Each slice's dot
// products are summed across lanes and added to C: deeper K rounds once more per slice.
constexpr int64_t kDotDepth = 1024;
// Rows ahead that the broadcast copy prefetches: its rows lie on different pages, which the hardware
// prefetchers do not cross.
constexpr int64_t kPrefetchRows = 8;

// Below this many multiply-adds a call stays on the calling thread (as gemm_cpu's kMinPanelWork): a
// parallel region costs microseconds and a busy machine can make it milliseconds (kernels/cpu/parallel.h).
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }
__mmask16 lanes_mask(int64_t n) { return n >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
__mmask16 vector_mask(int v, int vectors, __mmask16 last) { return v + 1 < vectors ? __mmask16(0xFFFF) : last; }

// c = alpha * sum + beta * c under mask; beta = 0 never reads c (it may hold NaN).
inline void store_scaled(float* c, __m512 sum, __mmask16 mask, float alpha, float beta) {
  __m512 r = _mm512_mul_ps(_mm512_set1_ps(alpha), sum);
  if (beta != 0.0f) r = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, c), r);
  _mm512_mask_storeu_ps(c, mask, r);
}

// K = 0 or alpha = 0: C = beta * C (beta = 0 assigns zeros).
void scale_only(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

// ------------------------------------------------------------------ broadcast form (trans_b = false)
// op(A)(i, k) = a[i * row + k * col]: NN reads (lda, 1), TN (1, lda). B's row k is contiguous.
struct StridedA {
  const float* a;
  int64_t row, col;
  StridedA shifted(int64_t i, int64_t k) const { return {a + i * row + k * col, row, col}; }
};

// Where a block's sums go: C at the last slice of K, else `partial` (ld kBroadcastColumns), which also
// holds the sums of the earlier slices unless this is the first.
struct BlockOut {
  float* partial;
  bool first, last;
  float* C;
  int64_t ldc;
  __mmask16 mask;  // lanes of the last vector
  float alpha, beta;
};

// Stores one row of B's panel into the copy; hints the row kPrefetchRows ahead into L1 (the rows lie on
// different pages, which the hardware prefetchers do not cross).
template <int NV>
[[gnu::always_inline]] inline void copy_row(float* copy, const __m512 (&bv)[NV], const float* ahead) {
  BASTION_UNROLL(4)
  for (int v = 0; v < NV; ++v) {
    if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + v * kLanes), _MM_HINT_T0);
    _mm512_store_ps(copy + v * kLanes, bv[v]);
  }
}

// Loads under a mask only where they must: a masked load also takes a slot on the FMA ports (measured: an
// L1-resident 3 x 8 dot block ran at about 60 % of the FMA peak with masked loads, 82 % without).
template <bool Masked>
__m512 load_lanes(const float* p, __mmask16 mask) {
  return Masked ? _mm512_maskz_loadu_ps(mask, p) : _mm512_loadu_ps(p);
}

// One block of C, MR rows x NV vectors, over K rows of B: k ascending, one FMA chain per element.
// MaskedLoad: B's last vector is read under out.mask (a copied slice is zero-padded and needs none).
// CopyB: the first block of a slice also stores the rows of B it reads into `copy` (row stride 64), for the
// blocks after it. Copying in a separate pass first cost 8 % of a cnn-fedfsa training step in perf: the
// copy waits on L3 with nothing else to do, where here the FMAs run while the next rows arrive.
template <int MR, int NV, bool MaskedLoad, bool CopyB>
void broadcast_block(StridedA A, const float* B, int64_t ldb, int64_t K, const BlockOut& out, float* copy) {
  __m512 acc[MR][NV];
  BASTION_UNROLL(8)
  for (int i = 0; i < MR; ++i) {
    BASTION_UNROLL(4)
    for (int v = 0; v < NV; ++v)
      acc[i][v] = out.first ? _mm512_setzero_ps() : _mm512_load_ps(out.partial + i * kBroadcastColumns + v * kLanes);
  }
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    const float* a = A.a + k * A.col;
    __m512 bv[NV];
    BASTION_UNROLL(4)
    for (int v = 0; v < NV; ++v)
      bv[v] = v + 1 < NV ? _mm512_loadu_ps(b + v * kLanes) : load_lanes<MaskedLoad>(b + v * kLanes, out.mask);
    if constexpr (CopyB)
      copy_row<NV>(copy + k * kBroadcastColumns, bv, k + kPrefetchRows < K ? b + kPrefetchRows * ldb : nullptr);
    BASTION_UNROLL(8)
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * A.row]);
      BASTION_UNROLL(4)
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  BASTION_UNROLL(8)
  for (int i = 0; i < MR; ++i) {
    BASTION_UNROLL(4)
    for (int v = 0; v < NV; ++v) {
      if (out.last)
        store_scaled(out.C + i * out.ldc + v * kLanes, acc[i][v], vector_mask(v, NV, out.mask), out.alpha, out.beta);
      else
        _mm512_store_ps(out.partial + i * kBroadcastColumns + v * kLanes, acc[i][v]);
    }
  }
}

using BroadcastBlock = void (*)(StridedA, const float*, int64_t, int64_t, const BlockOut&, float*);

template <int MR, bool MaskedLoad, bool CopyB = false>
constexpr BroadcastBlock broadcast_for(int nv) {
  return nv == 1   ? broadcast_block<MR, 1, MaskedLoad, CopyB>
         : nv == 2 ? broadcast_block<MR, 2, MaskedLoad, CopyB>
         : nv == 3 ? broadcast_block<MR, 3, MaskedLoad, CopyB>
                   : broadcast_block<MR, 4, MaskedLoad, CopyB>;
}

template <bool MaskedLoad>
BroadcastBlock broadcast_kernel(int64_t rows, int64_t vectors) {
  const int nv = static_cast<int>(vectors);
  switch (rows) {
    case 1:
      return broadcast_for<1, MaskedLoad>(nv);
    case 2:
      return broadcast_for<2, MaskedLoad>(nv);
    case 3:
      return broadcast_for<3, MaskedLoad>(nv);
    case 4:
      return broadcast_for<4, MaskedLoad>(nv);
    case 5:
      return broadcast_for<5, MaskedLoad>(nv);
    default:
      return broadcast_for<6, MaskedLoad>(nv);
  }
}

// The first, copying block of a slice: always 6 rows (a copy needs kMinBlocksToCopy blocks); its loads are
// masked when the panel is narrower than its vectors, so the copy's extra lanes hold zeros.
BroadcastBlock broadcast_copying_kernel(int64_t vectors, bool masked) {
  const int nv = static_cast<int>(vectors);
  return masked ? broadcast_for<kBroadcastRows, true, true>(nv) : broadcast_for<kBroadcastRows, false, true>(nv);
}

// One work item: rows [0, M) of A against one panel of B (`columns` <= 64 wide), K in slices.
void broadcast_item(StridedA A, int64_t M, int64_t columns, int64_t K, const float* B, int64_t ldb, float* C,
                    int64_t ldc, float alpha, float beta) {
  alignas(64) float slice[kBroadcastDepth * kBroadcastColumns];
  alignas(64) float partial[kPartialRows * kBroadcastColumns];
  const int64_t row_blocks = ceil_div(M, kBroadcastRows), vectors = ceil_div(columns, kLanes);
  const __mmask16 last = lanes_mask(columns - (vectors - 1) * kLanes);
  const bool copy = row_blocks >= kMinBlocksToCopy;
  // Kernels for full blocks and for the last, shorter one (M % 6 rows; unused when that is 0).
  const BroadcastBlock full = broadcast_kernel<false>(kBroadcastRows, vectors);
  const BroadcastBlock edge = copy || last == 0xFFFF ? broadcast_kernel<false>(M % kBroadcastRows, vectors)
                                                     : broadcast_kernel<true>(M % kBroadcastRows, vectors);
  const BroadcastBlock full_masked = copy || last == 0xFFFF ? full : broadcast_kernel<true>(kBroadcastRows, vectors);
  const BroadcastBlock copying = broadcast_copying_kernel(vectors, last != 0xFFFF);
  for (int64_t k0 = 0; k0 < K; k0 += kBroadcastDepth) {
    const int64_t depth = smaller(kBroadcastDepth, K - k0);
    for (int64_t r = 0; r < row_blocks; ++r) {
      const int64_t i0 = r * kBroadcastRows;
      const bool first = k0 == 0, final = k0 + depth >= K;  // both: one slice, no partial tile (M may exceed it)
      const BlockOut out{first && final ? nullptr : partial + i0 * kBroadcastColumns,
                         first,
                         final,
                         C + i0 * ldc,
                         ldc,
                         last,
                         alpha,
                         beta};
      const bool from_copy = copy && r > 0;  // block 0 reads B itself and fills the copy when there is one
      const BroadcastBlock kernel = copy && r == 0 ? copying : M - i0 >= kBroadcastRows ? full_masked : edge;
      kernel(A.shifted(i0, k0), from_copy ? slice : B + k0 * ldb, from_copy ? kBroadcastColumns : ldb, depth, out,
             slice);
    }
  }
}

// Work items: chunks of rows x 64-column panels, panel-major. A chunk is all the rows a partial tile
// holds when K needs several slices, else up to kSingleSliceRows (more blocks per copy of the panel).
void gemm_broadcast(StridedA A, int64_t M, int64_t N, int64_t K, float alpha, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc) {
  const int64_t chunk = K <= kBroadcastDepth ? kSingleSliceRows : kPartialRows;
  const int64_t chunks = ceil_div(M, chunk), items = chunks * ceil_div(N, kBroadcastColumns);
#pragma omp parallel for schedule(static) if (M * N * K >= kMinParallelWork)
  for (int64_t t = 0; t < items; ++t) {
    const int64_t i0 = (t % chunks) * chunk, j0 = (t / chunks) * kBroadcastColumns;
    broadcast_item(A.shifted(i0, 0), smaller(chunk, M - i0), smaller(kBroadcastColumns, N - j0), K, B + j0, ldb,
                   C + i0 * ldc + j0, ldc, alpha, beta);
  }
}

// ------------------------------------------------------------------ dot form (NT)
// Lane l of the result holds the full sum of v[l], l < 8 (upper lanes: partial sums, unused). A fixed
// tree: 512 -> 256 -> 128 bits across the vectors' quarters, then within each 128-bit quarter.
[[gnu::always_inline]] inline __m512 sum_lanes8(const __m512 v[8]) {
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

// One step of 16 lanes of K: acc[i][j] += a_i * b_j lane by lane. CopyB: also stores the lanes of B into
// `copy` (row stride copy_ld), as broadcast_block does.
template <int MR, int NR, bool Masked, bool CopyB>
[[gnu::always_inline]] inline void dot_step(__m512 (&acc)[MR][8], const float* A, int64_t lda, const float* B,
                                            int64_t ldb, __mmask16 mask, float* copy, int64_t copy_ld) {
  __m512 a[MR];
  BASTION_UNROLL(4)
  for (int i = 0; i < MR; ++i) a[i] = load_lanes<Masked>(A + i * lda, mask);
  BASTION_UNROLL(8)
  for (int j = 0; j < NR; ++j) {
    __m512 b = load_lanes<Masked>(B + j * ldb, mask);
    // Held in a register: GCC 12 otherwise folds this load into each of the MR multiply-adds as a memory
    // operand, so a k step of the 3 x 8 block issued 27 loads instead of 11 (objdump of dot_block<3, 8>).
    asm("" : "+v"(b));
    if constexpr (CopyB) _mm512_store_ps(copy + j * copy_ld, b);
    BASTION_UNROLL(4)
    for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(a[i], b, acc[i][j]);
  }
}

// C[i, j] for i < MR, j < NR: dot products of rows of A and rows of B, both contiguous in K, 16 lanes
// of K at a time (the last step masked), lanes summed once at the end by sum_lanes8.
template <int MR, int NR, bool CopyB>
void dot_block(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C, int64_t ldc, float alpha,
               float beta, float* copy, int64_t copy_ld) {
  __m512 acc[MR][8];
  BASTION_UNROLL(4)
  for (int i = 0; i < MR; ++i) {
    BASTION_UNROLL(8)
    for (int j = 0; j < 8; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes)
    dot_step<MR, NR, false, CopyB>(acc, A + k, lda, B + k, ldb, 0, copy + k, copy_ld);
  if (k < K) dot_step<MR, NR, true, CopyB>(acc, A + k, lda, B + k, ldb, lanes_mask(K - k), copy + k, copy_ld);
  BASTION_UNROLL(4)
  for (int i = 0; i < MR; ++i) store_scaled(C + i * ldc, sum_lanes8(acc[i]), lanes_mask(NR), alpha, beta);
}

using DotBlock = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, float, float, float*,
                          int64_t);

template <int MR, bool CopyB = false>
constexpr DotBlock dot_for(int nr) {
  switch (nr) {
    case 1:
      return dot_block<MR, 1, CopyB>;
    case 2:
      return dot_block<MR, 2, CopyB>;
    case 3:
      return dot_block<MR, 3, CopyB>;
    case 4:
      return dot_block<MR, 4, CopyB>;
    case 5:
      return dot_block<MR, 5, CopyB>;
    case 6:
      return dot_block<MR, 6, CopyB>;
    case 7:
      return dot_block<MR, 7, CopyB>;
    default:
      return dot_block<MR, 8, CopyB>;
  }
}

DotBlock dot_kernel(int64_t rows, int64_t columns) {
  const int nr = static_cast<int>(columns);
  return rows == 1 ? dot_for<1>(nr) : rows == 2 ? dot_for<2>(nr) : dot_for<3>(nr);
}

// One work item: all M rows of A against `columns` <= 8 rows of B, K in slices of kDotDepth; the
// first slice applies beta, later ones add to C.
void dot_item(int64_t M, int64_t columns, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
              int64_t ldb, float beta, float* C, int64_t ldc) {
  // The copy's rows are padded to a multiple of 16 plus one cache line, so consecutive rows fall into
  // different L1 sets; block 0 of each slice reads B itself and fills the copy (a full 3-row block, since
  // a copy needs kMinBlocksToCopy blocks).
  alignas(64) float copy[kDotColumns * (kDotDepth + kLanes)];
  const int64_t row_blocks = ceil_div(M, kDotRows);
  const bool copied = row_blocks >= kMinBlocksToCopy;
  for (int64_t k0 = 0; k0 < K; k0 += kDotDepth) {
    const int64_t depth = smaller(kDotDepth, K - k0), copy_ld = ceil_div(depth, kLanes) * kLanes + kLanes;
    for (int64_t r = 0; r < row_blocks; ++r) {
      const int64_t i0 = r * kDotRows;
      const bool from_copy = copied && r > 0;
      const DotBlock kernel = copied && r == 0 ? dot_for<kDotRows, true>(static_cast<int>(columns))
                                               : dot_kernel(smaller(kDotRows, M - i0), columns);
      kernel(A + i0 * lda + k0, lda, from_copy ? copy : B + k0, from_copy ? copy_ld : ldb, depth, C + i0 * ldc, ldc,
             alpha, k0 == 0 ? beta : 1.0f, copy, copy_ld);
    }
  }
}

// Work items: 8 columns of C (8 rows of B) each, over all rows.
void gemm_dot(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
              float beta, float* C, int64_t ldc) {
  const int64_t items = ceil_div(N, kDotColumns);
#pragma omp parallel for schedule(static) if (M * N * K >= kMinParallelWork)
  for (int64_t t = 0; t < items; ++t) {
    const int64_t j0 = t * kDotColumns;
    dot_item(M, smaller(kDotColumns, N - j0), K, alpha, A, lda, B + j0 * ldb, ldb, beta, C + j0, ldc);
  }
}

}  // namespace

bool gemm_small_available() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return available;
}

void gemm_small_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (!gemm_small_supports(trans_a, trans_b)) unsupported(trans_a, trans_b);
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f)  // as BLAS: A and B are not read
    scale_only(M, N, beta, C, ldc);
  else if (trans_b)
    gemm_dot(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    gemm_broadcast(trans_a ? StridedA{A, 1, lda} : StridedA{A, lda, 1}, M, N, K, alpha, B, ldb, beta, C, ldc);
}

#else  // not x86-64: never chosen

bool gemm_small_available() { return false; }

void gemm_small_cpu(bool trans_a, bool trans_b, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                    int64_t, float, float*, int64_t) {
  unsupported(trans_a, trans_b);
}

#endif

}  // namespace bastion
