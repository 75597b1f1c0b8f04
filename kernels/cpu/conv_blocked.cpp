#include "kernels/cpu/conv_blocked.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_blocked_internal.h"
#include "kernels/cpu/parallel.h"
#include "tensor/error.h"

namespace bastion {

namespace {

using conv_blocked_detail::BlockedKernels;
using conv_blocked_detail::GatherArgs;
using conv_blocked_detail::GatherClass;
using conv_blocked_detail::kLanes;
using conv_blocked_detail::kTaps;
using conv_blocked_detail::kTile;
using conv_blocked_detail::pack_weights;
using conv_blocked_detail::run_weight;
using conv_blocked_detail::weight_pass;
using conv_blocked_detail::WeightPass;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// ---- gather passes (forward, grad_in) --------------------------------------------------------------

struct GatherPass {
  int64_t N, in_blocks, out_blocks;
  int64_t in_plane, out_plane;  // floats per channel block of a sample (padded input; output)
  int in_col_step, out_col_step;
  int KV;  // output blocks per register block
  int classes;
  GatherClass cls[4];
  int64_t in_sample() const { return in_blocks * in_plane; }
  int64_t out_sample() const { return out_blocks * out_plane; }
  int64_t w_group() const { return in_blocks * kTaps * kTile * KV; }  // floats between output groups
  const BlockedKernels* isa;
};

// Output blocks per register block. Two (32 channels x up to 12 pixels) where rows are 8 pixels or wider,
// four (64 channels x up to 6 pixels) on narrower rows, where two would leave most accumulators unused;
// fewer when the blocks do not divide. Measured (bench/conv_blocked_ladder.cpp, ResNet18's layers, batch 32,
// 1 thread, 2026-11-28): two beat four by 10-25 % on the 32-, 16- and 8-wide planes, four beat two by
// 10-25 % on the 4-wide ones. At most the instruction set's max_gather_kv (AVX2: 1).
int output_vectors(int64_t blocks, int64_t cols, const BlockedKernels& isa) {
  const int want = std::min(cols >= 8 ? 2 : 4, isa.max_gather_kv);
  for (int kv = want; kv > 1; kv /= 2)
    if (blocks % kv == 0) return kv;
  return 1;
}

int64_t max_pixels(int KV, const BlockedKernels& isa) {
  return std::min<int64_t>(isa.max_pixels, isa.accumulators / KV);
}

// gather_samples on narrow rows: the class's grid of pixels in row-major order, cut into blocks of equal
// size (64 = 6 + 6 + 6 + 6 + 5 + ...), each pixel's offsets in the block's tables, sample by sample.
void gather_flat_samples(float* out_blocked, const float* in_blocked, const float* w, const float* init,
                         const GatherPass& p, const GatherClass& cls, GatherArgs a, int64_t kg, int64_t cb0, int64_t n0,
                         int64_t n1) {
  constexpr int kMaxFlat = 16;
  const int64_t pixels = cls.rows * cls.cols, max_t = std::min<int64_t>(kMaxFlat, p.isa->max_pixels);
  const int64_t blocks = ceil_div(pixels, max_t), narrow = pixels / blocks, wide_blocks = pixels % blocks;
  int64_t pixel_in[kMaxFlat], pixel_out[kMaxFlat];
  a.pixel_in = pixel_in;
  a.pixel_out = pixel_out;
  for (int64_t n = n0; n < n1; ++n) {
    const float* in_n = in_blocked + n * p.in_sample() + cb0 * p.in_plane;
    float* out_n = out_blocked + n * p.out_sample() + kg * p.out_plane;
    int64_t i = 0, j = 0;  // the block's first pixel
    for (int64_t b = 0; b < blocks; ++b) {
      const int t = static_cast<int>(narrow + (b < wide_blocks ? 1 : 0));
      for (int k = 0; k < t; ++k) {
        pixel_in[k] = (i * cls.in_row_step + j * p.in_col_step) * kLanes;
        pixel_out[k] = (cls.out_origin + i * cls.out_row_step + j * p.out_col_step) * kLanes;
        if (++j == cls.cols) j = 0, ++i;
      }
      p.isa->gather_flat(t)(out_n, in_n, w, init, a);
    }
  }
}

// Samples [n0, n1) of output group kg, class cls, input blocks [cb0, cb0 + chunk).
void gather_samples(float* out_blocked, const float* in_blocked, const float* packed, const float* bias_or_zero,
                    const GatherPass& p, const GatherClass& cls, int64_t kg, int64_t cb0, int64_t chunk, int64_t n0,
                    int64_t n1) {
  GatherArgs a{p.out_plane, p.in_plane, kTaps * kTile * p.KV, std::min(chunk, p.in_blocks - cb0), &cls,
               nullptr,     nullptr};
  const float* w = packed + kg * p.w_group() + cb0 * kTaps * kTile * p.KV;
  const float* init = cb0 == 0 ? bias_or_zero + kg * p.KV * kLanes : nullptr;
  if (p.isa->gather_flat != nullptr && p.KV == 1 && cls.cols < p.isa->flat_below_cols) {
    gather_flat_samples(out_blocked, in_blocked, w, init, p, cls, a, kg, cb0, n0, n1);
    return;
  }
  // A row in blocks of equal width (32 = 11 + 11 + 10): a narrow block holds few accumulators.
  const int64_t blocks = ceil_div(cls.cols, max_pixels(p.KV, *p.isa)), narrow = cls.cols / blocks;
  const int64_t wide_blocks = cls.cols % blocks;
  for (int64_t n = n0; n < n1; ++n) {
    const float* in_n = in_blocked + n * p.in_sample() + cb0 * p.in_plane;
    float* out_n = out_blocked + n * p.out_sample() + kg * p.KV * p.out_plane;
    for (int64_t i = 0; i < cls.rows; ++i)
      for (int64_t b = 0, j0 = 0; b < blocks; ++b) {
        const int t = static_cast<int>(narrow + (b < wide_blocks ? 1 : 0));
        p.isa->gather(p.KV, t, p.in_col_step, p.out_col_step)(
            out_n + (cls.out_origin + i * cls.out_row_step + j0 * p.out_col_step) * kLanes,
            in_n + (i * cls.in_row_step + j0 * p.in_col_step) * kLanes, w, init, a);
        j0 += t;
      }
  }
}

// Input blocks per call: one output group's weights for them stay in L1 (one block at KV = 4).
int64_t input_chunk(const GatherPass& p, const GatherClass& cls) {
  const int64_t slab_bytes = static_cast<int64_t>(p.KV) * cls.ntaps * kTile * 4;
  return std::clamp<int64_t>(p.isa->l1_weight_bytes / slab_bytes, 1, p.in_blocks);
}

bool class_empty(const GatherClass& cls) { return cls.rows <= 0 || cls.cols <= 0 || cls.ntaps == 0; }

// Layers whose packed weights fit this run sample by sample (every output group of a sample before the
// next sample), so a sample's blocked copies are converted, used and converted back while in L2 (the 64-
// and 128-channel layers, up to 128 -> 256: 1.2 MB of weights); larger filter banks run output group by
// output group over all the thread's samples, so each group's weights are read once per pass. Measured
// (bench/conv_blocked_ladder.cpp, 3 interleaved rounds, 2026-11-28): 128 -> 256 at stride 2 sample by
// sample, forward 138.0 -> 143.0 GFLOP/s and grad_in 118.8 -> 127.7 (medians, every round faster);
// 256 -> 256 (2.4 MB) no clear difference either way, so it stays group by group.
constexpr int64_t kSampleOuterWeightBytes = 1536 * 1024;

// out_blocked (N, out_blocks, out_plane) = gather over in_blocked (+ bias). Each thread takes a fixed
// range of samples; before(n) runs before sample n is read, after(n) once its outputs are final.
template <class Before, class After>
void run_gather(float* out_blocked, const float* in_blocked, const float* packed, const float* bias_or_zero,
                const GatherPass& p, int threads, Before before, After after) {
  const int64_t work = p.N * p.out_sample() * p.in_blocks * kTaps * kLanes;
  const bool sample_outer = p.out_blocks * p.w_group() / p.KV * 4 <= kSampleOuterWeightBytes;
#pragma omp parallel num_threads(threads) if (work >= kParallelMinWork)
  {
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t n0 = p.N * me / team, n1 = p.N * (me + 1) / team;
    if (sample_outer) {
      for (int64_t n = n0; n < n1; ++n) {
        before(n);
        for (int64_t kg = 0; kg < p.out_blocks / p.KV; ++kg)
          for (int ci = 0; ci < p.classes; ++ci) {
            if (class_empty(p.cls[ci])) continue;
            const int64_t chunk = input_chunk(p, p.cls[ci]);
            for (int64_t cb0 = 0; cb0 < p.in_blocks; cb0 += chunk)
              gather_samples(out_blocked, in_blocked, packed, bias_or_zero, p, p.cls[ci], kg, cb0, chunk, n, n + 1);
          }
        after(n);
      }
    } else {
      for (int64_t n = n0; n < n1; ++n) before(n);
      for (int64_t kg = 0; kg < p.out_blocks / p.KV; ++kg)
        for (int ci = 0; ci < p.classes; ++ci) {
          if (class_empty(p.cls[ci])) continue;
          const int64_t chunk = input_chunk(p, p.cls[ci]);
          for (int64_t cb0 = 0; cb0 < p.in_blocks; cb0 += chunk)
            gather_samples(out_blocked, in_blocked, packed, bias_or_zero, p, p.cls[ci], kg, cb0, chunk, n0, n1);
        }
      for (int64_t n = n0; n < n1; ++n) after(n);
    }
  }
}

// ---- plans of the three passes ------------------------------------------------------------------------

GatherPass forward_pass(const Conv2dGeometry& g, const BlockedKernels& isa) {
  GatherPass p{};
  p.isa = &isa;
  const int64_t Wp = g.W + 2;
  p.N = g.N;
  p.in_blocks = g.C / kLanes;
  p.out_blocks = g.K / kLanes;
  p.in_plane = (g.H + 2) * Wp * kLanes;
  p.out_plane = g.OH * g.OW * kLanes;
  p.in_col_step = static_cast<int>(g.stride);
  p.out_col_step = 1;
  p.KV = output_vectors(p.out_blocks, g.OW, isa);
  p.classes = 1;
  GatherClass& c = p.cls[0];
  c.rows = g.OH;
  c.cols = g.OW;
  c.out_origin = 0;
  c.out_row_step = g.OW;
  c.in_row_step = g.stride * Wp;
  c.ntaps = kTaps;
  for (int t = 0; t < kTaps; ++t) {
    c.in_off[t] = ((t / 3) * Wp + t % 3) * kLanes;
    c.w_off[t] = t * kTile;
  }
  return p;
}

// grad_in[c, ih, iw] = sum over taps (r, s) with ih + 1 - r and iw + 1 - s multiples of the stride of
// dy[k, (ih + 1 - r) / st, (iw + 1 - s) / st] weight[k, c, r, s]. Class (ph, pw) holds the pixels
// ih = st i + ph, iw = st j + pw; its taps read grad_out (padded by one pixel) at row i + dr, column j + ds.
GatherPass grad_in_pass(const Conv2dGeometry& g, const BlockedKernels& isa) {
  GatherPass p{};
  p.isa = &isa;
  const int64_t st = g.stride, Wd = g.OW + 2;
  p.N = g.N;
  p.in_blocks = g.K / kLanes;
  p.out_blocks = g.C / kLanes;
  p.in_plane = (g.OH + 2) * Wd * kLanes;
  p.out_plane = g.H * g.W * kLanes;
  p.in_col_step = 1;
  p.out_col_step = static_cast<int>(st);
  p.KV = output_vectors(p.out_blocks, ceil_div(g.W, st), isa);
  p.classes = static_cast<int>(st * st);
  for (int64_t ph = 0; ph < st; ++ph)
    for (int64_t pw = 0; pw < st; ++pw) {
      GatherClass& c = p.cls[ph * st + pw];
      c.rows = ceil_div(g.H - ph, st);
      c.cols = ceil_div(g.W - pw, st);
      c.out_origin = ph * g.W + pw;
      c.out_row_step = st * g.W;
      c.in_row_step = Wd;
      c.ntaps = 0;
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t s = 0; s < 3; ++s) {
          if ((ph + 1 - r) % st != 0 || (pw + 1 - s) % st != 0) continue;
          const int64_t dr = floor_div(ph + 1 - r, st) + 1, ds = floor_div(pw + 1 - s, st) + 1;
          c.in_off[c.ntaps] = (dr * Wd + ds) * kLanes;
          c.w_off[c.ntaps] = (r * 3 + s) * kTile;
          ++c.ntaps;
        }
    }
  return p;
}

int64_t x_blocked_floats(const Conv2dGeometry& g) { return g.N * g.C * (g.H + 2) * (g.W + 2); }
int64_t dy_blocked_floats(const Conv2dGeometry& g) { return g.N * g.K * (g.OH + 2) * (g.OW + 2); }

// The forward converts and computes the batch in chunks of samples whose blocked copies stay under
// 48 MiB, so evaluation at batch 512 does not hold the whole batch twice over (ResNet18's first layer:
// 285 MB); no output depends on the chunking. At training's batch 64 every layer is one chunk: each
// chunk is one OpenMP region, and with 16 MiB chunks (3 regions for the first layer) the 2-thread
// forward of the 64-channel 32x32 layer ran 94.7 / 104.4 GFLOP/s on the loaded machine against 127.2 /
// 123.9 with one (bench/conv_blocked_ladder.cpp, 2 interleaved rounds, 2026-11-28); conv2d_direct's
// forward workspace for that layer was 37 MB.
constexpr int64_t kForwardChunkFloats = int64_t{12} << 20;

int64_t forward_sample_floats(const Conv2dGeometry& g) { return g.C * (g.H + 2) * (g.W + 2) + g.K * g.out_plane(); }

int64_t forward_chunk_samples(const Conv2dGeometry& g) {
  return std::clamp<int64_t>(kForwardChunkFloats / forward_sample_floats(g), 1, std::max<int64_t>(g.N, 1));
}

struct ForwardSpace {
  float *x, *out, *packed, *bias;
};

ForwardSpace forward_space(float* ws, const Conv2dGeometry& g) {
  ForwardSpace s;
  s.packed = ws;
  s.bias = s.packed + g.K * g.C * kTaps;
  s.x = s.bias + g.K;
  s.out = s.x + forward_chunk_samples(g) * g.C * (g.H + 2) * (g.W + 2);
  return s;
}

// The weight gradient of a stride-2 layer with 128 or more input channels, without AVX-512, is columns and
// NT GEMMs (conv2d_backward_weight_cpu) instead of the blocked weight pass. On the AMD EPYC Zen 3 (batch
// 64, 6 alternated runs; bench/RESULTS.md, "The stride-2 weight gradient by columns") it ran ResNet18's
// 128 -> 256 and 256 -> 512 layers 1.21-1.41x faster at 1 thread and 1.39-1.92x at 2 (per-run medians);
// on 64 -> 128 it was 1.22x at 1 thread and 0.84x at 2 (four panels of 16 channels for two threads), so
// that layer keeps the blocked pass. A chunk's GEMMs reduce over about kWeightColumns output pixels:
// 512 against 256 and 1024 in the same runs (on the two layers the rule takes, 1024 ran at 0.99-1.03x
// 512's speed at 1 thread and 0.87-0.95x at 2, medians of the per-run ratios).
constexpr int64_t kWeightColumns = 512;
// Its workspace holds one copy of a chunk's grad_out rows and panel columns per thread for this many
// threads: a fixed number, so the workspace does not depend on the machine (256 -> 512 at batch 64:
// 4 MB more than the blocked input copy it replaces).
constexpr int kMaxColumnThreads = 8;

bool weight_by_columns(const Conv2dGeometry& g) {
#if defined(__AVX512F__)
  (void)g;
  return false;  // measured only without AVX-512
#else
  return g.stride == 2 && g.C >= 128;
#endif
}

int64_t weight_column_chunk(const Conv2dGeometry& g) {
  const int64_t P = std::max<int64_t>(g.out_plane(), 1);
  return std::clamp<int64_t>((kWeightColumns + P - 1) / P, 1, std::max<int64_t>(g.N, 1));
}

// The backward's first region: the blocked input copy (read by the weight pass only), or the columns'
// chunk in its place; then grad_in's blocked result.
int64_t x_region_floats(const Conv2dGeometry& g) {
  if (!weight_by_columns(g)) return x_blocked_floats(g);
  return std::max(x_blocked_floats(g),
                  conv2d_backward_weight_workspace_floats(g, weight_column_chunk(g), kMaxColumnThreads));
}

// grad_in's blocked result takes the blocked input's place: the weight gradient, the only reader of the
// input, runs first, and the padded input (N, C, H + 2, W + 2) is larger than grad_in (N, C, H, W).
struct BackwardSpace {
  float *x, *dy, *grad_in, *packed, *totals;
};

BackwardSpace backward_space(float* ws, const Conv2dGeometry& g) {
  BackwardSpace s;
  s.x = ws;
  s.grad_in = ws;
  s.dy = s.x + x_region_floats(g);
  s.packed = s.dy + dy_blocked_floats(g);
  s.totals = s.packed + g.K * g.C * kTaps;
  return s;
}

void convert_in(float* dst, const float* src, int64_t N, int64_t C, int64_t H, int64_t W, const BlockedKernels& isa,
                int threads) {
  const int64_t dst_sample = C * (H + 2) * (W + 2);
#pragma omp parallel for schedule(static) num_threads(threads) if (N * C * H * W >= kParallelMinWork)
  for (int64_t n = 0; n < N; ++n) isa.to_blocked(dst + n * dst_sample, src + n * C * H * W, C, H, W, 1);
}

// The kernels of `isa`, or null where this build or this CPU cannot run them.
const BlockedKernels* kernels_for(ConvBlockedIsa isa) {
  switch (isa) {
    case ConvBlockedIsa::Avx512:
#if defined(__AVX512F__)
      return &conv_blocked_detail::avx512_kernels();
#else
      return nullptr;
#endif
    case ConvBlockedIsa::Avx2:
      return conv_blocked_detail::avx2_kernels();
    case ConvBlockedIsa::Auto:
      break;
  }
  return conv_blocked_detail::default_kernels();
}

bool geometry_supported(const Conv2dGeometry& g) {
  return g.R == 3 && g.S == 3 && g.padding == 1 && (g.stride == 1 || g.stride == 2) && g.C % kLanes == 0 &&
         g.K % kLanes == 0 && g.C > 0 && g.K > 0 && g.H > 0 && g.W > 0;
}

const BlockedKernels& checked_kernels(const Conv2dGeometry& g, ConvBlockedIsa isa) {
  BASTION_CHECK(conv2d_blocked_supported(g, isa),
                "conv2d_blocked: this layer or instruction set is not supported here");
  return *kernels_for(isa);
}

}  // namespace

namespace conv_blocked_detail {

const BlockedKernels* default_kernels() {
#if defined(__AVX512F__)
  return &avx512_kernels();
#else
  return avx2_kernels();
#endif
}

}  // namespace conv_blocked_detail

bool conv2d_blocked_isa_available(ConvBlockedIsa isa) { return kernels_for(isa) != nullptr; }

bool conv2d_blocked_supported(const Conv2dGeometry& g, ConvBlockedIsa isa) {
  return geometry_supported(g) && kernels_for(isa) != nullptr;
}

// With AVX-512 every supported layer (conv_blocked.h). With AVX2 only, stride 1, or stride 2 on planes at
// least 16 wide: the AVX2 ladder against im2col + OpenBLAS (bench/RESULTS.md, "The channel-blocked
// convolution on AVX2", 2026-11-30, AMD EPYC Zen 3) won on every stride-1 layer of ResNet18 and on 64 -> 128
// and 128 -> 256 at stride 2, and lost on 256 -> 512 at stride 2 (8x8 -> 4x4: forward 0.57x, backward 0.61x).
// The op asks conv2d_winograd_preferred (kernels/cpu/conv_winograd.h) first: on AVX2 Winograd F(2x2, 3x3)
// beat these kernels on the stride-1 layers with even planes, so there they run only the odd ones.
bool conv2d_blocked_preferred(const Conv2dGeometry& g) {
  if (!conv2d_blocked_supported(g)) return false;
#if defined(__AVX512F__)
  return true;
#else
  return g.stride == 1 || g.W >= 16;
#endif
}

int64_t conv2d_blocked_forward_workspace_floats(const Conv2dGeometry& g) {
  return g.K * g.C * kTaps + g.K + forward_chunk_samples(g) * forward_sample_floats(g);
}

int64_t conv2d_blocked_workspace_floats(const Conv2dGeometry& g) {
  const int64_t filters = g.K * g.C * kTaps;
  const int64_t backward = x_region_floats(g) + dy_blocked_floats(g) + 2 * filters;
  return std::max(conv2d_blocked_forward_workspace_floats(g), backward);
}

void conv2d_blocked_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                                const Conv2dGeometry& g, float* workspace, int threads, ConvBlockedIsa isa) {
  const BlockedKernels& kernels = checked_kernels(g, isa);
  const ForwardSpace s = forward_space(workspace, g);
  GatherPass p = forward_pass(g, kernels);
  pack_weights(s.packed, weight, g.K, g.C, p.KV, false, threads);
  if (bias)
    std::copy_n(bias, g.K, s.bias);
  else
    std::fill_n(s.bias, g.K, 0.0f);
  const int64_t in_sample = g.C * g.H * g.W, x_sample = g.C * (g.H + 2) * (g.W + 2), out_sample = g.K * g.out_plane();
  const int64_t chunk = forward_chunk_samples(g);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    p.N = std::min(chunk, g.N - n0);
    const float* in_chunk = in + n0 * in_sample;
    float* out_chunk = out + n0 * out_sample;
    run_gather(
        s.out, s.x, s.packed, s.bias, p, threads,
        [&](int64_t n) { kernels.to_blocked(s.x + n * x_sample, in_chunk + n * in_sample, g.C, g.H, g.W, 1); },
        [&](int64_t n) {
          kernels.from_blocked(out_chunk + n * out_sample, s.out + n * out_sample, g.K, g.out_plane());
        });
  }
}

void conv2d_blocked_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                 const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                 int threads, ConvBlockedIsa isa) {
  const BlockedKernels& kernels = checked_kernels(g, isa);
  if (grad_bias) conv2d_backward_bias_cpu(grad_bias, grad_out, g);
  if (!grad_in && !grad_weight) return;
  const BackwardSpace s = backward_space(workspace, g);
  convert_in(s.dy, grad_out, g.N, g.K, g.OH, g.OW, kernels, threads);
  if (grad_weight) {
    if (g.N == 0) {
      std::fill_n(grad_weight, g.K * g.crs(), 0.0f);
    } else if (weight_by_columns(g)) {
      conv2d_backward_weight_cpu(grad_weight, grad_out, in, g, weight_column_chunk(g), s.x,
                                 std::min(threads, kMaxColumnThreads));
    } else {
      convert_in(s.x, in, g.N, g.C, g.H, g.W, kernels, threads);
      const WeightPass p = weight_pass(g, kernels);
      run_weight(s.totals, s.dy, s.x, p, kernels, threads);
      // totals [k / (16 KV)][c / 16][c % 16][kv][tap][k % 16] -> grad_weight[k, c, tap]
      const int64_t CB = g.C / kLanes;
#pragma omp parallel for schedule(static) num_threads(threads) if (g.K * g.C * kTaps >= kParallelMinWork)
      for (int64_t k = 0; k < g.K; ++k) {
        const int64_t kg = k / (kLanes * p.KV), kv = (k / kLanes) % p.KV;
        for (int64_t c = 0; c < g.C; ++c) {
          const float* from = s.totals + (((kg * CB + c / kLanes) * kLanes + c % kLanes) * p.KV + kv) * kTaps * kLanes;
          for (int64_t t = 0; t < kTaps; ++t) grad_weight[(k * g.C + c) * kTaps + t] = from[t * kLanes + k % kLanes];
        }
      }
    }
  }
  if (grad_in) {
    const GatherPass p = grad_in_pass(g, kernels);
    pack_weights(s.packed, weight, g.K, g.C, p.KV, true, threads);
    float* zeros = s.totals;  // C floats of zero start values; the totals are read out above
    std::fill_n(zeros, g.C, 0.0f);
    const int64_t in_sample = g.C * g.H * g.W;
    run_gather(
        s.grad_in, s.dy, s.packed, zeros, p, threads, [](int64_t) {},
        [&](int64_t n) { kernels.from_blocked(grad_in + n * in_sample, s.grad_in + n * in_sample, g.C, g.H * g.W); });
  }
}

}  // namespace bastion
