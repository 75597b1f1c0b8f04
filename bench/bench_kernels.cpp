// bench_kernels: GEMM, conv2d and max-pool kernels at the shapes Bastion's models produce.
//
//   gemm_openblas/<shape>/threads:T   rung 0: gemm_openblas_cpu with OpenBLAS's OWN threads set to T
//                                     (the library at its best; Bastion itself keeps OpenBLAS at 1 thread)
//   gemm_cpu/<shape>/threads:T        gemm_cpu, the path every op uses: shape-determined panels over T
//                                     OpenMP threads, each one single-threaded OpenBLAS call
//   gemm_blocked/<shape>/threads:1    gemm_blocked_cpu (single-threaded by contract, so 1 thread only)
//   gemm_small/<shape>/threads:T      gemm_small_cpu, the AVX-512 small-batch path (no packing), on the
//                                     trans combinations it serves and only where the CPU has AVX-512F:
//                                     the ladder behind gemm_cpu's choice (kernels/cpu/gemm.cpp)
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
//   max_pool2d_backward_v1/..., conv_col2im_v1/..., conv_col2im_v2/...
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
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_blocked.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_small.h"
#include "kernels/cpu/pool.h"
#include "tensor/random.h"

#ifdef BASTION_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int threads);  // cblas.h is private to bastion_core
#endif

using namespace bastion;

namespace {

// 64-byte aligned float buffer filled with N(0, 1) from a fixed seed (the pool's alignment).
struct Buffer {
  explicit Buffer(int64_t n, uint64_t seed = 1) : size(std::max<int64_t>(n, 1)) {
    const size_t bytes = (static_cast<size_t>(size) * sizeof(float) + 63) / 64 * 64;
    data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    Generator gen(seed);
    for (int64_t i = 0; i < size; ++i) data.get()[i] = static_cast<float>(gen.normal());
  }
  float* get() const { return data.get(); }
  int64_t size;
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
};

struct ConvLayer {
  const char* name;
  Conv2dGeometry g;
  bool first_layer;  // training skips grad_in of a network's first layer
};

std::vector<ConvLayer> conv_layers() {
  return {
      {"lenet28.conv1", conv2d_geometry(64, 1, 28, 28, 6, 5, 5, 1, 0), true},
      {"lenet28.conv2", conv2d_geometry(64, 6, 12, 12, 16, 5, 5, 1, 0), false},
      {"lenet32.conv1", conv2d_geometry(64, 3, 32, 32, 6, 5, 5, 1, 0), true},
      {"lenet32.conv2", conv2d_geometry(64, 6, 14, 14, 16, 5, 5, 1, 0), false},
      {"fedcap.conv1", conv2d_geometry(64, 3, 32, 32, 32, 5, 5, 1, 0), true},
      {"fedcap.conv2", conv2d_geometry(64, 32, 14, 14, 64, 5, 5, 1, 0), false},
      {"resnet18.layer1", conv2d_geometry(16, 64, 32, 32, 64, 3, 3, 1, 1), false},
  };
}

// ResNet18's 3x3 layers on CIFAR-10 (3x32x32) at batch 64: one per stage and stride (the 1x1 shortcuts
// and the 3-channel stem are not conv_blocked's).
std::vector<ConvLayer> resnet18_layers() {
  return {
      {"resnet18.64.32.s1", conv2d_geometry(64, 64, 32, 32, 64, 3, 3, 1, 1), false},
      {"resnet18.64.32.s2", conv2d_geometry(64, 64, 32, 32, 128, 3, 3, 2, 1), false},
      {"resnet18.128.16.s1", conv2d_geometry(64, 128, 16, 16, 128, 3, 3, 1, 1), false},
      {"resnet18.128.16.s2", conv2d_geometry(64, 128, 16, 16, 256, 3, 3, 2, 1), false},
      {"resnet18.256.8.s1", conv2d_geometry(64, 256, 8, 8, 256, 3, 3, 1, 1), false},
      {"resnet18.256.8.s2", conv2d_geometry(64, 256, 8, 8, 512, 3, 3, 2, 1), false},
      {"resnet18.512.4.s1", conv2d_geometry(64, 512, 4, 4, 512, 3, 3, 1, 1), false},
  };
}

double conv_forward_flops(const Conv2dGeometry& g) { return 2.0 * g.N * g.K * g.crs() * g.out_plane(); }

// ---- candidate kernel variants (not used by the library; see bench/RESULTS.md) ----

// max_pool2d_backward_v1: the 2x2 / stride 2 / no-padding backward written for the vectorizer:
// restrict pointers and float selects instead of a chain of bools. Same first-maximum rule as
// kernels/cpu/pool.cpp (a, b, c, d = top-left, top-right, bottom-left, bottom-right; the first equal to
// the window max wins; d when none compares equal). Needs H = 2*OH and W = 2*OW. ASSIGNS grad_in.
void max_pool2d_backward_v1(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* __restrict top = in + p * g.H * g.W + 2 * oh * g.W;
      const float* __restrict bottom = top + g.W;
      float* __restrict dtop = grad_in + p * g.H * g.W + 2 * oh * g.W;
      float* __restrict dbottom = dtop + g.W;
      const float* __restrict src = grad_out + (p * g.OH + oh) * g.OW;
#pragma omp simd
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const float a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
        const float m = std::max(std::max(a, b), std::max(c, d));
        const float after_a = a == m ? 0.0f : src[ow];  // gradient not yet placed
        const float after_b = b == m ? 0.0f : after_a;
        dtop[2 * ow] = a == m ? src[ow] : 0.0f;
        dtop[2 * ow + 1] = b == m ? after_a : 0.0f;
        dbottom[2 * ow] = c == m ? after_b : 0.0f;
        dbottom[2 * ow + 1] = c == m ? 0.0f : after_b;
      }
    }
  }
}

// conv_col2im_v1: col2im_add_cpu with a unit-stride inner loop for stride 1 (restrict pointers, so it
// vectorizes); other strides as the library. Same plane-per-iteration split, same summation order.
void col2im_add_v1(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count) {
  const int64_t P = g.out_plane(), row_len = n_count * P;
#pragma omp parallel for schedule(static)
  for (int64_t plane_index = 0; plane_index < n_count * g.C; ++plane_index) {
    const int64_t n = plane_index / g.C, c = plane_index % g.C;
    float* plane = in_grad + ((n_begin + n) * g.C + c) * g.H * g.W;
    for (int64_t r = 0; r < g.R; ++r) {
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t row = (c * g.R + r) * g.S + s;
        // Output columns whose input column ow*stride - pad + s lies in [0, W): [lo, hi).
        const int64_t first = g.padding - s, last = g.W - 1 + g.padding - s;
        const int64_t lo_raw = first <= 0 ? 0 : (first + g.stride - 1) / g.stride;
        const int64_t hi = last < 0 ? 0 : std::min(g.OW, last / g.stride + 1);
        const int64_t lo = std::min(lo_raw, hi);
        const float* src = cols + row * row_len + n * P;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.stride - g.padding + r;
          if (ih < 0 || ih >= g.H) continue;
          float* __restrict dst = plane + ih * g.W - g.padding + s;
          const float* __restrict src_row = src + oh * g.OW;
          if (g.stride == 1) {
#pragma omp simd
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += src_row[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.stride] += src_row[ow];
          }
        }
      }
    }
  }
}

// conv_col2im_v2: v1 with the loops reordered so the columns are READ in memory order: channel c outer
// (the parallel loop: each thread owns whole channels, so each (n, c) plane is still written by one
// thread), then (r, s), then the samples n, then (oh, ow). The library's order (plane (n, c) outer)
// visits, for each sample, all C*R*S rows of the (CRS, nb*P) column matrix at a stride of nb*P floats:
// for cnn-fedcap's conv2 that is 800 rows 25.6 KB apart per sample, far outside L2 and the TLB. Each
// element still receives its contributions in ascending (r, s) order (for fixed (r, s) an element gets
// at most one), so the sums are bitwise those of the library.
void col2im_add_v2(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count) {
  const int64_t P = g.out_plane(), row_len = n_count * P;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t r = 0; r < g.R; ++r) {
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t row = (c * g.R + r) * g.S + s;
        const int64_t first = g.padding - s, last = g.W - 1 + g.padding - s;
        const int64_t lo_raw = first <= 0 ? 0 : (first + g.stride - 1) / g.stride;
        const int64_t hi = last < 0 ? 0 : std::min(g.OW, last / g.stride + 1);
        const int64_t lo = std::min(lo_raw, hi);
        for (int64_t n = 0; n < n_count; ++n) {
          float* plane = in_grad + ((n_begin + n) * g.C + c) * g.H * g.W;
          const float* src = cols + row * row_len + n * P;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * g.stride - g.padding + r;
            if (ih < 0 || ih >= g.H) continue;
            float* __restrict dst = plane + ih * g.W - g.padding + s;
            const float* __restrict src_row = src + oh * g.OW;
            if (g.stride == 1) {
#pragma omp simd
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += src_row[ow];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.stride] += src_row[ow];
            }
          }
        }
      }
    }
  }
}

// Aborts unless `variant` reproduces `library` bit for bit on the benchmark's inputs.
void require_same(const char* what, const float* library, const float* variant, int64_t n) {
  if (std::memcmp(library, variant, static_cast<size_t>(n) * sizeof(float)) != 0) {
    std::fprintf(stderr, "bench_kernels: variant %s disagrees with the library kernel\n", what);
    std::abort();
  }
}

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
  // cnn-fedfsa's forward at the evaluation batch (128): forward only, where the small path might stop paying.
  shapes.push_back({"fedfsa_fc2_b128.fwd", false, true, 128, 1024, 1024});
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

void bm_conv_forward(benchmark::State& state, ConvLayer layer, int threads) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), bias(g.K, 3), out(g.N * g.K * g.out_plane(), 4),
      workspace(conv2d_workspace_floats(g), 5);
  for (auto _ : state) {
    conv2d_forward_cpu(out.get(), in.get(), weight.get(), bias.get(), g, workspace.get());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(conv_forward_flops(g), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_conv_backward(benchmark::State& state, ConvLayer layer, int threads, bool kept_columns) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), grad_out(g.N * g.K * g.out_plane(), 3),
      grad_in(g.N * g.C * g.H * g.W, 4), grad_weight(g.K * g.crs(), 5), grad_bias(g.K, 6),
      workspace(conv2d_workspace_floats(g), 7), out(g.N * g.K * g.out_plane(), 8);
  float* grad_in_ptr = layer.first_layer ? nullptr : grad_in.get();
  if (kept_columns) conv2d_forward_cpu(out.get(), in.get(), weight.get(), nullptr, g, workspace.get());
  for (auto _ : state) {
    conv2d_backward_cpu(grad_in_ptr, grad_weight.get(), grad_bias.get(), grad_out.get(), in.get(), weight.get(), g,
                        workspace.get(), kept_columns);
    benchmark::ClobberMemory();
  }
  const double flops = conv_forward_flops(g) * (layer.first_layer ? 1.0 : 2.0);
  state.counters["GFLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// The direct path (kernels/cpu/conv_direct.h), rung 1 of the conv ladder whose rung 0 is im2col +
// OpenBLAS (conv_forward / conv_backward above): same layers, same flop counts.
void bm_conv_direct_forward(benchmark::State& state, ConvLayer layer, int threads, ConvDirectVariant variant) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), bias(g.K, 3), out(g.N * g.K * g.out_plane(), 4),
      workspace(conv2d_direct_workspace_floats(g, threads), 5);
  for (auto _ : state) {
    conv2d_direct_forward_cpu(out.get(), in.get(), weight.get(), bias.get(), g, workspace.get(), threads, variant);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(conv_forward_flops(g), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_conv_direct_backward(benchmark::State& state, ConvLayer layer, int threads, ConvDirectVariant variant) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), grad_out(g.N * g.K * g.out_plane(), 3),
      grad_in(g.N * g.C * g.H * g.W, 4), grad_weight(g.K * g.crs(), 5), grad_bias(g.K, 6),
      workspace(conv2d_direct_workspace_floats(g, threads), 7);
  float* grad_in_ptr = layer.first_layer ? nullptr : grad_in.get();
  for (auto _ : state) {
    conv2d_direct_backward_cpu(grad_in_ptr, grad_weight.get(), grad_bias.get(), grad_out.get(), in.get(), weight.get(),
                               g, workspace.get(), threads, variant);
    benchmark::ClobberMemory();
  }
  const double flops = conv_forward_flops(g) * (layer.first_layer ? 1.0 : 2.0);
  state.counters["GFLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// Rung 4, conv_blocked (kernels/cpu/conv_blocked.h): same flop counts.
void bm_conv_blocked_forward(benchmark::State& state, ConvLayer layer, int threads) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), bias(g.K, 3), out(g.N * g.K * g.out_plane(), 4),
      workspace(conv2d_blocked_workspace_floats(g), 5);
  for (auto _ : state) {
    conv2d_blocked_forward_cpu(out.get(), in.get(), weight.get(), bias.get(), g, workspace.get(), threads);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(conv_forward_flops(g), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_conv_blocked_backward(benchmark::State& state, ConvLayer layer, int threads) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), grad_out(g.N * g.K * g.out_plane(), 3),
      grad_in(g.N * g.C * g.H * g.W, 4), grad_weight(g.K * g.crs(), 5), grad_bias(g.K, 6),
      workspace(conv2d_blocked_workspace_floats(g), 7);
  float* grad_in_ptr = layer.first_layer ? nullptr : grad_in.get();
  for (auto _ : state) {
    conv2d_blocked_backward_cpu(grad_in_ptr, grad_weight.get(), grad_bias.get(), grad_out.get(), in.get(), weight.get(),
                                g, workspace.get(), threads);
    benchmark::ClobberMemory();
  }
  const double flops = conv_forward_flops(g) * (layer.first_layer ? 1.0 : 2.0);
  state.counters["GFLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// im2col / col2im of the first chunk alone: bytes = input read + columns written (im2col), or
// columns read + input gradient read and written (col2im adds into it).
void bm_im2col(benchmark::State& state, ConvLayer layer, int threads) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  const int64_t nb = conv2d_chunk_samples(g);
  Buffer in(g.N * g.C * g.H * g.W, 1), cols(nb * g.out_plane() * g.crs(), 2);
  for (auto _ : state) {
    im2col_cpu(cols.get(), in.get(), g, 0, nb);
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * (nb * g.C * g.H * g.W + nb * g.out_plane() * g.crs());
  state.counters["GBps"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

using Col2imFn = void (*)(float*, const float*, const Conv2dGeometry&, int64_t, int64_t);

void bm_col2im(benchmark::State& state, ConvLayer layer, int threads, Col2imFn col2im) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  const int64_t nb = conv2d_chunk_samples(g);
  Buffer grad_in(g.N * g.C * g.H * g.W, 1), cols(nb * g.out_plane() * g.crs(), 2);
  if (col2im != col2im_add_cpu) {
    Buffer expected(g.N * g.C * g.H * g.W, 1);
    col2im_add_cpu(expected.get(), cols.get(), g, 0, nb);
    col2im(grad_in.get(), cols.get(), g, 0, nb);
    require_same("conv_col2im_v1/v2", expected.get(), grad_in.get(), expected.size);
  }
  for (auto _ : state) {
    col2im(grad_in.get(), cols.get(), g, 0, nb);
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * (2.0 * nb * g.C * g.H * g.W + nb * g.out_plane() * g.crs());
  state.counters["GBps"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_max_pool_forward(benchmark::State& state, Pool2dGeometry g, int threads) {
  set_num_threads(threads);
  Buffer in(g.planes * g.H * g.W, 1), out(g.planes * g.OH * g.OW, 2);
  for (auto _ : state) {
    max_pool2d_forward_cpu(out.get(), in.get(), g);
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * (g.planes * g.H * g.W + g.planes * g.OH * g.OW);
  state.counters["GBps"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

using PoolBackwardFn = void (*)(float*, const float*, const float*, const Pool2dGeometry&);

void bm_max_pool_backward(benchmark::State& state, Pool2dGeometry g, int threads, PoolBackwardFn backward) {
  set_num_threads(threads);
  Buffer in(g.planes * g.H * g.W, 1), grad_out(g.planes * g.OH * g.OW, 2), grad_in(g.planes * g.H * g.W, 3);
  if (backward != max_pool2d_backward_cpu) {
    Buffer expected(g.planes * g.H * g.W, 4);
    max_pool2d_backward_cpu(expected.get(), grad_out.get(), in.get(), g);
    backward(grad_in.get(), grad_out.get(), in.get(), g);
    require_same("max_pool2d_backward_v1", expected.get(), grad_in.get(), expected.size);
  }
  for (auto _ : state) {
    backward(grad_in.get(), grad_out.get(), in.get(), g);
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * (2.0 * g.planes * g.H * g.W + g.planes * g.OH * g.OW);  // in, grad_out, grad_in
  state.counters["GBps"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

std::string suffix(const std::string& what, int threads) { return "/" + what + "/threads:" + std::to_string(threads); }

// Rung 4's forward and backward on one layer at t threads.
void register_conv_blocked(const ConvLayer& layer, int t) {
  benchmark::RegisterBenchmark(("conv_blocked_forward" + suffix(layer.name, t)).c_str(), bm_conv_blocked_forward, layer,
                               t)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("conv_blocked_backward" + suffix(layer.name, t)).c_str(), bm_conv_blocked_backward,
                               layer, t)
      ->UseRealTime();
}

void register_all() {
  const int kThreads[] = {1, 2};
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
    }
  }
  for (const ConvLayer& layer : conv_layers()) {
    for (int t : kThreads) {
      benchmark::RegisterBenchmark(("conv_forward" + suffix(layer.name, t)).c_str(), bm_conv_forward, layer, t)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("conv_backward" + suffix(layer.name, t)).c_str(), bm_conv_backward, layer, t, false)
          ->UseRealTime();
      if (conv2d_chunk_samples(layer.g) >= layer.g.N)
        benchmark::RegisterBenchmark(("conv_backward_kept" + suffix(layer.name, t)).c_str(), bm_conv_backward, layer, t,
                                     true)
            ->UseRealTime();
      for (const auto& [rung, variant] :
           {std::pair{"rows", ConvDirectVariant::RowStrided}, std::pair{"channels", ConvDirectVariant::ChannelVector},
            std::pair{"scatter", ConvDirectVariant::ChannelScatter}}) {
        // channels: K % 16 == 0 (else every pass would fall back to rows); its grad_in needs C % 16 too.
        if (!conv2d_direct_supported(layer.g) || (variant != ConvDirectVariant::RowStrided && layer.g.K % 16 != 0))
          continue;
        benchmark::RegisterBenchmark((std::string("conv_direct_") + rung + "_forward" + suffix(layer.name, t)).c_str(),
                                     bm_conv_direct_forward, layer, t, variant)
            ->UseRealTime();
        benchmark::RegisterBenchmark((std::string("conv_direct_") + rung + "_backward" + suffix(layer.name, t)).c_str(),
                                     bm_conv_direct_backward, layer, t, variant)
            ->UseRealTime();
      }
      if (conv2d_blocked_supported(layer.g)) register_conv_blocked(layer, t);
      benchmark::RegisterBenchmark(("conv_im2col" + suffix(layer.name, t)).c_str(), bm_im2col, layer, t)->UseRealTime();
      if (!layer.first_layer) {
        benchmark::RegisterBenchmark(("conv_col2im" + suffix(layer.name, t)).c_str(), bm_col2im, layer, t,
                                     col2im_add_cpu)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("conv_col2im_v1" + suffix(layer.name, t)).c_str(), bm_col2im, layer, t,
                                     col2im_add_v1)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("conv_col2im_v2" + suffix(layer.name, t)).c_str(), bm_col2im, layer, t,
                                     col2im_add_v2)
            ->UseRealTime();
      }
    }
  }
  // LeNet's conv1 output at batch 64 on 28x28 input: 64 x 6 planes of 24x24, 2x2 window, stride 2.
  const Pool2dGeometry pool = pool2d_geometry(64 * 6, 24, 24, 2, 2, 0);
  for (const ConvLayer& layer : resnet18_layers()) {
    if (!conv2d_blocked_supported(layer.g)) continue;
    for (int t : kThreads) {
      register_conv_blocked(layer, t);
      if (conv2d_direct_supported(layer.g)) {
        benchmark::RegisterBenchmark(("conv_before_forward" + suffix(layer.name, t)).c_str(), bm_conv_direct_forward,
                                     layer, t, ConvDirectVariant::Auto)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("conv_before_backward" + suffix(layer.name, t)).c_str(), bm_conv_direct_backward,
                                     layer, t, ConvDirectVariant::Auto)
            ->UseRealTime();
      } else {
        benchmark::RegisterBenchmark(("conv_before_forward" + suffix(layer.name, t)).c_str(), bm_conv_forward, layer, t)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("conv_before_backward" + suffix(layer.name, t)).c_str(), bm_conv_backward, layer,
                                     t, false)
            ->UseRealTime();
      }
    }
  }
  for (int t : kThreads) {
    benchmark::RegisterBenchmark(("max_pool2d_forward" + suffix("lenet28.pool1", t)).c_str(), bm_max_pool_forward, pool,
                                 t)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("max_pool2d_backward" + suffix("lenet28.pool1", t)).c_str(), bm_max_pool_backward,
                                 pool, t, max_pool2d_backward_cpu)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("max_pool2d_backward_v1" + suffix("lenet28.pool1", t)).c_str(), bm_max_pool_backward,
                                 pool, t, max_pool2d_backward_v1)
        ->UseRealTime();
  }
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
