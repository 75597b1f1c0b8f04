// Recorded pooling. Math and conventions: kernels/cpu/pool.h.
#include "autograd/ops.h"
#include "kernels/cpu/pool.h"

namespace bastion {

namespace {
Pool2dGeometry geometry_for(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding, const char* op) {
  check_rank(x, 4, op, "input");
  require_cpu(x, op);
  return pool2d_geometry(x.size(0) * x.size(1), x.size(2), x.size(3), kernel, stride, padding);
}
}  // namespace

Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  const Pool2dGeometry g = geometry_for(x, kernel, stride, padding, "max_pool2d");
  Tensor out = Tensor::empty({x.size(0), x.size(1), g.OH, g.OW});
  max_pool2d_forward_cpu(out.data(), x.data(), g);
  return record(out, "max_pool2d", {x}, [x, g](const Tensor& grad, const Node&) {
    Tensor dx = Tensor::empty(x.shape());
    max_pool2d_backward_cpu(dx.data(), grad.data(), x.data(), g);
    return std::vector<Tensor>{dx};
  });
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  const Pool2dGeometry g = geometry_for(x, kernel, stride, padding, "avg_pool2d");
  Tensor out = Tensor::empty({x.size(0), x.size(1), g.OH, g.OW});
  avg_pool2d_forward_cpu(out.data(), x.data(), g);
  const Shape shape = x.shape();
  return record(out, "avg_pool2d", {x}, [shape, g](const Tensor& grad, const Node&) {
    Tensor dx = Tensor::empty(shape);
    avg_pool2d_backward_cpu(dx.data(), grad.data(), g);
    return std::vector<Tensor>{dx};
  });
}

Tensor global_avg_pool2d(const Tensor& x) {
  check_rank(x, 4, "global_avg_pool2d", "input");
  require_cpu(x, "global_avg_pool2d");
  const int64_t planes = x.size(0) * x.size(1), plane_size = x.size(2) * x.size(3);
  BASTION_CHECK(plane_size > 0, "global_avg_pool2d: empty planes in input ", x.shape());
  Tensor out = Tensor::empty({x.size(0), x.size(1), 1, 1});
  global_avg_pool_forward_cpu(out.data(), x.data(), planes, plane_size);
  const Shape shape = x.shape();
  return record(out, "global_avg_pool2d", {x}, [shape, planes, plane_size](const Tensor& grad, const Node&) {
    Tensor dx = Tensor::empty(shape);
    global_avg_pool_backward_cpu(dx.data(), grad.data(), planes, plane_size);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace bastion
