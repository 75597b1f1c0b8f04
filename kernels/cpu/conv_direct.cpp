#include "kernels/cpu/conv_direct.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/conv_direct_avx2.h"
#include "kernels/cpu/conv_direct_internal.h"
#include "kernels/cpu/conv_direct_rows.h"
#include "kernels/cpu/parallel.h"
#include "tensor/error.h"
#include "kernels/cpu/unroll.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace bastion {

namespace {

bool direct_geometry(const Conv2dGeometry& g) { return g.stride == 1 && g.padding < g.R && g.padding < g.S; }

// The row-strided plan on AVX2 (kernels/cpu/conv_direct_avx2.cpp): the only variant on CPUs without
// AVX-512, and RowStridedAvx2 on the others.
void avx2_forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                  float* workspace, int threads) {
  BASTION_CHECK(conv_direct_avx2::available(), "conv2d_direct: the AVX2 kernels need a CPU with AVX2 and FMA");
  conv_direct_avx2::forward(out, in, weight, bias, g, workspace, threads);
}

// What every backward variant does before its own passes: the bias gradient, and an empty batch's weight
// gradient (zero; the passes assume N > 0).
void backward_bias_and_empty_batch(float* grad_weight, float* grad_bias, const float* grad_out,
                                   const Conv2dGeometry& g) {
  if (grad_bias) conv2d_backward_bias_cpu(grad_bias, grad_out, g);
  if (grad_weight && g.N == 0) std::fill_n(grad_weight, g.K * g.crs(), 0.0f);
}

void avx2_backward(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out, const float* in,
                   const float* weight, const Conv2dGeometry& g, float* workspace, int threads) {
  BASTION_CHECK(conv_direct_avx2::available(), "conv2d_direct: the AVX2 kernels need a CPU with AVX2 and FMA");
  backward_bias_and_empty_batch(grad_weight, grad_bias, grad_out, g);
  if (grad_weight && g.N > 0) conv_direct_avx2::grad_weight(grad_weight, grad_out, in, g, workspace, threads);
  if (grad_in) conv_direct_avx2::grad_in(grad_in, grad_out, weight, g, workspace, threads);
}

int64_t avx2_workspace_floats(const Conv2dGeometry& g, int threads) {
  return conv_direct_avx2::available() ? conv_direct_avx2::workspace_floats(g, threads) : 0;
}

}  // namespace

#if defined(__AVX512F__)

using conv_direct_rows::copy_row;

void conv_direct_detail::pad_planes(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t ph,
                                    int64_t pw) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
  std::fill_n(dst, C * Hp * Wp, 0.0f);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h) copy_row(dst + (c * Hp + h + ph) * Wp + pw, src + (c * H + h) * W, W);
}

namespace {

using conv_direct_detail::pad_planes;
using namespace conv_direct_rows;

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

int64_t backward_shared_floats(const Conv2dGeometry& g) {
  const ValidConv f = forward_conv(g), b = grad_in_conv(g);
  return packed_filter_floats(b) + (g.padding > 0 ? g.N * f.C * f.plane() : 0) + g.N * f.K_padded * f.out_stride() +
         weight_grad_totals_floats(f);
}

}  // namespace

bool conv2d_direct_supported(const Conv2dGeometry& g) { return direct_geometry(g); }

bool conv2d_direct_preferred(const Conv2dGeometry& g) { return conv2d_direct_supported(g); }

// Enough for every variant, RowStridedAvx2 included.
int64_t conv2d_direct_workspace_floats(const Conv2dGeometry& g, int threads) {
  BASTION_CHECK(threads >= 1, "conv2d_direct: threads must be >= 1, got ", threads);
  const int64_t shared = std::max(forward_shared_floats(g), backward_shared_floats(g));
  const int64_t row_strided = shared + threads * std::max(forward_thread_floats(g), grad_in_thread_floats(g));
  const bool any_channel_pass = conv_direct_detail::channel_forward_ok(g) || conv_direct_detail::channel_grad_in_ok(g);
  const int64_t avx512 =
      any_channel_pass ? std::max(row_strided, conv_direct_detail::channel_workspace_floats(g, threads)) : row_strided;
  return std::max(avx512, avx2_workspace_floats(g, threads));
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
  if (variant == ConvDirectVariant::RowStridedAvx2) return avx2_forward(out, in, weight, bias, g, workspace, threads);
  if (use_channels(variant, conv_direct_detail::channel_forward_ok(g), lane_share(forward_conv(g))))
    conv_direct_detail::channel_forward(out, in, weight, bias, g, workspace, threads, use_row_scatter(variant));
  else
    row_strided_forward(out, in, weight, bias, g, workspace, threads);
}

void conv2d_direct_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                int threads, ConvDirectVariant variant) {
  BASTION_ASSERT(conv2d_direct_supported(g));
  if (variant == ConvDirectVariant::RowStridedAvx2)
    return avx2_backward(grad_in, grad_weight, grad_bias, grad_out, in, weight, g, workspace, threads);
  backward_bias_and_empty_batch(grad_weight, grad_bias, grad_out, g);
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

#else  // no AVX-512: the row-strided plan on AVX2 where the CPU has it, else the op keeps im2col + GEMM

bool conv2d_direct_supported(const Conv2dGeometry& g) { return conv_direct_avx2::available() && direct_geometry(g); }

// The AVX2 ladder (bench_kernels, AMD EPYC Zen 3, 1 thread, 2026-11-30; bench/RESULTS.md, "The direct
// convolution on AVX2"): forward plus backward as training runs them, direct against im2col + OpenBLAS, won
// on every layer with at most 32 output channels and a reduction C R S of at most 150 (LeNet's, cnn-fedfsa's,
// cnn-fedcap's first layer: 1.07-3.25x) and tied or lost on every layer with 50 or more (ResNet18's stem
// 1.04x, cnn-fedrep's first layer 1.00x, cnn-fedcap's second 0.83x, cnn-bapfl's second 0.67x, ResNet18's 3x3
// layers 0.29-0.85x).
bool conv2d_direct_preferred(const Conv2dGeometry& g) {
  constexpr int64_t kMaxOutputChannels = 32, kMaxReduction = 150;
  return conv2d_direct_supported(g) && g.K <= kMaxOutputChannels && g.crs() <= kMaxReduction;
}

int64_t conv2d_direct_workspace_floats(const Conv2dGeometry& g, int threads) {
  BASTION_CHECK(threads >= 1, "conv2d_direct: threads must be >= 1, got ", threads);
  return avx2_workspace_floats(g, threads);
}

// Every variant runs the AVX2 row-strided plan: the channel-vector passes are AVX-512 only.
void conv2d_direct_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                               const Conv2dGeometry& g, float* workspace, int threads, ConvDirectVariant) {
  BASTION_ASSERT(direct_geometry(g));
  avx2_forward(out, in, weight, bias, g, workspace, threads);
}

void conv2d_direct_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                int threads, ConvDirectVariant) {
  BASTION_ASSERT(direct_geometry(g));
  avx2_backward(grad_in, grad_weight, grad_bias, grad_out, in, weight, g, workspace, threads);
}

#endif

}  // namespace bastion
