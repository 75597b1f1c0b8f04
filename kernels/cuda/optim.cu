// sgd_step_cuda (contract: kernels/cuda/optim.h, the math of kernels/cpu/optim.h): one fused
// grid-stride kernel, float4 over the first 4*(D/4) parameters when w, grad and (if used) velocity are
// 16-byte aligned, scalars for the rest. Each parameter goes through the CPU's operations in the CPU's
// order; nvcc contracts the multiply-adds (wd * w + grad, mu * v + g, g + mu * v, w - lr * g) into FMAs,
// so a step can differ from sgd_step_cpu by an ulp or so per multiply-add.
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/optim.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;


// One parameter: sgd_step_cpu's loop body. `v` is only touched when momentum > 0.
__device__ __forceinline__ void sgd_update(float& w, float& v, float grad, const SgdStepOptions& o) {
  float g = grad + o.weight_decay * w;
  if (o.momentum > 0.0f) {
    v = o.first_step ? g : o.momentum * v + g;
    g = o.nesterov ? g + o.momentum * v : v;
  }
  w -= o.lr * g;
}

// velocity may be null when options.momentum == 0 (never dereferenced then).
__global__ void sgd_step_kernel(float* w, float* velocity, const float* grad, int64_t D, int64_t D4,
                                SgdStepOptions options) {
  const bool momentum = options.momentum > 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float4* w4 = reinterpret_cast<float4*>(w);
  float4* v4 = reinterpret_cast<float4*>(velocity);
  const float4* g4 = reinterpret_cast<const float4*>(grad);
  for (int64_t i = first; i < D4; i += stride) {
    float4 wi = w4[i];
    float4 vi = momentum ? v4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 gi = g4[i];
    sgd_update(wi.x, vi.x, gi.x, options);
    sgd_update(wi.y, vi.y, gi.y, options);
    sgd_update(wi.z, vi.z, gi.z, options);
    sgd_update(wi.w, vi.w, gi.w, options);
    w4[i] = wi;
    if (momentum) v4[i] = vi;
  }
  for (int64_t i = 4 * D4 + first; i < D; i += stride) {
    float unused = 0.0f;
    sgd_update(w[i], momentum ? velocity[i] : unused, grad[i], options);
  }
}

}  // namespace

void sgd_step_cuda(float* w, float* velocity, const float* grad, int64_t D, const SgdStepOptions& options,
                   CudaStream stream) {
  BASTION_CHECK(D >= 0, "sgd_step_cuda: D = ", D, " must be >= 0");
  BASTION_CHECK(options.momentum <= 0.0f || velocity != nullptr, "sgd_step_cuda: momentum ", options.momentum,
                " needs a velocity buffer");
  if (D == 0) return;
  const bool aligned = cuda_aligned16(w) && cuda_aligned16(grad) && (options.momentum <= 0.0f || cuda_aligned16(velocity));
  const int64_t D4 = aligned ? D / 4 : 0;
  cuda_launch("sgd_step_kernel", sgd_step_kernel, dim3(cuda_grid_stride_blocks(D4 + (D - 4 * D4), kThreads)),
              dim3(kThreads), stream, w, velocity, grad, D, D4, options);
}

}  // namespace bastion
