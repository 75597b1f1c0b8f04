// gemm_small_blocks.h: the small-batch GEMM's blocking, written once over an instruction set (contract in
// gemm_small.h). Included only by the files that instantiate it for one instruction set, each compiled for
// that set: gemm_small_avx512.cpp (-mavx512f) and gemm_small_avx2.cpp (-mavx2 -mfma).
//
// An `Isa` supplies the vector type and its operations (all always inlined) and the register blocking:
//   Vec, Mask                     a vector of kLanes floats; which lanes a masked load or store touches
//   kLanes, kRegisters            floats per vector; vector registers
//   kBroadcastRows, kBroadcastVectors   the broadcast form's block: rows of C x vectors of columns
//   kDotRows, kDotColumns         the dot form's block: rows of A x rows of B (kDotColumns <= kLanes)
//   kBroadcastDepth, kDotDepth    rows of B (broadcast) or floats of K (dot) that one copy of B holds
//   kPrefetchRows                 rows ahead that the broadcast form's copying block prefetches: its rows lie
//                                 on different pages, which the hardware prefetchers do not cross
//   kPrefetchHint                 into which cache: L1 (_MM_HINT_T0) or L2 (_MM_HINT_T1)
//   zero, set1, load (aligned), loadu, load_masked (zero in the other lanes), store (aligned), storeu,
//   store_masked, fmadd, mul, full_mask, lanes_mask(n) (the first n lanes), is_full
//   kCheapMasks                   whether a masked load or store costs what a plain one does
//   sum_lanes(v): lane j holds the sum of v[j]'s lanes, for j < kDotColumns, in a fixed order
//
// Why everything here sits in an anonymous namespace and the file includes no C++ library header: each
// including file is compiled for its own instruction set, so a function with external linkage defined
// here (an inline helper, or a library template instantiated here) could be emitted by both files, and
// the linker may keep the copy with AVX-512 instructions for the whole program, which then faults on a
// CPU without them. Internal linkage gives each file its own copies.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/unroll.h"

namespace bastion {

namespace {

namespace gemm_small_blocks {

// Below this many multiply-adds a call stays on the calling thread (as gemm_cpu's kMinPanelWork): a
// parallel region costs microseconds and a busy machine can make it milliseconds (kernels/cpu/parallel.h).
constexpr int64_t kMinParallelWork = int64_t{1} << 18;
// Why copy at all: the operands' rows are 4 KiB apart for 1024-wide layers, so every row of a B panel
// falls into the same few sets of L1 (and 1/16 of L2's sets): the rows of a panel evict each other, and
// the blocks that reuse it re-read it from L2 or L3. Copied contiguous (broadcast form) or with rows padded
// by one cache line (dot form), the panel stays in L1 for every block that uses it. A copy costs a load
// and a store per element, repaid when at least kMinBlocksToCopy blocks reuse it.
constexpr int64_t kMinBlocksToCopy = 4;
constexpr int64_t kCacheLineFloats = 16;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

template <class Isa>
typename Isa::Mask vector_mask(int v, int vectors, typename Isa::Mask last) {
  return v + 1 < vectors ? Isa::full_mask() : last;
}

// c = alpha * sum + beta * c under mask; beta = 0 never reads c (it may hold NaN). Where masked loads and
// stores are slow (AVX2's vmaskmovps), a full mask takes the plain ones.
template <class Isa>
inline void store_scaled(float* c, typename Isa::Vec sum, typename Isa::Mask mask, float alpha, float beta) {
  typename Isa::Vec r = Isa::mul(Isa::set1(alpha), sum);
  if constexpr (!Isa::kCheapMasks) {
    if (Isa::is_full(mask)) {
      if (beta != 0.0f) r = Isa::fmadd(Isa::set1(beta), Isa::loadu(c), r);
      Isa::storeu(c, r);
      return;
    }
  }
  if (beta != 0.0f) r = Isa::fmadd(Isa::set1(beta), Isa::load_masked(c, mask), r);
  Isa::store_masked(c, mask, r);
}

// K = 0 or alpha = 0: C = beta * C (beta = 0 assigns zeros).
inline void scale_only(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

// Loads under a mask only where they must: a masked load also takes a slot on the FMA ports (measured on
// AVX-512: an L1-resident 3 x 8 dot block ran at about 60 % of the FMA peak with masked loads, 82 % without).
template <class Isa, bool Masked>
[[gnu::always_inline]] inline typename Isa::Vec load_lanes(const float* p, typename Isa::Mask mask) {
  return Masked ? Isa::load_masked(p, mask) : Isa::loadu(p);
}

// ------------------------------------------------------------------ broadcast form (trans_b = false)
// op(A)(i, k) = a[i * row + k * col]: NN reads (lda, 1), TN (1, lda). B's row k is contiguous.
struct StridedA {
  const float* a;
  int64_t row, col;
  StridedA shifted(int64_t i, int64_t k) const { return {a + i * row + k * col, row, col}; }
};

template <class Isa>
constexpr int64_t kBroadcastColumns = Isa::kBroadcastVectors* Isa::kLanes;
// When K is deeper than one copy of B, a block's sums wait between slices in a tile of kPartialRows rows.
// Stored and reloaded as floats, a partial sum is exactly the register it came from: results do not
// depend on the slicing.
template <class Isa>
constexpr int64_t kPartialRows = 8 * Isa::kBroadcastRows;
template <class Isa>
constexpr int64_t kSingleSliceRows = 40 * Isa::kBroadcastRows;  // rows per work item when K fits one slice

// Where a block's sums go: C at the last slice of K, else `partial` (ld kBroadcastColumns), which also
// holds the sums of the earlier slices unless this is the first.
template <class Isa>
struct BlockOut {
  float* partial;
  bool first, last;
  float* C;
  int64_t ldc;
  typename Isa::Mask mask;  // lanes of the last vector
  float alpha, beta;
};

// Stores one row of B's panel into the copy; hints the row Isa::kPrefetchRows ahead into L1 (the rows lie on
// different pages, which the hardware prefetchers do not cross).
template <class Isa, int NV>
[[gnu::always_inline]] inline void copy_row(float* copy, const typename Isa::Vec (&bv)[NV], const float* ahead) {
  BASTION_UNROLL(4)
  for (int v = 0; v < NV; ++v) {
    if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + v * Isa::kLanes), Isa::kPrefetchHint);
    Isa::store(copy + v * Isa::kLanes, bv[v]);
  }
}

// One block of C, MR rows x NV vectors, over K rows of B: k ascending, one FMA chain per element.
// MaskedLoad: B's last vector is read under out.mask (a copied slice is zero-padded and needs none).
// CopyB: the first block of a slice also stores the rows of B it reads into `copy` (row stride
// kBroadcastColumns), for the blocks after it. Copying in a separate pass first cost 8 % of a cnn-fedfsa
// training step in perf (AVX-512): the copy waits on L3 with nothing else to do, where here the FMAs run
// while the next rows arrive.
template <class Isa, int MR, int NV, bool MaskedLoad, bool CopyB>
void broadcast_block(StridedA A, const float* B, int64_t ldb, int64_t K, const BlockOut<Isa>& out, float* copy) {
  using Vec = typename Isa::Vec;
  constexpr int64_t kLanes = Isa::kLanes, kColumns = kBroadcastColumns<Isa>;
  Vec acc[MR][NV];
  BASTION_UNROLL(8)
  for (int i = 0; i < MR; ++i) {
    BASTION_UNROLL(4)
    for (int v = 0; v < NV; ++v)
      acc[i][v] = out.first ? Isa::zero() : Isa::load(out.partial + i * kColumns + v * kLanes);
  }
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    const float* a = A.a + k * A.col;
    Vec bv[NV];
    BASTION_UNROLL(4)
    for (int v = 0; v < NV; ++v)
      bv[v] = v + 1 < NV ? Isa::loadu(b + v * kLanes) : load_lanes<Isa, MaskedLoad>(b + v * kLanes, out.mask);
    if constexpr (CopyB)
      copy_row<Isa, NV>(copy + k * kColumns, bv, k + Isa::kPrefetchRows < K ? b + Isa::kPrefetchRows * ldb : nullptr);
    BASTION_UNROLL(8)
    for (int i = 0; i < MR; ++i) {
      const Vec ai = Isa::set1(a[i * A.row]);
      BASTION_UNROLL(4)
      for (int v = 0; v < NV; ++v) acc[i][v] = Isa::fmadd(ai, bv[v], acc[i][v]);
    }
  }
  BASTION_UNROLL(8)
  for (int i = 0; i < MR; ++i) {
    BASTION_UNROLL(4)
    for (int v = 0; v < NV; ++v) {
      if (out.last)
        store_scaled<Isa>(out.C + i * out.ldc + v * kLanes, acc[i][v], vector_mask<Isa>(v, NV, out.mask), out.alpha,
                          out.beta);
      else
        Isa::store(out.partial + i * kColumns + v * kLanes, acc[i][v]);
    }
  }
}

template <class Isa>
using BroadcastBlock = void (*)(StridedA, const float*, int64_t, int64_t, const BlockOut<Isa>&, float*);

// The block of MR rows and min(nv, NV) vectors.
template <class Isa, int MR, bool MaskedLoad, bool CopyB, int NV = Isa::kBroadcastVectors>
constexpr BroadcastBlock<Isa> broadcast_for(int nv) {
  if constexpr (NV == 1)
    return broadcast_block<Isa, MR, 1, MaskedLoad, CopyB>;
  else
    return nv >= NV ? broadcast_block<Isa, MR, NV, MaskedLoad, CopyB>
                    : broadcast_for<Isa, MR, MaskedLoad, CopyB, NV - 1>(nv);
}

// The block of min(rows, MR) rows (rows >= 1).
template <class Isa, bool MaskedLoad, int MR = Isa::kBroadcastRows>
BroadcastBlock<Isa> broadcast_kernel(int64_t rows, int64_t vectors) {
  if constexpr (MR == 1)
    return broadcast_for<Isa, 1, MaskedLoad, false>(static_cast<int>(vectors));
  else
    return rows >= MR ? broadcast_for<Isa, MR, MaskedLoad, false>(static_cast<int>(vectors))
                      : broadcast_kernel<Isa, MaskedLoad, MR - 1>(rows, vectors);
}

// The first, copying block of a slice: always full height (a copy needs kMinBlocksToCopy blocks); its
// loads are masked when the panel is narrower than its vectors, so the copy's extra lanes hold zeros.
template <class Isa>
BroadcastBlock<Isa> broadcast_copying_kernel(int64_t vectors, bool masked) {
  const int nv = static_cast<int>(vectors);
  return masked ? broadcast_for<Isa, Isa::kBroadcastRows, true, true>(nv)
                : broadcast_for<Isa, Isa::kBroadcastRows, false, true>(nv);
}

// One work item: rows [0, M) of A against one panel of B (`columns` <= kBroadcastColumns wide), K in slices.
template <class Isa>
void broadcast_item(StridedA A, int64_t M, int64_t columns, int64_t K, const float* B, int64_t ldb, float* C,
                    int64_t ldc, float alpha, float beta) {
  constexpr int64_t kRows = Isa::kBroadcastRows, kColumns = kBroadcastColumns<Isa>;
  alignas(64) float slice[Isa::kBroadcastDepth * kColumns];
  alignas(64) float partial[kPartialRows<Isa> * kColumns];
  const int64_t row_blocks = ceil_div(M, kRows), vectors = ceil_div(columns, Isa::kLanes);
  const typename Isa::Mask last = Isa::lanes_mask(columns - (vectors - 1) * Isa::kLanes);
  const bool copy = row_blocks >= kMinBlocksToCopy, last_full = Isa::is_full(last);
  // Kernels for full blocks and for the last, shorter one (M % kRows rows; unused when that is 0).
  const BroadcastBlock<Isa> full = broadcast_kernel<Isa, false>(kRows, vectors);
  const BroadcastBlock<Isa> edge = copy || last_full ? broadcast_kernel<Isa, false>(M % kRows, vectors)
                                                     : broadcast_kernel<Isa, true>(M % kRows, vectors);
  const BroadcastBlock<Isa> full_masked = copy || last_full ? full : broadcast_kernel<Isa, true>(kRows, vectors);
  const BroadcastBlock<Isa> copying = broadcast_copying_kernel<Isa>(vectors, !last_full);
  for (int64_t k0 = 0; k0 < K; k0 += Isa::kBroadcastDepth) {
    const int64_t depth = smaller(Isa::kBroadcastDepth, K - k0);
    for (int64_t r = 0; r < row_blocks; ++r) {
      const int64_t i0 = r * kRows;
      const bool first = k0 == 0, final = k0 + depth >= K;  // both: one slice, no partial tile (M may exceed it)
      const BlockOut<Isa> out{
          first && final ? nullptr : partial + i0 * kColumns, first, final, C + i0 * ldc, ldc, last, alpha, beta};
      const bool from_copy = copy && r > 0;  // block 0 reads B itself and fills the copy when there is one
      const BroadcastBlock<Isa> kernel = copy && r == 0 ? copying : M - i0 >= kRows ? full_masked : edge;
      kernel(A.shifted(i0, k0), from_copy ? slice : B + k0 * ldb, from_copy ? kColumns : ldb, depth, out, slice);
    }
  }
}

// Work items: chunks of rows x panels of kBroadcastColumns, panel-major. A chunk is all the rows a partial
// tile holds when K needs several slices, else up to kSingleSliceRows (more blocks per copy of the panel).
template <class Isa>
void gemm_broadcast(StridedA A, int64_t M, int64_t N, int64_t K, float alpha, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc) {
  constexpr int64_t kColumns = kBroadcastColumns<Isa>;
  const int64_t chunk = K <= Isa::kBroadcastDepth ? kSingleSliceRows<Isa> : kPartialRows<Isa>;
  const int64_t chunks = ceil_div(M, chunk), items = chunks * ceil_div(N, kColumns);
#pragma omp parallel for schedule(static) if (M * N * K >= kMinParallelWork)
  for (int64_t t = 0; t < items; ++t) {
    const int64_t i0 = (t % chunks) * chunk, j0 = (t / chunks) * kColumns;
    broadcast_item<Isa>(A.shifted(i0, 0), smaller(chunk, M - i0), smaller(kColumns, N - j0), K, B + j0, ldb,
                        C + i0 * ldc + j0, ldc, alpha, beta);
  }
}

// ------------------------------------------------------------------ dot form (NT)
// One step of kLanes lanes of K: acc[i][j] += a_i * b_j lane by lane. CopyB: also stores the lanes of B
// into `copy` (row stride copy_ld), as broadcast_block does.
template <class Isa, int MR, int NR, bool Masked, bool CopyB>
[[gnu::always_inline]] inline void dot_step(typename Isa::Vec (&acc)[MR][Isa::kDotColumns], const float* A, int64_t lda,
                                            const float* B, int64_t ldb, typename Isa::Mask mask, float* copy,
                                            int64_t copy_ld) {
  typename Isa::Vec a[MR];
  BASTION_UNROLL(4)
  for (int i = 0; i < MR; ++i) {
    a[i] = load_lanes<Isa, Masked>(A + i * lda, mask);
    // Held in a register too where there are 16: GCC 12 otherwise folds these loads into the multiply-adds,
    // 12 loads of A instead of 3 a k step of AVX2's 3 x 4 block (objdump of dot_block). With 32 it keeps
    // them in registers by itself.
    if constexpr (Isa::kRegisters < 32) asm("" : "+v"(a[i]));
  }
  BASTION_UNROLL(8)
  for (int j = 0; j < NR; ++j) {
    typename Isa::Vec b = load_lanes<Isa, Masked>(B + j * ldb, mask);
    // Held in a register: GCC 12 otherwise folds this load into each of the MR multiply-adds as a memory
    // operand, so a k step of the AVX-512 3 x 8 block issued 27 loads instead of 11 (objdump of dot_block).
    asm("" : "+v"(b));
    if constexpr (CopyB) Isa::store(copy + j * copy_ld, b);
    BASTION_UNROLL(4)
    for (int i = 0; i < MR; ++i) acc[i][j] = Isa::fmadd(a[i], b, acc[i][j]);
  }
}

// C[i, j] for i < MR, j < NR: dot products of rows of A and rows of B, both contiguous in K, kLanes lanes
// of K at a time (the last step masked), lanes summed once at the end by Isa::sum_lanes.
template <class Isa, int MR, int NR, bool CopyB>
void dot_block(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C, int64_t ldc, float alpha,
               float beta, float* copy, int64_t copy_ld) {
  constexpr int64_t kLanes = Isa::kLanes;
  typename Isa::Vec acc[MR][Isa::kDotColumns];
  BASTION_UNROLL(4)
  for (int i = 0; i < MR; ++i) {
    BASTION_UNROLL(8)
    for (int j = 0; j < Isa::kDotColumns; ++j) acc[i][j] = Isa::zero();
  }
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes)
    dot_step<Isa, MR, NR, false, CopyB>(acc, A + k, lda, B + k, ldb, Isa::full_mask(), copy + k, copy_ld);
  if (k < K) dot_step<Isa, MR, NR, true, CopyB>(acc, A + k, lda, B + k, ldb, Isa::lanes_mask(K - k), copy + k, copy_ld);
  BASTION_UNROLL(4)
  for (int i = 0; i < MR; ++i) store_scaled<Isa>(C + i * ldc, Isa::sum_lanes(acc[i]), Isa::lanes_mask(NR), alpha, beta);
}

template <class Isa>
using DotBlock = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, float, float, float*,
                          int64_t);

// The block of MR rows and min(nr, NR) columns (nr >= 1).
template <class Isa, int MR, bool CopyB = false, int NR = Isa::kDotColumns>
constexpr DotBlock<Isa> dot_for(int nr) {
  if constexpr (NR == 1)
    return dot_block<Isa, MR, 1, CopyB>;
  else
    return nr >= NR ? dot_block<Isa, MR, NR, CopyB> : dot_for<Isa, MR, CopyB, NR - 1>(nr);
}

// The block of min(rows, MR) rows (rows >= 1).
template <class Isa, int MR = Isa::kDotRows>
DotBlock<Isa> dot_kernel(int64_t rows, int64_t columns) {
  if constexpr (MR == 1)
    return dot_for<Isa, 1>(static_cast<int>(columns));
  else
    return rows >= MR ? dot_for<Isa, MR>(static_cast<int>(columns)) : dot_kernel<Isa, MR - 1>(rows, columns);
}

// One work item: all M rows of A against `columns` <= kDotColumns rows of B, K in slices of kDotDepth; the
// first slice applies beta, later ones add to C.
template <class Isa>
void dot_item(int64_t M, int64_t columns, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
              int64_t ldb, float beta, float* C, int64_t ldc) {
  // The copy's rows are padded to a multiple of kLanes plus one cache line, so consecutive rows fall into
  // different L1 sets; block 0 of each slice reads B itself and fills the copy (a full-height block, since
  // a copy needs kMinBlocksToCopy blocks).
  alignas(64) float copy[Isa::kDotColumns * (Isa::kDotDepth + kCacheLineFloats)];
  const int64_t row_blocks = ceil_div(M, Isa::kDotRows);
  const bool copied = row_blocks >= kMinBlocksToCopy;
  for (int64_t k0 = 0; k0 < K; k0 += Isa::kDotDepth) {
    const int64_t depth = smaller(Isa::kDotDepth, K - k0);
    const int64_t copy_ld = ceil_div(depth, Isa::kLanes) * Isa::kLanes + kCacheLineFloats;
    for (int64_t r = 0; r < row_blocks; ++r) {
      const int64_t i0 = r * Isa::kDotRows;
      const bool from_copy = copied && r > 0;
      const DotBlock<Isa> kernel = copied && r == 0 ? dot_for<Isa, Isa::kDotRows, true>(static_cast<int>(columns))
                                                    : dot_kernel<Isa>(smaller(Isa::kDotRows, M - i0), columns);
      kernel(A + i0 * lda + k0, lda, from_copy ? copy : B + k0, from_copy ? copy_ld : ldb, depth, C + i0 * ldc, ldc,
             alpha, k0 == 0 ? beta : 1.0f, copy, copy_ld);
    }
  }
}

// Work items: kDotColumns columns of C (rows of B) each, over all rows.
template <class Isa>
void gemm_dot(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
              float beta, float* C, int64_t ldc) {
  const int64_t items = ceil_div(N, Isa::kDotColumns);
#pragma omp parallel for schedule(static) if (M * N * K >= kMinParallelWork)
  for (int64_t t = 0; t < items; ++t) {
    const int64_t j0 = t * Isa::kDotColumns;
    dot_item<Isa>(M, smaller(Isa::kDotColumns, N - j0), K, alpha, A, lda, B + j0 * ldb, ldb, beta, C + j0, ldc);
  }
}

// The whole contract of gemm_small_cpu but TT (the caller refuses it).
template <class Isa>
void gemm_small_run(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f)  // as BLAS: A and B are not read
    scale_only(M, N, beta, C, ldc);
  else if (trans_b)
    gemm_dot<Isa>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    gemm_broadcast<Isa>(trans_a ? StridedA{A, 1, lda} : StridedA{A, lda, 1}, M, N, K, alpha, B, ldb, beta, C, ldc);
}

}  // namespace gemm_small_blocks

}  // namespace

}  // namespace bastion
