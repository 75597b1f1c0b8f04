// Recorded ops of the Gaussian bottleneck (FedCR's stochastic encoder). Kernels: kernels/cpu/gaussian.h
// (contracts there) and their CUDA twins kernels/cuda/gaussian.h. Every tensor of one call lives on one
// device (the encoding's); eps and the priors are constants (no gradient reaches them). On the device the
// KL loss stays a device scalar and its backward reads the upstream gradient from one, as cross-entropy's.
#include "autograd/ops.h"
#include "kernels/cpu/gaussian.h"
#include "kernels/cuda/gaussian.h"

namespace bastion {

namespace {
// E (N, 2d): returns d.
int64_t latent_dim_of(const Tensor& encoding, const char* op) {
  check_rank(encoding, 2, op, "encoding");
  BASTION_CHECK(encoding.size(1) % 2 == 0 && encoding.size(1) > 0, op, ": encoding ", encoding.shape(),
                " needs an even, positive width (mu and the pre-softplus sigma)");
  return encoding.size(1) / 2;
}

// ASSIGNS dE of gaussian_sample on the device of `encoding`.
Tensor gaussian_sample_grad(const Tensor& g, const Tensor& encoding, const Tensor& eps, int64_t S, int64_t N, int64_t d,
                            float alpha) {
  Tensor de = Tensor::empty(encoding.shape(), encoding.device());
  switch (encoding.device()) {
    case Device::CPU:
      gaussian_sample_backward_cpu(de.data(), g.data(), encoding.data(), eps.data(), S, N, d, alpha);
      break;
    case Device::CUDA:
      gaussian_sample_backward_cuda(de.data(), g.data(), encoding.data(), eps.data(), S, N, d, alpha, cuda_stream());
      break;
  }
  return de;
}

// ASSIGNS dE of gaussian_kl; `g` is the (1) upstream gradient on the encoding's device.
Tensor gaussian_kl_grad(const Tensor& g, const Tensor& encoding, const Tensor& pm, const Tensor& ps, int64_t N,
                        int64_t d, float alpha) {
  Tensor de = Tensor::empty(encoding.shape(), encoding.device());
  switch (encoding.device()) {
    case Device::CPU:
      gaussian_kl_backward_cpu(de.data(), encoding.data(), pm.data(), ps.data(), g.item(), N, d, alpha);
      break;
    case Device::CUDA:
      gaussian_kl_backward_cuda(de.data(), encoding.data(), pm.data(), ps.data(), g.data(), N, d, alpha, cuda_stream());
      break;
  }
  return de;
}
}  // namespace

Tensor gaussian_sample(const Tensor& encoding, const Tensor& eps, float alpha) {
  const int64_t d = latent_dim_of(encoding, "gaussian_sample"), N = encoding.size(0);
  check_rank(eps, 3, "gaussian_sample", "eps");
  BASTION_CHECK(eps.size(1) == N && eps.size(2) == d, "gaussian_sample: eps ", eps.shape(), " for encoding ",
                encoding.shape(), " (expected (S, ", N, ", ", d, "))");
  check_same_device(encoding, eps, "gaussian_sample");
  const int64_t S = eps.size(0);
  Tensor z = Tensor::empty({S * N, d}, encoding.device());
  switch (encoding.device()) {
    case Device::CPU:
      gaussian_sample_forward_cpu(z.data(), encoding.data(), eps.data(), S, N, d, alpha);
      break;
    case Device::CUDA:
      gaussian_sample_forward_cuda(z.data(), encoding.data(), eps.data(), S, N, d, alpha, cuda_stream());
      break;
  }
  const Tensor saved = encoding.detach(), noise = eps.detach();
  return record(z, "gaussian_sample", {encoding}, [saved, noise, S, N, d, alpha](const Tensor& g, const Node&) {
    return std::vector<Tensor>{gaussian_sample_grad(g, saved, noise, S, N, d, alpha)};
  });
}

Tensor gaussian_kl(const Tensor& encoding, const Tensor& prior_mu, const Tensor& prior_sigma, float alpha) {
  const int64_t d = latent_dim_of(encoding, "gaussian_kl"), N = encoding.size(0);
  BASTION_CHECK(N > 0, "gaussian_kl: empty batch");
  for (const Tensor* prior : {&prior_mu, &prior_sigma}) {
    BASTION_CHECK(prior->shape() == Shape({N, d}), "gaussian_kl: prior ", prior->shape(), " for encoding ",
                  encoding.shape(), " (expected (", N, ", ", d, "))");
    check_same_device(encoding, *prior, "gaussian_kl");
  }
  Tensor out;
  switch (encoding.device()) {
    case Device::CPU:
      out = Tensor::full({1}, static_cast<float>(gaussian_kl_forward_cpu(encoding.data(), prior_mu.data(),
                                                                         prior_sigma.data(), N, d, alpha)));
      break;
    case Device::CUDA:
      out = Tensor::empty({1}, Device::CUDA);
      gaussian_kl_forward_cuda(out.data(), encoding.data(), prior_mu.data(), prior_sigma.data(), N, d, alpha,
                               cuda_stream());
      break;
  }
  const Tensor saved = encoding.detach(), pm = prior_mu.detach(), ps = prior_sigma.detach();
  return record(out, "gaussian_kl", {encoding}, [saved, pm, ps, N, d, alpha](const Tensor& g, const Node&) {
    return std::vector<Tensor>{gaussian_kl_grad(g, saved, pm, ps, N, d, alpha)};
  });
}

Tensor sample_mean(const Tensor& x, int64_t samples) {
  check_rank(x, 2, "sample_mean", "input");
  BASTION_CHECK(samples > 0 && x.size(0) % samples == 0, "sample_mean: ", x.size(0), " rows are not ", samples,
                " stacked copies of a batch");
  const int64_t N = x.size(0) / samples, C = x.size(1);
  const Device device = x.device();
  Tensor out = Tensor::empty({N, C}, device);
  switch (device) {
    case Device::CPU:
      sample_mean_forward_cpu(out.data(), x.data(), samples, N, C);
      break;
    case Device::CUDA:
      sample_mean_forward_cuda(out.data(), x.data(), samples, N, C, cuda_stream());
      break;
  }
  return record(out, "sample_mean", {x}, [samples, N, C, device](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty({samples * N, C}, device);
    switch (device) {
      case Device::CPU:
        sample_mean_backward_cpu(dx.data(), g.data(), samples, N, C);
        break;
      case Device::CUDA:
        sample_mean_backward_cuda(dx.data(), g.data(), samples, N, C, cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

}  // namespace bastion
