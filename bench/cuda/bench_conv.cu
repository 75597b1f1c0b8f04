// bench_conv: the conv2d forward ladder (STYLE.md §5) on ResNet18's (CIFAR) 3x3 layers at batch 128.
//
//   bench_conv <rung|all> [layer|all]      layer: an index 0..6 or a name from kLayers (e.g. 128-256@16s2)
//
// rung 0   cuDNN's legacy cudnnConvolutionForward, NCHW float32, math type CUDNN_FMA_MATH (exact FP32 as
//          our kernels; no TF32 tensor cores), algorithm from cudnnFindConvolutionForwardAlgorithm
//          (printed), its workspace from bastion::cuda_allocate.
// rung 1.. conv2d_forward_cuda_variant (kernels/cuda/conv.h): 1 im2col+gemm, 2 implicit-gemm.
// Every rung is first checked against rung 0's output (exit 1 on a mismatch), then timed with CUDA events
// (median of 20 runs after 5 warm-ups). No bias: cuDNN's convolution has none, so both sides do the same
// work. Built without cuDNN (BASTION_HAVE_CUDNN unset), rung 0 is rung 1, and the output says so.
#include <cuda_runtime.h>
#if defined(BASTION_HAVE_CUDNN)
#include <cudnn.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <string>
#include <vector>

#include "bench/cuda/bench_cuda_support.h"
#include "kernels/cpu/conv.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/cuda.h"
#include "tensor/random.h"

namespace {

using namespace bastion;

// FP32 results of the same sums in different orders differ by ~sqrt(CRS) * 6e-8 of the terms' size,
// i.e. ~1e-6 of the largest output for CRS = 4608; TF32 products would show ~1e-3 and a wrong index
// O(1). 1e-4 of the largest |output| separates them.
constexpr double kValidationTolerance = 1e-4;

constexpr int64_t kBatch = 128;

struct Layer {
  const char* name;
  int64_t C, H, W, K, stride;  // 3x3, padding 1
};

const Layer kLayers[] = {
    {"64-64@32", 64, 32, 32, 64, 1},       {"64-128@32s2", 64, 32, 32, 128, 2}, {"128-128@16", 128, 16, 16, 128, 1},
    {"128-256@16s2", 128, 16, 16, 256, 2}, {"256-256@8", 256, 8, 8, 256, 1},    {"256-512@8s2", 256, 8, 8, 512, 2},
    {"512-512@4", 512, 4, 4, 512, 1},
};
constexpr int kLayerCount = static_cast<int>(std::size(kLayers));

// Device floats freed on scope exit.
struct DeviceFloats {
  explicit DeviceFloats(int64_t n) : count(n), ptr(cuda_alloc_floats(std::max<int64_t>(n, 1))) {}
  ~DeviceFloats() { cuda_free_floats(ptr); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> download() const {
    std::vector<float> host(count);
    cuda_copy_to_host(host.data(), ptr, count * sizeof(float), cuda_stream());
    return host;
  }
  int64_t count;
  float* ptr;
};

void upload_random(DeviceFloats& buffer, Generator& gen) {
  std::vector<float> host(buffer.count);
  for (float& x : host) x = static_cast<float>(2.0 * gen.uniform() - 1.0);
  cuda_copy_to_device(buffer.ptr, host.data(), host.size() * sizeof(float), cuda_stream());
}

// max |got - want| / max |want|: an error measured against the output's scale, so outputs that cancel to
// near zero do not blow it up.
double scaled_max_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return worst / std::max(scale, 1e-30);
}

#if defined(BASTION_HAVE_CUDNN)
#define CUDNN_CHECK(expr)                                                                                              \
  do {                                                                                                                 \
    const cudnnStatus_t cudnn_status_ = (expr);                                                                        \
    BASTION_CHECK(cudnn_status_ == CUDNN_STATUS_SUCCESS, "cuDNN error '", cudnnGetErrorString(cudnn_status_), "' in ", \
                  #expr);                                                                                              \
  } while (0)

const char* cudnn_algorithm_name(cudnnConvolutionFwdAlgo_t algo) {
  static const char* const names[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                                      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  const int index = static_cast<int>(algo);
  return index >= 0 && index < static_cast<int>(std::size(names)) ? names[index] : "unknown";
}

// Rung 0: descriptors for one layer, the fastest FMA-math algorithm, and its workspace.
class CudnnConv {
 public:
  CudnnConv(cudnnHandle_t handle, const Conv2dGeometry& g) : handle_(handle) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.N), i(g.C), i(g.H), i(g.W)));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.N), i(g.K), i(g.OH), i(g.OW)));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(g.K), i(g.C), i(g.R), i(g.S)));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, i(g.padding), i(g.padding), i(g.stride), i(g.stride), 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));
    int n = 0, k = 0, oh = 0, ow = 0;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_, x_, w_, &n, &k, &oh, &ow));
    BASTION_CHECK(n == g.N && k == g.K && oh == g.OH && ow == g.OW, "cuDNN output shape differs from Bastion's");
    choose_algorithm();
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle_, x_, w_, conv_, y_, algo_, &workspace_bytes_));
    workspace_ = cuda_allocate(workspace_bytes_);
  }
  ~CudnnConv() {
    cuda_release(workspace_);
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(w_);
    cudnnDestroyTensorDescriptor(y_);
    cudnnDestroyTensorDescriptor(x_);
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void run(float* out, const float* in, const float* weight) const {
    const float alpha = 1.0f, beta = 0.0f;
    CUDNN_CHECK(cudnnConvolutionForward(handle_, &alpha, x_, in, w_, weight, conv_, algo_, workspace_, workspace_bytes_,
                                        &beta, y_, out));
  }
  std::string description() const {
    return std::string(cudnn_algorithm_name(algo_)) + ", workspace " + std::to_string(workspace_bytes_ >> 20) + " MiB";
  }

 private:
  // Find times every algorithm; take the fastest that succeeded with FMA math (no tensor cores).
  void choose_algorithm() {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(handle_, x_, w_, conv_, y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &returned, perf));
    for (int i = 0; i < returned; ++i)  // sorted fastest first
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {
        algo_ = perf[i].algo;
        return;
      }
    BASTION_FAIL("cuDNN found no FP32 (FMA math) forward algorithm");
  }

  cudnnHandle_t handle_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes_ = 0;
  void* workspace_ = nullptr;
};
#endif

struct LayerBuffers {
  explicit LayerBuffers(const Conv2dGeometry& g)
      : in(g.N * g.C * g.H * g.W), weight(g.K * g.crs()), reference(g.N * g.K * g.out_plane()),
        out(g.N * g.K * g.out_plane()), workspace(conv2d_cuda_workspace_floats(g)) {}
  DeviceFloats in, weight, reference, out, workspace;
};

// Rung 0 into b.reference; returns its timing.
bench::Timing run_rung0(const Conv2dGeometry& g, LayerBuffers& b, void* cudnn_handle, double flops, double bytes,
                        bool print) {
  CudaStream stream = cuda_stream();
#if defined(BASTION_HAVE_CUDNN)
  const CudnnConv conv(static_cast<cudnnHandle_t>(cudnn_handle), g);
  const auto body = [&] { conv.run(b.reference.ptr, b.in.ptr, b.weight.ptr); };
  const std::string name = "cudnn";
  if (print) std::printf("  cuDNN algorithm: %s\n", conv.description().c_str());
#else
  const auto body = [&] {
    conv2d_forward_cuda_variant(1, b.reference.ptr, b.in.ptr, b.weight.ptr, nullptr, g, b.workspace.ptr, stream);
  };
  const std::string name = "=rung1 (no cuDNN)";
#endif
  body();
  const bench::Timing t = bench::time_with_events(body, stream);
  if (print) bench::print_rung(0, name, t, flops, bytes, t.median_ms);
  return t;
}

// Checks and times each selected rung >= 1 on one layer; returns false on a mismatch.
bool bench_layer(const Layer& layer, int rung_choice, void* cudnn_handle) {
  const Conv2dGeometry g = conv2d_geometry(kBatch, layer.C, layer.H, layer.W, layer.K, 3, 3, layer.stride, 1);
  const double flops = 2.0 * g.N * g.K * g.crs() * g.out_plane();
  const double bytes = 4.0 * (g.N * g.C * g.H * g.W + g.K * g.crs() + g.N * g.K * g.out_plane());
  std::printf("layer %s: N=%lld C=%lld %lldx%lld -> K=%lld %lldx%lld, CRS=%lld, %.2f GFLOP\n", layer.name,
              static_cast<long long>(g.N), static_cast<long long>(g.C), static_cast<long long>(g.H),
              static_cast<long long>(g.W), static_cast<long long>(g.K), static_cast<long long>(g.OH),
              static_cast<long long>(g.OW), static_cast<long long>(g.crs()), flops * 1e-9);
  LayerBuffers b(g);
  Generator gen(42);
  upload_random(b.in, gen);
  upload_random(b.weight, gen);
  const bench::Timing rung0 = run_rung0(g, b, cudnn_handle, flops, bytes, rung_choice <= 0);
  const std::vector<float> reference = b.reference.download();
  bool ok = true;
  CudaStream stream = cuda_stream();
  for (int rung = 1; rung <= conv2d_forward_cuda_variant_count(); ++rung) {
    if (rung_choice >= 0 && rung != rung_choice) continue;
    const auto body = [&] {
      conv2d_forward_cuda_variant(rung, b.out.ptr, b.in.ptr, b.weight.ptr, nullptr, g, b.workspace.ptr, stream);
    };
    cuda_fill(b.out.ptr, NAN, b.out.count, stream);  // an unwritten output fails the check
    body();
    const double error = scaled_max_error(b.out.download(), reference);
    if (!(error <= kValidationTolerance)) {
      std::printf("rung %d %s: MISMATCH, max error %.3g of the output scale (tolerance %.1g)\n", rung,
                  conv2d_forward_cuda_variant_name(rung), error, kValidationTolerance);
      ok = false;
      continue;
    }
    bench::print_rung(rung, conv2d_forward_cuda_variant_name(rung), bench::time_with_events(body, stream), flops, bytes,
                      rung0.median_ms);
  }
  return ok;
}

// "all" -> -1; otherwise an integer in [0, last].
int parse_choice(const char* arg, int last, const char* what) {
  if (std::string(arg) == "all") return -1;
  char* end = nullptr;
  const long value = std::strtol(arg, &end, 10);
  BASTION_CHECK(end != arg && *end == '\0' && value >= 0 && value <= last, what, " '", arg, "' is not 'all' or 0..",
                last);
  return static_cast<int>(value);
}

int parse_layer(const char* arg) {
  std::string names;
  for (int i = 0; i < kLayerCount; ++i) {
    if (std::string(arg) == kLayers[i].name) return i;
    names += std::string(" ") + kLayers[i].name;
  }
  return parse_choice(arg, kLayerCount - 1, ("layer (or one of" + names + ")").c_str());
}

int run(int argc, char** argv) {
  BASTION_CHECK(argc <= 3, "usage: bench_conv <rung|all> [layer|all]");
  const int rung = parse_choice(argc > 1 ? argv[1] : "all", conv2d_forward_cuda_variant_count(), "rung");
  const int layer = argc > 2 ? parse_layer(argv[2]) : -1;
  bench::print_device_banner();
  void* cudnn_handle = nullptr;
#if defined(BASTION_HAVE_CUDNN)
  cudnnHandle_t handle = nullptr;
  CUDNN_CHECK(cudnnCreate(&handle));
  CUDNN_CHECK(cudnnSetStream(handle, cuda_stream()));
  cudnn_handle = handle;
  std::printf("rung 0 = cuDNN %zu (FMA math: FP32 without tensor cores)\n", cudnnGetVersion());
#else
  std::printf("built without cuDNN: rung 0 is rung 1 (im2col+gemm)\n");
#endif
  bool ok = true;
  for (int i = 0; i < kLayerCount; ++i)
    if (layer < 0 || layer == i) ok = bench_layer(kLayers[i], rung, cudnn_handle) && ok;
#if defined(BASTION_HAVE_CUDNN)
  cudnnDestroy(handle);
#endif
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_conv: %s\n", e.what());
    return 1;
  }
}
