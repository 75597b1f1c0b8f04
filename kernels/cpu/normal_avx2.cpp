// normal_avx2: box_muller_cpu's vector path for CPUs with AVX2 and FMA but not AVX-512 (contract in
// normal.h): normal.cpp's AVX-512 algorithm step for step, four pairs at a time, with the few AVX-512
// instructions it uses rebuilt from exact bit operations (exponent and mantissa from the bits, blends for
// masks). Every float equals the scalar formula's by the same fallback.
// This file is compiled with -mavx2 -mfma on x86-64 whatever BASTION_NATIVE says (CMakeLists.txt), and
// box_muller_avx2_available() decides at run time. As in gemm_small_avx2.cpp, it includes no C++ library
// header: an inline function instantiated here would carry AVX2 instructions, and the linker may keep this
// copy for the whole program. So no <cmath> either: the constants are in normal_series.h.
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/normal.h"
#include "kernels/cpu/normal_series.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace bastion {

#if defined(__AVX2__) && defined(__FMA__)

namespace {

constexpr int64_t kPairs = 4;       // doubles per vector
using namespace box_muller_series;  // the constants both vector paths share

__m256d all(double x) { return _mm256_set1_pd(x); }

template <int Count>
__m256d horner(__m256d z, const double (&coefficients)[Count]) {
  __m256d acc = all(coefficients[0]);
  for (int i = 1; i < Count; ++i) acc = _mm256_fmadd_pd(acc, z, all(coefficients[i]));
  return acc;
}

// u = 2^e m with m in [1, 2), read from the bits: AVX-512's getexp and getmant for a normal positive double
// (the uniforms are multiples of 2^-53 in (0, 1], all normal). The exponent field becomes a double exactly
// by placing it in the low bits of 2^52 and subtracting 2^52 (plus the bias).
void exponent_and_mantissa(__m256d u, __m256d* e, __m256d* m) {
  const __m256i bits = _mm256_castpd_si256(u);
  const __m256i mantissa = _mm256_and_si256(bits, _mm256_set1_epi64x(0x000FFFFFFFFFFFFFLL));
  *m = _mm256_castsi256_pd(_mm256_or_si256(mantissa, _mm256_set1_epi64x(0x3FF0000000000000LL)));
  const __m256i field = _mm256_srli_epi64(bits, 52);
  const __m256d shifted = _mm256_castsi256_pd(_mm256_or_si256(field, _mm256_castpd_si256(all(0x1p52))));
  *e = _mm256_sub_pd(shifted, all(0x1p52 + 1023.0));
}

// log(u) for u in (0, 1]: normal.cpp's log_unit (m in [sqrt(1/2), sqrt(2)), atanh's series through s^19).
__m256d log_unit(__m256d u) {
  __m256d e, m;
  exponent_and_mantissa(u, &e, &m);
  const __m256d high = _mm256_cmp_pd(m, all(kSqrt2), _CMP_GT_OQ);
  m = _mm256_blendv_pd(m, _mm256_mul_pd(m, all(0.5)), high);
  e = _mm256_blendv_pd(e, _mm256_add_pd(e, all(1.0)), high);
  const __m256d f = _mm256_sub_pd(m, all(1.0));
  const __m256d s = _mm256_div_pd(f, _mm256_add_pd(all(2.0), f));
  const __m256d z = _mm256_mul_pd(s, s);
  const __m256d two_s = _mm256_add_pd(s, s);
  const __m256d log_m = _mm256_fmadd_pd(_mm256_mul_pd(s, z), horner(z, kAtanhSeries), two_s);
  const __m256d low = _mm256_fmadd_pd(e, all(kLn2Lo), log_m);
  return _mm256_fmadd_pd(e, all(kLn2Hi), low);
}

// cos(a) and sin(a) for a in [0, 2 pi): normal.cpp's sincos_turn (three-part reduction, Taylor series).
void sincos_turn(__m256d a, __m256d* cosine, __m256d* sine) {
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(a, all(kTwoOverPi)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(k, all(kPio2_1), a);
  r = _mm256_fnmadd_pd(k, all(kPio2_2), r);
  r = _mm256_fnmadd_pd(k, all(kPio2_3), r);
  const __m256d z = _mm256_mul_pd(r, r);
  const __m256d sin_r = _mm256_fmadd_pd(_mm256_mul_pd(r, z), horner(z, kSinSeries), r);
  const __m256d cos_r = _mm256_fmadd_pd(z, horner(z, kCosSeries), all(1.0));
  // Quadrant k (0..4; 4 is 0): cos a = C, -S, -C, S and sin a = S, C, -S, -C for k = 0, 1, 2, 3.
  auto is = [&](double q) { return _mm256_cmp_pd(k, all(q), _CMP_EQ_OQ); };
  const __m256d swap = _mm256_or_pd(is(1.0), is(3.0)), cos_negative = _mm256_or_pd(is(1.0), is(2.0)),
                sin_negative = _mm256_or_pd(is(2.0), is(3.0));
  const __m256d c = _mm256_blendv_pd(cos_r, sin_r, swap), s = _mm256_blendv_pd(sin_r, cos_r, swap);
  const __m256d zero = _mm256_setzero_pd();
  *cosine = _mm256_blendv_pd(c, _mm256_sub_pd(zero, c), cos_negative);
  *sine = _mm256_blendv_pd(s, _mm256_sub_pd(zero, s), sin_negative);
}

// Lane bits (bit l for lane l) whose double lies within 2^12 ulps of a float rounding midpoint: normal.cpp's
// near_float_midpoint, the distance compared on both sides (AVX2 has no 64-bit abs).
int near_float_midpoint(__m256d x) {
  constexpr long long kBelowFloat = (1LL << 29) - 1, kMidpoint = 1LL << 28, kMargin = 1LL << 12;
  const __m256i low = _mm256_and_si256(_mm256_castpd_si256(x), _mm256_set1_epi64x(kBelowFloat));
  const __m256i distance = _mm256_sub_epi64(low, _mm256_set1_epi64x(kMidpoint));
  const __m256i above_low = _mm256_cmpgt_epi64(distance, _mm256_set1_epi64x(-kMargin - 1));
  const __m256i below_high = _mm256_cmpgt_epi64(_mm256_set1_epi64x(kMargin + 1), distance);
  return _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_and_si256(above_low, below_high)));
}

// Lane bits whose |x| is below 2^-10 (left to the C library, as in normal.cpp).
int small(__m256d x) {
  const __m256d magnitude = _mm256_andnot_pd(all(-0.0), x);
  return _mm256_movemask_pd(_mm256_cmp_pd(magnitude, all(0x1p-10), _CMP_LT_OQ));
}

struct Pairs {
  __m256d x, y, cosine, sine;
};

// All bits set in lanes 0 .. lanes - 1 (lane < lanes): the mask of maskload and maskstore.
__m256i active_lanes(int64_t lanes) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(lanes), _mm256_setr_epi64x(0, 1, 2, 3));
}

// The first `lanes` pairs from u1, u2 (1 to 4); unused lanes compute u1 = 0.5, u2 = 0 and are never stored.
Pairs box_muller_vector(int64_t lanes, const double* u1, const double* u2) {
  const __m256i active = active_lanes(lanes);
  const __m256d a1 = _mm256_blendv_pd(all(0.5), _mm256_maskload_pd(u1, active), _mm256_castsi256_pd(active));
  const __m256d a2 = _mm256_maskload_pd(u2, active);
  const __m256d radius = _mm256_sqrt_pd(_mm256_mul_pd(all(-2.0), log_unit(a1)));
  Pairs p;
  sincos_turn(_mm256_mul_pd(all(2.0 * kPi), a2), &p.cosine, &p.sine);
  p.x = _mm256_mul_pd(radius, p.cosine);
  p.y = _mm256_mul_pd(radius, p.sine);
  return p;
}

int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

}  // namespace

bool box_muller_avx2_available() { return cpu_has_avx2_fma(); }

void box_muller_doubles_avx2_cpu(double* x, double* y, const double* u1, const double* u2, int64_t pairs) {
  for (int64_t i0 = 0; i0 < pairs; i0 += kPairs) {
    const int64_t lanes = smaller(kPairs, pairs - i0);
    const Pairs p = box_muller_vector(lanes, u1 + i0, u2 + i0);
    const __m256i active = active_lanes(lanes);
    _mm256_maskstore_pd(x + i0, active, p.x);
    _mm256_maskstore_pd(y + i0, active, p.y);
  }
}

void box_muller_avx2_cpu(float* out, const double* u1, const double* u2, int64_t count) {
  const int64_t pairs = (count + 1) / 2;
  for (int64_t i0 = 0; i0 < pairs; i0 += kPairs) {
    const int64_t lanes = smaller(kPairs, pairs - i0);
    const Pairs p = box_muller_vector(lanes, u1 + i0, u2 + i0);
    const __m128 x = _mm256_cvtpd_ps(p.x), y = _mm256_cvtpd_ps(p.y);
    alignas(32) float interleaved[2 * kPairs];  // x0 y0 x1 y1 x2 y2 x3 y3
    _mm_store_ps(interleaved, _mm_unpacklo_ps(x, y));
    _mm_store_ps(interleaved + 4, _mm_unpackhi_ps(x, y));
    const int64_t floats = smaller(2 * kPairs, count - 2 * i0);
    for (int64_t j = 0; j < floats; ++j) out[2 * i0 + j] = interleaved[j];
    unsigned redo =
        static_cast<unsigned>(near_float_midpoint(p.x) | near_float_midpoint(p.y) | small(p.cosine) | small(p.sine)) &
        ((1u << lanes) - 1u);
    while (redo != 0) {
      const int lane = __builtin_ctz(redo);
      redo &= redo - 1;
      const int64_t i = i0 + lane;
      box_muller_pair_scalar(out + 2 * i, 2 * i + 1 < count ? out + 2 * i + 1 : nullptr, u1[i], u2[i]);
    }
  }
}

#else  // not x86-64: never chosen

bool box_muller_avx2_available() { return false; }

void box_muller_doubles_avx2_cpu(double*, double*, const double*, const double*, int64_t) {
  __builtin_trap();  // callers check box_muller_avx2_available() first
}

void box_muller_avx2_cpu(float*, const double*, const double*, int64_t) { __builtin_trap(); }

#endif

}  // namespace bastion
