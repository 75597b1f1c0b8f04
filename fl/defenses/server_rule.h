// Server rules: map the round's accepted uploads to the update the server adds to the global model
// (STYLE §8: the math is a pure function over an (n, D) row-major matrix; the round loop that samples,
// trains, evaluates and logs is elsewhere). Uploads arrive in sampling order (client ids ascending), so
// the result never depends on which client finished first.
//
// Columns [0, num_parameters) are parameters; [num_parameters, D) are BatchNorm running statistics
// (buffers): FedAvg-style rules average them like parameters, distance and similarity computations
// leave them out (SPEC notation).
//
// Invalid uploads (wrong length, NaN, Inf) never reach a rule: the run loop rejects and counts them
// first (server.on_invalid), so a rule may assume finite input.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fl/core/params.h"

namespace bastion {

struct AggregationInput {
  const float* updates = nullptr;         // (n, D) row-major
  int64_t n = 0, D = 0;
  int64_t num_parameters = 0;             // <= D
  std::span<const int64_t> num_samples;   // n: local training set sizes (sample weighting)
  std::span<const int64_t> clients;       // n: client ids
  int64_t round = 0;
  uint64_t seed = 0;                      // (seed, round)-derived, for randomised rules
};

struct AggregationOutput {
  std::vector<float> update;              // D: added to the global state
  std::vector<uint8_t> flagged;           // n: 1 = the rule judged this upload malicious (detection
                                          // metrics); empty = the rule flags nobody
};

class ServerRule {
 public:
  virtual ~ServerRule() = default;
  virtual AggregationOutput aggregate(const AggregationInput& input) = 0;
  // Rules with memory across rounds (FoolsGold history, ...) save it for checkpoints.
  virtual std::vector<float> save_state() const { return {}; }
  virtual void load_state(std::span<const float> state) {}
};

// fl/defenses/fedavg.cpp
const std::vector<ParamSpec>& fedavg_params();
std::unique_ptr<ServerRule> make_fedavg(const Params& params);

}  // namespace bastion
