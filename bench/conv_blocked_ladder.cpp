// Standalone ladder for conv2d_blocked (kernels/cpu/conv_blocked.h) against the kernels the op ran
// before it: conv2d_direct (Auto) for stride 1, im2col + OpenBLAS for stride 2. ResNet18's CIFAR 3x3
// layers, forward, grad_in and grad_weight timed separately, interleaved (old, new) in every repetition;
// prints medians. Seconds to build, no CMake (one command):
//   g++ -O3 -march=native -fopenmp -std=c++20 -I. -DBASTION_HAVE_OPENBLAS=1
//       -I/usr/include/x86_64-linux-gnu/openblas-pthread bench/conv_blocked_ladder.cpp
//       kernels/cpu/conv_blocked.cpp kernels/cpu/conv_blocked_weight.cpp kernels/cpu/conv_direct.cpp
//       kernels/cpu/conv_direct_channels.cpp kernels/cpu/conv.cpp kernels/cpu/gemm.cpp
//       kernels/cpu/gemm_small.cpp kernels/cpu/gemm_small_avx512.cpp kernels/cpu/gemm_small_avx2.cpp
//       tensor/error.cpp -lopenblas -o /tmp/conv_blocked_ladder
//   OPENBLAS_NUM_THREADS=1 /tmp/conv_blocked_ladder [batch=64] [threads=1] [repetitions=5] [peak GFLOP/s=245]
// LADDER_ONLY=<substring> keeps the layers whose name contains it. Each timing is the mean over calls for
// at least 0.15 s after one warm-up call; rel.diff = max |new - old| / max |old| (both float32).
// (bench_kernels' conv_blocked_* rows time the same kernels through Google Benchmark.)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_blocked.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/gemm.h"

using namespace bastion;

namespace {

struct Shape {
  const char* name;
  int64_t C, H, K, stride;
};

const Shape kShapes[] = {
    {"64,32x32,s1", 64, 32, 64, 1},         {"64->128,32->16,s2", 64, 32, 128, 2}, {"128,16x16,s1", 128, 16, 128, 1},
    {"128->256,16->8,s2", 128, 16, 256, 2}, {"256,8x8,s1", 256, 8, 256, 1},        {"256->512,8->4,s2", 256, 8, 512, 2},
    {"512,4x4,s1", 512, 4, 512, 1},
};

double seconds_per_call(const std::function<void()>& f, double min_seconds) {
  using clock = std::chrono::steady_clock;
  f();  // warm-up
  int calls = 0;
  const auto start = clock::now();
  double elapsed = 0;
  do {
    f();
    ++calls;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// max |a - b| / max |b|
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return std::isfinite(diff) ? diff / scale : INFINITY;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const double peak = argc > 4 ? std::atof(argv[4]) : 245.0;
  const char* only = std::getenv("LADDER_ONLY");
  omp_set_num_threads(threads);
  set_num_threads(threads);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto randn = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  std::printf("batch %lld, %d thread(s), %d repetitions, peak %.0f GFLOP/s; GFLOP/s (%% of peak), medians\n",
              static_cast<long long>(batch), threads, reps, peak);
  std::printf("%-20s %-8s %16s %16s %7s %10s\n", "layer", "pass", "old", "new", "new/old", "rel.diff");
  for (const Shape& sh : kShapes) {
    if (only && std::string(sh.name).find(only) == std::string::npos) continue;
    const Conv2dGeometry g = conv2d_geometry(batch, sh.C, sh.H, sh.H, sh.K, 3, 3, sh.stride, 1);
    const bool direct = conv2d_direct_preferred(g);
    const std::vector<float> in = randn(g.N * g.C * g.H * g.W), weight = randn(g.K * g.crs()), bias = randn(g.K),
                             grad_out = randn(g.N * g.K * g.out_plane());
    std::vector<float> out_old(grad_out.size()), out_new(grad_out.size()), gi_old(in.size()), gi_new(in.size()),
        gw_old(weight.size()), gw_new(weight.size());
    std::vector<float> ws_old(direct ? conv2d_direct_workspace_floats(g, threads) : conv2d_workspace_floats(g));
    std::vector<float> ws_new(conv2d_blocked_workspace_floats(g));
    auto old_forward = [&] {
      if (direct)
        conv2d_direct_forward_cpu(out_old.data(), in.data(), weight.data(), bias.data(), g, ws_old.data(), threads);
      else
        conv2d_forward_cpu(out_old.data(), in.data(), weight.data(), bias.data(), g, ws_old.data());
    };
    auto old_backward = [&](float* gi, float* gw) {
      if (direct)
        conv2d_direct_backward_cpu(gi, gw, nullptr, grad_out.data(), in.data(), weight.data(), g, ws_old.data(),
                                   threads);
      else
        conv2d_backward_cpu(gi, gw, nullptr, grad_out.data(), in.data(), weight.data(), g, ws_old.data());
    };
    auto new_forward = [&] {
      conv2d_blocked_forward_cpu(out_new.data(), in.data(), weight.data(), bias.data(), g, ws_new.data(), threads);
    };
    auto new_backward = [&](float* gi, float* gw) {
      conv2d_blocked_backward_cpu(gi, gw, nullptr, grad_out.data(), in.data(), weight.data(), g, ws_new.data(),
                                  threads);
    };
    const std::function<void()> passes[3][2] = {
        {old_forward, new_forward},
        {[&] { old_backward(gi_old.data(), nullptr); }, [&] { new_backward(gi_new.data(), nullptr); }},
        {[&] { old_backward(nullptr, gw_old.data()); }, [&] { new_backward(nullptr, gw_new.data()); }},
    };
    const char* pass_names[3] = {"fwd", "grad_in", "grad_w"};
    const std::vector<float>* results[3][2] = {{&out_old, &out_new}, {&gi_old, &gi_new}, {&gw_old, &gw_new}};
    const double flops = 2.0 * g.N * g.K * g.crs() * g.out_plane();
    for (int p = 0; p < 3; ++p) {
      std::vector<double> t_old, t_new;
      for (int rep = 0; rep < reps; ++rep) {
        t_old.push_back(seconds_per_call(passes[p][0], 0.15));
        t_new.push_back(seconds_per_call(passes[p][1], 0.15));
      }
      const double g_old = flops / median(t_old) * 1e-9, g_new = flops / median(t_new) * 1e-9;
      std::printf("%-20s %-8s %7.1f (%4.0f%%) %7.1f (%4.0f%%) %7.2f %10.2e\n", sh.name, pass_names[p], g_old,
                  100 * g_old / peak, g_new, 100 * g_new / peak, g_new / g_old,
                  relative_difference(*results[p][1], *results[p][0]));
      std::fflush(stdout);
    }
  }
  return 0;
}
