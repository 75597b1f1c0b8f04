// Memory behaviour that keeps large runs (ResNet18 / CIFAR-10) small: the storage pool's eviction on a
// miss (tensor/storage.cpp) and the autograd graph holding producers, not op outputs (autograd/engine.h).
// Everything is observed through storage_pool_stats() on constructed allocations; nothing here depends on
// the machine's memory or timing.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/ops.h"
#include "tensor/tensor.h"

namespace bastion {
namespace {

// Sizes no other code in this process uses (odd float counts), so each is its own size class. Their
// padded bytes: numel * 4 rounded up to 64.
constexpr int64_t kBigFloats = (int64_t{16} << 18) + 3;  // 16 MiB + 12 bytes -> 16 MiB + 64 padded
constexpr int64_t kOtherFloats = (int64_t{8} << 18) + 5;
constexpr int64_t kSmallFloats = (int64_t{1} << 18) + 7;
constexpr int64_t kTwelveMiBFloats = (int64_t{12} << 18) + 9;
constexpr int64_t kHugeFloats = (int64_t{70} << 18) + 11;

int64_t padded(int64_t floats) { return (floats * 4 + 63) / 64 * 64; }

// Allocates `count` tensors of `floats` and drops them, leaving them in the pool.
void cache_buffers(int64_t floats, int count) {
  std::vector<Tensor> held;
  for (int i = 0; i < count; ++i) held.push_back(Tensor::empty({floats}));
}

TEST(StoragePool, MissPastThePeakEvictsLargestCachedBuffersFirst) {
  storage_pool_release_all();
  // 5 x (16 MiB + 64) cached: the peak of live bytes is the baseline + 80 MiB + 320.
  cache_buffers(kBigFloats, 5);
  const StoragePoolStats cached = storage_pool_stats();
  ASSERT_EQ(cached.cached_bytes, 5 * padded(kBigFloats));
  ASSERT_GT(cached.cached_bytes, kStoragePoolKeptBytes);
  {
    // 70 MiB more would put live + cached 6 MiB past peak + 64 MiB: one 16 MiB buffer goes, the rest stay.
    const Tensor huge = Tensor::empty({kHugeFloats});
    const StoragePoolStats after = storage_pool_stats();
    EXPECT_EQ(after.evictions, cached.evictions + 1);
    EXPECT_EQ(after.cached_bytes, 4 * padded(kBigFloats));
    EXPECT_EQ(after.fresh_allocations, cached.fresh_allocations + 1);
  }
  // A hit evicts nothing, even above the kept bytes (4 x 16 MiB + 256 + the 70 MiB just cached).
  const StoragePoolStats before_hit = storage_pool_stats();
  const Tensor big = Tensor::empty({kBigFloats});
  const StoragePoolStats after_hit = storage_pool_stats();
  EXPECT_EQ(after_hit.evictions, before_hit.evictions);
  EXPECT_EQ(after_hit.reuses, before_hit.reuses + 1);
  storage_pool_release_all();
}

TEST(StoragePool, MissUnderThePeakEvictsNothing) {
  // The rule before evicted here (more than the kept bytes cached), and ResNet18's step paid for it in
  // page faults at every step: live + cached stay under the peak, so the buffers stay for the next phase.
  storage_pool_release_all();
  cache_buffers(kBigFloats, 5);
  const StoragePoolStats cached = storage_pool_stats();
  {
    const Tensor other = Tensor::empty({kOtherFloats});  // 8 MiB, no cached buffer fits: a fresh one
    const StoragePoolStats after = storage_pool_stats();
    EXPECT_EQ(after.evictions, cached.evictions);
    EXPECT_EQ(after.fresh_allocations, cached.fresh_allocations + 1);
    EXPECT_EQ(after.cached_bytes, cached.cached_bytes);
  }
  storage_pool_release_all();
}

TEST(StoragePool, MappedBufferServesSmallerRequestsWithinTheSlackAndReturnsWhole) {
  storage_pool_release_all();
  cache_buffers(kBigFloats, 1);
  const StoragePoolStats cached = storage_pool_stats();
  {
    // 12 MiB: the cached 16 MiB buffer is within 1.5 x of it, so it is handed out whole.
    const Tensor twelve = Tensor::empty({kTwelveMiBFloats});
    const StoragePoolStats after = storage_pool_stats();
    EXPECT_EQ(after.reuses, cached.reuses + 1);
    EXPECT_EQ(after.fresh_allocations, cached.fresh_allocations);
    EXPECT_EQ(after.cached_bytes, 0);
  }
  EXPECT_EQ(storage_pool_stats().cached_bytes, padded(kBigFloats));  // back with its own size
  {
    // 8 MiB: 16 MiB is more than 1.5 x of it, so a fresh buffer.
    const StoragePoolStats before = storage_pool_stats();
    const Tensor other = Tensor::empty({kOtherFloats});
    EXPECT_EQ(storage_pool_stats().fresh_allocations, before.fresh_allocations + 1);
    EXPECT_EQ(storage_pool_stats().cached_bytes, padded(kBigFloats));
  }
  {
    // The 16 MiB request after both: a hit on the buffer the 12 MiB tensor held.
    const StoragePoolStats before = storage_pool_stats();
    const Tensor big = Tensor::empty({kBigFloats});
    EXPECT_EQ(storage_pool_stats().reuses, before.reuses + 1);
  }
  storage_pool_release_all();
}

TEST(StoragePool, MissUnderTheKeptBytesEvictsNothing) {
  storage_pool_release_all();
  cache_buffers(kSmallFloats, 3);
  const StoragePoolStats cached = storage_pool_stats();
  ASSERT_EQ(cached.cached_bytes, 3 * padded(kSmallFloats));
  const Tensor other = Tensor::empty({kOtherFloats});
  const StoragePoolStats after = storage_pool_stats();
  EXPECT_EQ(after.evictions, cached.evictions);
  EXPECT_EQ(after.cached_bytes, cached.cached_bytes);  // the small model's buffers stay for the next step
  storage_pool_release_all();
}

TEST(AutogradMemory, OutputNoBackwardSavesIsFreedAtOnce) {
  // sum(relu(a + a)): add's backward saves nothing and relu saves its own output, so the sum a + a is
  // needed by no backward and returns to the pool when its handle goes, before backward runs. (When nodes
  // held their input tensors, it stayed alive until the graph was released.)
  Tensor a = Tensor::from_vector({kSmallFloats}, std::vector<float>(kSmallFloats, 1.5f));
  a.set_requires_grad(true);
  storage_pool_release_all();
  Tensor loss;
  {
    const Tensor doubled = add(a, a);
    loss = sum(relu(doubled));
  }
  EXPECT_EQ(storage_pool_stats().cached_bytes, padded(kSmallFloats));
  loss.backward();
  EXPECT_FLOAT_EQ(loss.item(), 3.0f * kSmallFloats);
  const std::vector<float> grad = a.grad().to_vector();
  for (int64_t i : {int64_t{0}, kSmallFloats / 2, kSmallFloats - 1}) EXPECT_EQ(grad[i], 2.0f) << "element " << i;
  storage_pool_release_all();
}

}  // namespace
}  // namespace bastion
