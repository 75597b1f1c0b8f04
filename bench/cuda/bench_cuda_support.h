// Shared by the kernel ladders in bench/cuda/: timing with CUDA events (warm-up, then the median of the
// timed runs) and the one-line report format. Every ladder validates a rung against a reference before
// timing it and exits non-zero on a mismatch.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "kernels/cuda/check.h"

namespace bastion::bench {

struct Timing {
  double median_ms = 0.0, min_ms = 0.0;
};

// Runs `body` `warmup` times, then `runs` times each between two events on `stream`; returns the
// median and the minimum in milliseconds.
Timing time_with_events(const std::function<void()>& body, cudaStream_t stream, int warmup = 5, int runs = 20);

// "rung 3 register-2d: 1.234 ms  12345.6 GFLOP/s  123.4 GB/s  85.3 % of rung 0"
void print_rung(int rung, const std::string& name, const Timing& t, double flops, double bytes, double rung0_ms);

// GPU model, driver and runtime versions, for bench/RESULTS.md.
void print_device_banner();

}  // namespace bastion::bench
