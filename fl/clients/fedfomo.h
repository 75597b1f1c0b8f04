// FedFomo's math (Zhang et al. ICLR'21; PFL-FACTS §9), as pure functions the client rule (fedfomo.cpp)
// and the server part (fedfomo_server.cpp) share, and the tests call on constructed inputs.
//   weight      w_n = (L_val(theta_ref) - L_val(theta_n)) / (||theta_n - theta_ref|| + eps)
//   mixing      w_n+ = max(w_n, 0) / sum_m max(w_m, 0); none when every w_n <= 0 (the caller keeps a model)
//   affinity    P[i, n] += w_n (raw) or w_n / |sum_m w_m| (NVlabs' normalised deltas)
//   choice      e-greedy over a pool of clients: per slot, with probability epsilon the next client of a
//               random order, else the next of the pool sorted by P[i, .] (ties in random order)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fl/clients/method_server.h"
#include "tensor/random.h"

namespace bastion {

// ||a - b|| over the given values in double: L2 (PFLlib, the paper's norm) or L1 (NVlabs' default).
double fomo_distance(std::span<const float> a, std::span<const float> b, bool l1);

// w_n. A non-finite loss (a broken candidate) gives a non-finite weight; fomo_mixing_weights drops it.
double fomo_weight(double reference_loss, double candidate_loss, double distance, double eps);

// The normalised non-negative weights, same length as `raw`; empty when no weight is > 0 (or finite).
std::vector<double> fomo_mixing_weights(const std::vector<double>& raw);

// P-row increments for the weights `raw` (same order): raw, or raw / max(|sum raw|, 1e-9) (NVlabs).
// Non-finite weights contribute 0.
std::vector<double> fomo_affinity_increments(const std::vector<double>& raw, bool normalised);

// Up to `count` distinct clients of `pool` (which must not hold duplicates), chosen e-greedily by
// `affinity` (indexed by client id). Deterministic for a given rng state.
std::vector<int64_t> fomo_choose(std::span<const float> affinity, const std::vector<int64_t>& pool, int64_t count,
                                 double epsilon, Generator& rng);

// epsilon_t = max(0, epsilon - decay (round - 1)), rounds from 1. NVlabs counts rounds from 0 and its
// round 0 only trains locally, so our round r is its round r - 1: the first downloads (round 2) explore
// with 0.3 - 0.05 = 0.25 in both.
double fomo_epsilon(double epsilon, double decay, int64_t round);

// The message keys: the offered clients' ids (floats) and their models (one row of D per id).
inline constexpr const char* kFomoIds = "fomo_ids";
inline constexpr const char* kFomoModels = "fomo_models";

struct FomoServerOptions {
  int64_t models = 5;  // M: models a client weighs, its own included (M - 1 are sent)
  double epsilon = 0.3, epsilon_decay = 0.05;
  bool pool_all = false;             // false: last round's uploaders (NVlabs, FedCAP); true: every stored model
  bool normalised_affinity = false;  // P += w / |sum w| (NVlabs) instead of P += w
  bool store_models = true;          // false (aggregate = false): nothing is sent, no model is kept
};

// The server part (fedfomo_server.cpp): P, the stored models, the e-greedy offer; zeroes the global update.
std::unique_ptr<MethodServer> make_fomo_server(int64_t clients, const FomoServerOptions& options);

}  // namespace bastion
