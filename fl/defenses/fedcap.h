// FedCAP's server math (Yu et al., "FedCAP: Robust Federated Learning via Customized Aggregation and
// Personalization", §IV; IMPLEMENTATION-FACTS §4.3, servercap.py send_models). Pure functions over
// row-major (k, D) matrices; the rule around them (fedcap.cpp) keeps the pool between rounds.
//
// Notation: client j was sent s_j (its customised model; the global model w the first time) and uploaded
// delta_j = (its trained model) - s_j.
//   recover    W_j = s_j + delta_j                                  (all D columns)
//   calibrate  u_j = W_j - w                                        (w: the global model of the round)
//   detect     ||u_j[0, P)||_2 > T_norm (or NaN)  ->  client j removed for good
//   customise  for client c with request vector u_c (its own u_c if it uploaded, else an update it
//              trained from w on request):
//                sim_j = cos(u_c[0, P), u_j[0, P)) for j != c (NaN -> -1)
//                p_j   = softmax_j(alpha * sim_j) over j != c
//                c uploaded:  p_j <- (1 - phi) p_j,  p_c = phi      (phi = -1: 1 / k)
//                w_c = sum_j p_j W_j                                 (a mixture of recovered MODELS)
//   global     w' = sum_{valid j} (n_j / sum n) W_j
// Cost: recovery and calibration O(kD); customising one client O(kP) for the cosines + O(kD) for the mix.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bastion {

// The customised weights p (k values, summing to 1) of one client: `updates` (k, P) the pool's
// similarity vectors (their first P columns are used, rows `stride` apart), `request` the client's
// vector (P values), `self_row` its own row in the pool or -1 (a request). A client alone in the pool
// gets weight 1 on itself (FedCAP's code gives it phi, a scaled model: docs/decisions.md).
std::vector<double> fedcap_mixture_weights(const float* updates, int64_t k, int64_t P, int64_t stride,
                                           std::span<const float> request, int64_t self_row, double alpha, double phi);

// out (D) = sum_j weights[j] * models[j] over the rows of `models` (k, D), accumulated in double.
void fedcap_mix(const float* models, int64_t k, int64_t D, std::span<const double> weights, std::span<float> out);

// ||row[0, P)||_2 in double; NaN when the row holds NaN.
double fedcap_norm(std::span<const float> row, int64_t P);

}  // namespace bastion
