// Personalised evaluation (DESIGN.md "Personalized FL" hook 3; SPEC §4): each evaluated benign client's
// OWN model (the client rule's personal_model, else the global model; with eval.personal_model = own-last
// the model the client itself last trained, as FedFSA's code judges every rule), after the post-training
// step when one applies this round, on
//   acc         its local test set,
//   global_acc  the global test set (eval.personal_global),
//   asr         its triggered local test set without target-class samples (eval.personal_asr = local;
//               BapFL's per-client metric) or the triggered global test set (global),
// and, with eval.personal_received, the model the client RECEIVED (the rule's received_model: FedCAP's
// customised model as of its latest round; else the global model) on its local test set (received_acc;
// FedCAP's "g" curve, before local training and without the post step),
// summarised over clients as plain mean, mean weighted by the client's local test samples (its
// triggered samples for asr), min, median and max. A client not sampled this round is evaluated as its
// state stands (stale); a client never sampled has no personal state and is evaluated with the global
// model. eval.personal_clients = k > 0 evaluates a seeded subset of k benign clients per evaluation.
// Local test sets: data.client_test_fraction of each client's own samples (split), or the global test set
// dealt out per class in each client's training proportions (like-train: FedRep's "test split like
// train", BapFL's per-class Dirichlet proportions applied to the test set).
// Cost per evaluated client: one model assembly (D floats), the post step's training when it applies,
// and forward passes over its local test set (twice with a backdoor) plus the global test set when
// personal_global: docs/fl.md has the measured seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/partition.h"
#include "data/transforms.h"
#include "fl/attacks/attack.h"
#include "fl/clients/client_rule.h"
#include "fl/clients/post_step.h"
#include "fl/core/device_replicas.h"
#include "fl/core/mpi_run.h"
#include "fl/base/thread_pool.h"
#include "fl/metrics/metrics.h"
#include "nn/model.h"

namespace bastion {

struct LocalTestSets {
  const Dataset* data = nullptr;              // the set the lists index into (train for split, test for like-train)
  std::vector<std::vector<int64_t>> indices;  // per client, ascending
};

// like-train: for each class c, its test samples (shuffled with `seed`) are cut at the cumulative shares
// h_k(c) / sum_j h_j(c) of the clients' training counts, so every test sample goes to at most one client
// and client k's test classes follow its training classes. split: partition.test over `train`.
LocalTestSets make_local_test_sets(const std::string& mode, const Dataset& train, const Dataset& test,
                                   const Partition& partition, uint64_t seed);

struct PersonalEvalInput {
  const ClientRule& rule;
  const std::optional<PostSpec>& post;
  std::span<const float> global;
  const std::vector<ClientState>& states;
  std::vector<int64_t> clients;  // the clients to evaluate, ascending
  const LocalTestSets& local;
  const Dataset& train;  // post steps train on partition.train[client]
  const Partition& partition;
  const TransformSpec& train_transform;
  const TransformSpec* eval_transform;  // null = identity
  const Dataset& test;
  const std::vector<int64_t>& test_indices;      // the global clean evaluation list
  const BackdoorTest* backdoor = nullptr;        // null: no asr
  const std::vector<int64_t>& backdoor_indices;  // the global triggered list
  bool asr_include_target = false;
  bool global_acc = true;
  bool local_asr = true;
  int64_t batch = 1000;
  int64_t round = 0, rounds = 0;
  Generator post_streams;     // forked by (round, client) for the post step's seeds
  bool received_acc = false;  // also evaluate the received model (eval.personal_received)
  // eval.personal_model = own-last: judge each client's own last locally trained model (the run loop keeps
  // it under kOwnLastKey), `initial` (the run's initial model) before its first training; in a round whose
  // post step applies, the post step starts as without own-last (the rule's model, else the global one).
  bool own_last = false;
  std::span<const float> initial;
  bool batch_mean = false;  // eval.client_accuracy = batch-mean: mean of per-batch accuracies
  // With received_acc: when not empty, row i (D floats) is the received model of clients[i], in place of
  // the rule's received_model (eval.personal_received_final = next: what the server would send next).
  std::span<const float> received_rows;
};

// ClientState key of a client's last locally trained model (D floats), kept when eval.personal_model =
// own-last.
inline constexpr const char* kOwnLastKey = "eval.own_last";

// Evaluates on the pool, worker w on replicas[w] (its state is overwritten). Per-client results are kept
// in client order, so the record is the same for any thread count.
// Spread over K > 1 ranks (`transport`, fl/core/mpi_run.h): each rank evaluates the clients it owns (their
// states live there, fl/core/spread_round.h) and sends rank 0 their figures, which it places in client
// order: the same record as one process. Ranks other than 0 return an empty record (present = false).
// `devices` (a CUDA run): each client's model is assembled on the host replica, then its post step and
// every forward pass run on the replica's device twin.
PersonalRecord evaluate_personal(const PersonalEvalInput& input, ThreadPool& pool,
                                 std::vector<std::unique_ptr<Model>>& replicas, RunTransport* transport = nullptr,
                                 const DeviceReplicas* devices = nullptr);

// The benign clients to evaluate: all of them, or a seeded subset of k (sorted ascending).
std::vector<int64_t> personal_eval_clients(const std::vector<uint8_t>& is_malicious, int64_t k, Generator rng);

}  // namespace bastion
