// The CUDA emulator's launch machinery and runtime API (contract: kernels/cuda/emulator.h).
// Built only by BASTION_CUDA=EMULATE.
#include "kernels/cuda/emulator.h"

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

constinit thread_local dim3 threadIdx;
constinit thread_local dim3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace bastion_emu {

namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridYZ = 65535;

// Why a completion function: the barrier cannot tell a __syncthreads phase from the end of a block,
// so each thread says which one it arrives for; a phase that mixes the two, or an end of block at
// which the threads counted different numbers of __syncthreads, marks the launch divergent.
struct BlockCheck {
  std::atomic<int>* end_arrivals;
  std::atomic<int>* min_syncs;
  std::atomic<int>* max_syncs;
  std::atomic<bool>* divergent;
  int* expected;
  void operator()() noexcept {
    const int ends = end_arrivals->exchange(0);
    if (ends != 0 && ends != *expected) divergent->store(true);
    if (ends != 0 && ends == *expected) {
      if (min_syncs->load() != max_syncs->load()) divergent->store(true);
      min_syncs->store(1 << 30);
      max_syncs->store(0);
    }
  }
};

struct Launch {
  int threads = 0;
  int expected = 0;  // threads still running, for the block check
  std::atomic<int> end_arrivals{0}, min_syncs{1 << 30}, max_syncs{0};
  std::atomic<bool> divergent{false};
  std::unique_ptr<std::barrier<BlockCheck>> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<uint64_t> warp_slots;
};

Launch* current_launch = nullptr;
thread_local int thread_rank = 0;  // linear thread index inside the block
thread_local int syncs_this_block = 0;
std::mutex launch_mutex;
cudaError_t last_error = cudaSuccess;

void record_extreme(std::atomic<int>& target, int value, bool keep_min) {
  int old = target.load();
  while ((keep_min ? value < old : value > old) && !target.compare_exchange_weak(old, value)) {
  }
}

void run_thread(Launch& launch, int rank, const std::function<void()>& body) {
  thread_rank = rank;
  threadIdx = dim3(rank % blockDim.x, rank / blockDim.x % blockDim.y, rank / (blockDim.x * blockDim.y));
  for (unsigned bz = 0; bz < gridDim.z; ++bz)
    for (unsigned by = 0; by < gridDim.y; ++by)
      for (unsigned bx = 0; bx < gridDim.x; ++bx) {
        blockIdx = dim3(bx, by, bz);
        syncs_this_block = 0;
        body();
        record_extreme(launch.min_syncs, syncs_this_block, true);
        record_extreme(launch.max_syncs, syncs_this_block, false);
        launch.end_arrivals.fetch_add(1);
        launch.block_barrier->arrive_and_wait();
      }
  // A thread that left early (a divergent launch) must not leave the others waiting for it forever.
  launch.block_barrier->arrive_and_drop();
  launch.warp_barriers[rank / warpSize]->arrive_and_drop();
}

bool valid_configuration(dim3 grid, dim3 block) {
  const long long threads = static_cast<long long>(block.x) * block.y * block.z;
  return grid.x > 0 && grid.y > 0 && grid.z > 0 && grid.y <= kMaxGridYZ && grid.z <= kMaxGridYZ && threads > 0 &&
         threads <= kMaxThreadsPerBlock && block.z <= 64;
}

}  // namespace

void syncthreads() {
  ++syncs_this_block;
  current_launch->block_barrier->arrive_and_wait();
}

int lane_id() { return thread_rank % warpSize; }

void syncwarp() { current_launch->warp_barriers[thread_rank / warpSize]->arrive_and_wait(); }

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
  state.threads = static_cast<int>(block.x * block.y * block.z);
  state.expected = state.threads;
  state.block_barrier = std::make_unique<std::barrier<BlockCheck>>(
      state.threads,
      BlockCheck{&state.end_arrivals, &state.min_syncs, &state.max_syncs, &state.divergent, &state.expected});
  for (int base = 0; base < state.threads; base += warpSize)
    state.warp_barriers.push_back(std::make_unique<std::barrier<>>(std::min(warpSize, state.threads - base)));
  state.warp_slots.assign(state.threads, 0);
  gridDim = grid;
  blockDim = block;
  current_launch = &state;
  std::vector<std::thread> threads;
  threads.reserve(state.threads);
  for (int rank = 0; rank < state.threads; ++rank)
    threads.emplace_back([&state, rank, &body] { run_thread(state, rank, body); });
  for (std::thread& t : threads) t.join();
  current_launch = nullptr;
  if (state.divergent.load()) {
    std::fprintf(stderr, "cuda emulator: %s: divergent __syncthreads (threads of a block reached different counts)\n",
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
