// Compiled with the build's own flags (never for AVX2 or AVX-512): the callers that are run on every CPU.
#include "kernels/cpu/cpu_features.h"

namespace bastion {

#if defined(__x86_64__) || defined(_M_X64)

bool cpu_has_avx512f() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}

bool cpu_has_avx2_fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  }();
  return has;
}

#else

bool cpu_has_avx512f() { return false; }
bool cpu_has_avx2_fma() { return false; }

#endif

}  // namespace bastion
