// Internal to kernels/cpu/pool*.cpp: the 2x2 / stride 2 max-pool backward's row on AVX2 + FMA
// (pool_avx2.cpp), which pool.cpp runs on CPUs without AVX-512 that have them.
#pragma once

#include <cstdint>

namespace bastion {

// One row of OW windows: ASSIGNS dtop[0, 2 OW) and dbottom[0, 2 OW) from the input rows top and bottom and
// the output gradients src[0, OW); each gradient goes to the first maximum of a, b, c, d (top-left,
// top-right, bottom-left, bottom-right). Only on a CPU with AVX2 and FMA.
void max_pool_2x2_backward_row_avx2(float* dtop, float* dbottom, const float* top, const float* bottom,
                                    const float* src, int64_t OW);

}  // namespace bastion
