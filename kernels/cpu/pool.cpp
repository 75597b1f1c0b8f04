#include "kernels/cpu/pool.h"

#include <algorithm>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/pool_avx2.h"
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
  return {planes,
          H,
          W,
          kernel,
          stride,
          padding,
          (H + 2 * padding - kernel) / stride + 1,
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
        dst[oh * g.OW + ow] =
            std::max(std::max(top[2 * ow], top[2 * ow + 1]), std::max(bottom[2 * ow], bottom[2 * ow + 1]));
    }
  }
}

#if defined(__AVX512F__)
// One row of 2x2 windows, 16 at a time: the two input rows are split into even (a, c) and odd (b, d)
// columns with a permute, the first maximum is found with compares (no branches: which of the four
// wins is unpredictable, and the branchy scalar loop took 26 % of a LeNet-28 step), and the four
// gradients are interleaved back. Lanes past OW are masked off on load and store.
// _mm512_max_ps through its zero-masked form: GCC 12's plain intrinsic starts from _mm512_undefined_ps
// and trips -Wmaybe-uninitialized.
__m512 max16(__m512 a, __m512 b) { return _mm512_maskz_max_ps(static_cast<__mmask16>(0xFFFF), a, b); }

void max_pool_2x2_backward_row(float* dtop, float* dbottom, const float* top, const float* bottom, const float* src,
                               int64_t OW) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow);
    const __mmask16 out_mask = static_cast<__mmask16>((1u << n) - 1u);
    const __mmask16 lo = static_cast<__mmask16>(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1u);
    const __mmask16 hi = static_cast<__mmask16>(n > 8 ? (1u << (2 * (n - 8))) - 1u : 0u);
    const __m512 t0 = _mm512_maskz_loadu_ps(lo, top + 2 * ow), t1 = _mm512_maskz_loadu_ps(hi, top + 2 * ow + 16);
    const __m512 b0 = _mm512_maskz_loadu_ps(lo, bottom + 2 * ow), b1 = _mm512_maskz_loadu_ps(hi, bottom + 2 * ow + 16);
    const __m512 a = _mm512_permutex2var_ps(t0, even, t1), b = _mm512_permutex2var_ps(t0, odd, t1);
    const __m512 c = _mm512_permutex2var_ps(b0, even, b1), d = _mm512_permutex2var_ps(b0, odd, b1);
    const __m512 grad = _mm512_maskz_loadu_ps(out_mask, src + ow);
    const __m512 m = max16(max16(a, b), max16(c, d));
    const __mmask16 a_wins = _mm512_cmp_ps_mask(a, m, _CMP_EQ_OQ);
    const __mmask16 b_wins = _mm512_cmp_ps_mask(b, m, _CMP_EQ_OQ) & ~a_wins;
    const __mmask16 c_wins = _mm512_cmp_ps_mask(c, m, _CMP_EQ_OQ) & ~(a_wins | b_wins);
    const __mmask16 d_wins = ~(a_wins | b_wins | c_wins);
    const __m512 ga = _mm512_maskz_mov_ps(a_wins, grad), gb = _mm512_maskz_mov_ps(b_wins, grad);
    const __m512 gc = _mm512_maskz_mov_ps(c_wins, grad), gd = _mm512_maskz_mov_ps(d_wins, grad);
    _mm512_mask_storeu_ps(dtop + 2 * ow, lo, _mm512_permutex2var_ps(ga, low, gb));
    _mm512_mask_storeu_ps(dtop + 2 * ow + 16, hi, _mm512_permutex2var_ps(ga, high, gb));
    _mm512_mask_storeu_ps(dbottom + 2 * ow, lo, _mm512_permutex2var_ps(gc, low, gd));
    _mm512_mask_storeu_ps(dbottom + 2 * ow + 16, hi, _mm512_permutex2var_ps(gc, high, gd));
  }
}
#else
// Without AVX-512: pool_avx2.cpp's row where the CPU has AVX2, else this one.
void max_pool_2x2_backward_row_scalar(float* dtop, float* dbottom, const float* top, const float* bottom,
                                      const float* src, int64_t OW) {
  for (int64_t ow = 0; ow < OW; ++ow) {
    const float a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
    const float grad = src[ow];
    // First maximum in the order a, b, c, d (same rule as the general path).
    const float m = std::max(std::max(a, b), std::max(c, d));
    const bool is_a = a == m, is_b = b == m, is_c = c == m;
    dtop[2 * ow] = is_a ? grad : 0.0f;
    dtop[2 * ow + 1] = is_b && !is_a ? grad : 0.0f;
    dbottom[2 * ow] = is_c && !(is_a || is_b) ? grad : 0.0f;
    dbottom[2 * ow + 1] = !(is_a || is_b || is_c) ? grad : 0.0f;
  }
}
#endif

using BackwardRowFn = void (*)(float*, float*, const float*, const float*, const float*, int64_t);

// The row is a template argument, so that a build's own row is inlined as before.
template <BackwardRowFn row>
void max_pool_2x2_backward(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g) {
  // Every input element of the covered rows and columns is written (no separate fill).
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = grad_in + p * g.H * g.W;
    const float* src = grad_out + p * g.OH * g.OW;
    if (g.H != 2 * g.OH || g.W != 2 * g.OW) std::fill_n(dst, g.H * g.W, 0.0f);  // odd sizes: edges unused
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* top = plane + 2 * oh * g.W;
      float* dtop = dst + 2 * oh * g.W;
      row(dtop, dtop + g.W, top, top + g.W, src + oh * g.OW, g.OW);
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
      for (int64_t ow = 0; ow < g.OW; ++ow)
        dst[oh * g.OW + ow] = plane[argmax_in_window(plane, g, window_of(g, oh, ow))];
  }
}

void max_pool2d_backward_cpu(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g) {
#if defined(__AVX512F__)
  if (is_2x2_stride2(g)) return max_pool_2x2_backward<max_pool_2x2_backward_row>(grad_in, grad_out, in, g);
#else
  if (is_2x2_stride2(g) && cpu_has_avx2_fma())
    return max_pool_2x2_backward<max_pool_2x2_backward_row_avx2>(grad_in, grad_out, in, g);
  if (is_2x2_stride2(g)) return max_pool_2x2_backward<max_pool_2x2_backward_row_scalar>(grad_in, grad_out, in, g);
#endif
#pragma omp parallel for schedule(static) if (g.planes * g.H * g.W >= kParallelMinWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = in + p * g.H * g.W;
    float* dst = grad_in + p * g.H * g.W;
    const float* src = grad_out + p * g.OH * g.OW;
    std::fill_n(dst, g.H * g.W, 0.0f);
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow)
        dst[argmax_in_window(plane, g, window_of(g, oh, ow))] += src[oh * g.OW + ow];
  }
}

void max_pool2d_backward_avx2_cpu(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g) {
  BASTION_CHECK(is_2x2_stride2(g),
                "max_pool2d_backward_avx2_cpu: only the 2x2 / stride 2 / no-padding pool, got kernel ", g.kernel,
                ", stride ", g.stride, ", padding ", g.padding);
  BASTION_CHECK(cpu_has_avx2_fma(), "max_pool2d_backward_avx2_cpu: this CPU lacks AVX2 or FMA");
  max_pool_2x2_backward<max_pool_2x2_backward_row_avx2>(grad_in, grad_out, in, g);
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
