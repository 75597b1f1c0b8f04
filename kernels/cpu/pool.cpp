#include "kernels/cpu/pool.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/parallel.h"
#include "tensor/error.h"

namespace bastion {

namespace {

// Window [h0, h1) x [w0, w1) of output (oh, ow), clipped to the input.
struct Window {
  int64_t h0, h1, w0, w1;
};

Window window_of(const Pool2dGeometry& g, int64_t oh, int64_t ow) {
  const int64_t h = oh * g.stride - g.padding, w = ow * g.stride - g.padding;
  return {std::max<int64_t>(h, 0), std::min(h + g.kernel, g.H), std::max<int64_t>(w, 0), std::min(w + g.kernel, g.W)};
}

// Position (in the plane) of the first maximum of the window.
int64_t argmax_in_window(const float* plane, const Pool2dGeometry& g, const Window& win) {
  int64_t best = win.h0 * g.W + win.w0;
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w)
      if (plane[h * g.W + w] > plane[best]) best = h * g.W + w;
  return best;
}

}  // namespace

Pool2dGeometry pool2d_geometry(int64_t planes, int64_t H, int64_t W, int64_t kernel, int64_t stride, int64_t padding) {
  BASTION_CHECK(kernel >= 1 && stride >= 1 && padding >= 0, "pool2d: kernel ", kernel, ", stride ", stride,
                ", padding ", padding, " must be positive (padding >= 0)");
  BASTION_CHECK(2 * padding <= kernel, "pool2d: padding ", padding, " must be at most half the kernel ", kernel);
  BASTION_CHECK(H + 2 * padding >= kernel && W + 2 * padding >= kernel, "pool2d: kernel ", kernel,
                " larger than padded input ", H, "x", W);
  return {planes, H, W, kernel, stride, padding, (H + 2 * padding - kernel) / stride + 1,
          (W + 2 * padding - kernel) / stride + 1};
}

namespace {
// The 2x2 / stride 2 / no-padding case every CNN here uses, without window arithmetic. Same first-max
// rule as the general path: (0,0), (0,1), (1,0), (1,1) in that order, strict > to replace.
bool is_2x2_stride2(const Pool2dGeometry& g) { return g.kernel == 2 && g.stride == 2 && g.padding == 0; }

void max_pool_2x2_forward(float* out, const float* in, const Pool2dGeometry& g) {
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = out + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* top = plane + 2 * oh * g.W;
      const float* bottom = top + g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow)
        dst[oh * g.OW + ow] = std::max(std::max(top[2 * ow], top[2 * ow + 1]), std::max(bottom[2 * ow], bottom[2 * ow + 1]));
    }
  }
}

void max_pool_2x2_backward(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g) {
  // Written to avoid data-dependent branches (which of the four wins is unpredictable), but GCC 12 still
  // emits compare-and-branch here (bench/RESULTS.md); bench_kernels' max_pool2d_backward_v1 is 2.5x
  // faster and is the candidate to adopt. Every input element is written (no separate fill).
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = grad_in + p * g.H * g.W;
    const float* src = grad_out + p * g.OH * g.OW;
    if (g.H != 2 * g.OH || g.W != 2 * g.OW) std::fill_n(dst, g.H * g.W, 0.0f);  // odd sizes: edges unused
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* top = plane + 2 * oh * g.W;
      const float* bottom = top + g.W;
      float* dtop = dst + 2 * oh * g.W;
      float* dbottom = dtop + g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const float a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
        const float grad = src[oh * g.OW + ow];
        // First maximum in the order a, b, c, d (same rule as the general path).
        const float m = std::max(std::max(a, b), std::max(c, d));
        const bool is_a = a == m, is_b = b == m, is_c = c == m;
        const bool a_wins = is_a;
        const bool b_wins = is_b & !is_a;
        const bool c_wins = is_c & !(is_a | is_b);
        const bool d_wins = !(is_a | is_b | is_c);
        dtop[2 * ow] = a_wins ? grad : 0.0f;
        dtop[2 * ow + 1] = b_wins ? grad : 0.0f;
        dbottom[2 * ow] = c_wins ? grad : 0.0f;
        dbottom[2 * ow + 1] = d_wins ? grad : 0.0f;
      }
    }
  }
}
}  // namespace

void max_pool2d_forward_cpu(float* out, const float* in, const Pool2dGeometry& g) {
  if (is_2x2_stride2(g)) return max_pool_2x2_forward(out, in, g);
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = out + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) dst[oh * g.OW + ow] = plane[argmax_in_window(plane, g, window_of(g, oh, ow))];
  }
}

void max_pool2d_backward_cpu(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g) {
  if (is_2x2_stride2(g)) return max_pool_2x2_backward(grad_in, grad_out, in, g);
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = grad_in + p * g.H * g.W;
    const float* src = grad_out + p * g.OH * g.OW;
    std::fill_n(dst, g.H * g.W, 0.0f);
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) dst[argmax_in_window(plane, g, window_of(g, oh, ow))] += src[oh * g.OW + ow];
  }
}

void avg_pool2d_forward_cpu(float* out, const float* in, const Pool2dGeometry& g) {
  const float inv_area = 1.0f / static_cast<float>(g.kernel * g.kernel);
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = out + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const Window win = window_of(g, oh, ow);
        float total = 0.0f;
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) total += plane[h * g.W + w];
        dst[oh * g.OW + ow] = total * inv_area;
      }
  }
}

void avg_pool2d_backward_cpu(float* grad_in, const float* grad_out, const Pool2dGeometry& g) {
  const float inv_area = 1.0f / static_cast<float>(g.kernel * g.kernel);
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    float* dst = grad_in + p * g.H * g.W;
    const float* src = grad_out + p * g.OH * g.OW;
    std::fill_n(dst, g.H * g.W, 0.0f);
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const Window win = window_of(g, oh, ow);
        const float share = src[oh * g.OW + ow] * inv_area;
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) dst[h * g.W + w] += share;
      }
  }
}

void global_avg_pool_forward_cpu(float* out, const float* in, int64_t planes, int64_t plane_size) {
  const double inv = 1.0 / static_cast<double>(plane_size);
#pragma omp parallel for schedule(static) if (planes * plane_size >= kParallelMinWork)
  for (int64_t p = 0; p < planes; ++p) {
    double total = 0.0;
    for (int64_t i = 0; i < plane_size; ++i) total += in[p * plane_size + i];
    out[p] = static_cast<float>(total * inv);
  }
}

void global_avg_pool_backward_cpu(float* grad_in, const float* grad_out, int64_t planes, int64_t plane_size) {
  const float inv = 1.0f / static_cast<float>(plane_size);
#pragma omp parallel for schedule(static) if (planes * plane_size >= kParallelMinWork)
  for (int64_t p = 0; p < planes; ++p) std::fill_n(grad_in + p * plane_size, plane_size, grad_out[p] * inv);
}

}  // namespace bastion
