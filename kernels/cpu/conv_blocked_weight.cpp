// The weight-gradient pass of conv2d_blocked (kernels/cpu/conv_blocked.h, plan and layouts there), over
// the blocked copies conv_blocked.cpp makes:
//   dw[k, c, r, s] = sum_n sum_{oh, ow} dy[n, k, oh, ow] * in[n, c, oh*st - 1 + r, ow*st - 1 + s]
// A register block holds the totals of one input channel: on AVX-512 KV (2, or 1 when K / 16 is odd)
// vectors of 16 output channels x the 9 taps, per output pixel KV grad_out loads and 9 input broadcasts for
// 9 KV FMAs (AVX2's block, in conv_blocked_avx2.cpp, says how it splits them over its 16 registers).
// Items (output group, input block) are split over threads in fixed ranges; each walks the batch in fixed
// chunks of samples (~1 MB of blocked data, in L2), and inside a chunk in groups of rows or samples (~32 KB,
// in L1 on AVX-512) that its 16 input channels pass over, adding to its own totals in one fixed order:
// results do not depend on the thread count.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/conv_blocked_internal.h"
#include "kernels/cpu/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include "kernels/cpu/unroll.h"

namespace bastion::conv_blocked_detail {

namespace {

// totals (KV x 9 vectors of input channel c) += sum over the group's pixels of dy[kv] x in[c, tap].
// dy: the group's first sample, first output block, pixel (oh0, 0) (inside the padding); x: the same
// sample's input block at row oh0 * stride, column 0, plus c.
template <int KV, int IS>
void weight_block(float* totals, const float* dy, const float* x, const WeightPass& p, int64_t samples, int64_t rows) {
  __m512 acc[KV][kTaps];
  BASTION_UNROLL(4)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(9)
    for (int t = 0; t < kTaps; ++t) acc[kv][t] = _mm512_loadu_ps(totals + (kv * kTaps + t) * kLanes);
  }
  const int64_t dy_sample = (p.K / kLanes) * p.dy_plane, x_sample = (p.C / kLanes) * p.x_plane;
  for (int64_t n = 0; n < samples; ++n)
    for (int64_t i = 0; i < rows; ++i) {
      const float* d = dy + n * dy_sample + i * p.dy_row;
      const float* x0 = x + n * x_sample + i * IS * p.x_row;
      const float* x1 = x0 + p.x_row;
      const float* x2 = x1 + p.x_row;
      for (int64_t j = 0; j < p.OW; ++j, d += kLanes, x0 += IS * kLanes, x1 += IS * kLanes, x2 += IS * kLanes) {
        __m512 g[KV];
        BASTION_UNROLL(4)
        for (int kv = 0; kv < KV; ++kv) g[kv] = _mm512_loadu_ps(d + kv * p.dy_plane);
        const float* xr[3] = {x0, x1, x2};
        BASTION_UNROLL(3)
        for (int r = 0; r < 3; ++r) {
          BASTION_UNROLL(3)
          for (int s = 0; s < 3; ++s) {
            const __m512 b = _mm512_set1_ps(xr[r][s * kLanes]);
            BASTION_UNROLL(4)
            for (int kv = 0; kv < KV; ++kv) acc[kv][r * 3 + s] = _mm512_fmadd_ps(g[kv], b, acc[kv][r * 3 + s]);
          }
        }
      }
    }
  BASTION_UNROLL(4)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(9)
    for (int t = 0; t < kTaps; ++t) _mm512_storeu_ps(totals + (kv * kTaps + t) * kLanes, acc[kv][t]);
  }
}

}  // namespace

WeightFn avx512_weight_fn(int KV, int64_t stride) {
  if (KV == 2) return stride == 2 ? weight_block<2, 2> : weight_block<2, 1>;
  return stride == 2 ? weight_block<1, 2> : weight_block<1, 1>;
}

}  // namespace bastion::conv_blocked_detail

#endif  // __AVX512F__

namespace bastion::conv_blocked_detail {

namespace {

// What a weight-gradient group reads (its rows of output gradients, KV blocks, and of one input block)
// stays in L1 while the group's 16 input channels pass over it (BlockedKernels::weight_group_bytes); a
// chunk's samples, all blocks, in L2.
constexpr int64_t kChunkBytes = 1024 * 1024;

}  // namespace

WeightPass weight_pass(const Conv2dGeometry& g, const BlockedKernels& isa) {
  const int kv = (g.K / kLanes) % 2 == 0 && isa.max_weight_kv >= 2 ? 2 : 1;
  WeightPass p{g.N, g.C, g.K, g.OH, g.OW, g.stride, 0, 0, 0, 0, kv, 1, 1, 1};
  p.x_row = (g.W + 2) * kLanes;
  p.x_plane = (g.H + 2) * p.x_row;
  p.dy_row = (g.OW + 2) * kLanes;
  p.dy_plane = (g.OH + 2) * p.dy_row;
  auto group_bytes = [&](int64_t rows) {  // input rows read by `rows` output rows, and their gradients
    return 4 * ((std::min(g.H + 2, (rows - 1) * g.stride + 3)) * p.x_row + p.KV * rows * g.OW * kLanes);
  };
  p.rows_per_group = 1;
  while (p.rows_per_group < g.OH && group_bytes(p.rows_per_group + 1) <= isa.weight_group_bytes) ++p.rows_per_group;
  p.samples_per_group = p.rows_per_group == g.OH ? std::max<int64_t>(1, isa.weight_group_bytes / group_bytes(g.OH)) : 1;
  const int64_t sample_bytes = 4 * ((g.C / kLanes) * p.x_plane + (g.K / kLanes) * p.dy_plane);
  p.samples_per_chunk = std::max<int64_t>(1, kChunkBytes / sample_bytes / p.samples_per_group) * p.samples_per_group;
  return p;
}

// totals: [k / (16 KV)][c / 16][c % 16][kv][tap][16], summed over all samples.
void run_weight(float* totals, const float* dy_blocked, const float* x_blocked, const WeightPass& p,
                const BlockedKernels& isa, int threads) {
  const int64_t groups = p.K / kLanes / p.KV, CB = p.C / kLanes, items = groups * CB;
  const int64_t item_floats = kLanes * p.KV * kTaps * kLanes;
  std::fill_n(totals, items * item_floats, 0.0f);
  const WeightFn fn = isa.weight(p.KV, p.stride);
  const int64_t dy_sample = (p.K / kLanes) * p.dy_plane, x_sample = CB * p.x_plane;
  const int64_t work = p.N * p.K * p.C * kTaps * p.OH * p.OW;
  // Each thread takes a fixed range of items and walks every chunk for them: no barrier between chunks
  // (on a loaded machine one per chunk cost more than the chunk at 2 threads).
#pragma omp parallel num_threads(threads) if (work >= kParallelMinWork)
  {
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t i0 = items * me / team, i1 = items * (me + 1) / team;
    for (int64_t n0 = 0; n0 < p.N; n0 += p.samples_per_chunk) {
      const int64_t n1 = std::min(p.N, n0 + p.samples_per_chunk);
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t kg = item / CB, cb = item % CB;
        float* mine = totals + item * item_floats;
        for (int64_t gn = n0; gn < n1; gn += p.samples_per_group) {
          const int64_t samples = std::min(p.samples_per_group, n1 - gn);
          for (int64_t oh0 = 0; oh0 < p.OH; oh0 += p.rows_per_group) {
            const int64_t rows = std::min(p.rows_per_group, p.OH - oh0);
            const float* dy = dy_blocked + gn * dy_sample + kg * p.KV * p.dy_plane + (oh0 + 1) * p.dy_row + kLanes;
            const float* x = x_blocked + gn * x_sample + cb * p.x_plane + oh0 * p.stride * p.x_row;
            for (int64_t c = 0; c < kLanes; ++c) fn(mine + c * p.KV * kTaps * kLanes, dy, x + c, p, samples, rows);
          }
        }
      }
    }
  }
}

}  // namespace bastion::conv_blocked_detail
