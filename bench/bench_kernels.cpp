// bench_kernels: GEMM, conv2d and max-pool kernels at the shapes Bastion's models produce.
//
//   gemm_openblas/<shape>/threads:T   rung 0: gemm_openblas_cpu with OpenBLAS's OWN threads set to T
//                                     (the library at its best; Bastion itself keeps OpenBLAS at 1 thread)
//   gemm_cpu/<shape>/threads:T        gemm_cpu, the path every op uses: shape-determined panels over T
//                                     OpenMP threads, each one single-threaded OpenBLAS call
//   gemm_blocked/<shape>/threads:1    gemm_blocked_cpu (single-threaded by contract, so 1 thread only)
//   gemm_small/<shape>/threads:T      gemm_small_cpu, the small-batch path (no packing) on the widest
//                                     instruction set the CPU has (AVX-512F, else AVX2 + FMA), on the trans
//                                     combinations it serves: the ladder behind gemm_cpu's choice
//                                     (kernels/cpu/gemm.cpp)
//   gemm_small_avx2/<shape>/T         its AVX2 instance, where the CPU has AVX-512F too (else gemm_small is it)
//   conv_forward/<layer>/threads:T    conv2d_forward_cpu  (im2col + one GEMM per chunk + bias scatter)
//   conv_backward/<layer>/threads:T   conv2d_backward_cpu (grad_in null for first layers, as in training;
//                                     workspace_holds_cols = false, i.e. it redoes its im2col)
//   conv_backward_kept/<layer>/T      the same with workspace_holds_cols = true, which is what training
//                                     runs when the batch is one chunk (autograd/ops/conv.cpp keeps the
//                                     forward's columns); only for such layers. The backward overwrites the
//                                     kept columns with dcols, so later iterations multiply stale columns:
//                                     same shapes and work, values irrelevant to the timing.
//   conv_direct_rows_{forward,backward}/<layer>       rung 1 of the conv ladder: the direct AVX-512 path
//                                     over row-strided planes (kernels/cpu/conv_direct.h)
//   conv_direct_rows_avx2_{forward,backward}/<layer>  rung 1 on AVX2 + FMA (conv_direct_avx2.cpp): the
//                                     only direct rung of a build without AVX-512
//   conv_direct_channels_{forward,backward}/<layer>   rung 2: 16 output channels per vector
//                                     (conv_direct_channels.cpp), layers with K % 16 == 0; the product
//                                     picks per layer and pass (ConvDirectVariant::Auto)
//   conv_blocked_{forward,backward}/<layer>   rung 4: channel-blocked AVX-512 loops for ResNet's 3x3
//                                     layers (kernels/cpu/conv_blocked.h), on the layers it supports,
//                                     including ResNet18's CIFAR layers at batch 64 (resnet18.<C>.<H>.s<st>);
//                                     conv_before_{forward,backward}/<those layers> time what the op ran
//                                     on them before (conv2d_direct Auto at stride 1, im2col + OpenBLAS
//                                     at stride 2). Backward = grad_in + grad_weight + grad_bias.
//   conv_im2col/<layer>, conv_col2im/<layer>   the building blocks alone, to split conv time
//   max_pool2d_forward/<shape>/threads:T, max_pool2d_backward/<shape>/threads:T
//   max_pool2d_backward_v1/...
//                                     candidate variants (STYLE.md §5), defined below and checked
//                                     bitwise against the library kernel before they are timed
//
// <shape> is either squareN (M = N = K = N, no transposes) or <layer>.<gemm>, the exact GEMM a conv
// layer issues per chunk: fwd (K, nb*P, CRS) NN, bwd_weight (K, CRS, nb*P) NT, bwd_input (CRS, nb*P, K) TN,
// so a conv's GFLOP/s can be put next to gemm_cpu on the very same matrices (bench/summarize.py).
// Counters: GFLOPS = flops/s (a GEMM is 2*M*N*K; a conv forward 2*N*K*C*R*S*OH*OW; its backward is
// 2x that with grad_in and 1x without), GBps = bytes moved/s (each input read once, each output
// written once: a lower bound on traffic). All benchmarks use real (wall) time, since the work runs on
// several threads. Inputs come from a fixed Generator; library outputs are not checked here (tests/ do
// that), only the variants' agreement with the library.
// main() calls gemm_select_blas_core(argv) first, as the bastion CLI does, so OpenBLAS runs the kernels
// the product would run (set OPENBLAS_CORETYPE to override, e.g. Prescott to see the fallback).
//
// Run: bench_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//                    --benchmark_enable_random_interleaving=true    (see bench/run_all.sh)
// Sources: this file (the GEMM ladder, main) and kernels_conv.cpp (everything conv and pooling), sharing
// bench_kernels_support.h.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench/bench_kernels_support.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_small.h"

#ifdef BASTION_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int threads);  // cblas.h is private to bastion_core
#endif

using namespace bastion;
using namespace bastion::bench_kernels;

namespace {

struct GemmShape {
  std::string name;
  bool trans_a, trans_b;
  int64_t M, N, K;
  float beta = 0.0f;
};

std::vector<GemmShape> gemm_shapes() {
  std::vector<GemmShape> shapes;
  for (int64_t n : {64, 256, 1024}) shapes.push_back({"square" + std::to_string(n), false, false, n, n, n});
  // A linear layer's three GEMMs (y = x W^T; dx = dy W; dW = dy^T x) at the papers' batches:
  // cnn-fedfsa's fc2 (1024 -> 1024), fc1 (192 -> 1024) and fc3 (1024 -> 10) at FedFSA's batch 48, and its
  // last partial batch of 10 (fc2), the MLP's fc1 (784 -> 200) and LeNet's fc1 (400 -> 120) at batch 64
  // (bench/RESULTS.md "Linear layers at small batch", "The small-batch GEMM ladder"). These have beta = 0;
  // the product accumulates dW into the gradient, which the .bwd_weight_acc shapes below time (beta = 1).
  struct Fc {
    const char* name;
    int64_t batch, in, out;
  };
  for (const Fc& fc :
       {Fc{"fedfsa_fc2", 48, 1024, 1024}, Fc{"fedfsa_fc1", 48, 192, 1024}, Fc{"fedfsa_fc3", 48, 1024, 10},
        Fc{"fedfsa_fc2_b10", 10, 1024, 1024}, Fc{"mlp_fc1", 64, 784, 200}, Fc{"lenet_fc1", 64, 400, 120}}) {
    const std::string base = fc.name;
    shapes.push_back({base + ".fwd", false, true, fc.batch, fc.out, fc.in});
    shapes.push_back({base + ".bwd_input", false, false, fc.batch, fc.in, fc.out});
    shapes.push_back({base + ".bwd_weight", true, false, fc.out, fc.in, fc.batch});
  }
  // cnn-fedfsa's weight gradients as the product runs them: added into the gradient (beta = 1).
  for (const Fc& fc : {Fc{"fedfsa_fc2", 48, 1024, 1024}, Fc{"fedfsa_fc1", 48, 192, 1024}})
    shapes.push_back({std::string(fc.name) + ".bwd_weight_acc", true, false, fc.out, fc.in, fc.batch, 1.0f});
  // Forwards at the evaluation batch (128, and cnn-fedfsa's 82-row tail): forward only, where the small path
  // might stop paying.
  shapes.push_back({"fedfsa_fc2_b128.fwd", false, true, 128, 1024, 1024});
  shapes.push_back({"fedfsa_fc2_b82.fwd", false, true, 82, 1024, 1024});
  shapes.push_back({"fedfsa_fc1_b128.fwd", false, true, 128, 1024, 192});
  shapes.push_back({"mlp_fc1_b128.fwd", false, true, 128, 200, 784});
  shapes.push_back({"lenet_fc1_b128.fwd", false, true, 128, 120, 400});
  for (const ConvLayer& layer : conv_layers()) {
    const Conv2dGeometry& g = layer.g;
    const int64_t cols = conv2d_chunk_samples(g) * g.out_plane();  // nb * P of a full chunk
    const std::string base = layer.name;
    shapes.push_back({base + ".fwd", false, false, g.K, cols, g.crs()});
    shapes.push_back({base + ".bwd_weight", false, true, g.K, g.crs(), cols});
    if (!layer.first_layer) shapes.push_back({base + ".bwd_input", true, false, g.crs(), cols, g.K});
  }
  return shapes;
}

using GemmFn = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                        float, float*, int64_t);

// openblas_threads > 0: set OpenBLAS's own thread count for this benchmark (after one call, so the
// library's one-time "single-threaded" setting has already happened) and put it back to 1 afterwards.
void bm_gemm(benchmark::State& state, GemmFn gemm, GemmShape s, int threads, int openblas_threads) {
  set_num_threads(threads);
  Buffer a(s.M * s.K, 1), b(s.K * s.N, 2), c(s.M * s.N, 3);
  const int64_t lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
  auto call = [&] {
    gemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, a.get(), lda, b.get(), ldb, s.beta, c.get(), s.N);
  };
  call();
#ifdef BASTION_HAVE_OPENBLAS
  if (openblas_threads > 0) openblas_set_num_threads(openblas_threads);
#endif
  for (auto _ : state) {
    call();
    benchmark::ClobberMemory();
  }
#ifdef BASTION_HAVE_OPENBLAS
  if (openblas_threads > 0) openblas_set_num_threads(1);
#endif
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * s.M * s.N * s.K, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["M"] = static_cast<double>(s.M);
  state.counters["N"] = static_cast<double>(s.N);
  state.counters["K"] = static_cast<double>(s.K);
}

void register_all() {
  const std::vector<int> kThreads = {1, 2};
  for (const GemmShape& s : gemm_shapes()) {
    for (int t : kThreads) {
      if (gemm_has_openblas())
        benchmark::RegisterBenchmark(("gemm_openblas" + suffix(s.name, t)).c_str(), bm_gemm, gemm_openblas_cpu, s, 1, t)
            ->UseRealTime();
      benchmark::RegisterBenchmark(("gemm_cpu" + suffix(s.name, t)).c_str(), bm_gemm, gemm_cpu, s, t, 0)->UseRealTime();
      if (t == 1)
        benchmark::RegisterBenchmark(("gemm_blocked" + suffix(s.name, t)).c_str(), bm_gemm, gemm_blocked_cpu, s, t, 0)
            ->UseRealTime();
      if (gemm_small_available() && gemm_small_supports(s.trans_a, s.trans_b))
        benchmark::RegisterBenchmark(("gemm_small" + suffix(s.name, t)).c_str(), bm_gemm, gemm_small_cpu, s, t, 0)
            ->UseRealTime();
      if (gemm_small_isa() == GemmSmallIsa::avx512 && gemm_small_avx2_available() &&
          gemm_small_supports(s.trans_a, s.trans_b))
        benchmark::RegisterBenchmark(("gemm_small_avx2" + suffix(s.name, t)).c_str(), bm_gemm, gemm_small_avx2_cpu, s,
                                     t, 0)
            ->UseRealTime();
    }
  }
  register_conv_benchmarks(kThreads);
}

}  // namespace

int main(int argc, char** argv) {
  const char* blas_core = gemm_select_blas_core(argv);  // may re-execute once with OPENBLAS_CORETYPE set
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("openblas_core", blas_core);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
