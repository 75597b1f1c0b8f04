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
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fl/base/params.h"
#include "fl/base/rule_state.h"
#include "tensor/error.h"

namespace bastion {

class ThreadPool;

struct ColumnRange {
  int64_t begin = 0, end = 0;  // [begin, end) of the D columns
};

// What a rule may ask of the server's own data: the held-out server split of the training set
// (data.server_fraction; SPMC holds out 10 %). FLTrust trains on it (root set), SageFlow scores models on
// it (public set), finetune trains the aggregate on it (validation set). The run loop implements it over a
// Model replica; unit tests use a small fake. States are full model states (D values, parameters then
// BatchNorm buffers), the same layout as the uploads.
struct ServerTrainSpec {
  int64_t epochs = 1;
  int64_t steps = 0;  // > 0: exactly this many steps instead of epochs (a client schedule's `steps`)
  int64_t batch = 64;
  double lr = 0.01, momentum = 0.9, weight_decay = 1e-5;
  bool nesterov = false;
  double grad_clip = 0.0;  // > 0: clip the gradient's global L2 norm
  bool drop_last = false;  // drop the last partial batch of each epoch
  double rho = 0.0;        // > 0: SAM steps with radius rho (FTSAM)
  uint64_t seed = 0;       // shuffling
};

struct ServerEval {
  double loss = 0.0;     // mean cross-entropy over the split
  double entropy = 0.0;  // mean entropy (nats) of the predicted distribution
  int64_t samples = 0;
};

class ServerData {
 public:
  virtual ~ServerData() = default;
  virtual int64_t size() const = 0;  // samples in the server split; 0 = none configured
  // Trains a copy of `state` on the split and returns the trained state (D values).
  virtual std::vector<float> train(std::span<const float> state, const ServerTrainSpec& spec) = 0;
  virtual ServerEval evaluate(std::span<const float> state) = 0;
  // The clients' local SGD schedule in `round` (epochs or steps, batch, lr as decayed for that round,
  // momentum, weight decay, nesterov, grad clip, drop_last; seed 0), so a rule can train the server's
  // copy exactly as a client trains (FLTrust's ModelUpdate); none when the run's client rule has none.
  virtual std::optional<ServerTrainSpec> client_schedule(int64_t round) const { return std::nullopt; }
};

struct AggregationInput {
  const float* updates = nullptr;  // (n, D) row-major
  int64_t n = 0, D = 0;
  int64_t num_parameters = 0;            // <= D
  std::span<const int64_t> num_samples;  // n: local training set sizes (sample weighting)
  std::span<const int64_t> clients;      // n: client ids
  int64_t round = 0;
  int64_t last_round = 0;                       // the run's final round (experiment.rounds); 0 = not known
  uint64_t seed = 0;                            // (seed, round)-derived, for randomised rules
  std::span<const float> global;                // D: the global state the updates are relative to
  int64_t expected_malicious = 0;               // f: attackers the server assumes among these n uploads
                                                // (server.expected_malicious); rules' own `f = -1` means this
  ServerData* server_data = nullptr;            // null: no server split (rules that need one refuse)
  ThreadPool* pool = nullptr;                   // threads a rule may use across coordinates; null = serial.
                                                // Results must not depend on the thread count.
  std::span<const ColumnRange> weight_columns;  // the conv and linear weights (parameter tensors of 2 or 4
                                                // dimensions) among [0, num_parameters), sorted, in row
                                                // coordinates (server_side.h, weight_columns). Empty = layout
                                                // unknown (unit tests, gas's random column groups): a rule that
                                                // needs it (fedcpa) then treats every parameter column as one.
};

struct AggregationOutput {
  std::vector<float> update;     // D: added to the global state
  std::vector<uint8_t> flagged;  // n: 1 = the rule judged this upload malicious (detection
                                 // metrics); empty = the rule flags nobody
  std::vector<double> weights;   // n: a weighted-mean rule's upload weights, summing to 1
                                 // (fedavg, spmc; SPMC's clients rebuild their coalition from
                                 // them); empty = the rule is no weighted mean
  // The values the rule derived this round from its parameters and the round (e.g. {"f", 4}, {"m", 16}
  // for multi-krum's f = -1, m = -1): summary.json's "resolved", so a reader sees what it assumed.
  std::vector<std::pair<std::string, double>> resolved;
};

// A round's plan (DESIGN.md pFL hook 1): a rule that personalises the clients' start states (FedCAP's
// customised models) says, before the round's training, where each sampled client starts. To plan, it
// may first ask some clients for an extra update (FedCAP's request path: clients absent from last
// round's uploads train from the global model its pool is relative to); the run loop trains those at once
// and returns them, so the whole exchange is one call.
//
// RequestUpdates trains each of `clients` from `base` (the rule's columns of a state) on its own data and a copy of its
// state, model attacks applied as to uploads; returns the updates, row i for clients[i].
using RequestUpdates =
    std::function<std::vector<float>(const std::vector<int64_t>& clients, std::span<const float> base)>;
struct RoundPlanInput {
  const std::vector<int64_t>* sampled = nullptr;  // this round's clients, ascending
  std::span<const float> global;                  // the global state's columns this rule aggregates over
  // Empty when no training can be done (the final round's "next" start states,
  // eval.personal_received_final): the rule then plans without.
  RequestUpdates request_updates;
};
struct RoundPlan {
  std::vector<float> starts;      // (sampled.size(), global.size()): row i is where sampled[i] starts
  std::vector<uint8_t> personal;  // sampled.size(): 0 = that client gets the global state (its row unused)
};

class ServerRule {
 public:
  virtual ~ServerRule() = default;
  virtual AggregationOutput aggregate(const AggregationInput& input) = 0;
  // Why this rule would refuse n uploads when the run assumes `expected_malicious` attackers (its own
  // `f` parameter applied), e.g. "krum: needs n > 2f + 2, got n = 5, f = 2"; empty when it accepts them.
  // Rules check it in aggregate(); wrappers ask it first to name the numbers that fail (bucketing).
  virtual std::string refusal(int64_t n, int64_t expected_malicious) const { return {}; }
  // A round's plan (RoundPlan above): asked once per round, before the sampled clients train. Default:
  // none, every client starts from the global state.
  virtual std::optional<RoundPlan> plan_round(const RoundPlanInput& input) { return std::nullopt; }
  // Rules with memory across rounds (FoolsGold history, ...) save it for checkpoints as named blocks
  // (fl/base/rule_state.h). load_state refuses a state it cannot have saved (bastion::Error), so a rule
  // without memory refuses any non-empty one; a rule with memory also reads the single float vector of a
  // checkpoint written before the codec (RuleState::legacy) in its old layout.
  virtual RuleState save_state() const { return {}; }
  virtual void load_state(const RuleState& state) {
    BASTION_CHECK(state.empty(), "server rule state: this rule keeps nothing between rounds, but the checkpoint ",
                  "gives it some");
  }
};

// One pair per rule, defined in fl/defenses/<name>.cpp and listed in fl/registry.cpp. Wrappers
// (bucketing, gas) apply an inner rule, which the registry builds from [server.<inner>].
const std::vector<ParamSpec>& fedavg_params();
std::unique_ptr<ServerRule> make_fedavg(const Params& params);
// distance-based: krum.cpp, multi_krum.cpp, bulyan.cpp
const std::vector<ParamSpec>& krum_params();
std::unique_ptr<ServerRule> make_krum(const Params& params);
const std::vector<ParamSpec>& multi_krum_params();
std::unique_ptr<ServerRule> make_multi_krum(const Params& params);
const std::vector<ParamSpec>& bulyan_params();
std::unique_ptr<ServerRule> make_bulyan(const Params& params);
// coordinate-wise: median.cpp, trimmed_mean.cpp
const std::vector<ParamSpec>& median_params();
std::unique_ptr<ServerRule> make_median(const Params& params);
const std::vector<ParamSpec>& trimmed_mean_params();
std::unique_ptr<ServerRule> make_trimmed_mean(const Params& params);
// norms, signs, noise: norm_clip.cpp, add_noise.cpp, norm_bound.cpp, crfl.cpp, rlr.cpp, rsa.cpp
const std::vector<ParamSpec>& norm_clip_params();
std::unique_ptr<ServerRule> make_norm_clip(const Params& params);
const std::vector<ParamSpec>& add_noise_params();
std::unique_ptr<ServerRule> make_add_noise(const Params& params);
const std::vector<ParamSpec>& norm_bound_params();
std::unique_ptr<ServerRule> make_norm_bound(const Params& params);
const std::vector<ParamSpec>& crfl_params();
std::unique_ptr<ServerRule> make_crfl(const Params& params);
const std::vector<ParamSpec>& rlr_params();
std::unique_ptr<ServerRule> make_rlr(const Params& params);
const std::vector<ParamSpec>& rsa_params();
std::unique_ptr<ServerRule> make_rsa(const Params& params);
const std::vector<ParamSpec>& rsa_server_params();  // rsa.cpp: SPMC's server-only variant (its defaults)
std::unique_ptr<ServerRule> make_rsa_server(const Params& params);
// similarity and clustering: foolsgold.cpp, dnc.cpp, clustered.cpp, rfa.cpp, residual_base.cpp, fedcpa.cpp
const std::vector<ParamSpec>& foolsgold_params();
std::unique_ptr<ServerRule> make_foolsgold(const Params& params);
const std::vector<ParamSpec>& dnc_params();
std::unique_ptr<ServerRule> make_dnc(const Params& params);
const std::vector<ParamSpec>& clustered_params();
std::unique_ptr<ServerRule> make_clustered(const Params& params);
const std::vector<ParamSpec>& rfa_params();
std::unique_ptr<ServerRule> make_rfa(const Params& params);
const std::vector<ParamSpec>& residual_base_params();
std::unique_ptr<ServerRule> make_residual_base(const Params& params);
const std::vector<ParamSpec>& fedcpa_params();
std::unique_ptr<ServerRule> make_fedcpa(const Params& params);
// margin contribution: spmc.cpp (SPMC's MCAgg)
const std::vector<ParamSpec>& spmc_params();
std::unique_ptr<ServerRule> make_spmc(const Params& params);
// server data: fltrust.cpp, sageflow.cpp, finetune.cpp
const std::vector<ParamSpec>& fltrust_params();
std::unique_ptr<ServerRule> make_fltrust(const Params& params);
const std::vector<ParamSpec>& sageflow_params();
std::unique_ptr<ServerRule> make_sageflow(const Params& params);
const std::vector<ParamSpec>& finetune_params();
std::unique_ptr<ServerRule> make_finetune(const Params& params);
// personalised: fedcap.cpp (FedCAP's customised aggregation, calibration and removal; fedcap.h)
const std::vector<ParamSpec>& fedcap_params();
std::unique_ptr<ServerRule> make_fedcap(const Params& params);
// wrappers: bucketing.cpp, gas.cpp
const std::vector<ParamSpec>& bucketing_params();
std::unique_ptr<ServerRule> make_bucketing(const Params& params, std::unique_ptr<ServerRule> inner);
const std::vector<ParamSpec>& gas_params();
std::unique_ptr<ServerRule> make_gas(const Params& params, std::unique_ptr<ServerRule> inner);

}  // namespace bastion
