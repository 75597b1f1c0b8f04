#include "kernels/cpu/normal.h"
#include "kernels/cpu/normal_series.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace bastion {

namespace {

// The formula in double: x = r cos a, y = r sin a.
void formula_doubles(double* x, double* y, double u1, double u2) {
  const double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * M_PI * u2;
  *x = radius * std::cos(angle);
  *y = radius * std::sin(angle);
}

// Pair i of box_muller_cpu's output by the formula (its sine dropped past count).
void formula_pair_into(float* out, int64_t count, const double* u1, const double* u2, int64_t i) {
  box_muller_pair_scalar(out + 2 * i, 2 * i + 1 < count ? out + 2 * i + 1 : nullptr, u1[i], u2[i]);
}

}  // namespace

void box_muller_pair_scalar(float* cosine, float* sine, double u1, double u2) {
  double x, y;
  formula_doubles(&x, &y, u1, u2);
  *cosine = static_cast<float>(x);
  if (sine) *sine = static_cast<float>(y);
}

#if defined(__AVX512F__)

namespace {

constexpr int64_t kPairs = 8;  // doubles per vector
// GCC 12's unmasked forms of these intrinsics start from an undefined vector and trip
// -Wmaybe-uninitialized; their zero-masked forms with every lane set are the same instructions.
constexpr __mmask8 kAll = 0xFF;

using namespace box_muller_series;  // the constants both vector paths share

// Horner's rule in z, highest coefficient first.
template <size_t Count>
__m512d horner(__m512d z, const double (&coefficients)[Count]) {
  __m512d acc = _mm512_set1_pd(coefficients[0]);
  for (size_t i = 1; i < Count; ++i) acc = _mm512_fmadd_pd(acc, z, _mm512_set1_pd(coefficients[i]));
  return acc;
}

// log(u) for u in (0, 1]: u = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1) /
// (m + 1), |s| <= 0.1716, by its series through s^19 (the first term left out is below 2^-54 of the sum).
__m512d log_unit(__m512d u) {
  __m512d m = _mm512_maskz_getmant_pd(kAll, u, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);
  __m512d e = _mm512_maskz_getexp_pd(kAll, u);
  const __mmask8 high = _mm512_cmp_pd_mask(m, _mm512_set1_pd(kSqrt2), _CMP_GT_OQ);
  m = _mm512_mask_mul_pd(m, high, m, _mm512_set1_pd(0.5));
  e = _mm512_mask_add_pd(e, high, e, _mm512_set1_pd(1.0));
  const __m512d f = _mm512_sub_pd(m, _mm512_set1_pd(1.0));  // exact: m is within a factor 2 of 1
  const __m512d s = _mm512_div_pd(f, _mm512_add_pd(_mm512_set1_pd(2.0), f));
  const __m512d z = _mm512_mul_pd(s, s);
  const __m512d two_s = _mm512_add_pd(s, s);
  const __m512d log_m = _mm512_fmadd_pd(_mm512_mul_pd(s, z), horner(z, kAtanhSeries), two_s);
  const __m512d low = _mm512_fmadd_pd(e, _mm512_set1_pd(kLn2Lo), log_m);
  return _mm512_fmadd_pd(e, _mm512_set1_pd(kLn2Hi), low);
}

// cos(a) and sin(a) for a in [0, 2 pi): r = a - k pi / 2 with |r| <= pi / 4, then the Taylor series of
// sin r through r^17 and of cos r through r^16 (the first terms left out are below 2^-55 of the value).
void sincos_turn(__m512d a, __m512d* cosine, __m512d* sine) {
  const __m512d k =
      _mm512_maskz_roundscale_pd(kAll, _mm512_mul_pd(a, _mm512_set1_pd(kTwoOverPi)), _MM_FROUND_TO_NEAREST_INT);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kPio2_1), a);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kPio2_2), r);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kPio2_3), r);
  const __m512d z = _mm512_mul_pd(r, r);
  const __m512d sin_r = _mm512_fmadd_pd(_mm512_mul_pd(r, z), horner(z, kSinSeries), r);
  const __m512d cos_r = _mm512_fmadd_pd(z, horner(z, kCosSeries), _mm512_set1_pd(1.0));
  // Quadrant k (0..4; 4 is 0): cos a = C, -S, -C, S and sin a = S, C, -S, -C for k = 0, 1, 2, 3.
  auto is = [&](double q) { return _mm512_cmp_pd_mask(k, _mm512_set1_pd(q), _CMP_EQ_OQ); };
  const __mmask8 swap = is(1.0) | is(3.0), cos_negative = is(1.0) | is(2.0), sin_negative = is(2.0) | is(3.0);
  const __m512d c = _mm512_mask_blend_pd(swap, cos_r, sin_r), s = _mm512_mask_blend_pd(swap, sin_r, cos_r);
  const __m512d zero = _mm512_setzero_pd();
  *cosine = _mm512_mask_sub_pd(c, cos_negative, zero, c);
  *sine = _mm512_mask_sub_pd(s, sin_negative, zero, s);
}

// Lanes whose float could differ from the scalar formula's: the double lies within 2^12 ulps of a float
// rounding midpoint (its 29 bits below the float mantissa are 2^28 +- 2^12), where this file's few ulps
// of error could round the other way. A float rounding midpoint in every binade has the same pattern.
__mmask8 near_float_midpoint(__m512d x) {
  constexpr int64_t kBelowFloat = (int64_t{1} << 29) - 1, kMidpoint = int64_t{1} << 28, kMargin = int64_t{1} << 12;
  const __m512i low = _mm512_and_si512(_mm512_castpd_si512(x), _mm512_set1_epi64(kBelowFloat));
  const __m512i distance = _mm512_maskz_abs_epi64(kAll, _mm512_sub_epi64(low, _mm512_set1_epi64(kMidpoint)));
  return _mm512_cmp_epi64_mask(distance, _mm512_set1_epi64(kMargin), _MM_CMPINT_LE);
}

// Cosines or sines below 2^-10 are left to the C library: there the few-ulp bound rests on the last
// steps of the argument reduction, and they are one draw in a thousand.
__mmask8 small(__m512d x) {
  const __m512d magnitude = _mm512_abs_pd(x);
  return _mm512_cmp_pd_mask(magnitude, _mm512_set1_pd(0x1p-10), _CMP_LT_OQ);
}

// One vector of pairs in double: x = r cos a, y = r sin a, and the cosine and sine themselves.
struct Pairs {
  __m512d x, y, cosine, sine;
};

Pairs box_muller_vector(__mmask8 lane_mask, const double* u1, const double* u2) {
  // Unused lanes read u1 = 0.5, u2 = 0 (finite results, never stored).
  const __m512d a1 = _mm512_mask_loadu_pd(_mm512_set1_pd(0.5), lane_mask, u1);
  const __m512d a2 = _mm512_maskz_loadu_pd(lane_mask, u2);
  const __m512d radius = _mm512_maskz_sqrt_pd(kAll, _mm512_mul_pd(_mm512_set1_pd(-2.0), log_unit(a1)));
  Pairs p;
  sincos_turn(_mm512_mul_pd(_mm512_set1_pd(2.0 * kPi), a2), &p.cosine, &p.sine);
  p.x = _mm512_mul_pd(radius, p.cosine);
  p.y = _mm512_mul_pd(radius, p.sine);
  return p;
}

__mmask8 lanes_of(int64_t lanes) { return static_cast<__mmask8>((1u << lanes) - 1u); }

}  // namespace

void box_muller_doubles_cpu(double* x, double* y, const double* u1, const double* u2, int64_t pairs) {
  for (int64_t i0 = 0; i0 < pairs; i0 += kPairs) {
    const __mmask8 lane_mask = lanes_of(std::min<int64_t>(kPairs, pairs - i0));
    const Pairs p = box_muller_vector(lane_mask, u1 + i0, u2 + i0);
    _mm512_mask_storeu_pd(x + i0, lane_mask, p.x);
    _mm512_mask_storeu_pd(y + i0, lane_mask, p.y);
  }
}

void box_muller_cpu(float* out, const double* u1, const double* u2, int64_t count) {
  const __m512i interleave = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  const int64_t pairs = (count + 1) / 2;
  for (int64_t i0 = 0; i0 < pairs; i0 += kPairs) {
    const __mmask8 lane_mask = lanes_of(std::min<int64_t>(kPairs, pairs - i0));
    const Pairs p = box_muller_vector(lane_mask, u1 + i0, u2 + i0);
    const __m256d x_floats = _mm256_castps_pd(_mm512_maskz_cvtpd_ps(kAll, p.x)),
                  y_floats = _mm256_castps_pd(_mm512_maskz_cvtpd_ps(kAll, p.y));
    const __m512 both = _mm512_castpd_ps(
        _mm512_maskz_insertf64x4(kAll, _mm512_maskz_insertf64x4(kAll, _mm512_setzero_pd(), x_floats, 0), y_floats, 1));
    const int64_t floats = std::min<int64_t>(2 * kPairs, count - 2 * i0);
    const auto store_mask = static_cast<__mmask16>((1u << floats) - 1u);
    _mm512_mask_storeu_ps(out + 2 * i0, store_mask, _mm512_maskz_permutexvar_ps(0xFFFF, interleave, both));
    unsigned redo = lane_mask & (near_float_midpoint(p.x) | near_float_midpoint(p.y) | small(p.cosine) | small(p.sine));
    while (redo != 0) {
      const int lane = __builtin_ctz(redo);
      redo &= redo - 1;
      formula_pair_into(out, count, u1, u2, i0 + lane);
    }
  }
}

#else  // no AVX-512: the AVX2 path where the CPU has it, else the scalar formula

void box_muller_doubles_cpu(double* x, double* y, const double* u1, const double* u2, int64_t pairs) {
  if (box_muller_avx2_available()) return box_muller_doubles_avx2_cpu(x, y, u1, u2, pairs);
  for (int64_t i = 0; i < pairs; ++i) formula_doubles(x + i, y + i, u1[i], u2[i]);
}

void box_muller_cpu(float* out, const double* u1, const double* u2, int64_t count) {
  if (box_muller_avx2_available()) return box_muller_avx2_cpu(out, u1, u2, count);
  for (int64_t i = 0; 2 * i < count; ++i) formula_pair_into(out, count, u1, u2, i);
}

#endif

}  // namespace bastion
