// bench_peak: this machine's measured FP32 FMA peak, the denominator of every "% of peak" in
// bench/RESULTS.md.
//
// Each thread runs a register-resident loop of kChains independent FMA chains
//   acc[i] = acc[i] * a + b        (_mm512_fmadd_ps: 16 lanes x 2 flops = 32 flops per instruction)
// With FMA latency 4 and two FMA ports, 8 chains are the minimum that keep both ports busy; 12 leaves
// slack and still fits the 32 zmm registers. A 256-bit (ymm, 16 flops per FMA) variant is measured too:
// on cores with a single 512-bit FMA port the two agree, which tells how much AVX-512 can buy.
// Threads: 1 and 2 (std::thread, one chain set per thread, each pinned to nothing: the OS places them).
// Each configuration is timed `kTrials` times (about 0.2 s each); the median and the best are printed.
// The values stay finite (acc converges to b / (1 - a)) and are summed into a sink so nothing is elided.
//
// Usage: bench_peak [--json]      (--json prints one JSON object, for bench/summarize.py)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;
constexpr int kTrials = 9;
constexpr double kTrialSeconds = 0.2;

volatile float g_sink = 0.0f;

// Runs `iterations` x kChains FMAs on zmm registers; returns the flops done.
// The target attributes let this file build with or without -march=native on any x86-64 host; main()
// asks the CPU before it runs a loop whose instructions the host lacks.
__attribute__((noinline, target("avx512f"))) double fma_loop_512(int64_t iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 total = acc[0];
  for (int i = 1; i < kChains; ++i) total = _mm512_add_ps(total, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  float s = 0.0f;
  for (float v : lanes) s += v;
  g_sink = g_sink + s;
  return static_cast<double>(iterations) * kChains * 32.0;
}

__attribute__((noinline, target("avx2,fma"))) double fma_loop_256(int64_t iterations) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 total = acc[0];
  for (int i = 1; i < kChains; ++i) total = _mm256_add_ps(total, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  float s = 0.0f;
  for (float v : lanes) s += v;
  g_sink = g_sink + s;
  return static_cast<double>(iterations) * kChains * 16.0;
}

using Loop = double (*)(int64_t);

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GFLOP/s of `threads` threads each running loop(iterations), timed from the first start to the
// last finish (so a straggler counts against the total, as it would in a parallel kernel).
double measure(Loop loop, int threads, int64_t iterations) {
  std::vector<std::thread> pool;
  std::vector<double> flops(threads, 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { flops[t] = loop(iterations); });
  for (std::thread& th : pool) th.join();
  const double elapsed = seconds_since(t0);
  double total = 0.0;
  for (double f : flops) total += f;
  return total / elapsed * 1e-9;
}

struct Result {
  const char* isa;
  int threads;
  double median_gflops, best_gflops;
};

Result run(const char* isa, Loop loop, int threads) {
  // Calibrate the iteration count so one trial takes about kTrialSeconds.
  int64_t iterations = 1 << 20;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    loop(iterations);
    const double s = seconds_since(t0);
    if (s > 0.02) {
      iterations = static_cast<int64_t>(iterations * kTrialSeconds / s);
      break;
    }
    iterations *= 4;
  }
  std::vector<double> trials;
  for (int i = 0; i < kTrials; ++i) trials.push_back(measure(loop, threads, iterations));
  std::sort(trials.begin(), trials.end());
  return {isa, threads, trials[trials.size() / 2], trials.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  std::vector<Result> results;
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!has_avx512) std::fprintf(stderr, "bench_peak: this CPU has no AVX-512F; the avx512 rows are skipped\n");
  if (!has_avx2) std::fprintf(stderr, "bench_peak: this CPU has no AVX2+FMA; the avx2 rows are skipped\n");
  for (int threads : {1, 2}) {
    if (has_avx512) results.push_back(run("avx512", fma_loop_512, threads));
    if (has_avx2) results.push_back(run("avx2", fma_loop_256, threads));
  }
  if (json) {
    std::printf("{\"peak\": [");
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("%s{\"isa\": \"%s\", \"threads\": %d, \"median_gflops\": %.2f, \"best_gflops\": %.2f}", i ? ", " : "",
                  results[i].isa, results[i].threads, results[i].median_gflops, results[i].best_gflops);
    std::printf("]}\n");
  } else {
    std::printf("FP32 FMA peak (%d chains, %d trials of ~%.1f s; hardware threads: %u)\n", kChains, kTrials,
                kTrialSeconds, std::thread::hardware_concurrency());
    std::printf("%-8s %8s %16s %14s %18s\n", "isa", "threads", "median GFLOP/s", "best GFLOP/s", "median per thread");
    for (const Result& r : results)
      std::printf("%-8s %8d %16.1f %14.1f %18.1f\n", r.isa, r.threads, r.median_gflops, r.best_gflops,
                  r.median_gflops / r.threads);
  }
  return g_sink == 12345.0f ? 1 : 0;  // never true; keeps the sink observable
}
