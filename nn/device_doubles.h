// DeviceDoubles: n doubles on the CUDA device, where the flat-vector reductions write their results, read
// back to the host in one copy. Internal to nn/ (the clip in optim.cpp, the SAM step in sam_device.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda.h"

namespace bastion {

class DeviceDoubles {
 public:
  explicit DeviceDoubles(int64_t n)
      : n_(n), data_(static_cast<double*>(cuda_allocate(static_cast<size_t>(n) * sizeof(double)))) {}
  ~DeviceDoubles() { cuda_release(data_); }
  DeviceDoubles(const DeviceDoubles&) = delete;
  DeviceDoubles& operator=(const DeviceDoubles&) = delete;
  double* data() const { return data_; }
  void copy_to_host(std::vector<double>& out) const {  // waits for the stream
    out.resize(static_cast<size_t>(n_));
    cuda_copy_to_host(out.data(), data_, static_cast<size_t>(n_) * sizeof(double), cuda_stream());
  }

 private:
  int64_t n_;
  double* data_;
};

}  // namespace bastion
