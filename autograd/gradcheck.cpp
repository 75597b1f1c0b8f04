#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"

namespace bastion {

namespace {
double weighted_sum(const Tensor& y, const std::vector<float>& weights) {
  const std::vector<float> values = y.to_vector();
  double total = 0.0;
  for (size_t i = 0; i < values.size(); ++i) total += static_cast<double>(weights[i]) * values[i];
  return total;
}
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) t.set_grad(Tensor());

  // Analytic gradients: backward of sum(w * y).
  Tensor y = fn(inputs);
  Generator gen(options.seed);
  std::vector<float> weights(y.numel());
  for (float& w : weights) w = static_cast<float>(gen.uniform() * 2.0 - 1.0);
  run_backward(y, Tensor::from_vector(y.shape(), weights));

  GradcheckResult result;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    const Tensor grad = x.grad();
    BASTION_CHECK(grad.defined(), "gradcheck: input ", k, " requires grad but received none");
    for (int64_t j = 0; j < x.numel(); ++j) {
      const float original = x.data()[j];
      x.data()[j] = static_cast<float>(original + options.step);
      const double plus = weighted_sum(fn(inputs), weights);
      x.data()[j] = static_cast<float>(original - options.step);
      const double minus = weighted_sum(fn(inputs), weights);
      x.data()[j] = original;
      const double numeric = (plus - minus) / (2.0 * options.step);
      const double analytic = grad.data()[j];
      const double error = std::abs(numeric - analytic);
      result.max_abs_error = std::max(result.max_abs_error, error);
      result.checked++;
      if (error > options.atol + options.rtol * std::abs(numeric) && result.ok) {
        result.ok = false;
        std::ostringstream message;
        message << "input " << k << " element " << j << ": numeric " << numeric << " analytic " << analytic;
        result.first_failure = message.str();
      }
    }
  }
  return result;
}

}  // namespace bastion
