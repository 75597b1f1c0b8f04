// FedCR's Gaussian bookkeeping (Zhang et al. ICML'23; haozzh/FedCR models/distributed_training_utils.py;
// PFL-FACTS §11), as pure functions the client rule (fedcr.cpp) and the tests share.
//   Two experts (client, per sample of the last local epoch, running):
//     var = var_q var_p / (var_q + var_p + 1e-32),  mu = (mu_p var_q + mu_q var_p) / (var_q + var_p + 1e-32)
//     (product_of_experts_two; the first sample of a class is taken as it is).
//   Server, per class c over the round's clients that have c, with a standard-normal prior term:
//     prec = 1 + sum_i 1 / sigma_i^2,  sigma = sqrt(1 / prec),  mu = sum_i (mu_i / sigma_i^2) / prec
//     (product_of_experts), then global <- (1 - beta2) global + beta2 PoE for mu and sigma alike;
//     classes no client has keep their global Gaussian.
// Sigmas below 1e-8 are raised to it before dividing (the code's own clamp in its KL), so a collapsed
// sigma cannot turn the global prior into NaN. All arithmetic in double.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace bastion {

// Per class c: a presence flag and a diagonal Gaussian (mu, sigma), each of `dim` values at c * dim.
struct ClassGaussians {
  int64_t classes = 0, dim = 0;
  std::vector<uint8_t> present;
  std::vector<double> mu, sigma;
  ClassGaussians() = default;
  ClassGaussians(int64_t classes, int64_t dim);  // none present; mu 0, sigma 1 (the server's initial prior)
};

// The two-expert product of one coordinate, in place into (mu_q, sigma_q).
void fuse_two_experts(double& mu_q, double& sigma_q, double mu_p, double sigma_p);

// The client's running fusion of its samples' encoder Gaussians, per class.
class ClassFusion {
 public:
  ClassFusion(int64_t classes, int64_t dim) : g_(classes, dim) {}
  // One sample of class c with encoder Gaussian (mu, sigma), `dim` values each.
  void add(int32_t c, const float* mu, const float* sigma);
  // Every row of fc3's output E (N, 2 dim) with labels y (sigma = softplus(E[:, dim:] - alpha)).
  void add_batch(const Tensor& encoding, const LabelTensor& y, float alpha);
  const ClassGaussians& gaussians() const { return g_; }

 private:
  ClassGaussians g_;
};

// The extra upload: [classes, dim, present (classes), mu (classes*dim), sigma (classes*dim)].
std::vector<float> pack_class_gaussians(const ClassGaussians& g);
// Throws bastion::Error on a malformed vector.
ClassGaussians unpack_class_gaussians(std::span<const float> packed);

// The server's product over `experts` (all of global's shape) with the N(0, 1) prior, mixed into `global`
// with weight beta2 for the classes at least one expert has.
void mix_product_of_experts(ClassGaussians& global, const std::vector<ClassGaussians>& experts, double beta2);

}  // namespace bastion
