// Recorded ops of the Gaussian bottleneck (FedCR's stochastic encoder). Kernels: kernels/cpu/gaussian.cpp
// (contracts there). CPU only: federated runs train on the CPU, and no CUDA twin exists yet
// (docs/decisions.md "cnn-fedcr"); a CUDA tensor gets require_cpu's error.
#include "autograd/ops.h"
#include "kernels/cpu/gaussian.h"

namespace bastion {

namespace {
// E (N, 2d): returns d.
int64_t latent_dim_of(const Tensor& encoding, const char* op) {
  check_rank(encoding, 2, op, "encoding");
  BASTION_CHECK(encoding.size(1) % 2 == 0 && encoding.size(1) > 0, op, ": encoding ", encoding.shape(),
                " needs an even, positive width (mu and the pre-softplus sigma)");
  require_cpu(encoding, op);
  return encoding.size(1) / 2;
}
}  // namespace

Tensor gaussian_sample(const Tensor& encoding, const Tensor& eps, float alpha) {
  const int64_t d = latent_dim_of(encoding, "gaussian_sample"), N = encoding.size(0);
  check_rank(eps, 3, "gaussian_sample", "eps");
  BASTION_CHECK(eps.size(1) == N && eps.size(2) == d, "gaussian_sample: eps ", eps.shape(), " for encoding ",
                encoding.shape(), " (expected (S, ", N, ", ", d, "))");
  require_cpu(eps, "gaussian_sample");
  const int64_t S = eps.size(0);
  Tensor z = Tensor::empty({S * N, d});
  gaussian_sample_forward_cpu(z.data(), encoding.data(), eps.data(), S, N, d, alpha);
  const Tensor saved = encoding.detach(), noise = eps.detach();
  return record(z, "gaussian_sample", {encoding}, [saved, noise, S, N, d, alpha](const Tensor& g, const Node&) {
    Tensor de = Tensor::empty(saved.shape());
    gaussian_sample_backward_cpu(de.data(), g.data(), saved.data(), noise.data(), S, N, d, alpha);
    return std::vector<Tensor>{de};
  });
}

Tensor gaussian_kl(const Tensor& encoding, const Tensor& prior_mu, const Tensor& prior_sigma, float alpha) {
  const int64_t d = latent_dim_of(encoding, "gaussian_kl"), N = encoding.size(0);
  BASTION_CHECK(N > 0, "gaussian_kl: empty batch");
  for (const Tensor* prior : {&prior_mu, &prior_sigma}) {
    BASTION_CHECK(prior->shape() == Shape({N, d}), "gaussian_kl: prior ", prior->shape(), " for encoding ",
                  encoding.shape(), " (expected (", N, ", ", d, "))");
    require_cpu(*prior, "gaussian_kl");
  }
  const double kl = gaussian_kl_forward_cpu(encoding.data(), prior_mu.data(), prior_sigma.data(), N, d, alpha);
  Tensor out = Tensor::full({1}, static_cast<float>(kl));
  const Tensor saved = encoding.detach(), pm = prior_mu.detach(), ps = prior_sigma.detach();
  return record(out, "gaussian_kl", {encoding}, [saved, pm, ps, N, d, alpha](const Tensor& g, const Node&) {
    Tensor de = Tensor::empty(saved.shape());
    gaussian_kl_backward_cpu(de.data(), saved.data(), pm.data(), ps.data(), g.item(), N, d, alpha);
    return std::vector<Tensor>{de};
  });
}

Tensor sample_mean(const Tensor& x, int64_t samples) {
  check_rank(x, 2, "sample_mean", "input");
  require_cpu(x, "sample_mean");
  BASTION_CHECK(samples > 0 && x.size(0) % samples == 0, "sample_mean: ", x.size(0), " rows are not ", samples,
                " stacked copies of a batch");
  const int64_t N = x.size(0) / samples, C = x.size(1);
  Tensor out = Tensor::empty({N, C});
  sample_mean_forward_cpu(out.data(), x.data(), samples, N, C);
  return record(out, "sample_mean", {x}, [samples, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty({samples * N, C});
    sample_mean_backward_cpu(dx.data(), g.data(), samples, N, C);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace bastion
