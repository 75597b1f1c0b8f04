// The CUDA emulator itself (kernels/cuda/emulator.h): thread and block indices, __syncthreads over
// static __shared__ memory, warp shuffles, and the errors a GPU reports (invalid configuration, a
// divergent barrier), on small kernels whose answers are known. Compiled with BASTION_CUDA_EMULATION in
// a BASTION_CUDA=EMULATE build (tests/CMakeLists.txt); elsewhere the tests skip.
#include <gtest/gtest.h>

#if defined(BASTION_CUDA_EMULATION)

#include <numeric>
#include <vector>

#include "kernels/cuda/emulator.h"

namespace {

constexpr int kBlock = 128;

// Each thread writes its 3-D thread and block coordinates at its global position.
__global__ void write_coordinates(int* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned at = block * blockDim.x * blockDim.y * blockDim.z + thread;
  out[at] = static_cast<int>(threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z + 1000 * blockIdx.x +
                             10000 * blockIdx.y + 100000 * blockIdx.z);
}

// A shared-memory tree sum per block: needs every __syncthreads.
__global__ void block_sums(float* sums, const float* in) {
  __shared__ float partial[kBlock];
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * kBlock + t];
  __syncthreads();
  for (unsigned stride = kBlock / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}

// Thread t reads what thread t + 1 staged: correct only with the __syncthreads between.
__global__ void rotate_through_shared(int* out, const int* in, bool sync) {
  __shared__ int stage[kBlock];
  const unsigned t = threadIdx.x;
  stage[t] = in[t];
  if (sync) __syncthreads();
  out[t] = stage[(t + 1) % kBlock];
}

// Per warp: the sum by shuffling down (lane 0 holds it) and by xor butterfly (every lane holds it).
__global__ void warp_sums(int* down, int* butterfly, const int* in) {
  const unsigned t = threadIdx.x, lane = t % warpSize;
  int a = in[t], b = in[t];
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    a += __shfl_down_sync(0xffffffffu, a, offset);
    b += __shfl_xor_sync(0xffffffffu, b, offset);
  }
  if (lane == 0) down[t / warpSize] = a;
  butterfly[t] = b;
}

// The first half of the block skips the barrier: a divergent __syncthreads.
__global__ void half_block_syncs(int* out) {
  if (threadIdx.x < kBlock / 2) __syncthreads();
  out[threadIdx.x] = 1;
}

// Only the first 16 lanes of each warp shuffle: a divergent warp exchange.
__global__ void half_warp_shuffles(int* out) {
  int value = static_cast<int>(threadIdx.x);
  if (threadIdx.x % warpSize < 16) value = __shfl_down_sync(0xffffffffu, value, 1);
  out[threadIdx.x] = value;
}

template <typename... Params, typename... Args>
cudaError_t run(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) {
  bastion_emulated_launch(kernel, grid, block, "test kernel", std::forward<Args>(args)...);
  return cudaGetLastError();
}

TEST(CudaEmulator, ThreadAndBlockIndicesCoverA3dGrid) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  std::vector<int> out(3 * 2 * 2 * 4 * 3 * 2, -1);
  ASSERT_EQ(run(write_coordinates, grid, block, out.data()), cudaSuccess);
  size_t at = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx, ++at)
              EXPECT_EQ(out[at], static_cast<int>(tx + 10 * ty + 100 * tz + 1000 * bx + 10000 * by + 100000 * bz))
                  << "element " << at;
}

TEST(CudaEmulator, SharedMemoryTreeSumPerBlock) {
  std::vector<float> in(3 * kBlock);
  std::iota(in.begin(), in.end(), 1.0f);  // small integers: every sum is exact in float
  std::vector<float> sums(3, -1.0f);
  ASSERT_EQ(run(block_sums, dim3(3), dim3(kBlock), sums.data(), in.data()), cudaSuccess);
  for (int b = 0; b < 3; ++b) {
    const float first = 1.0f + b * kBlock, last = first + kBlock - 1;
    EXPECT_EQ(sums[b], (first + last) * kBlock / 2) << "block " << b;
  }
}

// Each thread runs as far as it can before the next starts, so a missing __syncthreads reads what the
// previous launch left in shared memory, deterministically.
TEST(CudaEmulator, AMissingSyncthreadsReadsStaleSharedMemory) {
  std::vector<int> first(kBlock), second(kBlock), out(kBlock);
  std::iota(first.begin(), first.end(), 0);
  std::iota(second.begin(), second.end(), 1000);
  ASSERT_EQ(run(rotate_through_shared, dim3(1), dim3(kBlock), out.data(), first.data(), true), cudaSuccess);
  ASSERT_EQ(run(rotate_through_shared, dim3(1), dim3(kBlock), out.data(), second.data(), true), cudaSuccess);
  for (int t = 0; t < kBlock; ++t) EXPECT_EQ(out[t], second[(t + 1) % kBlock]) << "thread " << t;
  ASSERT_EQ(run(rotate_through_shared, dim3(1), dim3(kBlock), out.data(), first.data(), false), cudaSuccess);
  EXPECT_EQ(out[0], second[1]) << "thread 0 read thread 1's slot before thread 1 wrote it: the last launch's value";
  EXPECT_EQ(out[kBlock - 1], first[0]) << "the last thread reads after every other thread wrote";
}

TEST(CudaEmulator, WarpShufflesSumEachWarp) {
  const int threads = 96;  // three warps
  std::vector<int> in(threads), down(3, -1), butterfly(threads, -1);
  for (int t = 0; t < threads; ++t) in[t] = t * t % 37;
  ASSERT_EQ(run(warp_sums, dim3(1), dim3(threads), down.data(), butterfly.data(), in.data()), cudaSuccess);
  for (int w = 0; w < 3; ++w) {
    const int sum = std::accumulate(in.begin() + w * warpSize, in.begin() + (w + 1) * warpSize, 0);
    EXPECT_EQ(down[w], sum) << "warp " << w;
    for (int lane = 0; lane < warpSize; ++lane) EXPECT_EQ(butterfly[w * warpSize + lane], sum) << "lane " << lane;
  }
}

TEST(CudaEmulator, DivergentBarriersFailTheLaunchAndTheNextLaunchRuns) {
  std::vector<int> out(kBlock, 0);
  EXPECT_EQ(run(half_block_syncs, dim3(2), dim3(kBlock), out.data()), cudaErrorLaunchFailure);
  EXPECT_EQ(run(half_warp_shuffles, dim3(1), dim3(64), out.data()), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "reading the error resets it";
  std::vector<float> in(kBlock, 1.0f), sums(1, 0.0f);
  ASSERT_EQ(run(block_sums, dim3(1), dim3(kBlock), sums.data(), in.data()), cudaSuccess);
  EXPECT_EQ(sums[0], static_cast<float>(kBlock));
}

TEST(CudaEmulator, InvalidConfigurationsAreReportedLikeAGpu) {
  std::vector<int> out(2048, 0);
  EXPECT_EQ(run(write_coordinates, dim3(1), dim3(1025), out.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run(write_coordinates, dim3(1, 65536), dim3(1), out.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run(write_coordinates, dim3(0), dim3(32), out.data()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run(write_coordinates, dim3(1), dim3(1024), out.data()), cudaSuccess);
}

}  // namespace

#else

TEST(CudaEmulator, RunsInAnEmulatedBuild) {
  GTEST_SKIP() << "the emulator's own tests run in a BASTION_CUDA=EMULATE build (CI's sanitizer build)";
}

#endif
