// gradcheck: compares autograd gradients with central finite differences.
// The function under test maps the inputs to any tensor y; the scalar objective is
//   L = sum_i w_i * y_i   with fixed random weights w (so every output element matters),
// accumulated in double. For every element x_j of every input that requires grad:
//   numeric_j = (L(x_j + h) - L(x_j - h)) / (2h)      (evaluated in double from float32 forwards)
//   analytic_j = dL/dx_j from backward()
// and the check passes when |numeric - analytic| <= atol + rtol * |numeric| for all j.
// Forwards run in float32 (the engine's only dtype), so h cannot be tiny: round-off in L is about
// 1e-7 * sum|w_i y_i|, divided by 2h. The defaults (h = 1e-2 on O(1) inputs, rtol 2e-2, atol 2e-3)
// keep that below the tolerance while a wrong gradient (a missing factor, a transposed index) misses
// by 100% or more. Keep inputs away from kinks (ReLU at 0, pooling ties, |x| < h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace bastion {

struct GradcheckOptions {
  double step = 1e-2;
  double rtol = 2e-2;
  double atol = 2e-3;
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0.0;
  std::string first_failure;  // "input 1 element 7: numeric .. analytic .."
  int64_t checked = 0;
};

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace bastion
