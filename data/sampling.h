// Random sampling helpers for the partitions (data/partition.cpp), built only on bastion::Generator so
// every draw is the same on every platform (std::gamma_distribution's algorithm is
// implementation-defined).
// - Gamma(shape, 1) by Marsaglia & Tsang, "A simple method for generating gamma variables" (ACM TOMS
//   2000). For shape < 1 it uses their boost G(a) = G(a + 1) · U^(1/a); the result is returned as a
//   logarithm because U^(1/a) underflows double for small a (a = 0.01 and U < 1e-3 already gives 0),
//   and a Dirichlet with beta = 0.01 would otherwise normalise 0/0.
// - Symmetric Dirichlet Dir(beta·1_n) = Gamma(beta, 1) draws normalised in log space (log-sum-exp).
// - Fisher-Yates shuffle of an index list.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/random.h"

namespace bastion {

// log of one Gamma(shape, 1) draw; shape > 0 (throws otherwise).
double sample_gamma_log(Generator& rng, double shape);

// One Gamma(shape, 1) draw (exp of the above; may be 0 for tiny shapes).
double sample_gamma(Generator& rng, double shape);

// p ~ Dir(beta·1_n): n >= 1 non-negative weights summing to 1 (up to rounding), beta > 0.
std::vector<double> sample_dirichlet(Generator& rng, double beta, int64_t n);

// Normalises log-weights into probabilities, treating entries with keep[j] == false as zero mass.
// Returns all zeros when nothing is kept.
std::vector<double> normalize_log_weights(const std::vector<double>& log_weights, const std::vector<bool>& keep);

// In-place Fisher-Yates shuffle (draws rng.below(i + 1) for i = n-1 down to 1).
void shuffle_indices(std::vector<int64_t>& values, Generator& rng);

}  // namespace bastion
