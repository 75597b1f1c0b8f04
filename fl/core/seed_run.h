// SeedRun: one seed of an experiment (run_experiment in experiment.cpp runs one per seed). Internal to
// fl/core; its parts live in three files so each stays readable:
//   seed_run.cpp         setup, the round loop, client training, attacks on uploads, progress and results
//   seed_run_server.cpp  rank 0's server step (method messages, aggregation, verdicts) and evaluation
//   seed_run_state.cpp   what crosses between MPI ranks, checkpoints, and resuming from one
#pragma once

#include <chrono>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/partition.h"
#include "fl/clients/method_server.h"
#include "fl/clients/post_step.h"
#include "fl/core/checkpoint.h"
#include "fl/core/client_models.h"
#include "fl/core/device_replicas.h"
#include "fl/core/experiment.h"
#include "fl/core/mpi_run.h"
#include "fl/core/personal_eval.h"
#include "fl/core/run_setup.h"
#include "fl/core/server_side.h"
#include "fl/base/thread_pool.h"
#include "fl/evaluate.h"
#include "fl/registry.h"

namespace bastion {

class SeedRun {
 public:
  // threads: the run's threads; on a device the clients train on one worker and the server rule uses them all.
  SeedRun(const ExperimentConfig& config, const SharedData& shared, uint64_t seed, int threads, Device device,
          std::string dir, const RunOptions& options, RunTransport& net);

  void run(const RunOptions& options);
  RunSummary summary() const {
    RunSummary s = summarize_run(seed_, records_, timings_, c_.eval.text("report"), c_.eval.real("target_acc"));
    s.malicious_clients = malicious_;
    std::sort(s.malicious_clients.begin(), s.malicious_clients.end());
    s.resolved.assign(resolved_.begin(), resolved_.end());
    return s;
  }
  const std::vector<RoundRecord>& records() const { return records_; }
  // run --save-model, after run(): the global model to <dir>/model.safetensors and, when the client rule
  // keeps personal models, every client's to <dir>/personal-models.safetensors under "clients.<k>.<name>"
  // (a PyTorch ModuleList's names). Collective under mpirun (the client states are gathered on rank 0).
  void save_models();

 private:
  // Purposes forked from Generator(seed): each random decision has its own stream.
  enum Stream : uint64_t {
    kPartition = 1,
    kMalicious,
    kInit,
    kSampling,
    kClient,
    kAttack,
    kServer,
    kClientFixed,
    kLocalTest,
    kPersonalSubset,
    kPostStep,      // personalised evaluation
    kMethodServer,  // the method server's random choices (FedFomo's exploration)
    kRequest,
    kRequestAttack  // FedCAP's request updates: training and attacks
  };

  const ExperimentConfig& c_;
  const SharedData& shared_;
  uint64_t seed_;
  Generator root_;
  std::string dir_;
  ThreadPool pool_;         // client training and evaluation: one worker per model replica
  ThreadPool server_pool_;  // the server rule's math (AggregationInput::pool): every thread, also on a device
  // The ranks this run's clients are spread over (fl/core/mpi_run.h); one, in this process, without mpirun.
  // Rank 0 is the server: it alone prepares start states and messages, aggregates, evaluates the global
  // model, and writes the results and checkpoints.
  RunTransport& net_;
  int64_t bytes_before_round_ = 0;  // net_.bytes_moved() when this round began (logged per round)
  Partition partition_;
  std::vector<int64_t> malicious_;
  std::vector<uint8_t> is_malicious_;
  std::map<int64_t, int64_t> attacker_index_;
  std::unique_ptr<ClientRule> client_rule_;
  std::unique_ptr<ServerRule> server_rule_;
  std::unique_ptr<MethodServer> method_server_;  // the method's server part (method_server.h), or null
  std::vector<ClientMessage> messages_;          // per sampled client this round, with a method server
  std::optional<ModelServerData> server_data_;   // over replica 0, when data.server_fraction > 0
  AttackSet attacks_;
  std::vector<std::unique_ptr<Model>> replicas_;
  std::vector<std::unique_ptr<Model>> second_replicas_;  // rules that train two models (Ditto)
  DeviceReplicas devices_;                               // CUDA twins of replicas_ (run.device = "cuda"), else none
  DeviceReplicas second_devices_;                        // ... and of second_replicas_
  std::vector<float> global_;
  bool own_last_ = false;       // eval.personal_model = own-last: keep each client's trained model
  std::vector<float> initial_;  // the initial model, with own_last_ (a never-trained client's own model)
  int64_t P_ = 0, D_ = 0;
  SharedColumns sharing_;                    // what a client uploads (client_models.h)
  std::vector<ColumnRange> weight_columns_;  // conv/linear weight columns of an upload row (server_side.h)
  std::vector<float> global_shared_;         // the shared columns of global_ (when not every column is shared)
  std::vector<float> starts_;                // (m, D) per-client start states, when the server rule sends them
  std::optional<PostSpec> post_;             // post-training step before personalised evaluation
  LocalTestSets local_tests_;
  int64_t version_ = 0;  // bumped when global_ changes; replicas compare before eval
  std::vector<int64_t> loaded_version_;
  std::vector<ClientState> client_states_;
  std::vector<uint8_t> client_flags_;  // the server rule's latest verdict per client (per-client detection)
  std::optional<BackdoorTest> backdoor_;
  std::vector<int64_t> test_indices_;  // 0..test size - 1, the clean evaluation's list
  std::vector<int64_t> backdoor_indices_;
  std::vector<RoundRecord> records_;
  std::vector<RoundTiming> timings_;
  std::vector<ClientNote> notes_;            // client_notes.csv (rank 0): the rules' per-client choices
  std::map<std::string, double> resolved_;   // summary.json "resolved": the latest round's derived values
  bool clients_csv_ = false;                 // eval.clients_csv resolved
  std::vector<ClientRow> client_rows_;       // clients.csv (rank 0)
  std::vector<uint8_t> sampled_since_eval_;  // per client: trained since the last evaluated round
  RoundRecord pending_;                      // counters accumulated since the last evaluated round
  int64_t next_round_ = 1;
  // run.checkpoint_every = -1: a checkpoint when RunOptions::auto_checkpoint_seconds have passed since the
  // last (or the start).
  double auto_checkpoint_seconds_ = 60.0;
  std::chrono::steady_clock::time_point last_checkpoint_;
  bool wrote_auto_checkpoint_ = false;
  // rounds.csv, timing.csv, clients.csv: rewritten at most every RunOptions::results_write_seconds (and
  // at checkpoints and the end).
  double results_write_seconds_ = 2.0;
  std::chrono::steady_clock::time_point last_results_write_;
  bool checkpoint_due(int64_t round, int64_t rounds);
  double last_train_loss_ = kNoValue;

  bool spread() const { return net_.size() > 1; }
  bool is_server() const { return net_.rank() == 0; }
  bool attack_active(int64_t round) const {
    const int64_t end = c_.attack.integer("end_round");
    return !malicious_.empty() && round >= c_.attack.integer("start_round") && (end == 0 || round <= end);
  }
  // One round's work, passed along its steps (run()); the buffers live across rounds.
  struct RoundWork {
    int64_t round = 0;
    bool attack_on = false;
    std::vector<int64_t> sampled, rows;  // this round's clients; this rank's positions among them
    std::vector<float> uploads;          // (sampled, shared width) on the server after train_round
    std::vector<ClientResult> results;
    std::chrono::steady_clock::time_point start;
    double cpu_start = 0.0;  // process_cpu_seconds() when the round began
    double train_seconds = 0.0, aggregate_seconds = 0.0, eval_seconds = 0.0;
  };
  void begin_run(const RunOptions& options);
  void configure_round(int64_t round, RoundWork& work);
  void train_round(RoundWork& work);
  void aggregate_round(RoundWork& work);
  void record_round(const RoundWork& work);
  void evaluate_round_if_due(RoundWork& work);
  bool finish_round(const RunOptions& options, const RoundWork& work);
  void prepare_backdoor_test();
  std::vector<int64_t> round_clients(int64_t round, bool attack_on) const;
  std::span<const float> global_shared();
  void prepare_start_states(int64_t round, const std::vector<int64_t>& sampled, bool attack_on);
  std::vector<float> request_updates(int64_t round, const std::vector<int64_t>& asked, std::span<const float> base,
                                     bool attack_on);
  void train_clients(int64_t round, const std::vector<int64_t>& sampled, const std::vector<int64_t>& rows,
                     bool attack_on, std::vector<float>& uploads, std::vector<ClientResult>& results,
                     std::vector<ClientState>* scratch = nullptr, uint64_t stream = kClient);
  void send_client_inputs(const std::vector<int64_t>& sampled, const std::vector<int64_t>& rows);
  void collect_client_outputs(const std::vector<int64_t>& rows, std::vector<float>& uploads,
                              std::vector<ClientResult>& results);
  void share_global();
  void collect_client_states();
  void attack_uploads(int64_t round, const std::vector<int64_t>& sampled, std::vector<float>& uploads,
                      uint64_t stream = kAttack);
  void prepare_messages(int64_t round, const std::vector<int64_t>& sampled);
  void aggregate(int64_t round, const std::vector<int64_t>& sampled, bool attack_on, std::vector<float>& uploads,
                 const std::vector<ClientResult>& results);
  void method_after_aggregation(const float* uploads, const std::vector<int64_t>& accepted_clients,
                                const std::vector<int64_t>& sampled, const std::vector<ClientResult>& results,
                                AggregationOutput& output);
  int64_t message_bytes() const;
  Model& load_global(int worker);  // the worker's model (its device twin on a CUDA run) holding global_
  EvalResult evaluate_global(const std::vector<int64_t>& indices, const PoisonSpec* poison);
  double evaluate_local();
  PersonalRecord evaluate_personalized(int64_t round);
  void evaluate_round(int64_t round);
  void write_results() const;
  void write_partition() const;  // partition.csv: the data each client was dealt
  std::string tensorboard_dir_;  // this seed's RunOptions::tensorboard_dir (run_experiment adds seed-<s>); empty = none
  void log_progress(const RunOptions& options, int64_t round, double elapsed) const;
  CheckpointState checkpoint_state() const;
  void restore(const CheckpointState& state);
  void restore_client_notes(int64_t round);
  void record_client_rows(int64_t round, const PersonalRecord& personal);
  friend void resume_seed(SeedRun& run, const std::string& config_toml, const RunOptions& options);
  friend void resume_seed_spread(SeedRun& run, const std::string& config_toml, const RunOptions& options);
};

// --resume: restore `run` from its folder's checkpoint, if there is one (one process, or K = 1).
void resume_seed(SeedRun& run, const std::string& config_toml, const RunOptions& options);
// K > 1: rank 0 reads the checkpoint and broadcasts it; every rank restores it whole.
void resume_seed_spread(SeedRun& run, const std::string& config_toml, const RunOptions& options);

}  // namespace bastion
