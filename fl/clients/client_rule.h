// Client rules: what a sampled client does with the model it receives (DESIGN.md "One method = two
// small parts"). The run loop hands a rule a ClientTask whose model already holds the round's starting
// state; the rule trains it in place. The upload is then `model state - start state` over the whole
// flat state (parameters and BatchNorm buffers), computed by the run loop.
//
// Threads: the run loop calls train() for different clients concurrently, each on its own Model
// replica and ClientState, on a thread whose kernels run single-threaded. A rule keeps no mutable
// members; anything that must survive to the next round goes into ClientState (checkpointed).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "fl/core/params.h"
#include "nn/model.h"

namespace bastion {

class Attack;

// Persistent per-client state (personal heads, momentum, FSA layer choice, ...): named float vectors
// and scalars. Empty until a rule writes to it. Saved whole in checkpoints.
struct ClientState {
  std::map<std::string, std::vector<float>> vectors;
  std::map<std::string, double> scalars;
};

struct ClientTask {
  Model& model;                           // holds the start state on entry; trained in place
  const Dataset& data;                    // the shared training set
  const std::vector<int64_t>& indices;    // this client's training samples
  const TransformSpec& transform;         // per-sample transform (augmentation) for the loader
  ClientState& state;
  int64_t client = 0, round = 0;          // round counts from 1
  uint64_t seed = 0;                      // (seed, round, client)-derived: loader shuffling, dropout, ...
  uint64_t client_seed = 0;               // (seed, client)-derived, the same every round (fixed attack choices)
  // Set for a malicious client whose attack acts on data or training (else nullptr). The rule calls
  // attack->poison_loader on its loader, and for Training attacks attack->training_step instead of its
  // own step.
  const Attack* attack = nullptr;
  int64_t attacker_index = 0;             // position in the malicious set (DBA part), valid with attack
};

struct ClientResult {
  double train_loss = 0.0;                // mean over the steps taken
  int64_t steps = 0;
  int64_t samples = 0;                    // samples processed (epochs × local size, or steps × batch)
};

class ClientRule {
 public:
  virtual ~ClientRule() = default;
  virtual ClientResult train(ClientTask& task) const = 0;
};

// fl/clients/sgd.cpp
const std::vector<ParamSpec>& sgd_client_params();
std::unique_ptr<ClientRule> make_sgd_client(const Params& params);

}  // namespace bastion
