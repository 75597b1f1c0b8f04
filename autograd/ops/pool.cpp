// Recorded pooling. Math and conventions: kernels/cpu/pool.h, kernels/cuda/pool.h.
#include "autograd/ops.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/pool.h"

namespace bastion {

namespace {
Pool2dGeometry geometry_for(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding, const char* op) {
  check_rank(x, 4, op, "input");
  return pool2d_geometry(x.size(0) * x.size(1), x.size(2), x.size(3), kernel, stride, padding);
}
}  // namespace

Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  const Pool2dGeometry g = geometry_for(x, kernel, stride, padding, "max_pool2d");
  Tensor out = Tensor::empty({x.size(0), x.size(1), g.OH, g.OW}, x.device());
  switch (x.device()) {
    case Device::CPU:
      max_pool2d_forward_cpu(out.data(), x.data(), g);
      break;
    case Device::CUDA:
      max_pool2d_forward_cuda(out.data(), x.data(), g, cuda_stream());
      break;
  }
  return record(out, "max_pool2d", {x}, [x, g](const Tensor& grad, const Node&) {
    Tensor dx = Tensor::empty(x.shape(), x.device());
    switch (x.device()) {
      case Device::CPU:
        max_pool2d_backward_cpu(dx.data(), grad.data(), x.data(), g);
        break;
      case Device::CUDA:
        max_pool2d_backward_cuda(dx.data(), grad.data(), x.data(), g, cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  const Pool2dGeometry g = geometry_for(x, kernel, stride, padding, "avg_pool2d");
  const Device device = x.device();
  Tensor out = Tensor::empty({x.size(0), x.size(1), g.OH, g.OW}, device);
  switch (device) {
    case Device::CPU:
      avg_pool2d_forward_cpu(out.data(), x.data(), g);
      break;
    case Device::CUDA:
      avg_pool2d_forward_cuda(out.data(), x.data(), g, cuda_stream());
      break;
  }
  const Shape shape = x.shape();
  return record(out, "avg_pool2d", {x}, [shape, g, device](const Tensor& grad, const Node&) {
    Tensor dx = Tensor::empty(shape, device);
    switch (device) {
      case Device::CPU:
        avg_pool2d_backward_cpu(dx.data(), grad.data(), g);
        break;
      case Device::CUDA:
        avg_pool2d_backward_cuda(dx.data(), grad.data(), g, cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

Tensor global_avg_pool2d(const Tensor& x) {
  check_rank(x, 4, "global_avg_pool2d", "input");
  const int64_t planes = x.size(0) * x.size(1), plane_size = x.size(2) * x.size(3);
  BASTION_CHECK(plane_size > 0, "global_avg_pool2d: empty planes in input ", x.shape());
  const Device device = x.device();
  Tensor out = Tensor::empty({x.size(0), x.size(1), 1, 1}, device);
  switch (device) {
    case Device::CPU:
      global_avg_pool_forward_cpu(out.data(), x.data(), planes, plane_size);
      break;
    case Device::CUDA:
      global_avg_pool_forward_cuda(out.data(), x.data(), planes, plane_size, cuda_stream());
      break;
  }
  const Shape shape = x.shape();
  return record(out, "global_avg_pool2d", {x}, [shape, planes, plane_size, device](const Tensor& grad, const Node&) {
    Tensor dx = Tensor::empty(shape, device);
    switch (device) {
      case Device::CPU:
        global_avg_pool_backward_cpu(dx.data(), grad.data(), planes, plane_size);
        break;
      case Device::CUDA:
        global_avg_pool_backward_cuda(dx.data(), grad.data(), planes, plane_size, cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

}  // namespace bastion
