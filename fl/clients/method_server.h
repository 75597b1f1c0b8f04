// MethodServer: the server-side part of a method whose clients need more than the global model
// (DESIGN.md "One method = two small parts"). The run loop, per round:
//   1. message(client, global, out)   serially, for each sampled client, before training: what the client
//                                     receives besides the model (ClientTask::message);
//   2. the clients train; the attacks act on the uploads; the server rule aggregates the accepted uploads;
//   3. after_aggregation(round, update) adds the method's own term to the server rule's update (FedSpeed's
//                                     mean of all h_i) and updates the method's state from the accepted
//                                     uploads and their extra uploads (ClientResult::extra_upload).
// It sees the parameter columns only (the first num_parameters of each upload); the method's rules share
// every column. State that must survive a round is saved in checkpoints (save_state / load_state).
// Users: MoFedSAM and FedFSA (server momentum), FedSpeed (h_i), FedSMOO (h_i, mu_i, s); sam_family.cpp;
// FedCR (the global class-conditional Gaussians; fedcr.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fl/clients/client_rule.h"

namespace bastion {

struct MethodRound {
  const float* uploads = nullptr;      // (n, width) accepted uploads, after attacks, in `clients` order
  int64_t n = 0, width = 0, num_parameters = 0;
  const std::vector<int64_t>* clients = nullptr;  // the accepted clients
  // The accepted clients' extra uploads (row i: clients[i]); an entry is empty when the client sent none.
  const std::vector<std::span<const float>>* extra = nullptr;
};

class MethodServer {
 public:
  virtual ~MethodServer() = default;
  // `global`: the global model's parameters (num_parameters values). Called before the client trains.
  virtual void message(int64_t client, std::span<const float> global, ClientMessage& out) const = 0;
  // `update`: the server rule's update over the shared columns (width values), edited in place.
  virtual void after_aggregation(const MethodRound& round, std::span<float> update) = 0;
  // True when the server reads or edits the model columns (the SAM family): the rule must then share every
  // column. FedCR's server reads only the extra uploads, so its rule may keep a personal head.
  virtual bool needs_all_columns() const { return true; }
  virtual std::vector<float> save_state() const = 0;
  // Throws bastion::Error when `state` does not have the layout save_state writes.
  virtual void load_state(std::span<const float> state) = 0;
};

}  // namespace bastion
