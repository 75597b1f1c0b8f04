#include "kernels/cpu/conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "tensor/error.h"

namespace bastion {

namespace {

// 5 Mi floats (20 MiB) of columns per chunk: large enough that LeNet and both cnn-fedcap variants do a
// whole batch of 64 in one GEMM, so the backward reuses the forward's columns (the op keeps them when the
// batch is one chunk). The 3-channel cnn-fedcap's conv2 needs 80 Ki column floats a sample: at the former
// 4 Mi it ran in chunks of 52 and 12 and redid its im2col in the backward, and 5 Mi made its training
// step 1.09x faster at 1 and 2 threads on the AMD EPYC Zen 3 (ABBA x 3, bench/RESULTS.md, "One chunk
// for cnn-fedcap"). Small enough to stay far below memory limits for ResNet18.
constexpr int64_t kConvMaxColumnFloats = int64_t{5} << 20;

// Output columns ow whose input column ow*stride - pad + s lies in [0, W): [lo, hi).
void valid_range(int64_t s, int64_t stride, int64_t pad, int64_t W, int64_t OW, int64_t* lo, int64_t* hi) {
  const int64_t first = pad - s;  // need ow*stride >= first
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t last = W - 1 + pad - s;  // need ow*stride <= last
  *hi = last < 0 ? 0 : std::min(OW, last / stride + 1);
  *lo = std::min(*lo, *hi);
}

}  // namespace

Conv2dGeometry conv2d_geometry(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                               int64_t stride, int64_t padding) {
  BASTION_CHECK(stride >= 1 && padding >= 0, "conv2d: stride ", stride, " must be >= 1 and padding ", padding, " >= 0");
  BASTION_CHECK(H + 2 * padding >= R && W + 2 * padding >= S, "conv2d: kernel ", R, "x", S,
                " larger than padded input ", H + 2 * padding, "x", W + 2 * padding);
  const int64_t OH = (H + 2 * padding - R) / stride + 1;
  const int64_t OW = (W + 2 * padding - S) / stride + 1;
  return Conv2dGeometry{N, C, H, W, K, R, S, stride, padding, OH, OW};
}

int64_t conv2d_chunk_samples(const Conv2dGeometry& g) {
  const int64_t per_sample = std::max<int64_t>(g.crs() * g.out_plane(), 1);
  return std::clamp<int64_t>(kConvMaxColumnFloats / per_sample, 1, std::max<int64_t>(g.N, 1));
}

int64_t conv2d_workspace_floats(const Conv2dGeometry& g) {
  const int64_t cols = conv2d_chunk_samples(g) * g.out_plane();
  return cols * (g.crs() + g.K);  // columns + the (K, nb*P) GEMM result
}

namespace {
// Row `row` (c, r, s) of the columns of samples [n_begin, n_begin + n_count): n_count * P floats at dst.
void im2col_row(float* __restrict dst, const float* __restrict in, const Conv2dGeometry& g, int64_t row,
                int64_t n_begin, int64_t n_count) {
  const int64_t P = g.out_plane();
  const int64_t c = row / (g.R * g.S), r = (row / g.S) % g.R, s = row % g.S;
  int64_t lo, hi;
  valid_range(s, g.stride, g.padding, g.W, g.OW, &lo, &hi);
  for (int64_t n = 0; n < n_count; ++n) {
    const float* plane = in + ((n_begin + n) * g.C + c) * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      float* dst_row = dst + n * P + oh * g.OW;
      const int64_t ih = oh * g.stride - g.padding + r;
      if (ih < 0 || ih >= g.H) {
        std::fill_n(dst_row, g.OW, 0.0f);
        continue;
      }
      const float* src = plane + ih * g.W - g.padding + s;
      std::fill_n(dst_row, lo, 0.0f);
      if (g.stride == 1) {
        // Written as a plain loop for short rows (24 floats for LeNet), where a memcpy call cost 10 % of a
        // LeNet step. GCC 12 still turns it into a memmove call here (perf, 2026-11-30). 8-float block
        // copies that avoid the call were not measurably faster (bench/RESULTS.md, "col2im in the
        // columns' order", the row copy tried there).
        for (int64_t ow = lo; ow < hi; ++ow) dst_row[ow] = src[ow];
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) dst_row[ow] = src[ow * g.stride];
      }
      std::fill(dst_row + hi, dst_row + g.OW, 0.0f);
    }
  }
}
}  // namespace

void im2col_cpu(float* __restrict cols, const float* __restrict in, const Conv2dGeometry& g, int64_t n_begin,
                int64_t n_count) {
  const int64_t row_len = n_count * g.out_plane();
#pragma omp parallel for schedule(static) if (g.crs() * row_len >= kParallelMinWork)
  for (int64_t row = 0; row < g.crs(); ++row) im2col_row(cols + row * row_len, in, g, row, n_begin, n_count);
}

// Columns read in memory order: channel c, then its rows (r, s), then the samples. The former loop, one
// (sample, channel) plane at a time, jumped between the plane's R S rows, 25.6 KB apart per sample for
// cnn-fedcap's conv2; this order ran 1.85-4.5x faster on the Intel Xeon (bench/RESULTS.md, "conv_col2im_v2")
// and 1.33x (cnn-fedcap conv2) and 2.1x (ResNet18 layer1) on the AMD EPYC Zen 3 (bench/RESULTS.md, "col2im in
// the columns' order"). Every element still receives its contributions in ascending (r, s) order, at most
// one per (r, s), so the sums are bitwise the former ones. One channel per iteration: each input plane is
// written by one thread, and the sums do not depend on the thread count.
void col2im_add_cpu(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count) {
  const int64_t P = g.out_plane(), row_len = n_count * P;
#pragma omp parallel for schedule(static) if (g.crs() * row_len >= kParallelMinWork)
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t r = 0; r < g.R; ++r) {
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t row = (c * g.R + r) * g.S + s;
        int64_t lo, hi;
        valid_range(s, g.stride, g.padding, g.W, g.OW, &lo, &hi);
        for (int64_t n = 0; n < n_count; ++n) {
          float* plane = in_grad + ((n_begin + n) * g.C + c) * g.H * g.W;
          const float* src = cols + row * row_len + n * P;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * g.stride - g.padding + r;
            if (ih < 0 || ih >= g.H) continue;
            float* __restrict dst = plane + ih * g.W - g.padding + s;
            const float* __restrict src_row = src + oh * g.OW;
            if (g.stride == 1) {
#pragma omp simd
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += src_row[ow];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.stride] += src_row[ow];
            }
          }
        }
      }
    }
  }
}

void conv2d_forward_cpu(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                        float* workspace) {
  const int64_t P = g.out_plane(), chunk = conv2d_chunk_samples(g);
  float* cols = workspace;
  float* tmp = workspace + chunk * P * g.crs();
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.N - n0);
    im2col_cpu(cols, in, g, n0, nb);
    gemm_cpu(false, false, g.K, nb * P, g.crs(), 1.0f, weight, g.crs(), cols, nb * P, 0.0f, tmp, nb * P);
#pragma omp parallel for schedule(static) if (nb * g.K * P >= kParallelMinWork)
    for (int64_t nk = 0; nk < nb * g.K; ++nk) {
      const int64_t n = nk / g.K, k = nk % g.K;
      const float b = bias ? bias[k] : 0.0f;
      const float* src = tmp + k * nb * P + n * P;
      float* dst = out + ((n0 + n) * g.K + k) * P;
      for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + b;
    }
  }
}

namespace {
// Sum of one output plane in 16 float lanes (element p goes to lane p % 16), then the lanes in order:
// a fixed order the compiler can vectorize, unlike one serial double sum (7 % of a LeNet-28 step).
double plane_sum(const float* src, int64_t P) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes] = {};
  int64_t p = 0;
  for (; p + kLanes <= P; p += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += src[p + l];
  double total = 0.0;
  for (; p < P; ++p) total += src[p];
  for (float lane : lanes) total += lane;
  return total;
}
}  // namespace

void conv2d_backward_bias_cpu(float* grad_bias, const float* grad_out, const Conv2dGeometry& g) {
  const int64_t P = g.out_plane();
#pragma omp parallel for schedule(static) if (g.K * g.N * P >= kParallelMinWork)
  for (int64_t k = 0; k < g.K; ++k) {
    double total = 0.0;
    for (int64_t n = 0; n < g.N; ++n) total += plane_sum(grad_out + (n * g.K + k) * P, P);
    grad_bias[k] = static_cast<float>(total);
  }
}

namespace {
// Row (sample n, channel k) of dyt (K, nb*P), the grad_out of samples [n0, n0 + nb) with their channel rows
// side by side: the weight gradient's GEMM operand. nk = n K + k.
void gather_grad_out_row(float* dyt, const float* grad_out, const Conv2dGeometry& g, int64_t n0, int64_t nb,
                         int64_t nk) {
  const int64_t n = nk / g.K, k = nk % g.K, P = g.out_plane();
  std::memcpy(dyt + k * nb * P + n * P, grad_out + ((n0 + n) * g.K + k) * P, P * sizeof(float));
}
}  // namespace

void conv2d_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out, const float* in,
                         const float* weight, const Conv2dGeometry& g, float* workspace, bool workspace_holds_cols) {
  const int64_t P = g.out_plane(), chunk = conv2d_chunk_samples(g);
  float* cols = workspace;
  float* dyt = workspace + chunk * P * g.crs();
  if (grad_in) std::fill_n(grad_in, g.N * g.C * g.H * g.W, 0.0f);
  // The chunk loop assigns grad_weight (beta = 0 on the first chunk); an empty batch has no chunk.
  if (grad_weight && g.N == 0) std::fill_n(grad_weight, g.K * g.crs(), 0.0f);
  if (grad_bias) conv2d_backward_bias_cpu(grad_bias, grad_out, g);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.N - n0);
#pragma omp parallel for schedule(static) if (nb * g.K * P >= kParallelMinWork)
    for (int64_t nk = 0; nk < nb * g.K; ++nk) gather_grad_out_row(dyt, grad_out, g, n0, nb, nk);
    if (grad_weight) {
      BASTION_ASSERT(!workspace_holds_cols || nb == g.N);
      if (!workspace_holds_cols) im2col_cpu(cols, in, g, n0, nb);
      gemm_cpu(false, true, g.K, g.crs(), nb * P, 1.0f, dyt, nb * P, cols, nb * P, n0 == 0 ? 0.0f : 1.0f, grad_weight,
               g.crs());
    }
    if (grad_in) {
      gemm_cpu(true, false, g.crs(), nb * P, g.K, 1.0f, weight, g.crs(), dyt, nb * P, 0.0f, cols, nb * P);
      col2im_add_cpu(grad_in, cols, g, n0, nb);
    }
  }
}

namespace {
// conv2d_backward_weight_cpu's panels: the C R S columns of kWeightPanelChannels input channels.
constexpr int64_t kWeightPanelChannels = 16;

int64_t weight_panel_columns(const Conv2dGeometry& g) { return std::min(g.C, kWeightPanelChannels) * g.R * g.S; }

int64_t weight_thread_floats(const Conv2dGeometry& g, int64_t chunk) {
  return chunk * g.out_plane() * (g.K + weight_panel_columns(g));
}
}  // namespace

int64_t conv2d_backward_weight_workspace_floats(const Conv2dGeometry& g, int64_t chunk, int threads) {
  return threads * weight_thread_floats(g, chunk);
}

void conv2d_backward_weight_cpu(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g,
                                int64_t chunk, float* workspace, int threads) {
  BASTION_CHECK(chunk >= 1 && threads >= 1, "conv2d_backward_weight_cpu: chunk (", chunk, ") and threads (", threads,
                ") must be at least 1");
  if (g.N == 0) std::fill_n(grad_weight, g.K * g.crs(), 0.0f);
  const int64_t P = g.out_plane(), width = weight_panel_columns(g);
  const int64_t panels = (g.crs() + width - 1) / width;
#pragma omp parallel num_threads(threads) if (g.N * g.K * g.crs() * P >= kParallelMinWork)
  {
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t p0 = panels * me / team, p1 = panels * (me + 1) / team;
    float* dyt = workspace + me * weight_thread_floats(g, chunk);
    float* cols = dyt + chunk * P * g.K;
    for (int64_t n0 = 0; n0 < g.N && p0 < p1; n0 += chunk) {
      const int64_t nb = std::min(chunk, g.N - n0), columns = nb * P;
      for (int64_t nk = 0; nk < nb * g.K; ++nk) gather_grad_out_row(dyt, grad_out, g, n0, nb, nk);
      for (int64_t panel = p0; panel < p1; ++panel) {
        const int64_t row0 = panel * width, rows = std::min(width, g.crs() - row0);
        for (int64_t row = 0; row < rows; ++row) im2col_row(cols + row * columns, in, g, row0 + row, n0, nb);
        gemm_one_thread_cpu(false, true, g.K, rows, columns, dyt, columns, cols, columns, n0 == 0 ? 0.0f : 1.0f,
                            grad_weight + row0, g.crs());
      }
    }
  }
}

void conv2d_forward_reference_cpu(float* out, const float* in, const float* weight, const float* bias,
                                  const Conv2dGeometry& g) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double total = bias ? bias[k] : 0.0;
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t r = 0; r < g.R; ++r)
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t ih = oh * g.stride - g.padding + r, iw = ow * g.stride - g.padding + s;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                total += static_cast<double>(weight[((k * g.C + c) * g.R + r) * g.S + s]) *
                         in[((n * g.C + c) * g.H + ih) * g.W + iw];
              }
          out[((n * g.K + k) * g.OH + oh) * g.OW + ow] = static_cast<float>(total);
        }
}

}  // namespace bastion
