// CUDA agreement table, pooling family (kernels/cuda/pool.h) against the CPU twins (kernels/cpu/pool.h):
// every function, on odd planes with padding and overlapping windows (kernel 3, stride 2), batch > 1.
// Max-pool inputs are distinct values (no ties), so "the first maximum" is one well-defined element.
//
// Tolerances: max-pool forward copies an input element (exact). The other results are short float32
// sums; as in test_cuda_conv.cpp, each side is within sum_tolerance(terms) * sum|terms| of the exact value
// (tests/kernel_test_support.h), so they differ by at most twice that, with sum|terms| from the CPU
// kernel run on absolute values.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kernels/cpu/pool.h"
#include "kernels/cuda/pool.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::absolute;
using testing::DeviceBuffer;
using testing::expect_agree;
using testing::expect_close;
using testing::random_floats;
using testing::sentinels;
using testing::sum_tolerance;

// Both sides within one sum_tolerance bound of the exact sum.
constexpr double kBothSidesRounded = 2.0;
// Max-pool forward returns one of its inputs.
constexpr double kExact = 0.0;

struct PoolCase {
  int64_t planes, H, W, kernel, stride, padding;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) {
  return os << c.planes << " planes " << c.H << "x" << c.W << " kernel " << c.kernel << " stride " << c.stride
            << " pad " << c.padding;
}

// planes = N*C = 2*3; odd planes.
const PoolCase kCases[] = {
    {6, 11, 9, 2, 2, 0},  // the CPU's 2x2 fast path, with an unused last row and column
    {6, 11, 9, 3, 2, 1},  // overlapping windows and padding
    {6, 10, 7, 3, 1, 1},  // stride 1: up to 9 windows per input element
    {6, 9, 13, 3, 3, 0},  // tiling windows
    {6, 8, 9, 4, 2, 2},   // padding = kernel / 2: corner windows hold a single element
    {6, 7, 5, 2, 1, 1},   // even kernel with padding
};

int64_t windows_per_element(const Pool2dGeometry& g) {
  const int64_t per_axis = (g.kernel + g.stride - 1) / g.stride;
  return per_axis * per_axis;
}

// n distinct values in (-1, 1), shuffled: no ties for max-pool's "first maximum" to break.
std::vector<float> distinct_floats(size_t n, Generator& gen) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((2.0 * i + 1.0) / static_cast<double>(n) - 1.0);
  for (size_t i = n; i > 1; --i) std::swap(v[i - 1], v[gen.below(i)]);
  return v;
}

void expect_within_sum_bound(const std::vector<float>& got, const std::vector<float>& want,
                             const std::vector<float>& magnitude, int64_t terms, const char* what) {
  std::vector<double> want_d(want.begin(), want.end()), bound(magnitude.size());
  for (size_t i = 0; i < magnitude.size(); ++i) bound[i] = kBothSidesRounded * magnitude[i];
  expect_close(got, want_d, bound, terms, what);
}

Pool2dGeometry geometry(const PoolCase& c) {
  return pool2d_geometry(c.planes, c.H, c.W, c.kernel, c.stride, c.padding);
}
size_t in_numel(const Pool2dGeometry& g) { return static_cast<size_t>(g.planes * g.H * g.W); }
size_t out_numel(const Pool2dGeometry& g) { return static_cast<size_t>(g.planes * g.OH * g.OW); }

TEST(CudaAgreement, PoolMaxForwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 10;
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const Pool2dGeometry g = geometry(c);
    Generator gen(seed++);
    const std::vector<float> in = distinct_floats(in_numel(g), gen);
    std::vector<float> want(out_numel(g));
    max_pool2d_forward_cpu(want.data(), in.data(), g);
    const DeviceBuffer<float> in_device(in);
    DeviceBuffer<float> out(sentinels(out_numel(g)));
    max_pool2d_forward_cuda(out.get(), in_device.get(), g, cuda_stream());
    expect_agree(out.download(), want, kExact, "max_pool2d forward");
  }
}

TEST(CudaAgreement, PoolMaxBackwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 20;
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const Pool2dGeometry g = geometry(c);
    Generator gen(seed++);
    const std::vector<float> in = distinct_floats(in_numel(g), gen), grad_out = random_floats(out_numel(g), gen);
    std::vector<float> want(in_numel(g)), magnitude(in_numel(g));
    max_pool2d_backward_cpu(want.data(), grad_out.data(), in.data(), g);
    max_pool2d_backward_cpu(magnitude.data(), absolute(grad_out).data(), in.data(), g);
    const DeviceBuffer<float> in_device(in), grad_out_device(grad_out);
    DeviceBuffer<float> grad_in(sentinels(in_numel(g)));
    max_pool2d_backward_cuda(grad_in.get(), grad_out_device.get(), in_device.get(), g, cuda_stream());
    expect_within_sum_bound(grad_in.download(), want, magnitude, windows_per_element(g), "max_pool2d backward");
  }
}

TEST(CudaAgreement, PoolAvgForwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 30;
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const Pool2dGeometry g = geometry(c);
    Generator gen(seed++);
    const std::vector<float> in = random_floats(in_numel(g), gen);
    std::vector<float> want(out_numel(g)), magnitude(out_numel(g));
    avg_pool2d_forward_cpu(want.data(), in.data(), g);
    avg_pool2d_forward_cpu(magnitude.data(), absolute(in).data(), g);
    const DeviceBuffer<float> in_device(in);
    DeviceBuffer<float> out(sentinels(out_numel(g)));
    avg_pool2d_forward_cuda(out.get(), in_device.get(), g, cuda_stream());
    // kernel^2 additions and the scaling.
    expect_within_sum_bound(out.download(), want, magnitude, g.kernel * g.kernel + 1, "avg_pool2d forward");
  }
}

TEST(CudaAgreement, PoolAvgBackwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 40;
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const Pool2dGeometry g = geometry(c);
    Generator gen(seed++);
    const std::vector<float> grad_out = random_floats(out_numel(g), gen);
    std::vector<float> want(in_numel(g)), magnitude(in_numel(g));
    avg_pool2d_backward_cpu(want.data(), grad_out.data(), g);
    avg_pool2d_backward_cpu(magnitude.data(), absolute(grad_out).data(), g);
    const DeviceBuffer<float> grad_out_device(grad_out);
    DeviceBuffer<float> grad_in(sentinels(in_numel(g)));
    avg_pool2d_backward_cuda(grad_in.get(), grad_out_device.get(), g, cuda_stream());
    // One scaled term per window, summed.
    expect_within_sum_bound(grad_in.download(), want, magnitude, windows_per_element(g) + 1, "avg_pool2d backward");
  }
}

// Planes smaller than a warp, of several warp strides, and one element.
const std::pair<int64_t, int64_t> kGlobalCases[] = {{10, 7 * 9}, {6, 300}, {35, 1}, {3, 17}};

TEST(CudaAgreement, PoolGlobalAvgForwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 50;
  for (const auto& [planes, plane_size] : kGlobalCases) {
    SCOPED_TRACE(::testing::Message() << planes << " planes of " << plane_size);
    Generator gen(seed++);
    const std::vector<float> in = random_floats(planes * plane_size, gen);
    std::vector<float> want(planes), magnitude(planes);
    global_avg_pool_forward_cpu(want.data(), in.data(), planes, plane_size);
    global_avg_pool_forward_cpu(magnitude.data(), absolute(in).data(), planes, plane_size);
    const DeviceBuffer<float> in_device(in);
    DeviceBuffer<float> out(sentinels(planes));
    global_avg_pool_forward_cuda(out.get(), in_device.get(), planes, plane_size, cuda_stream());
    expect_within_sum_bound(out.download(), want, magnitude, plane_size + 1, "global_avg_pool forward");
  }
}

TEST(CudaAgreement, PoolGlobalAvgBackwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 60;
  for (const auto& [planes, plane_size] : kGlobalCases) {
    SCOPED_TRACE(::testing::Message() << planes << " planes of " << plane_size);
    Generator gen(seed++);
    const std::vector<float> grad_out = random_floats(planes, gen);
    std::vector<float> want(planes * plane_size), magnitude(planes * plane_size);
    global_avg_pool_backward_cpu(want.data(), grad_out.data(), planes, plane_size);
    global_avg_pool_backward_cpu(magnitude.data(), absolute(grad_out).data(), planes, plane_size);
    const DeviceBuffer<float> grad_out_device(grad_out);
    DeviceBuffer<float> grad_in(sentinels(planes * plane_size));
    global_avg_pool_backward_cuda(grad_in.get(), grad_out_device.get(), planes, plane_size, cuda_stream());
    // One product per element.
    expect_within_sum_bound(grad_in.download(), want, magnitude, 1, "global_avg_pool backward");
  }
}

}  // namespace
}  // namespace bastion
