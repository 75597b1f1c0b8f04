// The softmax family on the GPU: the contract of kernels/cpu/softmax.h on device pointers plus a
// stream, with one difference: the losses do not return a host double (that would synchronise every
// training step). cross_entropy_forward_cuda and kl_div_forward_cuda write the loss to the device
// scalar `loss`, and the backward kernels read the upstream gradient from the device scalar `grad`.
// Labels `y` are int32 on the device. One warp per row; the batch mean of the losses is summed in a
// fixed order by one block (deterministic).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

void log_softmax_forward_cuda(float* out, const float* x, int64_t N, int64_t C, CudaStream stream);
void log_softmax_backward_cuda(float* dx, const float* grad_out, const float* out, int64_t N, int64_t C,
                               CudaStream stream);
void cross_entropy_forward_cuda(float* loss, float* probs, const float* x, const int32_t* y, int64_t N, int64_t C,
                                CudaStream stream);
void cross_entropy_backward_cuda(float* dx, const float* probs, const int32_t* y, const float* grad, int64_t N,
                                 int64_t C, CudaStream stream);
void kl_div_forward_cuda(float* loss, float* log_ps, float* log_pt, const float* student, const float* teacher,
                         float T, int64_t N, int64_t C, CudaStream stream);
void kl_div_backward_cuda(float* d_student, float* d_teacher, const float* log_ps, const float* log_pt, float T,
                          const float* grad, int64_t N, int64_t C, CudaStream stream);

}  // namespace bastion
