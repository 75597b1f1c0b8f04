// FLOPs of the GEMM-shaped ops (linear, conv2d), forward and backward, counted on the calling thread, for
// bench_train's GFLOP/s and "% of peak" (bench/RESULTS.md). 2 flops per multiply-add, the convention of
// every GFLOP/s figure in bench/RESULTS.md. Element-wise ops, pooling, batch norm and the loss are not
// counted: they are memory-bound, and torch.utils.flop_counter leaves them out too, so figures compare.
// Counting costs one add per op call; nothing reads the counter outside benchmarks and tests.
#pragma once

#include <cstdint>

namespace bastion {

void count_flops(int64_t flops);
int64_t thread_flops();  // flops counted on this thread since it started

// Flops of one linear layer pass (forward, or one of the two backward products): 2 N in out.
inline int64_t linear_flops(int64_t N, int64_t in, int64_t out) { return 2 * N * in * out; }

}  // namespace bastion
