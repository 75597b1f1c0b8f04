// The CUDA runtime layer (contract: kernels/cuda/cuda.h): device query, stream, caching allocator,
// copies, debug mode. Compiled by nvcc, or as C++ over the emulator in the EMULATE build.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/launch.h"

namespace bastion {

namespace {

constexpr size_t kSmallRounding = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeRounding = size_t{2} << 20;

size_t rounded_bytes(size_t bytes) {
  const size_t unit = bytes < kLargeThreshold ? kSmallRounding : kLargeRounding;
  return (std::max<size_t>(bytes, 1) + unit - 1) / unit * unit;
}

struct CachingAllocator {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_by_size;
  std::unordered_map<void*, size_t> live;  // pointer -> rounded size
  CudaAllocatorStats stats;
};

CachingAllocator& allocator() {
  static CachingAllocator* instance = new CachingAllocator();  // outlives tensors freed at exit
  return *instance;
}

std::string mebibytes(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

void release_cached_locked(CachingAllocator& a) {
  for (auto& [size, blocks] : a.free_by_size)
    for (void* ptr : blocks) cudaFree(ptr);  // unchecked: called on the out-of-memory path and at exit
  a.free_by_size.clear();
  a.stats.cached_bytes = 0;
}

bool debug_sync_from_environment() {
  const char* value = std::getenv("BASTION_CUDA_SYNC");
  return value != nullptr && std::string(value) == "1";
}

bool& debug_sync_flag() {
  static bool flag = debug_sync_from_environment();
  return flag;
}

}  // namespace

bool cuda_available() {
  static const bool available = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return available;
}

bool cuda_emulated() {
#if defined(BASTION_CUDA_EMULATION)
  return true;
#else
  return false;
#endif
}

const char* cuda_device_description() {
  static const std::string description = []() -> std::string {
#if defined(BASTION_CUDA_EMULATION)
    return "CUDA emulator (kernels run on CPU threads)";
#else
    if (!cuda_available()) return "no CUDA device";
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.multiProcessorCount) + " SMs)";
#endif
  }();
  return description.c_str();
}

int cuda_select_device(int index) {
  BASTION_CHECK(cuda_available(), "no CUDA device found (cudaGetDeviceCount returned none)");
  BASTION_CHECK(index >= 0, "cuda_select_device: index ", index, " must be >= 0");
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  const int device = index % count;
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

CudaStream cuda_stream() {
  static CudaStream stream = [] {
    BASTION_CHECK(cuda_available(), "no CUDA device found (cudaGetDeviceCount returned none)");
    cudaStream_t created = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return stream;
}

void cuda_synchronize(CudaStream stream) { CUDA_CHECK(cudaStreamSynchronize(stream)); }
void cuda_set_debug_sync(bool on) { debug_sync_flag() = on; }
bool cuda_debug_sync() { return debug_sync_flag(); }

void cuda_check_launch(const char* kernel, CudaStream stream) {
  const cudaError_t launch_error = cudaGetLastError();
  BASTION_CHECK(launch_error == cudaSuccess, "CUDA error '", cudaGetErrorString(launch_error), "' launching ", kernel);
  if (!cuda_debug_sync()) return;
  const cudaError_t run_error = cudaStreamSynchronize(stream);
  BASTION_CHECK(run_error == cudaSuccess, "CUDA error '", cudaGetErrorString(run_error), "' running ", kernel,
                " (debug sync)");
}

unsigned cuda_grid_stride_blocks(int64_t n, int threads) {
#if defined(BASTION_CUDA_EMULATION)
  constexpr int64_t kMaxBlocks = 4;
#else
  constexpr int64_t kMaxBlocks = 8192;
#endif
  const int64_t blocks = (std::max<int64_t>(n, 1) + threads - 1) / threads;
  return static_cast<unsigned>(std::min(blocks, kMaxBlocks));
}

// ---- caching allocator ----

void* cuda_allocate(size_t bytes) {
  CachingAllocator& a = allocator();
  const size_t size = rounded_bytes(bytes);
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.free_by_size.find(size);
  void* ptr = nullptr;
  if (it != a.free_by_size.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    a.stats.reuses++;
    a.stats.cached_bytes -= static_cast<int64_t>(size);
  } else {
    if (cudaMalloc(&ptr, size) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky out-of-memory error before retrying
      release_cached_locked(a);
      const cudaError_t retry = cudaMalloc(&ptr, size);
      if (retry != cudaSuccess) cudaGetLastError();  // the allocator stays usable after the error below
      // One line a user can act on: what was asked, what the run holds (docs/cuda.md "Memory").
      BASTION_CHECK(retry == cudaSuccess, "CUDA ", cudaGetErrorString(retry), ": ", mebibytes(size),
                    " MiB asked for, with ", mebibytes(static_cast<size_t>(a.stats.live_bytes)),
                    " MiB in use by this run (docs/cuda.md \"Memory\" says what a run holds on the device)");
    }
    a.stats.fresh_allocations++;
  }
  a.live[ptr] = size;
  a.stats.live_bytes += static_cast<int64_t>(size);
  return ptr;
}

void cuda_release(void* ptr) {
  if (ptr == nullptr) return;
  CachingAllocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(ptr);
  BASTION_ASSERT(it != a.live.end());
  const size_t size = it->second;
  a.live.erase(it);
  a.free_by_size[size].push_back(ptr);
  a.stats.live_bytes -= static_cast<int64_t>(size);
  a.stats.cached_bytes += static_cast<int64_t>(size);
}

float* cuda_alloc_floats(int64_t numel) {
  BASTION_CHECK(numel >= 0, "cuda_alloc_floats: negative size ", numel);
  return static_cast<float*>(cuda_allocate(static_cast<size_t>(numel) * sizeof(float)));
}

void cuda_free_floats(float* ptr) { cuda_release(ptr); }

CudaAllocatorStats cuda_allocator_stats() {
  CachingAllocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.stats;
}

void cuda_allocator_release_all() {
  CachingAllocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  release_cached_locked(a);
}

// ---- copies ----

void cuda_copy_to_device(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

void cuda_copy_to_host(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void cuda_copy_on_device(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

namespace {
__global__ void fill_kernel(float* dst, float value, int64_t numel) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel; i += stride) dst[i] = value;
}
}  // namespace

void cuda_fill(float* dst, float value, int64_t numel, CudaStream stream) {
  if (numel == 0) return;
  constexpr int kThreads = 256;
  cuda_launch("fill_kernel", fill_kernel, dim3(cuda_grid_stride_blocks(numel, kThreads)), dim3(kThreads), stream, dst,
              value, numel);
}

}  // namespace bastion
