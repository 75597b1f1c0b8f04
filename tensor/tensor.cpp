#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

const char* device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

namespace {
std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->offset = offset;
  impl->shape = shape;
  return impl;
}

void copy_floats(float* dst, Device dst_device, const float* src, Device src_device, int64_t numel) {
  if (numel == 0) return;
  const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
  if (dst_device == Device::CPU && src_device == Device::CPU) {
    std::memcpy(dst, src, bytes);
  } else if (dst_device == Device::CUDA && src_device == Device::CPU) {
    cuda_copy_to_device(dst, src, bytes, cuda_stream());
  } else if (dst_device == Device::CPU && src_device == Device::CUDA) {
    cuda_copy_to_host(dst, src, bytes, cuda_stream());
  } else {
    cuda_copy_on_device(dst, src, bytes, cuda_stream());
  }
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, Device device) {
  return Tensor(make_impl(std::make_shared<Storage>(shape.numel(), device), 0, shape));
}

Tensor Tensor::zeros(const Shape& shape, Device device) {
  Tensor t = empty(shape, device);
  t.fill(0.0f);
  return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, std::span<const float> values) {
  BASTION_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: shape ", shape, " needs ",
                shape.numel(), " values, got ", values.size());
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, float mean, float stddev) {
  Tensor t = empty(shape);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = mean + stddev * static_cast<float>(gen.normal());
  return t;
}

Tensor Tensor::uniform(const Shape& shape, Generator& gen, float low, float high) {
  Tensor t = empty(shape);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = low + (high - low) * static_cast<float>(gen.uniform());
  return t;
}

Tensor Tensor::view_of(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape) {
  BASTION_CHECK(offset >= 0 && offset + shape.numel() <= storage->numel, "view_of: shape ", shape, " at offset ",
                offset, " does not fit in storage of ", storage->numel, " elements");
  return Tensor(make_impl(std::move(storage), offset, shape));
}

int64_t Tensor::size(int dim) const {
  const int r = rank();
  const int d = dim < 0 ? dim + r : dim;
  BASTION_CHECK(d >= 0 && d < r, "dimension ", dim, " out of range for shape ", shape());
  return shape()[d];
}

float& Tensor::at(std::initializer_list<int64_t> index) const {
  BASTION_CHECK(device() == Device::CPU, "at(): element access needs a CPU tensor");
  BASTION_CHECK(static_cast<int>(index.size()) == rank(), "at(): ", index.size(), " indices for shape ", shape());
  int64_t flat = 0;
  int d = 0;
  for (int64_t i : index) {
    BASTION_CHECK(i >= 0 && i < shape()[d], "at(): index ", i, " out of range for dimension ", d, " of ", shape());
    flat = flat * shape()[d] + i;
    ++d;
  }
  return data()[flat];
}

float Tensor::item() const {
  BASTION_CHECK(numel() == 1, "item(): tensor of shape ", shape(), " has ", numel(), " elements, not 1");
  if (device() == Device::CPU) return data()[0];
  return to(Device::CPU).data()[0];
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(numel());
  copy_floats(out.data(), Device::CPU, data(), device(), numel());
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), device());
  copy_floats(out.data(), device(), data(), device(), numel());
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape(), target);
  copy_floats(out.data(), target, data(), device(), numel());
  return out;
}

void Tensor::copy_from(const Tensor& src) const {
  BASTION_CHECK(src.numel() == numel(), "copy_from: ", src.shape(), " into ", shape());
  copy_floats(data(), device(), src.data(), src.device(), numel());
}

void Tensor::fill(float value) const {
  if (device() == Device::CPU) {
    float* out = data();
    parallel_elements(numel(), [out, value](int64_t begin, int64_t end) { std::fill(out + begin, out + end, value); });
  } else {
    cuda_fill(data(), value, numel(), cuda_stream());
  }
}

Tensor Tensor::view(const Shape& new_shape) const {
  BASTION_CHECK(new_shape.numel() == numel(), "view: cannot view ", shape(), " as ", new_shape);
  return Tensor(make_impl(storage(), storage_offset(), new_shape));
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  BASTION_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= size(0), "slice_rows: [", begin, ", ", end,
                ") out of range for shape ", shape());
  Shape s = shape();
  const int64_t row = s[0] == 0 ? 0 : numel() / s[0];
  s[0] = end - begin;
  return Tensor(make_impl(storage(), storage_offset() + begin * row, s));
}

Tensor Tensor::detach() const { return Tensor(make_impl(storage(), storage_offset(), shape())); }

Tensor& Tensor::set_requires_grad(bool value) {
  BASTION_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can change requires_grad");
  impl().requires_grad = value;
  return *this;
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) check_same_shape(*this, grad, "set_grad");
  impl().grad = grad.impl_shared();
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  BASTION_CHECK(a.device() == b.device(), op, ": tensors on different devices (", device_name(a.device()), " and ",
                device_name(b.device()), ")");
}

void check_rank(const Tensor& t, int rank, const char* op, const char* what) {
  BASTION_CHECK(t.defined(), op, ": ", what, " is undefined");
  BASTION_CHECK(t.rank() == rank, op, ": ", what, " must have rank ", rank, ", got shape ", t.shape());
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  BASTION_CHECK(a.shape() == b.shape(), op, ": shapes differ: ", a.shape(), " vs ", b.shape());
}

LabelTensor LabelTensor::from_vector(std::vector<int32_t> values) {
  LabelTensor t;
  t.values_ = std::make_shared<std::vector<int32_t>>(std::move(values));
  return t;
}

void LabelTensor::check_range(int64_t num_classes, const char* op) const {
  for (int64_t i = 0; i < size(); ++i) {
    const int32_t y = (*values_)[i];
    BASTION_CHECK(y >= 0 && y < num_classes, op, ": label ", y, " at index ", i, " outside [0, ", num_classes, ")");
  }
}

}  // namespace bastion
