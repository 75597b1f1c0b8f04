// normal_series: the constants of box_muller_cpu's two vector paths (normal.cpp with AVX-512, normal_avx2.cpp
// with AVX2), kept in one place so both compute the same doubles. It includes no C++ library header, as
// normal_avx2.cpp requires (that file says why).
#pragma once

namespace bastion::box_muller_series {

// The literals of M_PI, M_2_PI and M_SQRT2.
inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kTwoOverPi = 0.63661977236758134308;
inline constexpr double kSqrt2 = 1.41421356237309504880;

// pi/2 in three parts (fdlibm's __ieee754_rem_pio2): the first two have 33 significant bits, so k times
// them is exact for the k <= 4 of an angle in [0, 2 pi), and a - k * kPio2_1 is exact; the reduced
// argument is then within about one ulp of a - k pi / 2.
inline constexpr double kPio2_1 = 1.57079632673412561417e+00;
inline constexpr double kPio2_2 = 6.07710050630396597660e-11;
inline constexpr double kPio2_3 = 2.02226624871116645580e-21;
// ln 2 in two parts (fdlibm's e_log.c): e * kLn2Hi is exact for the exponents of a double in (0, 1).
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;

// log m = 2 atanh(s) = 2 s + s^3 (2/3 + z (2/5 + ...)) with z = s^2, for |s| <= 0.1716: Horner's rule in
// z, highest coefficient first (the first term left out is below 2^-54 of the sum).
inline constexpr double kAtanhSeries[] = {2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
                                          2.0 / 9,  2.0 / 7,  2.0 / 5,  2.0 / 3};
// sin r = r + r z (...) through r^17 and cos r = 1 + z (...) through r^16, |r| <= pi / 4 (the first terms
// left out are below 2^-55 of the value).
inline constexpr double kSinSeries[] = {
    1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0,
    1.0 / 362880.0,          -1.0 / 5040.0,          1.0 / 120.0,        -1.0 / 6.0};
inline constexpr double kCosSeries[] = {
    1.0 / 20922789888000.0, -1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0,
    1.0 / 40320.0,          -1.0 / 720.0,         1.0 / 24.0,        -0.5};

}  // namespace bastion::box_muller_series
