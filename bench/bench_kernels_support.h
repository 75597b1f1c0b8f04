// bench_kernels' shared pieces: the aligned input buffer, the conv layers both of its source files time,
// flop counts, the bitwise check of candidate variants, and benchmark names. bench_kernels.cpp holds the
// GEMM ladder and main(); kernels_conv.cpp the conv, im2col / col2im and pooling benchmarks.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/conv.h"
#include "tensor/random.h"

namespace bastion::bench_kernels {

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

inline std::vector<ConvLayer> conv_layers() {
  return {
      {"lenet28.conv1", conv2d_geometry(64, 1, 28, 28, 6, 5, 5, 1, 0), true},
      {"lenet28.conv2", conv2d_geometry(64, 6, 12, 12, 16, 5, 5, 1, 0), false},
      {"lenet32.conv1", conv2d_geometry(64, 3, 32, 32, 6, 5, 5, 1, 0), true},
      {"lenet32.conv2", conv2d_geometry(64, 6, 14, 14, 16, 5, 5, 1, 0), false},
      {"fedfsa.conv1", conv2d_geometry(48, 1, 28, 28, 4, 5, 5, 1, 0), true},  // cnn-fedfsa on FMNIST, batch 48
      {"fedfsa.conv2", conv2d_geometry(48, 4, 12, 12, 12, 5, 5, 1, 0), false},
      {"fedcap.conv1", conv2d_geometry(64, 3, 32, 32, 32, 5, 5, 1, 0), true},
      {"fedcap.conv2", conv2d_geometry(64, 32, 14, 14, 64, 5, 5, 1, 0), false},
      {"resnet18.layer1", conv2d_geometry(16, 64, 32, 32, 64, 3, 3, 1, 1), false},
      // Where the AVX2 direct path's rule (conv_direct.cpp) was drawn: reductions C R S of 27, 75, 500, 1600.
      {"resnet18.stem", conv2d_geometry(64, 3, 32, 32, 64, 3, 3, 1, 1), true},
      {"fedrep.conv1", conv2d_geometry(64, 3, 32, 32, 64, 5, 5, 1, 0), true},
      {"bapfl.conv2", conv2d_geometry(64, 20, 12, 12, 50, 5, 5, 1, 0), false},
      {"fedrep.conv2", conv2d_geometry(64, 64, 14, 14, 64, 5, 5, 1, 0), false},
  };
}

// ResNet18's 3x3 layers on CIFAR-10 (3x32x32) at batch 64: one per stage and stride (the 1x1 shortcuts
// and the 3-channel stem are not conv_blocked's).
inline std::vector<ConvLayer> resnet18_layers() {
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

inline double conv_forward_flops(const Conv2dGeometry& g) { return 2.0 * g.N * g.K * g.crs() * g.out_plane(); }

// Aborts unless `variant` reproduces `library` bit for bit on the benchmark's inputs.
inline void require_same(const char* what, const float* library, const float* variant, int64_t n) {
  if (std::memcmp(library, variant, static_cast<size_t>(n) * sizeof(float)) != 0) {
    std::fprintf(stderr, "bench_kernels: variant %s disagrees with the library kernel\n", what);
    std::abort();
  }
}

inline std::string suffix(const std::string& what, int threads) {
  return "/" + what + "/threads:" + std::to_string(threads);
}

// kernels_conv.cpp: registers the conv, im2col / col2im and max-pool benchmarks at each thread count.
void register_conv_benchmarks(const std::vector<int>& threads);

}  // namespace bastion::bench_kernels
