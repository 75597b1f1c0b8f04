// The CUDA emulator's launch machinery and runtime API (contract: kernels/cuda/emulator.h).
// Built only by BASTION_CUDA=EMULATE.
#include "kernels/cuda/emulator.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

// AddressSanitizer is told about every switch between the scheduler's stack and a fiber's, so that its
// stack checks follow the fiber being run (sanitizer/common_interface_defs.h, "fiber" annotations).
#if defined(__SANITIZE_ADDRESS__)
#define BASTION_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BASTION_EMU_ASAN 1
#endif
#endif
#if BASTION_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

constinit thread_local dim3 threadIdx;
constinit thread_local dim3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace bastion_emu {

namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridYZ = 65535;
// A fiber's stack: kernels keep a few register tiles and indices there (ASan's redzones make frames a few
// times larger). Mapped once, reused by every launch, and only the pages touched are ever backed.
constexpr size_t kFiberStackBytes = 256 * 1024;

enum class FiberState { kReady, kAtBlockBarrier, kAtWarpBarrier, kDone };

struct Fiber {
  ucontext_t context{};
  void* stack = nullptr;
  FiberState state = FiberState::kReady;
  int syncs = 0;  // __syncthreads reached in this block
};

struct Launch {
  const std::function<void()>* body = nullptr;
  int threads = 0;
  int running = -1;  // the fiber being run
  std::vector<uint64_t> warp_slots;
  ucontext_t scheduler{};  // uc_stack stays empty: ASan's swapcontext hook then leaves this stack's shadow alone
  const void* scheduler_stack = nullptr;
  size_t scheduler_stack_bytes = 0;
};

// Guarded by launch_mutex: one launch runs at a time, on the launching thread, its CUDA threads as fibers.
std::mutex launch_mutex;
std::vector<Fiber> fibers;  // grows to the largest block launched; the stacks are kept
Launch* current_launch = nullptr;
cudaError_t last_error = cudaSuccess;
thread_local int thread_rank = 0;  // linear thread index inside the block

// ---- switching between the scheduler and a fiber ----

void enter_fiber(Launch& launch, int rank) {
  Fiber& fiber = fibers[rank];
  launch.running = rank;
  thread_rank = rank;
  threadIdx = dim3(rank % blockDim.x, rank / blockDim.x % blockDim.y, rank / (blockDim.x * blockDim.y));
#if BASTION_EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, fiber.stack, kFiberStackBytes);
  swapcontext(&launch.scheduler, &fiber.context);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  swapcontext(&launch.scheduler, &fiber.context);
#endif
  launch.running = -1;
}

// From the running fiber back to the scheduler; returns when the scheduler resumes this fiber.
void leave_fiber(FiberState state) {
  Launch& launch = *current_launch;
  Fiber& fiber = fibers[launch.running];
  fiber.state = state;
#if BASTION_EMU_ASAN
  void* fake_stack = nullptr;
  // A finished fiber's fake frames are dropped (nullptr): it is never resumed, only restarted.
  __sanitizer_start_switch_fiber(state == FiberState::kDone ? nullptr : &fake_stack, launch.scheduler_stack,
                                 launch.scheduler_stack_bytes);
  swapcontext(&fiber.context, &launch.scheduler);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  swapcontext(&fiber.context, &launch.scheduler);
#endif
}

void fiber_main() {
  Launch& launch = *current_launch;
#if BASTION_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &launch.scheduler_stack, &launch.scheduler_stack_bytes);
#endif
  (*launch.body)();
  leave_fiber(FiberState::kDone);
}

void start_fiber(Fiber& fiber) {
  if (fiber.stack == nullptr) {
    fiber.stack = mmap(nullptr, kFiberStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
    if (fiber.stack == MAP_FAILED) {
      fiber.stack = nullptr;
      throw std::bad_alloc();
    }
  }
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = fiber.stack;
  fiber.context.uc_stack.ss_size = kFiberStackBytes;
  fiber.context.uc_link = nullptr;  // fiber_main never returns: it leaves through leave_fiber
  makecontext(&fiber.context, fiber_main, 0);
  fiber.state = FiberState::kReady;
  fiber.syncs = 0;
}

// ---- one block ----

// Wakes the fibers waiting at a barrier every thread it is for has reached: a warp's exchange slot
// barrier (all its lanes), else __syncthreads (every thread of the block). False when none can be woken:
// some threads wait at a barrier that others left (finished, or wait elsewhere): a divergent block.
bool release_a_barrier(const Launch& launch) {
  bool released = false;
  for (int base = 0; base < launch.threads; base += warpSize) {
    const int end = std::min(base + warpSize, launch.threads);
    bool whole_warp = true;
    for (int rank = base; rank < end; ++rank) whole_warp &= fibers[rank].state == FiberState::kAtWarpBarrier;
    if (!whole_warp) continue;
    for (int rank = base; rank < end; ++rank) fibers[rank].state = FiberState::kReady;
    released = true;
  }
  if (released) return true;
  for (int rank = 0; rank < launch.threads; ++rank)
    if (fibers[rank].state != FiberState::kAtBlockBarrier) return false;
  for (int rank = 0; rank < launch.threads; ++rank) fibers[rank].state = FiberState::kReady;
  return true;
}

// Runs every thread of the current block, in rank order, each until it finishes or waits at a barrier;
// then opens the barriers all its threads reached, and again. False for a divergent block (its fibers
// are abandoned where they wait and restarted by the next launch).
bool run_block(Launch& launch) {
  for (int rank = 0; rank < launch.threads; ++rank) start_fiber(fibers[rank]);
  for (;;) {
    for (int rank = 0; rank < launch.threads; ++rank)
      if (fibers[rank].state == FiberState::kReady) enter_fiber(launch, rank);
    bool all_done = true;
    for (int rank = 0; rank < launch.threads; ++rank) all_done &= fibers[rank].state == FiberState::kDone;
    if (all_done) break;
    if (!release_a_barrier(launch)) return false;
  }
  for (int rank = 1; rank < launch.threads; ++rank)
    if (fibers[rank].syncs != fibers[0].syncs) return false;
  return true;
}

// Every block in x, then y, then z order; false at the first divergent block.
bool run_grid(Launch& launch, dim3 grid) {
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx = dim3(bx, by, bz);
        if (!run_block(launch)) return false;
      }
  return true;
}

bool valid_configuration(dim3 grid, dim3 block) {
  const long long threads = static_cast<long long>(block.x) * block.y * block.z;
  return grid.x > 0 && grid.y > 0 && grid.z > 0 && grid.y <= kMaxGridYZ && grid.z <= kMaxGridYZ && threads > 0 &&
         threads <= kMaxThreadsPerBlock && block.z <= 64;
}

}  // namespace

void syncthreads() {
  ++fibers[current_launch->running].syncs;
  leave_fiber(FiberState::kAtBlockBarrier);
}

int lane_id() { return thread_rank % warpSize; }

void syncwarp() { leave_fiber(FiberState::kAtWarpBarrier); }

uint64_t warp_exchange(uint64_t bits, int source_lane) {
  Launch& launch = *current_launch;
  const int warp_base = thread_rank - lane_id();
  const int source = warp_base + source_lane;
  launch.warp_slots[thread_rank] = bits;
  syncwarp();
  const uint64_t out = source < launch.threads ? launch.warp_slots[source] : bits;
  syncwarp();  // nobody overwrites a slot before every lane has read it
  return out;
}

bool launch(dim3 grid, dim3 block, const std::function<void()>& body, const char* name) {
  std::lock_guard<std::mutex> lock(launch_mutex);
  if (!valid_configuration(grid, block)) {
    std::fprintf(stderr, "cuda emulator: %s: invalid launch configuration grid (%u, %u, %u) block (%u, %u, %u)\n", name,
                 grid.x, grid.y, grid.z, block.x, block.y, block.z);
    last_error = cudaErrorInvalidConfiguration;
    return false;
  }
  Launch state;
  state.body = &body;
  state.threads = static_cast<int>(block.x * block.y * block.z);
  state.warp_slots.assign(state.threads, 0);
  if (fibers.size() < static_cast<size_t>(state.threads)) fibers.resize(state.threads);
  gridDim = grid;
  blockDim = block;
  current_launch = &state;
  const bool divergent = !run_grid(state, grid);
  current_launch = nullptr;
  if (divergent) {
    std::fprintf(stderr,
                 "cuda emulator: %s: divergent __syncthreads or warp exchange (threads of a block reached different "
                 "barriers, or different counts of them)\n",
                 name);
    last_error = cudaErrorLaunchFailure;
    return false;
  }
  return true;
}

cudaError_t take_last_error(bool reset) {
  std::lock_guard<std::mutex> lock(launch_mutex);
  const cudaError_t error = last_error;
  if (reset) last_error = cudaSuccess;
  return error;
}

}  // namespace bastion_emu

// ---- runtime API ----
// Emulated device memory is host memory, 256-byte aligned like cudaMalloc's.
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) { return cudaMemset(dst, value, bytes); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = nullptr;  // every emulated launch is synchronous: one stream is as good as another
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return bastion_emu::take_last_error(false); }
cudaError_t cudaDeviceSynchronize() { return bastion_emu::take_last_error(false); }
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return bastion_emu::take_last_error(true); }
cudaError_t cudaPeekAtLastError() { return bastion_emu::take_last_error(false); }
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}
