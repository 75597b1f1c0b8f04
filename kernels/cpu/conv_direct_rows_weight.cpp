// conv_direct's row-strided weight gradient (kernels/cpu/conv_direct_rows.h): register blocks of KB output
// channels x TB filter taps, each summing over the samples and the row-strided positions of one input
// channel; moved out of conv_direct.cpp unchanged.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/conv_direct_rows.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/unroll.h"

#if defined(__AVX512F__)

namespace bastion::conv_direct_rows {

namespace {

// Sum of the 16 lanes in a fixed order (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized).
float lane_sum(__m512 x) {
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, x);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

// Samples per weight-gradient chunk: the register sums of an item start from zero at a chunk's first
// sample and are added to the item's vector totals after its last. Fixed, so the summation order depends
// on nothing but N.
constexpr int64_t kWeightGradChunk = 4;

// A chunk's output-gradient rows of one channel block above this size are swept one sample at a time
// (every item of a sample, then the next sample), so that they come from L1 rather than L2: 32 KiB is
// Zen 4's L1d. bench_kernels' conv_direct_rows_backward, Intel Xeon, 1 thread, CPU time, medians of 4
// interleaved pairs (bench/RESULTS.md, 2026-11-29): LeNet-32 conv1 (86 KiB a chunk) x1.25, LeNet-28
// conv1 (64 KiB) x1.24, cnn-fedcap conv1 (115 KiB) x1.17. Where a chunk fits (cnn-fedcap conv2, 18 KiB)
// a sweep per sample was slower (x0.74 in two pairs): the partial sums' loads and stores then cost more
// than the L2 reads they save.
constexpr int64_t kChunkRowsInL1Bytes = 32 * 1024;

bool sweep_per_sample(const ValidConv& v) {
  return kWeightGradChunk * v.KB * v.out_stride() * static_cast<int64_t>(sizeof(float)) > kChunkRowsInL1Bytes;
}

// Where a block's samples fall in their chunk: it starts its sums from zero (first) or from the item's
// partial sums in memory, and ends by adding them to the totals (last) or storing them back. A whole
// chunk in one call is {true, true}; a sweep per sample keeps the sums in `partial` between samples.
struct ChunkPlace {
  bool first, last;
};

// dw block: KB output channels x TB filter taps of input channel c over samples [n0, n1). grads: the
// row-strided grad_out of this block's first channel, (N, K_padded, stride); inputs: (N, C, Hp, Wp),
// already padded. partial and totals: KB * TB vectors each. Each sum meets its terms in (n, q) order
// whichever way the chunk is split into calls.
template <int KB, int TB>
void weight_grad_block(__m512* totals, __m512* partial, const float* grads, const float* inputs, const ValidConv& v,
                       int64_t n0, int64_t n1, int64_t c, const int64_t* tap_offsets, ChunkPlace place) {
  __m512 acc[KB][TB];
  BASTION_UNROLL(24)
  for (int kk = 0; kk < KB; ++kk) {
    BASTION_UNROLL(24)
    for (int t = 0; t < TB; ++t) acc[kk][t] = place.first ? _mm512_setzero_ps() : partial[kk * TB + t];
  }
  for (int64_t n = n0; n < n1; ++n) {
    const float* dy = grads + n * v.K_padded * v.out_stride();
    const float* x = inputs + n * v.C * v.plane() + c * v.plane();
    for (int64_t q = 0; q < v.vectors; ++q) {
      const __mmask16 mask = q + 1 == v.vectors ? v.last_mask() : static_cast<__mmask16>(0xFFFF);
      __m512 g[KB];
      BASTION_UNROLL(24)
      for (int kk = 0; kk < KB; ++kk) g[kk] = _mm512_loadu_ps(dy + kk * v.out_stride() + q * kLanes);
      BASTION_UNROLL(24)
      for (int t = 0; t < TB; ++t) {
        const __m512 xt = _mm512_maskz_loadu_ps(mask, x + q * kLanes + tap_offsets[t]);
        BASTION_UNROLL(24)
        for (int kk = 0; kk < KB; ++kk) acc[kk][t] = _mm512_fmadd_ps(g[kk], xt, acc[kk][t]);
      }
    }
  }
  BASTION_UNROLL(24)
  for (int kk = 0; kk < KB; ++kk) {
    BASTION_UNROLL(24)
    for (int t = 0; t < TB; ++t) {
      __m512& out = place.last ? totals[kk * TB + t] : partial[kk * TB + t];
      out = place.last ? _mm512_add_ps(out, acc[kk][t]) : acc[kk][t];
    }
  }
}

using WeightGradFn = void (*)(__m512*, __m512*, const float*, const float*, const ValidConv&, int64_t, int64_t, int64_t,
                              const int64_t*, ChunkPlace);

template <int KB, int... TB>
WeightGradFn weight_grad_for(int tb, std::integer_sequence<int, TB...>) {
  WeightGradFn table[] = {nullptr, weight_grad_block<KB, TB + 1>...};
  return table[tb];
}

WeightGradFn weight_grad_fn(int KB, int tb) {
  switch (KB) {
    case 8:
      return weight_grad_for<8>(tb, std::make_integer_sequence<int, kAccumulators / 8>{});
    case 6:
      return weight_grad_for<6>(tb, std::make_integer_sequence<int, kAccumulators / 6>{});
    default:
      return weight_grad_for<4>(tb, std::make_integer_sequence<int, kAccumulators / 4>{});
  }
}

// Items: (channel block, input channel, tap block), kb-major so consecutive items reuse the same
// output-gradient rows. totals and partial: kAccumulators vectors per item each.
struct WeightGradItems {
  int64_t tap_blocks, count, max_tb;
};

WeightGradItems weight_grad_items(const ValidConv& v) {
  const int64_t max_tb = kAccumulators / v.KB, tap_blocks = ceil_div(v.R * v.S, max_tb);
  return {tap_blocks, (v.K_padded / v.KB) * v.C * tap_blocks, max_tb};
}

}  // namespace

void weight_grad(float* grad_weight, __m512* totals, const float* grad_rows, const float* inputs, const ValidConv& v,
                 int64_t N, int threads) {
  const int64_t RS = v.R * v.S;
  const WeightGradItems items = weight_grad_items(v);
  __m512* partial = totals + items.count * kAccumulators;
  for (int64_t i = 0; i < items.count * kAccumulators; ++i) totals[i] = _mm512_setzero_ps();
  const int64_t step = sweep_per_sample(v) ? 1 : kWeightGradChunk;
  // Every step's loop hands out the items the same way (static schedule, same count), so each item's
  // sums stay with one thread and the loops need no barrier between steps.
#pragma omp parallel num_threads(threads) if (N * v.K * v.C * RS * v.Q >= kParallelMinWork)
  for (int64_t n0 = 0; n0 < N; n0 += step) {
    const int64_t n1 = std::min(N, n0 + step);
    const ChunkPlace place{n0 % kWeightGradChunk == 0, n1 % kWeightGradChunk == 0 || n1 == N};
#pragma omp for schedule(static) nowait
    for (int64_t item = 0; item < items.count; ++item) {
      const int64_t kb = item / (v.C * items.tap_blocks), c = (item / items.tap_blocks) % v.C;
      const int64_t t0 = (item % items.tap_blocks) * items.max_tb;
      const int tb = static_cast<int>(std::min(items.max_tb, RS - t0));
      int64_t offsets[kAccumulators];
      for (int t = 0; t < tb; ++t) offsets[t] = ((t0 + t) / v.S) * v.Wp + (t0 + t) % v.S;
      weight_grad_fn(v.KB, tb)(totals + item * kAccumulators, partial + item * kAccumulators,
                               grad_rows + kb * v.KB * v.out_stride(), inputs, v, n0, n1, c, offsets, place);
    }
  }
  for (int64_t item = 0; item < items.count; ++item) {
    const int64_t kb = item / (v.C * items.tap_blocks), c = (item / items.tap_blocks) % v.C;
    const int64_t t0 = (item % items.tap_blocks) * items.max_tb;
    const int64_t tb = std::min(items.max_tb, RS - t0);
    for (int64_t kk = 0; kk < v.KB && kb * v.KB + kk < v.K; ++kk)
      for (int64_t t = 0; t < tb; ++t)
        grad_weight[((kb * v.KB + kk) * v.C + c) * RS + t0 + t] = lane_sum(totals[item * kAccumulators + kk * tb + t]);
  }
}

int64_t weight_grad_totals_floats(const ValidConv& v) {
  return (2 * weight_grad_items(v).count * kAccumulators + 1) * kLanes;
}

__m512* aligned_totals(float* at) {
  const auto address = reinterpret_cast<uintptr_t>(at);
  return reinterpret_cast<__m512*>((address + 63) & ~uintptr_t{63});
}

// Each float is written once (the dropped columns, the tail and the padded channels zeroed, the rest
// copied), as in conv_direct_avx2.cpp, where zeroing the whole buffer first was 3.8 % of LeNet's step.
void grad_out_rows(float* rows, const float* grad_out, const Conv2dGeometry& g, const ValidConv& v, int threads) {
#pragma omp parallel for schedule(static) \
    num_threads(threads) if (g.N * v.K_padded * v.out_stride() >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* dst = rows + n * v.K_padded * v.out_stride();
    for (int64_t k = 0; k < g.K; ++k) {
      float* channel = dst + k * v.out_stride();
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        copy_row(channel + oh * v.Wp, grad_out + ((n * g.K + k) * g.OH + oh) * g.OW, g.OW);
        if (oh + 1 < g.OH) std::fill_n(channel + oh * v.Wp + g.OW, v.Wp - g.OW, 0.0f);
      }
      std::fill_n(channel + v.Q, v.out_stride() - v.Q, 0.0f);
    }
    std::fill_n(dst + g.K * v.out_stride(), (v.K_padded - g.K) * v.out_stride(), 0.0f);
  }
}

}  // namespace bastion::conv_direct_rows

#endif
