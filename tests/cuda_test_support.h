// Helpers for the CUDA agreement table (tests/test_cuda_*.cpp, suite CudaAgreement): device buffers,
// the skip when no device is present, and the comparison of a CUDA result with its CPU twin.
// In a BASTION_CUDA=EMULATE build the same tests run the kernels on CPU threads (kernels/cuda/emulator.h).
//
// Agreement rule (docs/cuda.md has the per-op table): outputs start as NaN sentinels (an element the
// kernel forgot shows as NaN and fails), inputs are random and non-zero, sizes are odd (not multiples of
// any tile) with batch > 1, and |cuda - cpu| <= tolerance * max(|cpu|, scale_floor) element by element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "tensor/random.h"

namespace bastion::testing {

#define BASTION_REQUIRE_CUDA()                                                                        \
  do {                                                                                                \
    if (!::bastion::cuda_available())                                                                 \
      GTEST_SKIP() << "no CUDA device (" << ::bastion::cuda_device_description()                      \
                   << "); the emulated build (-DBASTION_CUDA=EMULATE) runs this test on CPU threads"; \
  } while (0)

// A device buffer of T, filled from or read back to a host vector.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count), ptr_(static_cast<T*>(cuda_allocate(count * sizeof(T)))) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cuda_release(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), count_);
    cuda_copy_to_device(ptr_, host.data(), count_ * sizeof(T), cuda_stream());
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    cuda_copy_to_host(host.data(), ptr_, count_ * sizeof(T), cuda_stream());
    return host;
  }

 private:
  size_t count_;
  T* ptr_;
};

inline constexpr float kSentinel = std::numeric_limits<float>::quiet_NaN();

// `count` NaN sentinels, to upload as an output buffer.
inline std::vector<float> sentinels(size_t count) { return std::vector<float>(count, kSentinel); }

inline std::vector<float> random_floats(size_t count, Generator& gen, float low = -1.0f, float high = 1.0f) {
  std::vector<float> v(count);
  for (float& x : v) x = low + (high - low) * static_cast<float>(gen.uniform());
  return v;
}

// Checks |got - want| <= tolerance * max(|want|, scale_floor) for every element (NaN fails); reports the
// largest relative error and the first few offenders.
inline void expect_agree(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                         const char* what, double scale_floor = 1.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(std::abs(static_cast<double>(want[i])), scale_floor);
    const double error = std::abs(static_cast<double>(got[i]) - want[i]) / scale;
    if (!(error <= tolerance)) {  // also catches NaN
      if (failures++ < 5) ADD_FAILURE() << what << "[" << i << "] cuda " << got[i] << " cpu " << want[i];
    }
    if (error > worst) worst = error;
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size() << " elements disagree (tolerance "
                         << tolerance << ")";
  ::testing::Test::RecordProperty(std::string(what) + "_max_relative_error", std::to_string(worst));
}

// The largest |v[i]|, in double: the scale a tolerance is taken relative to.
inline double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// A device copy of `host` starting `offset` floats into its buffer, between NaN guards: with offset 1
// the view is 4-byte but not 16-byte aligned. view() is the pointer the kernels get.
class OffsetBuffer {
 public:
  OffsetBuffer(const std::vector<float>& host, int64_t offset)
      : offset_(offset), size_(host.size()), buffer_(padded(host, offset)) {}
  float* view() const { return buffer_.get() + offset_; }
  // The view's elements; fails if a guard element before or after the view was written.
  std::vector<float> download_view() const {
    const std::vector<float> all = buffer_.download();
    for (int64_t i = 0; i < offset_; ++i) EXPECT_TRUE(std::isnan(all[i])) << "guard before the view written";
    EXPECT_TRUE(std::isnan(all.back())) << "guard after the view written";
    return std::vector<float>(all.begin() + offset_, all.begin() + offset_ + static_cast<int64_t>(size_));
  }

 private:
  static std::vector<float> padded(const std::vector<float>& host, int64_t offset) {
    std::vector<float> all = sentinels(host.size() + offset + 1);
    std::copy(host.begin(), host.end(), all.begin() + offset);
    return all;
  }
  int64_t offset_;
  size_t size_;
  DeviceBuffer<float> buffer_;
};

}  // namespace bastion::testing
