#include "kernels/cpu/conv_direct.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/conv_direct_internal.h"
#include "kernels/cpu/parallel.h"
#include "tensor/error.h"
#include "kernels/cpu/unroll.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace bastion {

#if defined(__AVX512F__)

namespace {

// Copies n floats by 16-float vectors and a masked tail. The rows this file copies are short (LeNet: 10
// to 28 floats, tens of thousands per training step), and a memcpy call per row cost more than its copy:
// memmove was 5.4 % of a cnn-spmc step (perf, 2026-11-29).
void copy_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
  if (i < n) {
    const auto tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, tail, _mm512_maskz_loadu_ps(tail, src + i));
  }
}

}  // namespace

void conv_direct_detail::pad_planes(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t ph,
                                    int64_t pw) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
  std::fill_n(dst, C * Hp * Wp, 0.0f);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h) copy_row(dst + (c * Hp + h + ph) * Wp + pw, src + (c * H + h) * W, W);
}

namespace {

using conv_direct_detail::pad_planes;

constexpr int64_t kLanes = 16;
// Register budget of a block: 24 accumulators, leaving 8 of the 32 zmm registers for the loaded
// vectors (forward: NV input vectors; weight gradient: KB output-gradient vectors + 1 input vector).
constexpr int kAccumulators = 24;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output channels per register block: a divisor of K when one of 8 or 6 is, else 4 with K rounded up
// (the padded channels have zero weights and are never copied out).
int block_channels(int64_t K) { return K % 8 == 0 ? 8 : K % 6 == 0 ? 6 : 4; }

// A valid stride-1 correlation of C planes (Hp, Wp) with (K, C, R, S) filters, row-strided output.
struct ValidConv {
  int64_t C, Hp, Wp, K, R, S;
  int64_t pad_rows;  // zero rows above (and below) the data rows of every plane
  int KB;            // output channels per register block
  int64_t K_padded;  // K rounded up to KB
  int64_t OH, OW;    // valid output size
  int64_t Q;         // outputs in row-strided numbering: (OH - 1) * Wp + OW
  int64_t vectors;   // ceil(Q / 16): the last one is masked
  int64_t plane() const { return Hp * Wp; }
  int64_t out_stride() const { return vectors * kLanes; }  // floats per output channel of the buffer
  __mmask16 last_mask() const {
    const int64_t rest = Q - (vectors - 1) * kLanes;
    return static_cast<__mmask16>((1u << rest) - 1u);
  }
};

ValidConv valid_conv(int64_t C, int64_t Hp, int64_t Wp, int64_t K, int64_t R, int64_t S, int64_t pad_rows) {
  ValidConv v{C, Hp, Wp, K, R, S, pad_rows, block_channels(K), 0, Hp - R + 1, Wp - S + 1, 0, 0};
  v.K_padded = ceil_div(K, v.KB) * v.KB;
  v.Q = (v.OH - 1) * Wp + v.OW;
  v.vectors = ceil_div(v.Q, kLanes);
  return v;
}

int64_t packed_filter_floats(const ValidConv& v) { return v.K_padded * v.C * v.R * v.S; }

// Filters packed per channel block as [block][c][r][s][KB], so the KB weights one input vector meets
// are adjacent. flip_transpose packs the grad_in filters: packed (C_out = K of the layer's input
// side) from weight[k, c, R-1-r, S-1-s] with the roles of K and C swapped.
void pack_filters(float* packed, const float* weight, const ValidConv& v, bool flip_transpose) {
  const int64_t RS = v.R * v.S;
  std::fill_n(packed, packed_filter_floats(v), 0.0f);
  for (int64_t k = 0; k < v.K; ++k)
    for (int64_t c = 0; c < v.C; ++c)
      for (int64_t t = 0; t < RS; ++t) {
        // forward: weight (K, C, R, S); flipped: the layer's weight is (C_layer = v.K, K_layer = v.C, R, S)
        const float w = flip_transpose ? weight[(c * v.K + k) * RS + (RS - 1 - t)] : weight[(k * v.C + c) * RS + t];
        packed[(((k / v.KB) * v.C + c) * RS + t) * v.KB + k % v.KB] = w;
      }
}

// One register block of the forward: KB channels x NV vectors starting at vector v0. `mask` applies to
// the block's last vector (all ones unless it is the plane's last vector).
template <int KB, int NV>
void valid_block(float* out, const float* in, const float* packed, const float* bias, const ValidConv& v, int64_t v0,
                 __mmask16 mask) {
  __m512 acc[KB][NV];
  BASTION_UNROLL(24)
  for (int kk = 0; kk < KB; ++kk) {
    const __m512 b = _mm512_set1_ps(bias ? bias[kk] : 0.0f);
    BASTION_UNROLL(24)
    for (int j = 0; j < NV; ++j) acc[kk][j] = b;
  }
  // Filter rows that meet only zero padding for every output row of the block are skipped (grad_in pads
  // by R - 1 - pad: in LeNet conv2's grad_in 4 of 5 filter rows at the top and bottom output rows).
  const int64_t oh_lo = v0 * kLanes / v.Wp, oh_hi = std::min(v.OH - 1, ((v0 + NV) * kLanes - 1) / v.Wp);
  const int64_t r0 = std::max<int64_t>(0, v.pad_rows - oh_hi), r1 = std::min(v.R, v.Hp - v.pad_rows - oh_lo);
  for (int64_t c = 0; c < v.C; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = in + c * v.plane() + r * v.Wp + v0 * kLanes;
      const float* w = packed + (c * v.R + r) * v.S * KB;
      for (int64_t s = 0; s < v.S; ++s, w += KB) {
        __m512 x[NV];
        BASTION_UNROLL(24)
        for (int j = 0; j < NV; ++j)
          x[j] =
              j == NV - 1 ? _mm512_maskz_loadu_ps(mask, row + s + j * kLanes) : _mm512_loadu_ps(row + s + j * kLanes);
        BASTION_UNROLL(24)
        for (int kk = 0; kk < KB; ++kk) {
          const __m512 wk = _mm512_set1_ps(w[kk]);
          BASTION_UNROLL(24)
          for (int j = 0; j < NV; ++j) acc[kk][j] = _mm512_fmadd_ps(wk, x[j], acc[kk][j]);
        }
      }
    }
  }
  BASTION_UNROLL(24)
  for (int kk = 0; kk < KB; ++kk) {
    BASTION_UNROLL(24)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(out + kk * v.out_stride() + (v0 + j) * kLanes, acc[kk][j]);
  }
}

using ValidBlockFn = void (*)(float*, const float*, const float*, const float*, const ValidConv&, int64_t, __mmask16);

template <int KB, int... NV>
ValidBlockFn valid_block_for(int nv, std::integer_sequence<int, NV...>) {
  ValidBlockFn table[] = {nullptr, valid_block<KB, NV + 1>...};
  return table[nv];
}

ValidBlockFn valid_block_fn(int KB, int nv) {
  switch (KB) {
    case 8:
      return valid_block_for<8>(nv, std::make_integer_sequence<int, kAccumulators / 8>{});
    case 6:
      return valid_block_for<6>(nv, std::make_integer_sequence<int, kAccumulators / 6>{});
    default:
      return valid_block_for<4>(nv, std::make_integer_sequence<int, kAccumulators / 4>{});
  }
}

// out (K_padded, vectors * 16), row-strided = valid(in (C, Hp, Wp), packed filters) + bias_packed.
void valid_conv_sample(float* out, const float* in, const float* packed, const float* bias_packed, const ValidConv& v) {
  const int max_nv = kAccumulators / v.KB;
  const int64_t block_floats = static_cast<int64_t>(v.KB) * v.C * v.R * v.S;
  for (int64_t kb = 0; kb < v.K_padded / v.KB; ++kb) {
    for (int64_t v0 = 0; v0 < v.vectors; v0 += max_nv) {
      const int nv = static_cast<int>(std::min<int64_t>(max_nv, v.vectors - v0));
      const __mmask16 mask = v0 + nv == v.vectors ? v.last_mask() : static_cast<__mmask16>(0xFFFF);
      valid_block_fn(v.KB, nv)(out + kb * v.KB * v.out_stride(), in, packed + kb * block_floats,
                               bias_packed ? bias_packed + kb * v.KB : nullptr, v, v0, mask);
    }
  }
}

// Copies the valid (OH, OW) part of a row-strided buffer into a dense (channels, OH, OW) block.
void copy_out_rows(float* dst, const float* buffer, const ValidConv& v, int64_t channels) {
  for (int64_t k = 0; k < channels; ++k)
    for (int64_t oh = 0; oh < v.OH; ++oh)
      copy_row(dst + (k * v.OH + oh) * v.OW, buffer + k * v.out_stride() + oh * v.Wp, v.OW);
}

// ---- the three passes' plans: geometry of each valid convolution and the workspace layout --------------

ValidConv forward_conv(const Conv2dGeometry& g) {
  return valid_conv(g.C, g.H + 2 * g.padding, g.W + 2 * g.padding, g.K, g.R, g.S, g.padding);
}

// grad_in = valid(grad_out padded by R-1-pad, S-1-pad; flipped filters with C outputs and K inputs).
ValidConv grad_in_conv(const Conv2dGeometry& g) {
  return valid_conv(g.K, g.OH + 2 * (g.R - 1 - g.padding), g.OW + 2 * (g.S - 1 - g.padding), g.C, g.R, g.S,
                    g.R - 1 - g.padding);
}

int64_t forward_thread_floats(const Conv2dGeometry& g) {
  const ValidConv v = forward_conv(g);
  return (g.padding > 0 ? v.C * v.plane() : 0) + v.K_padded * v.out_stride();
}

int64_t grad_in_thread_floats(const Conv2dGeometry& g) {
  const ValidConv v = grad_in_conv(g);
  return v.C * v.plane() + v.K_padded * v.out_stride();
}

int64_t forward_shared_floats(const Conv2dGeometry& g) {
  const ValidConv v = forward_conv(g);
  return packed_filter_floats(v) + v.K_padded;
}

int64_t weight_grad_totals_floats(const ValidConv& v);

int64_t backward_shared_floats(const Conv2dGeometry& g) {
  const ValidConv f = forward_conv(g), b = grad_in_conv(g);
  return packed_filter_floats(b) + (g.padding > 0 ? g.N * f.C * f.plane() : 0) + g.N * f.K_padded * f.out_stride() +
         weight_grad_totals_floats(f);
}

// ---- weight gradient ------------------------------------------------------------------------------------

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

// The vector totals and partial sums, plus one vector of slack to align them to 64 bytes inside the workspace.
int64_t weight_grad_totals_floats(const ValidConv& v) {
  return (2 * weight_grad_items(v).count * kAccumulators + 1) * kLanes;
}

__m512* aligned_totals(float* at) {
  const auto address = reinterpret_cast<uintptr_t>(at);
  return reinterpret_cast<__m512*>((address + 63) & ~uintptr_t{63});
}

// grad_out (N, K, OH, OW) -> row-strided rows of width Wp with zeros in the dropped columns, the tail
// and the padded channels.
void grad_out_rows(float* rows, const float* grad_out, const Conv2dGeometry& g, const ValidConv& v, int threads) {
#pragma omp parallel for schedule(static) \
    num_threads(threads) if (g.N * v.K_padded * v.out_stride() >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* dst = rows + n * v.K_padded * v.out_stride();
    std::fill_n(dst, v.K_padded * v.out_stride(), 0.0f);
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        copy_row(dst + k * v.out_stride() + oh * v.Wp, grad_out + ((n * g.K + k) * g.OH + oh) * g.OW, g.OW);
  }
}

}  // namespace

bool conv2d_direct_supported(const Conv2dGeometry& g) { return g.stride == 1 && g.padding < g.R && g.padding < g.S; }

int64_t conv2d_direct_workspace_floats(const Conv2dGeometry& g, int threads) {
  BASTION_CHECK(threads >= 1, "conv2d_direct: threads must be >= 1, got ", threads);
  const int64_t shared = std::max(forward_shared_floats(g), backward_shared_floats(g));
  const int64_t row_strided = shared + threads * std::max(forward_thread_floats(g), grad_in_thread_floats(g));
  const bool any_channel_pass = conv_direct_detail::channel_forward_ok(g) || conv_direct_detail::channel_grad_in_ok(g);
  return any_channel_pass ? std::max(row_strided, conv_direct_detail::channel_workspace_floats(g, threads))
                          : row_strided;
}

namespace {

// The pass runs channel vectors: asked for (and possible), or Auto and measured faster.
bool use_channels(ConvDirectVariant variant, bool possible, double row_strided_lane_share) {
  // bench_kernels' conv ladder, 2026-11-23 (bench/RESULTS.md): channel vectors win where the row-strided
  // plan leaves a third of its lanes empty (cnn-fedcap conv2, 10x10 outputs, 69 % filled: forward x1.39)
  // and lose where it fills most (cnn-fedcap conv1, 88 %: forward x0.83).
  constexpr double kChannelVectorsBelowLaneShare = 0.75;
  if (!possible || variant == ConvDirectVariant::RowStrided) return false;
  return variant == ConvDirectVariant::ChannelVector || variant == ConvDirectVariant::ChannelScatter ||
         row_strided_lane_share < kChannelVectorsBelowLaneShare;
}

// Row-scatter blocks inside the channel-vector passes, wherever they apply: bench_kernels' conv ladder,
// 2026-11-26, Intel Xeon, 1 thread (bench/RESULTS.md): cnn-fedcap conv2 backward (grad_in 2 vectors)
// 39.3 -> 29.7 ms, conv1 forward on channel vectors 9.4 -> 7.6 ms; conv2 forward (4 vectors) unchanged.
bool use_row_scatter(ConvDirectVariant variant) {
  return variant == ConvDirectVariant::ChannelScatter || variant == ConvDirectVariant::Auto;
}

double lane_share(const ValidConv& v) {
  return static_cast<double>(v.OH * v.OW) / static_cast<double>(v.vectors * kLanes);
}

void row_strided_forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                         float* workspace, int threads) {
  const ValidConv v = forward_conv(g);
  float* packed = workspace;
  float* bias_packed = packed + packed_filter_floats(v);
  pack_filters(packed, weight, v, false);
  std::fill_n(bias_packed, v.K_padded, 0.0f);
  if (bias) std::copy_n(bias, g.K, bias_packed);
  float* thread_base = workspace + std::max(forward_shared_floats(g), backward_shared_floats(g));
  const int64_t thread_floats = std::max(forward_thread_floats(g), grad_in_thread_floats(g));
  const int64_t in_sample = g.C * g.H * g.W;
#pragma omp parallel for schedule(static) num_threads(threads) if (g.N * g.K * g.crs() * v.Q >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* mine = thread_base + omp_get_thread_num() * thread_floats;
    const float* planes = in + n * in_sample;
    float* rows = mine;
    if (g.padding > 0) {
      pad_planes(mine, planes, g.C, g.H, g.W, g.padding, g.padding);
      planes = mine;
      rows = mine + v.C * v.plane();
    }
    valid_conv_sample(rows, planes, packed, bias_packed, v);
    copy_out_rows(out + n * g.K * g.out_plane(), rows, v, g.K);
  }
}

void row_strided_grad_weight(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g,
                             float* workspace, int threads) {
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
  __m512* totals = aligned_totals(grad_rows + g.N * f.K_padded * f.out_stride());
  weight_grad(grad_weight, totals, grad_rows, inputs, f, g.N, threads);
}

void row_strided_grad_in(float* grad_in, const float* grad_out, const float* weight, const Conv2dGeometry& g,
                         float* workspace, int threads) {
  const ValidConv b = grad_in_conv(g);
  float* packed = workspace;
  pack_filters(packed, weight, b, true);
  float* thread_base = workspace + std::max(forward_shared_floats(g), backward_shared_floats(g));
  const int64_t thread_floats = std::max(forward_thread_floats(g), grad_in_thread_floats(g));
  const int64_t ph = g.R - 1 - g.padding, pw = g.S - 1 - g.padding;
#pragma omp parallel for schedule(static) num_threads(threads) if (g.N * g.K * g.crs() * b.Q >= kParallelMinWork)
  for (int64_t n = 0; n < g.N; ++n) {
    float* padded = thread_base + omp_get_thread_num() * thread_floats;
    float* rows = padded + b.C * b.plane();
    pad_planes(padded, grad_out + n * g.K * g.out_plane(), g.K, g.OH, g.OW, ph, pw);
    valid_conv_sample(rows, padded, packed, nullptr, b);
    copy_out_rows(grad_in + n * g.C * g.H * g.W, rows, b, g.C);
  }
}

}  // namespace

void conv2d_direct_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                               const Conv2dGeometry& g, float* workspace, int threads, ConvDirectVariant variant) {
  BASTION_ASSERT(conv2d_direct_supported(g));
  if (use_channels(variant, conv_direct_detail::channel_forward_ok(g), lane_share(forward_conv(g))))
    conv_direct_detail::channel_forward(out, in, weight, bias, g, workspace, threads, use_row_scatter(variant));
  else
    row_strided_forward(out, in, weight, bias, g, workspace, threads);
}

void conv2d_direct_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                int threads, ConvDirectVariant variant) {
  BASTION_ASSERT(conv2d_direct_supported(g));
  if (grad_bias) conv2d_backward_bias_cpu(grad_bias, grad_out, g);
  if (grad_weight && g.N == 0) std::fill_n(grad_weight, g.K * g.crs(), 0.0f);
  if (grad_weight && g.N > 0) {
    if (use_channels(variant, conv_direct_detail::channel_weight_ok(g), lane_share(forward_conv(g))))
      conv_direct_detail::channel_grad_weight(grad_weight, grad_out, in, g, workspace, threads);
    else
      row_strided_grad_weight(grad_weight, grad_out, in, g, workspace, threads);
  }
  if (grad_in) {
    // grad_in: channel vectors whenever C allows (they also skip the filter rows that meet only padding).
    if (use_channels(variant, conv_direct_detail::channel_grad_in_ok(g), 0.0))
      conv_direct_detail::channel_grad_in(grad_in, grad_out, weight, g, workspace, threads, use_row_scatter(variant));
    else
      row_strided_grad_in(grad_in, grad_out, weight, g, workspace, threads);
  }
}

#else  // no AVX-512: the op keeps im2col + GEMM

bool conv2d_direct_supported(const Conv2dGeometry&) { return false; }
int64_t conv2d_direct_workspace_floats(const Conv2dGeometry&, int) { return 0; }
void conv2d_direct_forward_cpu(float*, const float*, const float*, const float*, const Conv2dGeometry&, float*, int,
                               ConvDirectVariant) {
  BASTION_FAIL("conv2d_direct: built without AVX-512");
}
void conv2d_direct_backward_cpu(float*, float*, float*, const float*, const float*, const float*, const Conv2dGeometry&,
                                float*, int, ConvDirectVariant) {
  BASTION_FAIL("conv2d_direct: built without AVX-512");
}

#endif

}  // namespace bastion
