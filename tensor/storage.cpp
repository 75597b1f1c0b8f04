// Storage and its CPU buffer pool.
// Why a pool: a training step creates dozens of activation and gradient tensors of the same sizes every
// step; keeping freed buffers by exact size makes every step after the first allocation-free, which
// matters for small models where malloc/free and page faults would otherwise rival the arithmetic.
// The pool is process-wide behind one mutex (uncontended locks cost ~20 ns; a buffer is microseconds
// of work), holds at most kMaxCachedBytes, and hands out 64-byte aligned buffers for AVX-512 loads.
// Why eviction: buffers are kept by exact size, so a phase that needs new sizes (the backward of a
// ResNet's first stage after its last stages, evaluation after training, another model) would otherwise
// allocate fresh memory while the pool sits on the previous phase's buffers. On a miss, while the pool
// holds more than kStoragePoolKeptBytes, it first frees as many cached bytes as it is about to allocate
// (largest buffers first), so malloc can reuse that memory: cached + live bytes then grow only when live
// bytes do. A small model's whole working set stays under kStoragePoolKeptBytes and is never evicted.
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <mutex>
#include <utility>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>

#include "kernels/cuda/cuda.h"
#include "tensor/tensor.h"

namespace bastion {

namespace {

constexpr int64_t kAlignment = 64;
constexpr int64_t kMaxCachedBytes = int64_t{2} << 30;
// Buffers from 1 MiB up are mapped by the pool itself: unmapping returns their pages at once, where
// free() would leave them in malloc's arenas (ResNet18 round: 387 MB free but held there after training).
// Small models' activations stay under it, and mapped buffers are cached like the others.
constexpr int64_t kMappedBytes = int64_t{1} << 20;

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

float* system_allocate(int64_t bytes) {
  if (bytes < kMappedBytes) return static_cast<float*>(std::aligned_alloc(kAlignment, static_cast<size_t>(bytes)));
  void* ptr = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : static_cast<float*>(ptr);  // page-aligned, so 64-byte aligned
}

void system_free(float* ptr, int64_t bytes) {
  if (bytes < kMappedBytes) return std::free(ptr);
  munmap(ptr, static_cast<size_t>(bytes));
}

// Takes cached buffers, largest first, until `bytes` are taken or the pool is down to kStoragePoolKeptBytes;
// the caller frees them outside the lock. O(cached sizes) per buffer taken, on misses only.
std::vector<std::pair<float*, int64_t>> take_evictions(CpuPool& pool, int64_t bytes) {
  std::vector<std::pair<float*, int64_t>> taken;
  for (int64_t freed = 0; freed < bytes && pool.stats.cached_bytes > kStoragePoolKeptBytes;) {
    auto largest = pool.free_by_bytes.end();
    for (auto it = pool.free_by_bytes.begin(); it != pool.free_by_bytes.end(); ++it)
      if (!it->second.empty() && (largest == pool.free_by_bytes.end() || it->first > largest->first)) largest = it;
    BASTION_ASSERT(largest != pool.free_by_bytes.end());  // cached_bytes > 0 means some list is non-empty
    taken.emplace_back(largest->second.back(), largest->first);
    largest->second.pop_back();
    freed += largest->first;
    pool.stats.cached_bytes -= largest->first;
    pool.stats.evictions++;
  }
  return taken;
}

float* cpu_acquire(int64_t numel) {
  const int64_t bytes = padded_bytes(numel);
  CpuPool& pool = cpu_pool();
  std::vector<std::pair<float*, int64_t>> evicted;
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
    evicted = take_evictions(pool, bytes);
  }
  for (const auto& [old, old_bytes] : evicted) system_free(old, old_bytes);  // first: malloc may reuse it
  float* ptr = system_allocate(bytes);
  BASTION_CHECK(ptr != nullptr, "out of memory allocating ", bytes, " bytes");
  return ptr;
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
  system_free(ptr, bytes);
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
    for (float* ptr : buffers) system_free(ptr, bytes);
  pool.free_by_bytes.clear();
  pool.stats.cached_bytes = 0;
  // free() keeps most of that memory in malloc's arenas (the two training threads' arenas are
  // fragmented by the graph's many sizes): hand their free pages back so the next phase starts from the
  // live set (ResNet18 round: evaluation ran on top of 1.85 GB of freed training memory without this).
  malloc_trim(0);
}

}  // namespace bastion
