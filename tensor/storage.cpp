// Storage and its CPU buffer pool.
// Why a pool: a training step creates dozens of activation and gradient tensors of the same sizes every
// step; keeping freed buffers by exact size makes every step after the first allocation-free, which
// matters for small models where malloc/free and page faults would otherwise rival the arithmetic.
// The pool is process-wide behind one mutex (uncontended locks cost ~20 ns; a buffer is microseconds
// of work), holds at most kMaxCachedBytes, and hands out 64-byte aligned buffers for AVX-512 loads.
// Why eviction: buffers are kept by size, so a phase that needs new sizes (the backward of a ResNet's first
// stage after its last stages, evaluation after training, another model) would otherwise allocate fresh
// memory while the pool sits on the previous phase's buffers. The bound: live + cached bytes stay within
// kStoragePoolKeptBytes of the most bytes that were ever live at once (since storage_pool_release_all).
// A miss that would pass it first frees cached buffers, largest first, until it holds again (or the pool
// is down to kStoragePoolKeptBytes), so malloc and mmap can reuse that memory: the process grows only when
// live bytes do. A small model's whole working set stays under kStoragePoolKeptBytes and is never evicted.
// The rule before (free as many cached bytes as the miss asks for whenever the pool held more than the kept
// bytes) evicted buffers on every miss even far below the peak: ResNet18's step at batch 64 then missed
// 49 times a step after warm-up, and the kernel's time in its new mappings' page faults was 14 % of the
// benchmark's CPU time.
// Why best fit for mapped buffers: that step asks for dozens of large sizes (activations, gradients and
// workspaces of 4-36 MiB) that differ by a few percent between phases. A cached mapped buffer therefore
// serves any request of at least 1/kMappedSlack of its size, and goes back to the pool with its own size.
// With both, the step misses 4 times (bench/RESULTS.md, "storage pool").
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <malloc.h>
#include <map>
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
// A cached mapped buffer serves a request of `bytes` if it holds at most bytes * kMappedSlack. Chosen on the
// ResNet18 step (bench/RESULTS.md, "storage pool"): misses a step 23 / 17 / 4 / 5 at 1 / 1.25 / 1.5 / 2,
// maximum RSS 560 / 567 / 574 / 590 MB.
constexpr double kMappedSlack = 1.5;

struct CpuPool {
  std::mutex mutex;
  std::unordered_map<int64_t, std::vector<float*>> free_by_bytes;  // under kMappedBytes, by exact size
  std::multimap<int64_t, float*> mapped_free;                      // kMappedBytes and up, by their size
  std::unordered_map<float*, int64_t> mapped_in_use;               // handed-out mapped buffer -> its size
  int64_t live_bytes = 0;                                          // handed out and not yet released
  int64_t peak_live_bytes = 0;  // the most live_bytes has been since the last storage_pool_release_all
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

// The largest cached buffer, taken out of the pool (its size in .second); every mapped one is larger than
// every malloc'd one. O(cached sizes) when only malloc'd ones are left; called on misses only.
std::pair<float*, int64_t> take_largest(CpuPool& pool) {
  if (!pool.mapped_free.empty()) {
    const auto largest = std::prev(pool.mapped_free.end());
    const std::pair<float*, int64_t> taken{largest->second, largest->first};
    pool.mapped_free.erase(largest);
    return taken;
  }
  auto largest = pool.free_by_bytes.end();
  for (auto it = pool.free_by_bytes.begin(); it != pool.free_by_bytes.end(); ++it)
    if (!it->second.empty() && (largest == pool.free_by_bytes.end() || it->first > largest->first)) largest = it;
  BASTION_ASSERT(largest != pool.free_by_bytes.end());  // cached_bytes > 0 means some list is non-empty
  const std::pair<float*, int64_t> taken{largest->second.back(), largest->first};
  largest->second.pop_back();
  return taken;
}

// Takes cached buffers, largest first, until a new buffer of `bytes` keeps the bound of the header comment
// or the pool is down to kStoragePoolKeptBytes; the caller frees them outside the lock.
std::vector<std::pair<float*, int64_t>> take_evictions(CpuPool& pool, int64_t bytes) {
  std::vector<std::pair<float*, int64_t>> taken;
  const int64_t bound = std::max(pool.peak_live_bytes, pool.live_bytes + bytes) + kStoragePoolKeptBytes;
  while (pool.live_bytes + pool.stats.cached_bytes + bytes > bound && pool.stats.cached_bytes > kStoragePoolKeptBytes) {
    taken.push_back(take_largest(pool));
    pool.stats.cached_bytes -= taken.back().second;
    pool.stats.evictions++;
  }
  return taken;
}

void add_live(CpuPool& pool, int64_t bytes) {
  pool.live_bytes += bytes;
  pool.peak_live_bytes = std::max(pool.peak_live_bytes, pool.live_bytes);
}

// A cached buffer for `bytes`, or nullptr: the exact size under kMappedBytes, the smallest mapped buffer
// within kMappedSlack above it. Called with the lock held.
float* take_cached(CpuPool& pool, int64_t bytes) {
  float* ptr = nullptr;
  int64_t size = bytes;
  if (bytes < kMappedBytes) {
    auto it = pool.free_by_bytes.find(bytes);
    if (it == pool.free_by_bytes.end() || it->second.empty()) return nullptr;
    ptr = it->second.back();
    it->second.pop_back();
  } else {
    auto it = pool.mapped_free.lower_bound(bytes);
    if (it == pool.mapped_free.end() || static_cast<double>(it->first) > static_cast<double>(bytes) * kMappedSlack)
      return nullptr;
    ptr = it->second, size = it->first;
    pool.mapped_free.erase(it);
    pool.mapped_in_use.emplace(ptr, size);
  }
  pool.stats.reuses++;
  pool.stats.cached_bytes -= size;
  add_live(pool, size);
  return ptr;
}

float* cpu_acquire(int64_t numel) {
  const int64_t bytes = padded_bytes(numel);
  CpuPool& pool = cpu_pool();
  std::vector<std::pair<float*, int64_t>> evicted;
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (float* ptr = take_cached(pool, bytes)) return ptr;
    pool.stats.fresh_allocations++;
    evicted = take_evictions(pool, bytes);
  }
  for (const auto& [old, old_bytes] : evicted) system_free(old, old_bytes);  // first: malloc may reuse it
  float* ptr = system_allocate(bytes);
  BASTION_CHECK(ptr != nullptr, "out of memory allocating ", bytes, " bytes");
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (bytes >= kMappedBytes) pool.mapped_in_use.emplace(ptr, bytes);
  add_live(pool, bytes);
  return ptr;
}

void cpu_release(float* ptr, int64_t numel) {
  int64_t bytes = padded_bytes(numel);
  CpuPool& pool = cpu_pool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (bytes >= kMappedBytes) {  // its own size, which best fit may have made larger than numel's
      const auto it = pool.mapped_in_use.find(ptr);
      BASTION_ASSERT(it != pool.mapped_in_use.end());
      bytes = it->second;
      pool.mapped_in_use.erase(it);
    }
    pool.live_bytes -= bytes;
    if (pool.stats.cached_bytes + bytes <= kMaxCachedBytes) {
      if (bytes >= kMappedBytes)
        pool.mapped_free.emplace(bytes, ptr);
      else
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
  for (const auto& [bytes, ptr] : pool.mapped_free) system_free(ptr, bytes);
  pool.mapped_free.clear();
  pool.stats.cached_bytes = 0;
  pool.peak_live_bytes = pool.live_bytes;
  // free() keeps most of that memory in malloc's arenas (the two training threads' arenas are
  // fragmented by the graph's many sizes): hand their free pages back so the next phase starts from the
  // live set (ResNet18 round: evaluation ran on top of 1.85 GB of freed training memory without this).
  malloc_trim(0);
}

}  // namespace bastion
