// bench_gemm: the GEMM kernel ladder of kernels/cuda/gemm.h against cuBLAS.
//   bench_gemm <rung|all> [M N K]        rung 0..4; default all rungs at M = N = K = 4096
// C (M, N) = A (M, K) @ B (K, N), row-major, alpha = 1, beta = 0.
//
// Rung 0 is cublasSgemm in exact FP32 (CUBLAS_DEFAULT_MATH: TF32 tensor ops are off unless asked for).
// Every rung first runs once on the same random inputs, into a C full of NaN, and is compared with
// rung 0's result element by element, relative to the sum of |terms| (|A| @ |B|, also by cuBLAS); the
// largest such error is printed and the program exits 1 above the tolerance. Then it is timed (CUDA
// events, 5 warm-ups, median of 20 runs) and reported with GFLOP/s (2MNK), GB/s (4(MK + KN + MN) bytes)
// and % of rung 0 measured in the same process. Rung 4 (TF32) is also set against cuBLAS with TF32
// tensor ops ("cublas-tf32"), its fair rung 0.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cuda/bench_cuda_support.h"
#include "kernels/cuda/gemm.h"
#include "tensor/random.h"

#define CUBLAS_CHECK(expr)                                                                                          \
  do {                                                                                                              \
    const cublasStatus_t cublas_status_ = (expr);                                                                   \
    BASTION_CHECK(cublas_status_ == CUBLAS_STATUS_SUCCESS, "cuBLAS error '", cublasGetStatusString(cublas_status_), \
                  "' in ", #expr);                                                                                  \
  } while (0)

namespace bastion {
namespace {

// Both results carry float32 summation error of up to ~8 sqrt(K + 2) u of the sum of |terms| (the
// random-walk bound of tests/kernel_test_support.h, u = 2^-24), so they may differ by twice that.
double fp32_tolerance(int64_t K) { return 2.0 * 8.0 * std::sqrt(static_cast<double>(K + 2)) * 0x1.0p-24; }
// TF32 rounds each operand to 10 mantissa bits: up to 2 * 2^-10 per product (truncation bound).
constexpr double kTf32ProductError = 2.0 * 0x1.0p-10;

struct Problem {
  int64_t M, N, K;
  float *A, *B, *C, *reference, *magnitude;  // device
};

// cuBLAS is column-major: the row-major C (M, N) is the column-major C^T (N, M) = B^T A^T, and the
// row-major B (K, N) and A (M, K) are, unchanged in memory, the column-major B^T (N, K) and A^T (K, M).
void cublas_gemm_row_major(cublasHandle_t handle, int64_t M, int64_t N, int64_t K, const float* A, const float* B,
                           float* C) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                           static_cast<int>(K), &alpha, B, static_cast<int>(N), A, static_cast<int>(K), &beta, C,
                           static_cast<int>(N)));
}

float* upload(const std::vector<float>& host) {
  float* device = cuda_alloc_floats(static_cast<int64_t>(host.size()));
  cuda_copy_to_device(device, host.data(), host.size() * sizeof(float), cuda_stream());
  return device;
}

std::vector<float> download(const float* device, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  cuda_copy_to_host(host.data(), device, host.size() * sizeof(float), cuda_stream());
  return host;
}

// Random A, B in [-1, 1); rung 0's C; and |A| @ |B|, the scale of each element's rounding error.
Problem make_problem(cublasHandle_t handle, int64_t M, int64_t N, int64_t K) {
  Generator gen(2024);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = static_cast<float>(2.0 * gen.uniform() - 1.0);
    return v;
  };
  auto absolute = [](std::vector<float> v) {
    for (float& x : v) x = std::fabs(x);
    return v;
  };
  const std::vector<float> a = random(M * K), b = random(K * N);
  Problem p{
      M, N, K, upload(a), upload(b), cuda_alloc_floats(M * N), cuda_alloc_floats(M * N), cuda_alloc_floats(M * N)};
  float* abs_a = upload(absolute(a));
  float* abs_b = upload(absolute(b));
  cublas_gemm_row_major(handle, M, N, K, p.A, p.B, p.reference);
  cublas_gemm_row_major(handle, M, N, K, abs_a, abs_b, p.magnitude);
  cuda_synchronize(cuda_stream());
  cuda_free_floats(abs_a);
  cuda_free_floats(abs_b);
  return p;
}

// Largest |C - reference| / (|A| @ |B|) over the elements (NaN, an unwritten element, counts as infinite).
double max_relative_error(const Problem& p) {
  const std::vector<float> c = download(p.C, p.M * p.N), ref = download(p.reference, p.M * p.N),
                           mag = download(p.magnitude, p.M * p.N);
  double worst = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double error = std::fabs(static_cast<double>(c[i]) - ref[i]) / std::max(static_cast<double>(mag[i]), 1e-30);
    if (!(error <= worst)) worst = std::isnan(error) ? INFINITY : error;
  }
  return worst;
}

void run_rung(int rung, const Problem& p) {
  gemm_cuda_variant(rung, false, false, p.M, p.N, p.K, 1.0f, p.A, p.K, p.B, p.N, 0.0f, p.C, p.N, cuda_stream());
}

// Validates one of our rungs against rung 0; returns false (after saying why) on a mismatch.
bool validate(int rung, const Problem& p) {
  cuda_fill(p.C, NAN, p.M * p.N, cuda_stream());
  run_rung(rung, p);
  const double error = max_relative_error(p);
  const double tolerance = fp32_tolerance(p.K) + (rung == 4 ? kTf32ProductError : 0.0);
  const bool ok = error <= tolerance;
  std::printf("rung %d %-16s max error %.3e of sum|terms| vs rung 0 (tolerance %.3e): %s\n", rung,
              gemm_cuda_variant_name(rung), error, tolerance, ok ? "ok" : "MISMATCH");
  return ok;
}

int run(int argc, char** argv) {
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: %s <rung 0..%d | all> [M N K]\n", argv[0], gemm_cuda_variant_count());
    return 2;
  }
  const std::string which = argv[1];
  const int only = which == "all" ? -1 : std::atoi(argv[1]);
  if (only < -1 || only > gemm_cuda_variant_count() || (only == 0 && which != "0")) {
    std::fprintf(stderr, "unknown rung '%s'\n", argv[1]);
    return 2;
  }
  const int64_t M = argc == 5 ? std::atoll(argv[2]) : 4096, N = argc == 5 ? std::atoll(argv[3]) : 4096,
                K = argc == 5 ? std::atoll(argv[4]) : 4096;
  BASTION_CHECK(M > 0 && N > 0 && K > 0, "sizes must be positive: M ", M, " N ", N, " K ", K);

  bench::print_device_banner();
  std::printf("C (%lld, %lld) = A (%lld, %lld) @ B (%lld, %lld), row-major float32\n", static_cast<long long>(M),
              static_cast<long long>(N), static_cast<long long>(M), static_cast<long long>(K),
              static_cast<long long>(K), static_cast<long long>(N));
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, cuda_stream()));
  CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  const Problem p = make_problem(handle, M, N, K);
  const double flops = 2.0 * M * N * K, bytes = 4.0 * (M * K + K * N + M * N);

  const bench::Timing rung0 =
      bench::time_with_events([&] { cublas_gemm_row_major(handle, M, N, K, p.A, p.B, p.C); }, cuda_stream());
  bench::print_rung(0, "cublas-fp32", rung0, flops, bytes, rung0.median_ms);
  bool all_ok = true;
  for (int rung = 1; rung <= gemm_cuda_variant_count(); ++rung) {
    if (only != -1 && only != rung) continue;
    if (!validate(rung, p)) {
      all_ok = false;
      continue;
    }
    const bench::Timing t = bench::time_with_events([&] { run_rung(rung, p); }, cuda_stream());
    bench::print_rung(rung, gemm_cuda_variant_name(rung), t, flops, bytes, rung0.median_ms);
    if (rung == 4) {
      CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
      const bench::Timing tf32 =
          bench::time_with_events([&] { cublas_gemm_row_major(handle, M, N, K, p.A, p.B, p.C); }, cuda_stream());
      CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
      bench::print_rung(0, "cublas-tf32", tf32, flops, bytes, rung0.median_ms);
      std::printf("rung 4 is %.1f %% of cublas-tf32\n", 100.0 * tf32.median_ms / t.median_ms);
    }
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  for (float* ptr : {p.A, p.B, p.C, p.reference, p.magnitude}) cuda_free_floats(ptr);
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace bastion

int main(int argc, char** argv) {
  try {
    return bastion::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: %s\n", e.what());
    return 2;
  }
}
