// Tensor: a float32, contiguous, row-major (NCHW) view into refcounted storage on one device.
// - Storage buffers come from a size-keyed pool (tensor/storage.cpp), so the training loop does not
//   call malloc for activations after its first step.
// - A tensor is a handle: copies share the same TensorImpl (shape, storage, autograd state).
//   Use clone() for a deep copy.
// - Views (reshape, slice of the leading dimension, views into a model's flat parameter buffer) share
//   storage and differ by offset and shape.
// - Autograd state (requires_grad, grad, grad_fn) lives on the TensorImpl; see autograd/engine.h.
// Labels are int32 and live in LabelTensor below (no autograd, CPU only).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/error.h"
#include "tensor/random.h"
#include "tensor/shape.h"

namespace bastion {

enum class Device { CPU, CUDA };
const char* device_name(Device device);

// A buffer of `numel` floats on one device. Returned to the pool when the last owner lets go.
struct Storage {
  float* data = nullptr;
  int64_t numel = 0;
  Device device = Device::CPU;
  Storage(int64_t numel, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct Node;  // autograd/engine.h
class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient of a leaf (same shape)
  std::shared_ptr<Node> grad_fn;     // the node that produced this tensor (non-leaf only)
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation ----
  static Tensor empty(const Shape& shape, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, Device device = Device::CPU);
  static Tensor full(const Shape& shape, float value);
  static Tensor from_vector(const Shape& shape, std::span<const float> values);
  static Tensor randn(const Shape& shape, Generator& gen, float mean = 0.0f, float stddev = 1.0f);
  static Tensor uniform(const Shape& shape, Generator& gen, float low, float high);
  // A view of `shape` into `storage` starting at element `offset`.
  static Tensor view_of(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return impl().shape.rank(); }
  int64_t size(int dim) const;  // negative dim counts from the end
  int64_t numel() const { return impl().shape.numel(); }
  Device device() const { return impl().storage->device; }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  int64_t storage_offset() const { return impl().offset; }
  TensorImpl* impl_ptr() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_shared() const { return impl_; }
  bool same_storage(const Tensor& other) const { return storage() == other.storage(); }

  // ---- raw access (CPU tensors for element access; kernels use data()) ----
  float* data() const { return impl().storage->data + impl().offset; }
  std::span<float> span() const { return {data(), static_cast<size_t>(numel())}; }
  float& at(std::initializer_list<int64_t> index) const;  // CPU only, bounds-checked
  float item() const;                                     // the value of a one-element tensor
  std::vector<float> to_vector() const;                   // copy to host

  // ---- copies and views (no autograd; autograd/ops has the recorded versions) ----
  Tensor clone() const;                     // deep copy, same device, no autograd history
  Tensor to(Device device) const;           // copy to `device` (shares when already there)
  void copy_from(const Tensor& src) const;  // same numel; across devices too
  void fill(float value) const;
  Tensor view(const Shape& shape) const;                // same storage, same numel
  Tensor slice_rows(int64_t begin, int64_t end) const;  // [begin, end) of dimension 0, a view
  Tensor detach() const;                                // shares storage, drops autograd history

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool value);
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  void backward() const;  // this must be a one-element tensor (a loss)

 private:
  TensorImpl& impl() const {
    BASTION_ASSERT(impl_ != nullptr);
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Checks used by every op: same device, expected rank, same shapes. They throw with the shapes.
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_rank(const Tensor& t, int rank, const char* op, const char* what);
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);

// int32 labels (class indices), CPU only, shape (N).
class LabelTensor {
 public:
  LabelTensor() = default;
  explicit LabelTensor(int64_t n) : values_(std::make_shared<std::vector<int32_t>>(n, 0)) {}
  static LabelTensor from_vector(std::vector<int32_t> values);
  int64_t size() const { return values_ ? static_cast<int64_t>(values_->size()) : 0; }
  int32_t* data() const { return values_->data(); }
  int32_t& operator[](int64_t i) const { return (*values_)[i]; }
  bool defined() const { return values_ != nullptr; }
  // Throws unless every label lies in [0, num_classes).
  void check_range(int64_t num_classes, const char* op) const;

 private:
  std::shared_ptr<std::vector<int32_t>> values_;
};

// Pool statistics, for tests and benchmarks that assert "no allocation in the training loop".
struct StoragePoolStats {
  int64_t fresh_allocations = 0;  // buffers obtained from the system
  int64_t reuses = 0;             // buffers handed out again from the pool
  int64_t cached_bytes = 0;       // bytes held by the pool right now
  int64_t evictions = 0;          // cached buffers freed to make room on a miss (tensor/storage.cpp)
};
StoragePoolStats storage_pool_stats();
void storage_pool_release_all();  // give cached CPU buffers back to the system
// A miss evicts cached buffers only while the pool holds more than this (tensor/storage.cpp says why).
inline constexpr int64_t kStoragePoolKeptBytes = int64_t{64} << 20;

}  // namespace bastion
