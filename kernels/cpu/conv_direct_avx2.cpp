// conv_direct_avx2: the row-strided direct convolution (the plan in conv_direct.h) on 8-lane AVX2 + FMA
// vectors. Without it every convolution on a CPU without AVX-512 went through im2col + OpenBLAS, and the FL
// CNNs' training steps ran at 14-28 % of the FP32 peak of an AMD EPYC Zen 3 (bench_train, 2026-11-30). The
// blocking follows conv_direct.cpp and conv_direct_rows_weight.cpp, resized for 16 ymm registers:
//   forward and grad_in   KB output channels x NV vectors, 12 accumulators (4 x 3, 6 x 2, 8 x 1), NV input
//                         vectors and one broadcast weight: 16 registers at most
//   grad_weight           KB channels x TB filter taps, 12 accumulators (4 x 3, 6 x 2, 8 x 1), summed over
//                         the samples and positions of one input channel
// It is a second copy of that plan, not an instance of a shared template as the small GEMM's two files are:
// the AVX-512 loops differ (24 accumulators, a mask per vector, the weight gradient's loop order) and were
// tuned on hosts this file was not written on; one template over both, with the AVX-512 object code checked
// unchanged, is left for a session on an AVX-512 host.
// Compiled with -mavx2 -mfma on x86-64 whatever BASTION_NATIVE says (CMakeLists.txt) and run only where
// available() says so; for that reason every function here has internal linkage or is one of the entry
// points, and the file includes no C++ library header (kernels/cpu/gemm_small_blocks.h says why).
//
// Determinism: forward and grad_in split samples over threads; grad_weight hands out (channel block, input
// channel, tap block) items the same way at every step, and sums each item's terms in (sample, position)
// order. Every output is computed by one thread in a fixed order, whatever the thread count.
#include "kernels/cpu/conv_direct_avx2.h"

#include "kernels/cpu/cpu_features.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <omp.h>

#include "kernels/cpu/unroll.h"
#endif

namespace bastion::conv_direct_avx2 {

#if defined(__AVX2__) && defined(__FMA__)

namespace {

constexpr int64_t kLanes = 8;
constexpr int kAccumulators = 12;
// As kernels/cpu/parallel.h's kParallelMinWork (not included: it includes a C++ library header).
constexpr int64_t kParallelMinWork = int64_t{1} << 16;

int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max_of(int64_t a, int64_t b) { return a > b ? a : b; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

__m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

void fill_zero(float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = 0.0f;
}

// Copies n floats by 8-float vectors and a masked tail: the rows are short (LeNet: 8 to 28 floats).
void copy_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
  if (i < n) {
    const __m256i tail = first_lanes(n - i);
    _mm256_maskstore_ps(dst + i, tail, _mm256_maskload_ps(src + i, tail));
  }
}

// planes (C, H, W) -> zero-padded (C, H + 2 ph, W + 2 pw), padding ASSIGNED zero.
void pad_planes(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
  fill_zero(dst, C * Hp * Wp);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h) copy_row(dst + (c * Hp + h + ph) * Wp + pw, src + (c * H + h) * W, W);
}

// Output channels per register block: a divisor of K when one of 8 or 6 is, else 4 with K rounded up (the
// padded channels have zero weights and are never copied out).
int block_channels(int64_t K) { return K % 8 == 0 ? 8 : K % 6 == 0 ? 6 : 4; }

// A valid stride-1 correlation of C planes (Hp, Wp) with (K, C, R, S) filters, row-strided output: output
// (oh, ow) at oh * Wp + ow, so one vector covers consecutive positions across row ends.
struct ValidConv {
  int64_t C, Hp, Wp, K, R, S;
  int64_t pad_rows;  // zero rows above (and below) the data rows of every plane
  int KB;            // output channels per register block
  int64_t K_padded;  // K rounded up to KB
  int64_t OH, OW;    // valid output size
  int64_t Q;         // outputs in row-strided numbering: (OH - 1) * Wp + OW
  int64_t vectors;   // ceil(Q / 8): the last one is masked
  int64_t plane() const { return Hp * Wp; }
  int64_t out_stride() const { return vectors * kLanes; }  // floats per output channel of the buffer
  __m256i last_mask() const { return first_lanes(Q - (vectors - 1) * kLanes); }
};

ValidConv valid_conv(int64_t C, int64_t Hp, int64_t Wp, int64_t K, int64_t R, int64_t S, int64_t pad_rows) {
  ValidConv v{C, Hp, Wp, K, R, S, pad_rows, block_channels(K), 0, Hp - R + 1, Wp - S + 1, 0, 0};
  v.K_padded = ceil_div(K, v.KB) * v.KB;
  v.Q = (v.OH - 1) * Wp + v.OW;
  v.vectors = ceil_div(v.Q, kLanes);
  return v;
}

ValidConv forward_conv(const Conv2dGeometry& g) {
  return valid_conv(g.C, g.H + 2 * g.padding, g.W + 2 * g.padding, g.K, g.R, g.S, g.padding);
}

// grad_in = valid(grad_out padded by R-1-pad, S-1-pad; flipped filters with C outputs and K inputs).
ValidConv grad_in_conv(const Conv2dGeometry& g) {
  return valid_conv(g.K, g.OH + 2 * (g.R - 1 - g.padding), g.OW + 2 * (g.S - 1 - g.padding), g.C, g.R, g.S,
                    g.R - 1 - g.padding);
}

int64_t packed_filter_floats(const ValidConv& v) { return v.K_padded * v.C * v.R * v.S; }

// Filters packed per channel block as [block][c][r][s][KB], so the KB weights one input vector meets are
// adjacent. flip_transpose packs the grad_in filters from weight[k, c, R-1-r, S-1-s] with K and C swapped.
void pack_filters(float* packed, const float* weight, const ValidConv& v, bool flip_transpose) {
  const int64_t RS = v.R * v.S;
  fill_zero(packed, packed_filter_floats(v));
  for (int64_t k = 0; k < v.K; ++k)
    for (int64_t c = 0; c < v.C; ++c)
      for (int64_t t = 0; t < RS; ++t) {
        const float w = flip_transpose ? weight[(c * v.K + k) * RS + (RS - 1 - t)] : weight[(k * v.C + c) * RS + t];
        packed[(((k / v.KB) * v.C + c) * RS + t) * v.KB + k % v.KB] = w;
      }
}

// ---- forward and grad_in: one valid convolution per sample ------------------------------------------------

// One register block: KB channels x NV vectors from vector v0. kTail: the block ends at the plane's last
// vector, whose lanes past Q are loaded as zeros (they would read past the plane).
template <int KB, int NV, bool kTail>
void valid_block(float* out, const float* in, const float* packed, const float* bias, const ValidConv& v, int64_t v0) {
  __m256 acc[KB][NV];
  BASTION_UNROLL(12)
  for (int kk = 0; kk < KB; ++kk) {
    const __m256 b = _mm256_set1_ps(bias ? bias[kk] : 0.0f);
    BASTION_UNROLL(12)
    for (int j = 0; j < NV; ++j) acc[kk][j] = b;
  }
  const __m256i tail = v.last_mask();
  // Filter rows that meet only zero padding for every output row of the block are skipped.
  const int64_t oh_lo = v0 * kLanes / v.Wp, oh_hi = min_of(v.OH - 1, ((v0 + NV) * kLanes - 1) / v.Wp);
  const int64_t r0 = max_of(0, v.pad_rows - oh_hi), r1 = min_of(v.R, v.Hp - v.pad_rows - oh_lo);
  for (int64_t c = 0; c < v.C; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = in + c * v.plane() + r * v.Wp + v0 * kLanes;
      const float* w = packed + (c * v.R + r) * v.S * KB;
      for (int64_t s = 0; s < v.S; ++s, w += KB) {
        __m256 x[NV];
        BASTION_UNROLL(12)
        for (int j = 0; j < NV; ++j)
          x[j] = kTail && j == NV - 1 ? _mm256_maskload_ps(row + s + j * kLanes, tail)
                                      : _mm256_loadu_ps(row + s + j * kLanes);
        BASTION_UNROLL(12)
        for (int kk = 0; kk < KB; ++kk) {
          const __m256 wk = _mm256_broadcast_ss(w + kk);
          BASTION_UNROLL(12)
          for (int j = 0; j < NV; ++j) acc[kk][j] = _mm256_fmadd_ps(wk, x[j], acc[kk][j]);
        }
      }
    }
  }
  BASTION_UNROLL(12)
  for (int kk = 0; kk < KB; ++kk) {
    BASTION_UNROLL(12)
    for (int j = 0; j < NV; ++j) _mm256_storeu_ps(out + kk * v.out_stride() + (v0 + j) * kLanes, acc[kk][j]);
  }
}

using ValidBlockFn = void (*)(float*, const float*, const float*, const float*, const ValidConv&, int64_t);

template <int KB, bool kTail>
ValidBlockFn valid_block_for(int nv) {
  if constexpr (kAccumulators / KB >= 3)
    if (nv == 3) return valid_block<KB, 3, kTail>;
  if constexpr (kAccumulators / KB >= 2)
    if (nv == 2) return valid_block<KB, 2, kTail>;
  return valid_block<KB, 1, kTail>;
}

template <bool kTail>
ValidBlockFn valid_block_fn(int KB, int nv) {
  return KB == 8   ? valid_block_for<8, kTail>(nv)
         : KB == 6 ? valid_block_for<6, kTail>(nv)
                   : valid_block_for<4, kTail>(nv);
}

// out (K_padded, vectors * 8), row-strided = valid(in (C, Hp, Wp), packed filters) + bias_packed.
void valid_conv_sample(float* out, const float* in, const float* packed, const float* bias_packed, const ValidConv& v) {
  const int max_nv = kAccumulators / v.KB;
  const int64_t block_floats = static_cast<int64_t>(v.KB) * v.C * v.R * v.S;
  for (int64_t kb = 0; kb < v.K_padded / v.KB; ++kb) {
    for (int64_t v0 = 0; v0 < v.vectors; v0 += max_nv) {
      const int nv = static_cast<int>(min_of(max_nv, v.vectors - v0));
      const ValidBlockFn block =
          v0 + nv == v.vectors ? valid_block_fn<true>(v.KB, nv) : valid_block_fn<false>(v.KB, nv);
      block(out + kb * v.KB * v.out_stride(), in, packed + kb * block_floats,
            bias_packed ? bias_packed + kb * v.KB : nullptr, v, v0);
    }
  }
}

// Copies the valid (OH, OW) part of a row-strided buffer into a dense (channels, OH, OW) block.
void copy_out_rows(float* dst, const float* buffer, const ValidConv& v, int64_t channels) {
  for (int64_t k = 0; k < channels; ++k)
    for (int64_t oh = 0; oh < v.OH; ++oh)
      copy_row(dst + (k * v.OH + oh) * v.OW, buffer + k * v.out_stride() + oh * v.Wp, v.OW);
}

// ---- grad_weight: register blocks of KB channels x TB taps, summed over samples and positions -----------------

// Samples per chunk: an item's register sums start from zero at a chunk's first sample and are added to
// its vector totals after the last. Fixed, so the summation order depends on nothing but N.
constexpr int64_t kWeightGradChunk = 4;
// A chunk's output-gradient rows of one channel block above this size are swept one sample at a time, so
// that they come from L1 (32 KiB on Zen 2 and 3) rather than L2; conv_direct_rows_weight.cpp measured why.
constexpr int64_t kChunkRowsInL1Bytes = 32 * 1024;

bool sweep_per_sample(const ValidConv& v) {
  return kWeightGradChunk * v.KB * v.out_stride() * static_cast<int64_t>(sizeof(float)) > kChunkRowsInL1Bytes;
}

// Where a call's samples fall in their chunk: it starts from zero (first) or from the partial sums, and
// ends by adding to the totals (last) or storing the partial sums back.
struct ChunkPlace {
  bool first, last;
};

// One position vector q of one sample: acc[kk][t] += dy[kk][q] * x[q + tap t]. kTail: q is the last vector,
// whose input lanes past Q are loaded as zeros (their output gradients are zero, the inputs may lie past
// the plane). The TB input vectors stay in registers and each channel's output gradient is loaded once
// (12 accumulators + TB + 1 <= 16 registers: KB + TB loads per KB x TB multiply-adds). Holding the KB
// gradients instead (the AVX-512 file's order) needs KB + TB + 12 registers, and GCC then reloads a
// gradient for every multiply-add.
template <int KB, int TB, bool kTail>
[[gnu::always_inline]] inline void weight_grad_vector(__m256 (&acc)[KB][TB], const float* dy, const float* x,
                                                      int64_t stride, const int64_t* tap_offsets, __m256i tail) {
  __m256 xt[TB];
  BASTION_UNROLL(12)
  for (int t = 0; t < TB; ++t)
    xt[t] = kTail ? _mm256_maskload_ps(x + tap_offsets[t], tail) : _mm256_loadu_ps(x + tap_offsets[t]);
  BASTION_UNROLL(12)
  for (int kk = 0; kk < KB; ++kk) {
    const __m256 g = _mm256_loadu_ps(dy + kk * stride);
    BASTION_UNROLL(12)
    for (int t = 0; t < TB; ++t) acc[kk][t] = _mm256_fmadd_ps(g, xt[t], acc[kk][t]);
  }
}

// dw block: KB channels x TB taps of input channel c over samples [n0, n1). grads: the row-strided grad_out
// of this block's first channel, (N, K_padded, stride); inputs: (N, C, Hp, Wp), padded.
template <int KB, int TB>
void weight_grad_block(__m256* totals, __m256* partial, const float* grads, const float* inputs, const ValidConv& v,
                       int64_t n0, int64_t n1, int64_t c, const int64_t* tap_offsets, ChunkPlace place) {
  __m256 acc[KB][TB];
  BASTION_UNROLL(12)
  for (int kk = 0; kk < KB; ++kk) {
    BASTION_UNROLL(12)
    for (int t = 0; t < TB; ++t) acc[kk][t] = place.first ? _mm256_setzero_ps() : partial[kk * TB + t];
  }
  const __m256i tail = v.last_mask();
  const int64_t stride = v.out_stride(), last = v.vectors - 1;
  for (int64_t n = n0; n < n1; ++n) {
    const float* dy = grads + n * v.K_padded * stride;
    const float* x = inputs + n * v.C * v.plane() + c * v.plane();
    for (int64_t q = 0; q < last; ++q)
      weight_grad_vector<KB, TB, false>(acc, dy + q * kLanes, x + q * kLanes, stride, tap_offsets, tail);
    weight_grad_vector<KB, TB, true>(acc, dy + last * kLanes, x + last * kLanes, stride, tap_offsets, tail);
  }
  BASTION_UNROLL(12)
  for (int kk = 0; kk < KB; ++kk) {
    BASTION_UNROLL(12)
    for (int t = 0; t < TB; ++t) {
      __m256& out = place.last ? totals[kk * TB + t] : partial[kk * TB + t];
      out = place.last ? _mm256_add_ps(out, acc[kk][t]) : acc[kk][t];
    }
  }
}

using WeightGradFn = void (*)(__m256*, __m256*, const float*, const float*, const ValidConv&, int64_t, int64_t, int64_t,
                              const int64_t*, ChunkPlace);

template <int KB>
WeightGradFn weight_grad_for(int tb) {
  if constexpr (kAccumulators / KB >= 3)
    if (tb == 3) return weight_grad_block<KB, 3>;
  if constexpr (kAccumulators / KB >= 2)
    if (tb == 2) return weight_grad_block<KB, 2>;
  return weight_grad_block<KB, 1>;
}

WeightGradFn weight_grad_fn(int KB, int tb) {
  return KB == 8 ? weight_grad_for<8>(tb) : KB == 6 ? weight_grad_for<6>(tb) : weight_grad_for<4>(tb);
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

// The 8 lanes summed in a fixed order.
float lane_sum(__m256 x) {
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, x);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

struct ItemPlace {
  int64_t kb, c, t0;
  int tb;
};

ItemPlace item_place(int64_t item, const WeightGradItems& items, const ValidConv& v) {
  const int64_t t0 = (item % items.tap_blocks) * items.max_tb;
  return {item / (v.C * items.tap_blocks), (item / items.tap_blocks) % v.C, t0,
          static_cast<int>(min_of(items.max_tb, v.R * v.S - t0))};
}

// grad_weight (K, C, R, S) ASSIGNED from the row-strided output gradients and the padded inputs.
void weight_grad(float* grad_weight, __m256* totals, const float* grad_rows, const float* inputs, const ValidConv& v,
                 int64_t N, int threads) {
  const int64_t RS = v.R * v.S;
  const WeightGradItems items = weight_grad_items(v);
  __m256* partial = totals + items.count * kAccumulators;
  for (int64_t i = 0; i < items.count * kAccumulators; ++i) totals[i] = _mm256_setzero_ps();
  const int64_t step = sweep_per_sample(v) ? 1 : kWeightGradChunk;
  // Every step's loop hands out the items the same way (static schedule, same count), so each item's sums
  // stay with one thread and the loops need no barrier between steps.
#pragma omp parallel num_threads(threads) if (N * v.K * v.C * RS * v.Q >= kParallelMinWork)
  for (int64_t n0 = 0; n0 < N; n0 += step) {
    const int64_t n1 = min_of(N, n0 + step);
    const ChunkPlace place{n0 % kWeightGradChunk == 0, n1 % kWeightGradChunk == 0 || n1 == N};
#pragma omp for schedule(static) nowait
    for (int64_t item = 0; item < items.count; ++item) {
      const ItemPlace at = item_place(item, items, v);
      int64_t offsets[kAccumulators];
      for (int t = 0; t < at.tb; ++t) offsets[t] = ((at.t0 + t) / v.S) * v.Wp + (at.t0 + t) % v.S;
      weight_grad_fn(v.KB, at.tb)(totals + item * kAccumulators, partial + item * kAccumulators,
                                  grad_rows + at.kb * v.KB * v.out_stride(), inputs, v, n0, n1, at.c, offsets, place);
    }
  }
  for (int64_t item = 0; item < items.count; ++item) {
    const ItemPlace at = item_place(item, items, v);
    for (int64_t kk = 0; kk < v.KB && at.kb * v.KB + kk < v.K; ++kk)
      for (int64_t t = 0; t < at.tb; ++t)
        grad_weight[((at.kb * v.KB + kk) * v.C + at.c) * RS + at.t0 + t] =
            lane_sum(totals[item * kAccumulators + kk * at.tb + t]);
  }
}

int64_t weight_grad_totals_floats(const ValidConv& v) {
  return (2 * weight_grad_items(v).count * kAccumulators + 1) * kLanes;
}

// grad_out (N, K, OH, OW) -> row-strided rows of width Wp with zeros in the dropped columns, the tail and
// the padded channels: (N, K_padded, out_stride()). Each float is written once: zeroing the whole buffer
// first and copying over it was 3.8 % of LeNet's training step (perf, 2026-11-30, Zen 3).
void grad_out_rows(float* rows, const float* grad_out, const Conv2dGeometry& g, const ValidConv& v, int threads) {
  const int64_t sample_floats = v.K_padded * v.out_stride();
#pragma omp parallel for schedule(static) num_threads(threads) if (g.N * sample_floats >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* dst = rows + n * sample_floats;
    for (int64_t k = 0; k < g.K; ++k) {
      float* channel = dst + k * v.out_stride();
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        copy_row(channel + oh * v.Wp, grad_out + ((n * g.K + k) * g.OH + oh) * g.OW, g.OW);
        if (oh + 1 < g.OH) fill_zero(channel + oh * v.Wp + g.OW, v.Wp - g.OW);  // the dropped columns
      }
      fill_zero(channel + v.Q, v.out_stride() - v.Q);  // the tail after the last row
    }
    fill_zero(dst + g.K * v.out_stride(), (v.K_padded - g.K) * v.out_stride());
  }
}

// ---- workspace: [shared: packed filters | bias or padded inputs, grad rows, totals][per-thread slices] -------

int64_t forward_thread_floats(const Conv2dGeometry& g) {
  const ValidConv v = forward_conv(g);
  return (g.padding > 0 ? v.C * v.plane() : 0) + v.K_padded * v.out_stride();
}

int64_t grad_in_thread_floats(const Conv2dGeometry& g) {
  const ValidConv v = grad_in_conv(g);
  return v.C * v.plane() + v.K_padded * v.out_stride();
}

int64_t shared_floats(const Conv2dGeometry& g) {
  const ValidConv f = forward_conv(g), b = grad_in_conv(g);
  const int64_t forward = packed_filter_floats(f) + f.K_padded;
  const int64_t backward = packed_filter_floats(b) + (g.padding > 0 ? g.N * f.C * f.plane() : 0) +
                           g.N * f.K_padded * f.out_stride() + weight_grad_totals_floats(f);
  return max_of(forward, backward);
}

int64_t thread_floats(const Conv2dGeometry& g) { return max_of(forward_thread_floats(g), grad_in_thread_floats(g)); }

__m256* aligned_totals(float* at) {
  const auto address = reinterpret_cast<uintptr_t>(at);
  return reinterpret_cast<__m256*>((address + 31) & ~uintptr_t{31});
}

int64_t work(const Conv2dGeometry& g, const ValidConv& v) { return g.N * g.K * g.C * g.R * g.S * v.Q; }

}  // namespace

bool available() { return cpu_has_avx2_fma(); }

int64_t workspace_floats(const Conv2dGeometry& g, int threads) { return shared_floats(g) + threads * thread_floats(g); }

void forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
             float* workspace, int threads) {
  const ValidConv v = forward_conv(g);
  float* packed = workspace;
  float* bias_packed = packed + packed_filter_floats(v);
  pack_filters(packed, weight, v, false);
  fill_zero(bias_packed, v.K_padded);
  if (bias)
    for (int64_t k = 0; k < g.K; ++k) bias_packed[k] = bias[k];
  float* thread_base = workspace + shared_floats(g);
  const int64_t slice = thread_floats(g), in_sample = g.C * g.H * g.W, out_sample = g.K * g.OH * g.OW;
#pragma omp parallel for schedule(static) num_threads(threads) if (work(g, v) >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* mine = thread_base + omp_get_thread_num() * slice;
    const float* planes = in + n * in_sample;
    float* rows = mine;
    if (g.padding > 0) {
      pad_planes(mine, planes, g.C, g.H, g.W, g.padding, g.padding);
      planes = mine;
      rows = mine + v.C * v.plane();
    }
    valid_conv_sample(rows, planes, packed, bias_packed, v);
    copy_out_rows(out + n * out_sample, rows, v, g.K);
  }
}

void grad_in(float* grad_in, const float* grad_out, const float* weight, const Conv2dGeometry& g, float* workspace,
             int threads) {
  const ValidConv b = grad_in_conv(g);
  float* packed = workspace;
  pack_filters(packed, weight, b, true);
  float* thread_base = workspace + shared_floats(g);
  const int64_t slice = thread_floats(g), ph = g.R - 1 - g.padding, pw = g.S - 1 - g.padding;
  const int64_t in_sample = g.C * g.H * g.W, out_sample = g.K * g.OH * g.OW;
#pragma omp parallel for schedule(static) num_threads(threads) if (work(g, b) >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* padded = thread_base + omp_get_thread_num() * slice;
    float* rows = padded + b.C * b.plane();
    pad_planes(padded, grad_out + n * out_sample, g.K, g.OH, g.OW, ph, pw);
    valid_conv_sample(rows, padded, packed, nullptr, b);
    copy_out_rows(grad_in + n * in_sample, rows, b, g.C);
  }
}

void grad_weight(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g, float* workspace,
                 int threads) {
  const ValidConv f = forward_conv(g), b = grad_in_conv(g);
  float* padded_inputs = workspace + packed_filter_floats(b);
  float* grad_rows = padded_inputs + (g.padding > 0 ? g.N * f.C * f.plane() : 0);
  const float* inputs = in;
  if (g.padding > 0) {
    for (int64_t n = 0; n < g.N; ++n)
      pad_planes(padded_inputs + n * f.C * f.plane(), in + n * g.C * g.H * g.W, g.C, g.H, g.W, g.padding, g.padding);
    inputs = padded_inputs;
  }
  grad_out_rows(grad_rows, grad_out, g, f, threads);
  weight_grad(grad_weight, aligned_totals(grad_rows + g.N * f.K_padded * f.out_stride()), grad_rows, inputs, f, g.N,
              threads);
}

#else  // not x86-64: never available, so conv_direct.cpp never calls the passes

bool available() { return false; }
int64_t workspace_floats(const Conv2dGeometry&, int) { return 0; }
void forward(float*, const float*, const float*, const float*, const Conv2dGeometry&, float*, int) {}
void grad_in(float*, const float*, const float*, const Conv2dGeometry&, float*, int) {}
void grad_weight(float*, const float*, const float*, const Conv2dGeometry&, float*, int) {}

#endif

}  // namespace bastion::conv_direct_avx2
