// bench_kernels' conv and pooling benchmarks (the names and their meaning: bench_kernels.cpp's header):
// conv2d through the op's path, the direct rungs 1-3 and the blocked rung 4, im2col / col2im alone, the
// max-pool kernels, and the candidate variants checked bitwise against the library before they are timed.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_kernels_support.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_blocked.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/pool.h"

using namespace bastion;
using namespace bastion::bench_kernels;

namespace {

// The direct path's AVX-512 rungs exist in a build for an AVX-512 CPU (kernels/cpu/conv_direct.cpp); without it
// every variant runs the AVX2 kernels.
#if defined(__AVX512F__)
constexpr bool kAvx512Build = true;
#else
constexpr bool kAvx512Build = false;
#endif

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

using ConvForwardFn = void (*)(float*, const float*, const float*, const float*, const Conv2dGeometry&, float*, int);

void blocked_forward(float* out, const float* in, const float* w, const float* b, const Conv2dGeometry& g, float* ws,
                     int threads) {
  conv2d_blocked_forward_cpu(out, in, w, b, g, ws, threads);
}

// Rung 4's and rung 5's forward; the direct convolution's flop count.
void bm_conv_forward_of(benchmark::State& state, ConvLayer layer, int threads, ConvForwardFn forward,
                        int64_t workspace_floats) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), bias(g.K, 3), out(g.N * g.K * g.out_plane(), 4),
      workspace(workspace_floats, 5);
  for (auto _ : state) {
    forward(out.get(), in.get(), weight.get(), bias.get(), g, workspace.get(), threads);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(conv_forward_flops(g), benchmark::Counter::kIsIterationInvariantRate);
}

// Rung 4, conv_blocked (kernels/cpu/conv_blocked.h): same flop counts.
void bm_conv_blocked_forward(benchmark::State& state, ConvLayer layer, int threads) {
  bm_conv_forward_of(state, layer, threads, blocked_forward, conv2d_blocked_workspace_floats(layer.g));
}

// Which gradients a backward benchmark asks for: both (grad_in unless the layer is a first layer) or one.
enum class ConvGrads { Both, InputOnly, WeightOnly };

// A backward pass's flops (each gradient costs one forward) and the pointers it passes (null: skipped).
double conv_backward_flops(const ConvLayer& layer, ConvGrads grads) {
  const double pass = conv_forward_flops(layer.g);
  if (grads != ConvGrads::Both) return pass;
  return pass * (layer.first_layer ? 1.0 : 2.0);
}

using ConvBackwardFn = void (*)(float*, float*, float*, const float*, const float*, const float*, const Conv2dGeometry&,
                                float*, int);

void blocked_backward(float* gi, float* gw, float* gb, const float* dy, const float* x, const float* w,
                      const Conv2dGeometry& g, float* ws, int threads) {
  conv2d_blocked_backward_cpu(gi, gw, gb, dy, x, w, g, ws, threads);
}

// Rung 4's and rung 5's backward (both gradients, or one; grad_bias with the weight's).
void bm_conv_backward_of(benchmark::State& state, ConvLayer layer, int threads, ConvBackwardFn backward,
                         int64_t workspace_floats, ConvGrads grads) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  Buffer in(g.N * g.C * g.H * g.W, 1), weight(g.K * g.crs(), 2), grad_out(g.N * g.K * g.out_plane(), 3),
      grad_in(g.N * g.C * g.H * g.W, 4), grad_weight(g.K * g.crs(), 5), grad_bias(g.K, 6),
      workspace(workspace_floats, 7);
  const bool want_in = grads == ConvGrads::InputOnly || (grads == ConvGrads::Both && !layer.first_layer);
  const bool want_weight = grads != ConvGrads::InputOnly;
  float* grad_in_ptr = want_in ? grad_in.get() : nullptr;
  float* grad_weight_ptr = want_weight ? grad_weight.get() : nullptr;
  float* grad_bias_ptr = want_weight ? grad_bias.get() : nullptr;
  for (auto _ : state) {
    backward(grad_in_ptr, grad_weight_ptr, grad_bias_ptr, grad_out.get(), in.get(), weight.get(), g, workspace.get(),
             threads);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(conv_backward_flops(layer, grads), benchmark::Counter::kIsIterationInvariantRate);
}

// Rung 0 (im2col + GEMM) with each gradient alone: the per-pass ladder's baseline.
void im2col_backward(float* gi, float* gw, float* gb, const float* dy, const float* x, const float* w,
                     const Conv2dGeometry& g, float* ws, int /*threads: set_num_threads*/) {
  conv2d_backward_cpu(gi, gw, gb, dy, x, w, g, ws, false);
}

void bm_conv_im2col_backward(benchmark::State& state, ConvLayer layer, int threads, ConvGrads grads) {
  bm_conv_backward_of(state, layer, threads, im2col_backward, conv2d_workspace_floats(layer.g), grads);
}

void bm_conv_blocked_backward(benchmark::State& state, ConvLayer layer, int threads, ConvGrads grads) {
  bm_conv_backward_of(state, layer, threads, blocked_backward, conv2d_blocked_workspace_floats(layer.g), grads);
}

// Rung 5, conv_winograd (kernels/cpu/conv_winograd.h), stride-1 layers: the direct convolution's flop
// counts, so its GFLOP/s read as an equivalent rate (it does 2.25x fewer multiply-adds in its GEMMs).
void bm_conv_winograd_forward(benchmark::State& state, ConvLayer layer, int threads) {
  bm_conv_forward_of(state, layer, threads, conv2d_winograd_forward_cpu, conv2d_winograd_workspace_floats(layer.g));
}

void bm_conv_winograd_backward(benchmark::State& state, ConvLayer layer, int threads, ConvGrads grads) {
  bm_conv_backward_of(state, layer, threads, conv2d_winograd_backward_cpu, conv2d_winograd_workspace_floats(layer.g),
                      grads);
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

void bm_col2im(benchmark::State& state, ConvLayer layer, int threads) {
  set_num_threads(threads);
  const Conv2dGeometry& g = layer.g;
  const int64_t nb = conv2d_chunk_samples(g);
  Buffer grad_in(g.N * g.C * g.H * g.W, 1), cols(nb * g.out_plane() * g.crs(), 2);
  for (auto _ : state) {
    col2im_add_cpu(grad_in.get(), cols.get(), g, 0, nb);
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

// Rung 4's forward and backward on one layer at t threads, each gradient alone too; rung 5's where it
// runs the layer.
void register_conv_blocked(const ConvLayer& layer, int t) {
  benchmark::RegisterBenchmark(("conv_blocked_forward" + suffix(layer.name, t)).c_str(), bm_conv_blocked_forward, layer,
                               t)
      ->UseRealTime();
  const std::pair<const char*, ConvGrads> passes[] = {
      {"backward", ConvGrads::Both}, {"grad_in", ConvGrads::InputOnly}, {"grad_weight", ConvGrads::WeightOnly}};
  for (const auto& [pass, grads] : passes) {
    benchmark::RegisterBenchmark(("conv_blocked_" + std::string(pass) + suffix(layer.name, t)).c_str(),
                                 bm_conv_blocked_backward, layer, t, grads)
        ->UseRealTime();
    if (grads == ConvGrads::Both) continue;  // conv_before_backward is rung 0's
    benchmark::RegisterBenchmark(("conv_im2col_" + std::string(pass) + suffix(layer.name, t)).c_str(),
                                 bm_conv_im2col_backward, layer, t, grads)
        ->UseRealTime();
  }
  if (!conv2d_winograd_supported(layer.g)) return;
  benchmark::RegisterBenchmark(("conv_winograd_forward" + suffix(layer.name, t)).c_str(), bm_conv_winograd_forward,
                               layer, t)
      ->UseRealTime();
  for (const auto& [pass, grads] : passes) {
    benchmark::RegisterBenchmark(("conv_winograd_" + std::string(pass) + suffix(layer.name, t)).c_str(),
                                 bm_conv_winograd_backward, layer, t, grads)
        ->UseRealTime();
  }
}

}  // namespace

namespace bastion::bench_kernels {

// A build without AVX-512 has no conv_blocked: ResNet's layers then take im2col + OpenBLAS (rung 0) or, at
// stride 1, the AVX2 direct path (rows_avx2), which are measured side by side.
void register_resnet_without_avx512(const ConvLayer& layer, const std::vector<int>& kThreads) {
  for (int t : kThreads) {
    benchmark::RegisterBenchmark(("conv_forward" + suffix(layer.name, t)).c_str(), bm_conv_forward, layer, t)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("conv_backward" + suffix(layer.name, t)).c_str(), bm_conv_backward, layer, t, false)
        ->UseRealTime();
    if (!conv2d_direct_supported(layer.g)) continue;
    benchmark::RegisterBenchmark(("conv_direct_rows_avx2_forward" + suffix(layer.name, t)).c_str(),
                                 bm_conv_direct_forward, layer, t, ConvDirectVariant::RowStridedAvx2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("conv_direct_rows_avx2_backward" + suffix(layer.name, t)).c_str(),
                                 bm_conv_direct_backward, layer, t, ConvDirectVariant::RowStridedAvx2)
        ->UseRealTime();
  }
}

void register_conv_benchmarks(const std::vector<int>& kThreads) {
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
            std::pair{"scatter", ConvDirectVariant::ChannelScatter},
            std::pair{"rows_avx2", ConvDirectVariant::RowStridedAvx2}}) {
        // channels: K % 16 == 0 (else every pass would fall back to rows); its grad_in needs C % 16 too.
        // Without AVX-512 every variant is rows_avx2, so only that rung is registered.
        const bool row_strided =
            variant == ConvDirectVariant::RowStrided || variant == ConvDirectVariant::RowStridedAvx2;
        if (!conv2d_direct_supported(layer.g) || (!row_strided && layer.g.K % 16 != 0) ||
            (variant != ConvDirectVariant::RowStridedAvx2 && !kAvx512Build))
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
        benchmark::RegisterBenchmark(("conv_col2im" + suffix(layer.name, t)).c_str(), bm_col2im, layer, t)
            ->UseRealTime();
      }
    }
  }
  // LeNet's conv1 output at batch 64 on 28x28 input: 64 x 6 planes of 24x24, 2x2 window, stride 2.
  const Pool2dGeometry pool = pool2d_geometry(64 * 6, 24, 24, 2, 2, 0);
  for (const ConvLayer& layer : resnet18_layers()) {
    if (!conv2d_blocked_supported(layer.g)) {
      register_resnet_without_avx512(layer, kThreads);
      continue;
    }
    for (int t : kThreads) {
      register_conv_blocked(layer, t);
      if (conv2d_direct_preferred(layer.g)) {
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

}  // namespace bastion::bench_kernels
