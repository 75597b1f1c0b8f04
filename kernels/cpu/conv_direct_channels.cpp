// The channel-vector variant of conv2d_direct (kernels/cpu/conv_direct.h): 16 output channels per
// vector instead of 16 outputs of one plane, for layers whose planes are too small to fill the
// row-strided lanes (cnn-fedcap conv2: 10x10 outputs fill 100 of 144 lanes) but whose channel counts are
// multiples of 16. Every lane holds a real output, at the price of a transposition per sample.
//   forward      tmp[p, k] = sum_{c,r,s} in[c, oh + r, ow + s] * packed[c, r, s, k] (a broadcast input
//                times a vector of 16 weights), then out[k, p] = tmp[p, k] + bias[k]
//   grad_in      the same on grad_out padded by R-1-pad / S-1-pad with flipped, transposed filters
//   grad_weight  dw[k, c, r, s] = sum_n sum_p dyT[n, p, k] * in[n, c, oh + r, ow + s] (a vector of 16
//                output-gradient channels times a broadcast input), dyT = grad_out transposed per sample
// Register blocks: KV vectors of channels x JB positions of one output row (forward), KV x TB taps of
// one input channel (weight gradient); 24 accumulators as in the row-strided variant.
// Row-scatter blocks (5-wide filters, KV <= 2; ChannelScatter and Auto): the same sums with the loops of
// one filter row turned around. The 5 x KV weight vectors of the row stay in registers and each input
// column of the block is broadcast ONCE and multiplied into every output position it reaches (JB + 4
// broadcasts per filter row instead of 5 JB). Where the plane's first and last 4 columns are zero
// padding (grad_in of an unpadded layer) the block's edge columns are skipped, and with them the 29 %
// of cnn-fedcap conv2's grad_in multiply-adds that only met padding. Each output still receives its
// terms in (c, r, s) order, the gather block's order less its zero terms.
#include "kernels/cpu/conv_direct_internal.h"

#if defined(__AVX512F__)

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/unroll.h"

namespace bastion::conv_direct_detail {

namespace {

constexpr int64_t kLanes = 16;
constexpr int kAccumulators = 24;
constexpr int64_t kWeightGradChunk = 4;  // samples per pass over the items, as in the row-strided variant

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Channel vectors per block: 4 (64 channels) when K allows, else 2, else 1.
int channel_vectors(int64_t K) { return K % 64 == 0 ? 4 : K % 32 == 0 ? 2 : 1; }

// A valid stride-1 correlation of one sample: in (C, Hp, Wp) -> out (K, OH, OW), K % 16 == 0.
// ph: zero rows above (and below) the H_in data rows of each padded plane. Filter rows that fall in
// them are skipped: for grad_in (padded by R - 1 - pad) that is 29 % of the taps of cnn-fedcap conv2.
// pw: zero columns left (and right) of the data, which the row-scatter blocks may skip.
struct ChannelConv {
  int64_t C, Hp, Wp, K, R, S, OH, OW, ph, pw;
  int KV;
  int64_t out_plane() const { return OH * OW; }
  int64_t first_row(int64_t oh) const { return std::max<int64_t>(0, ph - oh); }     // filter rows [first,
  int64_t end_row(int64_t oh) const { return std::min<int64_t>(R, Hp - ph - oh); }  //   end) meet data
};

ChannelConv channel_conv(int64_t C, int64_t Hp, int64_t Wp, int64_t K, int64_t R, int64_t S, int64_t ph, int64_t pw) {
  return {C, Hp, Wp, K, R, S, Hp - R + 1, Wp - S + 1, ph, pw, channel_vectors(K)};
}

ChannelConv forward_conv(const Conv2dGeometry& g) {
  return channel_conv(g.C, g.H + 2 * g.padding, g.W + 2 * g.padding, g.K, g.R, g.S, g.padding, g.padding);
}

ChannelConv grad_in_conv(const Conv2dGeometry& g) {
  return channel_conv(g.K, g.OH + 2 * (g.R - 1 - g.padding), g.OW + 2 * (g.S - 1 - g.padding), g.C, g.R, g.S,
                      g.R - 1 - g.padding, g.S - 1 - g.padding);
}

// packed[c, r, s, k] (k fastest). flip_transpose: the grad_in filters, packed[k_layer, r, s, c_layer] =
// weight[k_layer, c_layer, R-1-r, S-1-s], i.e. v.C = the layer's K and v.K = the layer's C.
void pack_filters(float* packed, const float* weight, const ChannelConv& v, bool flip_transpose) {
  const int64_t RS = v.R * v.S;
  for (int64_t k = 0; k < v.K; ++k)
    for (int64_t c = 0; c < v.C; ++c)
      for (int64_t t = 0; t < RS; ++t)
        packed[(c * RS + t) * v.K + k] =
            flip_transpose ? weight[(c * v.K + k) * RS + (RS - 1 - t)] : weight[(k * v.C + c) * RS + t];
}

template <int KV, int JB>
inline void zero_block(__m512 (&acc)[KV][JB]) {
  BASTION_UNROLL(24)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(24)
    for (int j = 0; j < JB; ++j) acc[kv][j] = _mm512_setzero_ps();
  }
}

// dst[j * K + kv * 16 + lane] = acc[kv][j]: the block's JB positions of the transposed result (P, K).
template <int KV, int JB>
inline void store_block(float* dst, int64_t K, const __m512 (&acc)[KV][JB]) {
  BASTION_UNROLL(24)
  for (int j = 0; j < JB; ++j) {
    BASTION_UNROLL(24)
    for (int kv = 0; kv < KV; ++kv) _mm512_storeu_ps(dst + j * K + kv * kLanes, acc[kv][j]);
  }
}

// One block: channels [k0, k0 + 16 KV) x positions [ow0, ow0 + JB) of output row oh.
template <int KV, int JB>
void channel_block(float* tmp, const float* in, const float* packed, const ChannelConv& v, int64_t oh, int64_t ow0,
                   int64_t k0) {
  __m512 acc[KV][JB];
  zero_block(acc);
  const int64_t r0 = v.first_row(oh), r1 = v.end_row(oh);
  for (int64_t c = 0; c < v.C; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = in + (c * v.Hp + oh + r) * v.Wp + ow0;
      const float* w = packed + (c * v.R + r) * v.S * v.K + k0;
      for (int64_t s = 0; s < v.S; ++s, w += v.K) {
        __m512 wv[KV];
        BASTION_UNROLL(24)
        for (int kv = 0; kv < KV; ++kv) wv[kv] = _mm512_loadu_ps(w + kv * kLanes);
        BASTION_UNROLL(24)
        for (int j = 0; j < JB; ++j) {
          const __m512 x = _mm512_set1_ps(row[s + j]);
          BASTION_UNROLL(24)
          for (int kv = 0; kv < KV; ++kv) acc[kv][j] = _mm512_fmadd_ps(wv[kv], x, acc[kv][j]);
        }
      }
    }
  }
  store_block(tmp + (oh * v.OW + ow0) * v.K + k0, v.K, acc);
}

using ChannelBlockFn = void (*)(float*, const float*, const float*, const ChannelConv&, int64_t, int64_t, int64_t);

template <int KV, int... JB>
ChannelBlockFn channel_block_for(int jb, std::integer_sequence<int, JB...>) {
  ChannelBlockFn table[] = {nullptr, channel_block<KV, JB + 1>...};
  return table[jb];
}

ChannelBlockFn channel_block_fn(int KV, int jb) {
  switch (KV) {
    case 4:
      return channel_block_for<4>(jb, std::make_integer_sequence<int, kAccumulators / 4>{});
    case 2:
      return channel_block_for<2>(jb, std::make_integer_sequence<int, kAccumulators / 2>{});
    default:
      return channel_block_for<1>(jb, std::make_integer_sequence<int, kAccumulators>{});
  }
}

// ---- row-scatter blocks (5-wide filters) ----

constexpr int kScatterS = 5;
// Block widths that keep accumulators, the 5 KV weight vectors and the broadcast within 32 registers.
constexpr int kScatterMaxJb2 = 9, kScatterMaxJb1 = 12;

bool scatter_applies(const ChannelConv& v) { return v.S == kScatterS && v.KV <= 2; }

// The same block as channel_block<KV, JB>. LEFT / RIGHT: the block starts at the plane's first output
// column / ends at its last, and the plane has S - 1 zero columns on each side, so the block's first /
// last S - 1 input columns are all zero and are skipped.
template <int KV, int JB, bool LEFT, bool RIGHT>
void scatter_block(float* tmp, const float* in, const float* packed, const ChannelConv& v, int64_t oh, int64_t ow0,
                   int64_t k0) {
  constexpr int S = kScatterS, first_x = LEFT ? S - 1 : 0, end_x = JB + S - 1 - (RIGHT ? S - 1 : 0);
  __m512 acc[KV][JB];
  zero_block(acc);
  const int64_t r0 = v.first_row(oh), r1 = v.end_row(oh);
  for (int64_t c = 0; c < v.C; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = in + (c * v.Hp + oh + r) * v.Wp + ow0;
      const float* w = packed + (c * v.R + r) * S * v.K + k0;
      __m512 wv[S][KV];
      BASTION_UNROLL(8)
      for (int s = 0; s < S; ++s) {
        BASTION_UNROLL(8)
        for (int kv = 0; kv < KV; ++kv) wv[s][kv] = _mm512_loadu_ps(w + s * v.K + kv * kLanes);
      }
      // Input column x feeds output j = x - s for every tap s with 0 <= j < JB; the indices are
      // compile-time (a fold over x), so the accumulators stay in registers.
      [&]<int... X>(std::integer_sequence<int, X...>) {
        [[maybe_unused]] auto column = [&]<int x>(std::integral_constant<int, x>) {
          const __m512 b = _mm512_set1_ps(row[x]);
          [&]<int... Tap>(std::integer_sequence<int, Tap...>) {
            auto tap = [&]<int s>(std::integral_constant<int, s>) {
              if constexpr (x - s >= 0 && x - s < JB) {
                BASTION_UNROLL(8)
                for (int kv = 0; kv < KV; ++kv) acc[kv][x - s] = _mm512_fmadd_ps(wv[s][kv], b, acc[kv][x - s]);
              }
            };
            (tap(std::integral_constant<int, Tap>{}), ...);
          }
          (std::make_integer_sequence<int, S>{});
        };
        (column(std::integral_constant<int, first_x + X>{}), ...);
      }
      (std::make_integer_sequence<int, std::max(0, end_x - first_x)>{});  // JB < 4 with both edges: never run
    }
  }
  store_block(tmp + (oh * v.OW + ow0) * v.K + k0, v.K, acc);
}

template <int KV, bool LEFT, bool RIGHT, int... JB>
ChannelBlockFn scatter_block_for(int jb, std::integer_sequence<int, JB...>) {
  ChannelBlockFn table[] = {nullptr, scatter_block<KV, JB + 1, LEFT, RIGHT>...};
  return table[jb];
}

template <int KV, int MaxJb>
ChannelBlockFn scatter_block_fn_kv(int jb, bool left, bool right) {
  constexpr auto widths = std::make_integer_sequence<int, MaxJb>{};
  if (left && right) return scatter_block_for<KV, true, true>(jb, widths);
  if (left) return scatter_block_for<KV, true, false>(jb, widths);
  if (right) return scatter_block_for<KV, false, true>(jb, widths);
  return scatter_block_for<KV, false, false>(jb, widths);
}

ChannelBlockFn scatter_block_fn(int KV, int jb, bool left, bool right) {
  return KV == 2 ? scatter_block_fn_kv<2, kScatterMaxJb2>(jb, left, right)
                 : scatter_block_fn_kv<1, kScatterMaxJb1>(jb, left, right);
}

// out (K, OH, OW) = valid(in, packed) + bias, through tmp (OH * OW, K). scatter: row-scatter blocks
// (the caller checked scatter_applies).
void channel_conv_sample(float* out, const float* in, const float* packed, const float* bias, const ChannelConv& v,
                         float* tmp, bool scatter) {
  // A row in equal blocks (14 = 7 + 7, not 12 + 2): a short tail block would hold few accumulators.
  const int64_t max_jb = !scatter ? kAccumulators / v.KV : v.KV == 2 ? kScatterMaxJb2 : kScatterMaxJb1;
  const int64_t blocks = ceil_div(v.OW, max_jb), even_jb = ceil_div(v.OW, blocks);
  const bool zero_edges = v.pw == kScatterS - 1;  // S - 1 zero columns each side
  for (int64_t oh = 0; oh < v.OH; ++oh)
    for (int64_t ow0 = 0; ow0 < v.OW; ow0 += even_jb) {
      const int jb = static_cast<int>(std::min<int64_t>(even_jb, v.OW - ow0));
      const ChannelBlockFn block =
          scatter ? scatter_block_fn(v.KV, jb, zero_edges && ow0 == 0, zero_edges && ow0 + jb == v.OW)
                  : channel_block_fn(v.KV, jb);
      for (int64_t k0 = 0; k0 < v.K; k0 += v.KV * kLanes) block(tmp, in, packed, v, oh, ow0, k0);
    }
  const int64_t P = v.out_plane();
  for (int64_t k = 0; k < v.K; ++k) {
    const float b = bias ? bias[k] : 0.0f;
    for (int64_t p = 0; p < P; ++p) out[k * P + p] = tmp[p * v.K + k] + b;
  }
}

int64_t filter_floats(const Conv2dGeometry& g) { return g.K * g.C * g.R * g.S; }

// Per-thread floats of the forward / grad_in sample pass: the padded input and the transposed result.
int64_t sample_thread_floats(const ChannelConv& v, bool padded) {
  return (padded ? v.C * v.Hp * v.Wp : 0) + v.out_plane() * v.K;
}

void run_samples(float* out, const float* in, int64_t in_sample, int64_t ph, int64_t pw, const float* packed,
                 const float* bias, const ChannelConv& v, int64_t N, float* thread_base, int64_t thread_floats,
                 int threads, bool scatter) {
  const bool padded = ph > 0 || pw > 0;
  const int64_t H = v.Hp - 2 * ph, W = v.Wp - 2 * pw;
#pragma omp parallel for schedule(static) \
    num_threads(threads) if (N * v.K * v.C * v.R * v.S * v.out_plane() >= kParallelMinWork)
  for (int64_t n = 0; n < N; ++n) {
    float* mine = thread_base + omp_get_thread_num() * thread_floats;
    const float* planes = in + n * in_sample;
    float* tmp = mine;
    if (padded) {
      pad_planes(mine, planes, v.C, H, W, ph, pw);
      planes = mine;
      tmp = mine + v.C * v.Hp * v.Wp;
    }
    channel_conv_sample(out + n * v.K * v.out_plane(), planes, packed, bias, v, tmp, scatter);
  }
}

// ---- weight gradient ----

template <int KV, int TB>
void weight_block(__m512* totals, const float* dyT, const float* inputs, const ChannelConv& v, int64_t nb,
                  int64_t in_sample, int64_t k0, const int64_t* taps) {
  __m512 acc[KV][TB];
  BASTION_UNROLL(24)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(24)
    for (int t = 0; t < TB; ++t) acc[kv][t] = _mm512_setzero_ps();
  }
  for (int64_t n = 0; n < nb; ++n) {
    const float* x = inputs + n * in_sample;
    const float* dy = dyT + n * v.out_plane() * v.K + k0;
    for (int64_t oh = 0; oh < v.OH; ++oh) {
      for (int64_t ow = 0; ow < v.OW; ++ow, dy += v.K) {
        const float* base = x + oh * v.Wp + ow;
        __m512 g[KV];
        BASTION_UNROLL(24)
        for (int kv = 0; kv < KV; ++kv) g[kv] = _mm512_loadu_ps(dy + kv * kLanes);
        BASTION_UNROLL(24)
        for (int t = 0; t < TB; ++t) {
          const __m512 xt = _mm512_set1_ps(base[taps[t]]);
          BASTION_UNROLL(24)
          for (int kv = 0; kv < KV; ++kv) acc[kv][t] = _mm512_fmadd_ps(g[kv], xt, acc[kv][t]);
        }
      }
    }
  }
  BASTION_UNROLL(24)
  for (int kv = 0; kv < KV; ++kv) {
    BASTION_UNROLL(24)
    for (int t = 0; t < TB; ++t) totals[kv * TB + t] = _mm512_add_ps(totals[kv * TB + t], acc[kv][t]);
  }
}

using WeightBlockFn = void (*)(__m512*, const float*, const float*, const ChannelConv&, int64_t, int64_t, int64_t,
                               const int64_t*);

template <int KV, int... TB>
WeightBlockFn weight_block_for(int tb, std::integer_sequence<int, TB...>) {
  WeightBlockFn table[] = {nullptr, weight_block<KV, TB + 1>...};
  return table[tb];
}

WeightBlockFn weight_block_fn(int KV, int tb) {
  switch (KV) {
    case 4:
      return weight_block_for<4>(tb, std::make_integer_sequence<int, kAccumulators / 4>{});
    case 2:
      return weight_block_for<2>(tb, std::make_integer_sequence<int, kAccumulators / 2>{});
    default:
      return weight_block_for<1>(tb, std::make_integer_sequence<int, kAccumulators>{});
  }
}

// tap_step: taps per block, equal blocks as in the forward (25 taps at KV = 4: 5 x 5, not 6 + 6 + 6 + 6 + 1,
// whose 1-tap block holds 4 accumulators and ran 2.6x slower per tap than the 6-tap blocks).
struct WeightItems {
  int64_t groups, tap_blocks, tap_step, count;
};

WeightItems weight_items(const ChannelConv& v) {
  const int64_t max_tb = kAccumulators / v.KV, tap_blocks = ceil_div(v.R * v.S, max_tb);
  const int64_t groups = v.K / (v.KV * kLanes);
  return {groups, tap_blocks, ceil_div(v.R * v.S, tap_blocks), groups * v.C * tap_blocks};
}

int64_t weight_shared_floats(const Conv2dGeometry& g) {
  const ChannelConv v = forward_conv(g);
  const int64_t padded_inputs = g.padding > 0 ? g.N * v.C * v.Hp * v.Wp : 0;
  const int64_t transposed = kWeightGradChunk * v.out_plane() * v.K;
  return padded_inputs + transposed + (weight_items(v).count * kAccumulators + 1) * kLanes;
}

__m512* aligned_vectors(float* at) {
  const auto address = reinterpret_cast<uintptr_t>(at);
  return reinterpret_cast<__m512*>((address + 63) & ~uintptr_t{63});
}

}  // namespace

bool channel_forward_ok(const Conv2dGeometry& g) { return g.K % kLanes == 0; }
bool channel_grad_in_ok(const Conv2dGeometry& g) { return g.C % kLanes == 0; }
bool channel_weight_ok(const Conv2dGeometry& g) { return g.K % kLanes == 0; }

int64_t channel_workspace_floats(const Conv2dGeometry& g, int threads) {
  const bool padded = g.padding > 0;
  const int64_t per_thread =
      std::max(sample_thread_floats(forward_conv(g), padded), sample_thread_floats(grad_in_conv(g), true));
  return filter_floats(g) + g.K + threads * per_thread + weight_shared_floats(g);
}

void channel_forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                     float* workspace, int threads, bool row_scatter) {
  const ChannelConv v = forward_conv(g);
  float* packed = workspace;
  pack_filters(packed, weight, v, false);
  float* thread_base = packed + filter_floats(g) + g.K;
  const int64_t per_thread =
      std::max(sample_thread_floats(forward_conv(g), g.padding > 0), sample_thread_floats(grad_in_conv(g), true));
  run_samples(out, in, g.C * g.H * g.W, g.padding, g.padding, packed, bias, v, g.N, thread_base, per_thread, threads,
              row_scatter && scatter_applies(v));
}

void channel_grad_in(float* grad_in, const float* grad_out, const float* weight, const Conv2dGeometry& g,
                     float* workspace, int threads, bool row_scatter) {
  const ChannelConv v = grad_in_conv(g);
  float* packed = workspace;
  pack_filters(packed, weight, v, true);
  float* thread_base = packed + filter_floats(g) + g.K;
  const int64_t per_thread =
      std::max(sample_thread_floats(forward_conv(g), g.padding > 0), sample_thread_floats(grad_in_conv(g), true));
  run_samples(grad_in, grad_out, g.K * g.out_plane(), g.R - 1 - g.padding, g.S - 1 - g.padding, packed, nullptr, v, g.N,
              thread_base, per_thread, threads, row_scatter && scatter_applies(v));
}

void channel_grad_weight(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g,
                         float* workspace, int threads) {
  const ChannelConv v = forward_conv(g);
  const int64_t RS = v.R * v.S, P = v.out_plane(), in_sample = v.C * v.Hp * v.Wp;
  float* shared = workspace + channel_workspace_floats(g, threads) - weight_shared_floats(g);  // the last region
  float* padded_inputs = shared;
  float* transposed = padded_inputs + (g.padding > 0 ? g.N * in_sample : 0);
  __m512* totals = aligned_vectors(transposed + kWeightGradChunk * P * v.K);
  const float* inputs = in;
  if (g.padding > 0) {
    for (int64_t n = 0; n < g.N; ++n)
      pad_planes(padded_inputs + n * in_sample, in + n * g.C * g.H * g.W, g.C, g.H, g.W, g.padding, g.padding);
    inputs = padded_inputs;
  }
  const WeightItems items = weight_items(v);
  for (int64_t i = 0; i < items.count * kAccumulators; ++i) totals[i] = _mm512_setzero_ps();
  for (int64_t n0 = 0; n0 < g.N; n0 += kWeightGradChunk) {
    const int64_t nb = std::min(kWeightGradChunk, g.N - n0);
    for (int64_t n = 0; n < nb; ++n)
      for (int64_t k = 0; k < v.K; ++k)
        for (int64_t p = 0; p < P; ++p) transposed[(n * P + p) * v.K + k] = grad_out[((n0 + n) * v.K + k) * P + p];
#pragma omp parallel for schedule(static) num_threads(threads) if (nb * v.K * v.C * RS * P >= kParallelMinWork)
    for (int64_t item = 0; item < items.count; ++item) {
      const int64_t group = item / (v.C * items.tap_blocks), c = (item / items.tap_blocks) % v.C;
      const int64_t t0 = (item % items.tap_blocks) * items.tap_step;
      const int tb = static_cast<int>(std::min(items.tap_step, RS - t0));
      int64_t taps[kAccumulators];
      for (int t = 0; t < tb; ++t) taps[t] = ((t0 + t) / v.S) * v.Wp + (t0 + t) % v.S;
      weight_block_fn(v.KV, tb)(totals + item * kAccumulators, transposed, inputs + n0 * in_sample + c * v.Hp * v.Wp, v,
                                nb, in_sample, group * v.KV * kLanes, taps);
    }
  }
  for (int64_t item = 0; item < items.count; ++item) {
    const int64_t group = item / (v.C * items.tap_blocks), c = (item / items.tap_blocks) % v.C;
    const int64_t t0 = (item % items.tap_blocks) * items.tap_step, tb = std::min(items.tap_step, RS - t0);
    for (int64_t kv = 0; kv < v.KV; ++kv)
      for (int64_t t = 0; t < tb; ++t) {
        alignas(64) float lanes[kLanes];
        _mm512_store_ps(lanes, totals[item * kAccumulators + kv * tb + t]);
        for (int64_t l = 0; l < kLanes; ++l)
          grad_weight[((group * v.KV + kv) * kLanes + l) * v.C * RS + c * RS + t0 + t] = lanes[l];
      }
  }
}

}  // namespace bastion::conv_direct_detail

#endif  // __AVX512F__
