// Storage and its CPU buffer pool.
// Why a pool: a training step creates dozens of activation and gradient tensors of the same sizes every
// step; keeping freed buffers by exact size makes every step after the first allocation-free, which
// matters for small models where malloc/free and page faults would otherwise rival the arithmetic.
// The pool is process-wide behind one mutex (uncontended locks cost ~20 ns; a buffer is microseconds
// of work), holds at most kMaxCachedBytes, and hands out 64-byte aligned buffers for AVX-512 loads.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "tensor/tensor.h"

namespace bastion {

namespace {

constexpr int64_t kAlignment = 64;
constexpr int64_t kMaxCachedBytes = int64_t{2} << 30;

struct CpuPool {
  std::mutex mutex;
  std::unordered_map<int64_t, std::vector<float*>> free_by_bytes;
  StoragePoolStats stats;
};

CpuPool& cpu_pool() {
  static CpuPool* pool = new CpuPool();  // never destroyed: storages may outlive static destructors
  return *pool;
}

int64_t padded_bytes(int64_t numel) {
  const int64_t bytes = std::max<int64_t>(numel, 1) * static_cast<int64_t>(sizeof(float));
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

float* cpu_acquire(int64_t numel) {
  const int64_t bytes = padded_bytes(numel);
  CpuPool& pool = cpu_pool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto it = pool.free_by_bytes.find(bytes);
    if (it != pool.free_by_bytes.end() && !it->second.empty()) {
      float* ptr = it->second.back();
      it->second.pop_back();
      pool.stats.reuses++;
      pool.stats.cached_bytes -= bytes;
      return ptr;
    }
    pool.stats.fresh_allocations++;
  }
  void* ptr = std::aligned_alloc(kAlignment, static_cast<size_t>(bytes));
  BASTION_CHECK(ptr != nullptr, "out of memory allocating ", bytes, " bytes");
  return static_cast<float*>(ptr);
}

void cpu_release(float* ptr, int64_t numel) {
  const int64_t bytes = padded_bytes(numel);
  CpuPool& pool = cpu_pool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (pool.stats.cached_bytes + bytes <= kMaxCachedBytes) {
      pool.free_by_bytes[bytes].push_back(ptr);
      pool.stats.cached_bytes += bytes;
      return;
    }
  }
  std::free(ptr);
}

}  // namespace

Storage::Storage(int64_t numel_, Device device_) : numel(numel_), device(device_) {
  BASTION_CHECK(numel_ >= 0, "negative storage size ", numel_);
  data = device == Device::CPU ? cpu_acquire(numel) : cuda_alloc_floats(std::max<int64_t>(numel, 1));
}

Storage::~Storage() {
  if (data == nullptr) return;
  if (device == Device::CPU) {
    cpu_release(data, numel);
  } else {
    try {
      cuda_free_floats(data);
    } catch (...) {
      // A destructor must not throw; a failing cudaFree means the context is already gone.
    }
  }
}

StoragePoolStats storage_pool_stats() {
  std::lock_guard<std::mutex> lock(cpu_pool().mutex);
  return cpu_pool().stats;
}

void storage_pool_release_all() {
  CpuPool& pool = cpu_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  for (auto& [bytes, buffers] : pool.free_by_bytes)
    for (float* ptr : buffers) std::free(ptr);
  pool.free_by_bytes.clear();
  pool.stats.cached_bytes = 0;
}

}  // namespace bastion
