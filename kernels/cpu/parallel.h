// When Bastion's own OpenMP loops go parallel. A parallel region costs microseconds to start and, on
// a loaded machine, spinning worker threads can turn a 30 us loop into milliseconds (measured: the conv
// gradchecks went from 32 ms to 1-10 s with 2 threads on a busy 2-core box). Loops touching fewer
// than kParallelMinWork elements therefore run on the calling thread. Results never depend on this:
// every parallel loop writes disjoint outputs.
#pragma once

#include <cstdint>

namespace bastion {
constexpr int64_t kParallelMinWork = int64_t{1} << 16;
}  // namespace bastion
