// When Bastion's own OpenMP loops go parallel. A parallel region costs microseconds to start and, on
// a loaded machine, spinning worker threads can turn a 30 us loop into milliseconds (measured: the conv
// gradchecks went from 32 ms to 1-10 s with 2 threads on a busy 2-core box). Loops touching fewer
// than kParallelMinWork elements therefore run on the calling thread. Results never depend on this:
// every parallel loop writes disjoint outputs.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace bastion {
constexpr int64_t kParallelMinWork = int64_t{1} << 16;

// Elementwise passes (ReLU, adds, the SGD step, fills) do a few loads and stores per element, so their
// threshold is higher: 1 MiB of floats. Below it they stay on the calling thread. Above it they split
// across the caller's OpenMP threads, one per thread: at 2 threads ResNet18's step had its ReLU, adds and
// SGD step on one thread while the other waited, about 10 % of its samples (perf, bench/RESULTS.md,
// 2026-11-29). Inside an FL client (set_num_threads(1)) the team is that one thread.
constexpr int64_t kParallelMinElements = int64_t{1} << 18;

// body(begin, end) over [0, n), one contiguous range per thread, each starting at a multiple of 16 elements
// (a 64-byte line of floats), so an aligned buffer splits on line boundaries. Elementwise bodies give the
// same bits at any thread count: every element is computed by the same expression wherever the split falls.
template <class Body>
void parallel_elements(int64_t n, const Body& body) {
  if (n < kParallelMinElements) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    constexpr int64_t kLine = 16;
    const int64_t chunk = ((n + threads - 1) / threads + kLine - 1) / kLine * kLine;
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) body(begin, end);
  }
}

}  // namespace bastion
