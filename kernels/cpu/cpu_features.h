// cpu_features: what the CPU this process runs on supports, for the kernels compiled for an instruction set
// beyond the build's own (gemm_small_avx512.cpp and the *_avx2.cpp files), which run only where these say
// true. Read once and cached; false on every CPU that is not x86-64.
#pragma once

namespace bastion {

bool cpu_has_avx512f();
bool cpu_has_avx2_fma();  // AVX2 and FMA3 both

}  // namespace bastion
