// sgd_step_cpu, sgd_step_from_cpu (contract: kernels/cpu/optim.h).
#include "kernels/cpu/optim.h"

#include "kernels/cpu/parallel.h"

namespace bastion {

namespace {

// One loop per case, with the case's flags as template constants and restrict pointers, so that every
// loop vectorises: the earlier single loop with the flags tested per element ran scalar (12 % of a
// cnn-fedfsa step, whose 1.26 M parameters make the step memory-bound). Same arithmetic per element.
// kFromStart: the weights are read from `start` (SAM's saved weights) and only written to w; otherwise
// start is unused and w is read and written in place. Both come from this one body, so the arithmetic
// (and what the compiler contracts into multiply-adds) is the same.
template <bool kFirstStep, bool kNesterov, bool kFromStart>
void sgd_momentum(float* __restrict w, const float* __restrict start, float* __restrict velocity,
                  const float* __restrict grad, int64_t D, float lr, float mu, float wd) {
  for (int64_t i = 0; i < D; ++i) {
    const float w0 = kFromStart ? start[i] : w[i];
    float g = grad[i] + wd * w0;
    const float v = kFirstStep ? g : mu * velocity[i] + g;
    velocity[i] = v;
    g = kNesterov ? g + mu * v : v;
    w[i] = w0 - lr * g;
  }
}

template <bool kFromStart>
void sgd_plain(float* __restrict w, const float* __restrict start, const float* __restrict grad, int64_t D, float lr,
               float wd) {
  for (int64_t i = 0; i < D; ++i) {
    const float w0 = kFromStart ? start[i] : w[i];
    w[i] = w0 - lr * (grad[i] + wd * w0);
  }
}

template <bool kFromStart>
void sgd_step(float* w, const float* start, float* velocity, const float* grad, int64_t D,
              const SgdStepOptions& options) {
  const float lr = options.lr, mu = options.momentum, wd = options.weight_decay;
  if (mu <= 0.0f) return sgd_plain<kFromStart>(w, start, grad, D, lr, wd);
  if (options.first_step)
    options.nesterov ? sgd_momentum<true, true, kFromStart>(w, start, velocity, grad, D, lr, mu, wd)
                     : sgd_momentum<true, false, kFromStart>(w, start, velocity, grad, D, lr, mu, wd);
  else
    options.nesterov ? sgd_momentum<false, true, kFromStart>(w, start, velocity, grad, D, lr, mu, wd)
                     : sgd_momentum<false, false, kFromStart>(w, start, velocity, grad, D, lr, mu, wd);
}

}  // namespace

// Each thread's range runs the same template loop (parallel_elements): the same bits at any thread count.
void sgd_step_cpu(float* w, float* velocity, const float* grad, int64_t D, const SgdStepOptions& options) {
  parallel_elements(D, [&](int64_t begin, int64_t end) {
    sgd_step<false>(w + begin, nullptr, velocity ? velocity + begin : nullptr, grad + begin, end - begin, options);
  });
}

void sgd_step_from_cpu(float* w, const float* start, float* velocity, const float* grad, int64_t D,
                       const SgdStepOptions& options) {
  parallel_elements(D, [&](int64_t begin, int64_t end) {
    sgd_step<true>(w + begin, start + begin, velocity ? velocity + begin : nullptr, grad + begin, end - begin, options);
  });
}

}  // namespace bastion
