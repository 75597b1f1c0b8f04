// A CUDA emulator for CPU-only machines: the subset of CUDA C++ and of the runtime API that
// kernels/cuda/*.cu use, implemented on the CPU, so the same kernel source runs on a machine without a
// GPU (the BASTION_CUDA=EMULATE build; the .cu files are compiled as C++ with BASTION_CUDA_EMULATION
// defined, see kernels/cuda/compat.h).
//
// Why: CI has no GPU, and a kernel that only ever compiles is untested code. Emulated, every kernel's
// index arithmetic, tiling, bounds handling, shared-memory use and warp shuffles run against the CPU
// twin in the agreement table, under AddressSanitizer (out-of-bounds reads and writes of device
// buffers are caught like compute-sanitizer's memcheck).
//
// Execution model: a launch runs on the calling thread, one block at a time (blocks in x, then y, then z
// order), each CUDA thread of the block as a fiber (ucontext) with its own stack. The fibers run in
// thread order, each until it finishes or waits at a barrier; a barrier opens when every thread it is
// for has reached it: __syncthreads the whole block, __syncwarp and the warp shuffles (which exchange
// through a per-warp slot array between two warp barriers) the 32 lanes of a warp. `__shared__`
// (emulated as a function-local `static`) is therefore private to the block being run. Running each
// thread as far as it can before the next starts is the most adversarial order for a missing
// __syncthreads: thread 0 reads a tile before any other thread has written its part, and overwrites its
// part of the next tile before the others have read this one, so the kernel's result goes wrong
// deterministically (tests/test_cuda_emulator.cpp shows it). Fibers rather than OS threads: a launch
// costs a context switch per thread and barrier instead of a thread start and a futex wake-up, which is
// what makes the emulated test suite affordable under the sanitizers.
// Launch-configuration errors (more than 1024 threads per block, grid.y or grid.z above 65535, a zero
// dimension) are reported through cudaGetLastError as on a GPU. A block whose threads do not all reach
// the same barriers (a __syncthreads some threads skip or exit before, a shuffle not every lane of the
// warp makes) is reported as cudaErrorLaunchFailure ("divergent").
//
// What it cannot show: speed, memory coalescing, bank conflicts, occupancy, tensor cores (TF32 kernels
// are not emulated), and races between blocks or streams (launches run one at a time, synchronously).
#pragma once

#include <math.h>

#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- language ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __align__(n) alignas(n)
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

// constinit: no dynamic initialisation, so g++ reads these straight off the thread pointer instead of
// through a TLS wrapper call plus a null check; GCC 12 miscompiles that check under ASan + UBSan with
// -fno-omit-frame-pointer (a flag-less `lea` feeding a `je`), reporting "member access within null
// pointer of type 'struct dim3'" for a valid blockIdx.
extern thread_local constinit dim3 threadIdx;
extern thread_local constinit dim3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
constexpr int warpSize = 32;

namespace bastion_emu {
void syncthreads();
void syncwarp();
// Publishes `bits` in this thread's warp slot and returns the bits published by lane `source_lane`
// of the same warp (its own bits when that lane does not exist).
uint64_t warp_exchange(uint64_t bits, int source_lane);
int lane_id();
// Runs `body` as every thread of every block of the grid; returns false (and sets the last error) for
// an invalid configuration or a divergent __syncthreads.
bool launch(dim3 grid, dim3 block, const std::function<void()>& body, const char* name);

template <typename T>
T shuffle_from(T value, int source_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_exchange(bits, source_lane);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace bastion_emu

inline void __syncthreads() { bastion_emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { bastion_emu::syncwarp(); }

template <typename T>
T __shfl_sync(unsigned, T value, int src_lane, int width = warpSize) {
  const int lane = bastion_emu::lane_id(), base = lane - lane % width;
  return bastion_emu::shuffle_from(value, base + src_lane % width);
}
template <typename T>
T __shfl_xor_sync(unsigned, T value, int lane_mask, int width = warpSize) {
  const int lane = bastion_emu::lane_id(), base = lane - lane % width;
  const int target = (lane % width) ^ lane_mask;
  return bastion_emu::shuffle_from(value, target < width ? base + target : lane);
}
template <typename T>
T __shfl_down_sync(unsigned, T value, unsigned delta, int width = warpSize) {
  const int lane = bastion_emu::lane_id();
  const bool inside = lane % width + static_cast<int>(delta) < width;
  return bastion_emu::shuffle_from(value, inside ? lane + static_cast<int>(delta) : lane);
}
template <typename T>
T __shfl_up_sync(unsigned, T value, unsigned delta, int width = warpSize) {
  const int lane = bastion_emu::lane_id();
  const bool inside = lane % width >= static_cast<int>(delta);
  return bastion_emu::shuffle_from(value, inside ? lane - static_cast<int>(delta) : lane);
}

// ---- atomics ----
template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (old < value && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;
}

// ---- device math intrinsics (the fast-math forms are computed exactly here) ----
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

// ---- runtime API (host memory stands in for device memory; every call is synchronous) ----
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
constexpr unsigned cudaStreamNonBlocking = 1;

cudaError_t cudaMalloc(void** ptr, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);  // the emulator has device 0 only
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t error);

// kernel<<<grid, block, 0, stream>>>(args...) for the emulator: the arguments are converted to the
// kernel's parameter types once, as CUDA copies them at launch, and every emulated thread calls the
// kernel with them.
template <typename... Params, typename... Args>
void bastion_emulated_launch(void (*kernel)(Params...), dim3 grid, dim3 block, const char* name, Args&&... args) {
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  bastion_emu::launch(grid, block, [&] { std::apply(kernel, params); }, name);
}
