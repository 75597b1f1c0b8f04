// Timing and reporting for bench/cuda/ (contract: bench_cuda_support.h).
#include "bench/cuda/bench_cuda_support.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace bastion::bench {

Timing time_with_events(const std::function<void()>& body, cudaStream_t stream, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) body();
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(elapsed);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

void print_rung(int rung, const std::string& name, const Timing& t, double flops, double bytes, double rung0_ms) {
  std::printf("rung %d %-16s median %9.4f ms  min %9.4f ms  %9.1f GFLOP/s  %8.1f GB/s  %6.1f %% of rung 0\n", rung,
              name.c_str(), t.median_ms, t.min_ms, flops / (t.median_ms * 1e6), bytes / (t.median_ms * 1e6),
              rung0_ms > 0.0 ? 100.0 * rung0_ms / t.median_ms : 100.0);
}

void print_device_banner() {
  int device = 0, driver = 0, runtime = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("device %s, sm_%d%d, %d SMs; driver %d.%d, runtime %d.%d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}

}  // namespace bastion::bench
