// Helpers shared by the kernels/cpu test files: a NaN sentinel for "unwritten" outputs, the tolerance of
// hand-computed examples, seeded Gaussian inputs and element-wise magnitudes (for relative tolerances), and
// a guard that restores the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/gemm.h"
#include "tensor/random.h"
#include "tests/test_support.h"

namespace bastion::testing {

// ---- tolerances ----------------------------------------------------------------------------------
// A float32 sum of K products rounds at each step with relative error at most u = 2^-24 (about 6e-8),
// so |computed - exact| <= K * u * sum|terms| in the worst case (Higham, "Accuracy and Stability of
// Numerical Algorithms", §3.1): "~K * 1e-7 relative" to the sum of magnitudes, which unlike the sum
// itself does not cancel. For large K that bound is too loose to notice even a missing block of terms,
// while real rounding errors are independent and add like a random walk (Higham & Mary, SIAM J. Sci.
// Comput. 2019) with a standard deviation of about sqrt(K) * u / sqrt(3). So the tolerance is
// min(K + 2, kRandomWalkSafety * sqrt(K + 2)) * u * sum|terms|: the worst case up to K = 62, then 8 sqrt(K) u,
// about 14 standard deviations (+2 covers the final rounding and alpha/beta). A single wrong term of typical
// size sum|terms| / K still fails it for K up to ~10^4. The reference is computed in double.
inline constexpr double kUnitRoundoff = 0x1.0p-24;
inline constexpr double kRandomWalkSafety = 8.0;

inline double sum_tolerance(int64_t K) {
  const double terms = static_cast<double>(K + 2);
  return std::min(terms, kRandomWalkSafety * std::sqrt(terms)) * kUnitRoundoff;
}

// Checks got[i] against want[i] within sum_tolerance(K) * magnitude[i] (+ a denormal floor); stops
// after the first few failures so a broken kernel does not print a million lines.
inline void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                         const std::vector<double>& magnitude, int64_t K, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  const double rel = sum_tolerance(K);
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    const double bound = rel * magnitude[i] + 1e-30;
    if (!(std::abs(got[i] - want[i]) <= bound)) {  // also catches NaN
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i] << " +- " << bound;
      ++failures;
    }
  }
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline std::vector<float> randn(int64_t n, Generator& gen, double stddev = 1.0) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(stddev * gen.normal());
  return v;
}

inline std::vector<float> absolute(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [](float x) { return std::abs(x); });
  return out;
}

// Restores the thread count (set_num_threads) even when an assertion returns early.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(num_threads()) {}
  ~ThreadCountGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace bastion::testing
