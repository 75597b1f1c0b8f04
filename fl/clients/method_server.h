// MethodServer: the server-side part of a method whose clients need more than the global model
// (DESIGN.md "One method = two small parts"). The run loop, per round:
//   0. begin_round(start)             once, before the messages: the round number (from 1), a
//                                     (seed, round)-derived seed for the server's random choices (FedFomo's
//                                     exploration), the global parameters and the sampled clients (FedALA's
//                                     Θ^0 and first visits); default: nothing;
//   1. message(client, global, out)   serially, for each sampled client, before training: what the client
//                                     receives besides the model (ClientTask::message);
//   2. the clients train; the attacks act on the uploads; the server rule aggregates the accepted uploads;
//   3. after_aggregation(round, update) adds the method's own term to the server rule's update (FedSpeed's
//                                     mean of all h_i) and updates the method's state from the accepted
//                                     uploads and their extra uploads (ClientResult::extra_upload).
// It sees the parameter columns only (the first num_parameters of each upload); the method's rules share
// every column. State that must survive a round is saved in checkpoints (save_state / load_state).
// Users: MoFedSAM and FedFSA (server momentum), FedSpeed (h_i), FedSMOO (h_i, mu_i, s); sam_family.cpp.
// FedALA (fedala.cpp): Θ^0 for late first visits.
// FedFomo (fedfomo.cpp): the clients' last uploaded models and the affinity matrix P.
// FedCR (the global class-conditional Gaussians; fedcr.cpp).
// SPMC (spmc.cpp): each client's aggregation weight of the previous round, for its coalition model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fl/base/rule_state.h"
#include "fl/clients/client_rule.h"

namespace bastion {

struct MethodRound {
  const float* uploads = nullptr;  // (n, width) accepted uploads, after attacks, in `clients` order
  int64_t n = 0, width = 0, num_parameters = 0;
  const std::vector<int64_t>* clients = nullptr;  // the accepted clients
  // The accepted clients' extra uploads (row i: clients[i]); an entry is empty when the client sent none.
  const std::vector<std::span<const float>>* extra = nullptr;
  // The global state's shared columns (width values) that the uploads are relative to: upload + global
  // is what a client uploaded as its model (FedFomo stores it; with a server rule that sends its own
  // start states, ServerRule::client_start_state, it would not be: no rule does so yet). Empty when the
  // caller gives none.
  std::span<const float> global = {};
  // The server rule's weight of each accepted upload (AggregationOutput::weights, row i: clients[i]);
  // empty when the rule reports none. SPMC's server part stores them for the clients' coalitions.
  std::span<const double> weights = {};
};

struct RoundStart {
  int64_t round = 0;                              // from 1
  uint64_t seed = 0;                              // (seed, round)-derived
  std::span<const float> global;                  // the global model's parameters (num_parameters values)
  const std::vector<int64_t>* sampled = nullptr;  // this round's clients
};

class MethodServer {
 public:
  virtual ~MethodServer() = default;
  virtual void begin_round(const RoundStart& start) {}
  // `global`: the global model's parameters (num_parameters values). Called before the client trains.
  virtual void message(int64_t client, std::span<const float> global, ClientMessage& out) const = 0;
  // `update`: the server rule's update over the shared columns (width values), edited in place.
  virtual void after_aggregation(const MethodRound& round, std::span<float> update) = 0;
  // True when the server reads or edits the model columns (the SAM family): the rule must then share every
  // column. FedCR's server reads only the extra uploads, so its rule may keep a personal head.
  virtual bool needs_all_columns() const { return true; }
  // Checkpointed memory as named blocks (fl/base/rule_state.h). load_state throws bastion::Error when
  // `state` is not what save_state writes; it also reads the single float vector of a checkpoint written
  // before the codec (RuleState::legacy) in its old layout.
  virtual RuleState save_state() const = 0;
  virtual void load_state(const RuleState& state) = 0;
};

}  // namespace bastion
