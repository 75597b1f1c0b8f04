#include "fl/core/experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>

#include "data/partition.h"
#include "fl/clients/method_server.h"
#include "fl/clients/post_step.h"
#include "fl/core/checkpoint.h"
#include "fl/core/client_models.h"
#include "fl/core/mpi_run.h"
#include "fl/core/personal_eval.h"
#include "fl/core/run_setup.h"
#include "fl/core/sampling.h"
#include "fl/core/server_side.h"
#include "fl/core/spread_round.h"
#include "fl/core/thread_pool.h"
#include "fl/evaluate.h"
#include "fl/registry.h"
#include "kernels/cpu/gemm.h"
#include "nn/models.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

namespace {

// Purposes forked from Generator(seed): each random decision has its own stream.
enum Stream : uint64_t {
  kPartition = 1, kMalicious, kInit, kSampling, kClient, kAttack, kServer, kClientFixed,
  kLocalTest, kPersonalSubset, kPostStep,  // personalised evaluation
  kMethodServer,                           // the method server's random choices (FedFomo's exploration)
  kRequest, kRequestAttack                 // FedCAP's request updates: training and attacks
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string percent(double value) {
  if (std::isnan(value)) return "   -  ";
  char text[32];
  std::snprintf(text, sizeof text, "%6.2f%%", 100.0 * value);
  return text;
}

// One seed of an experiment.
class SeedRun {
 public:
  SeedRun(const ExperimentConfig& config, const SharedData& shared, uint64_t seed, int threads, std::string dir,
          const RunOptions& options, RunTransport& net)
      : c_(config), shared_(shared), seed_(seed), root_(seed), dir_(std::move(dir)), pool_(threads), net_(net) {
    partition_ = make_partition(shared.train, partition_spec(c_.data), c_.data.integer("clients"),
                                root_.fork(kPartition).next_u64());
    malicious_ = choose_malicious(c_.data.integer("clients"), resolved_malicious_count(c_), c_.attack.text("selection"),
                                  root_.fork(kMalicious));
    is_malicious_.assign(static_cast<size_t>(c_.data.integer("clients")), 0);
    for (size_t j = 0; j < malicious_.size(); ++j) {
      is_malicious_[malicious_[j]] = 1;
      attacker_index_[malicious_[j]] = static_cast<int64_t>(j);
    }
    client_rule_ = find_client_rule(c_.clients.text("rule")).make(c_.client_rule);
    attacks_ = make_attacks(c_);
    const uint64_t init_seed = root_.fork(kInit).next_u64();
    for (int w = 0; w < threads; ++w)
      replicas_.push_back(make_model(c_.model.text("name"), shared.input, shared.train.num_classes, init_seed));
    const std::span<const float> state = replicas_[0]->flat_state();
    global_.assign(state.begin(), state.end());
    P_ = replicas_[0]->num_parameters();
    sharing_ = shared_columns(*replicas_[0], client_rule_->shared_part());
    server_rule_ = build_server_rule(c_, *replicas_[0], sharing_);
    weight_columns_ = weight_columns(*replicas_[0], sharing_);
    if (options.wrap_server_rule) server_rule_ = options.wrap_server_rule(std::move(server_rule_));
    method_server_ = client_rule_->make_method_server(c_.data.integer("clients"), P_);
    BASTION_CHECK(!method_server_ || sharing_.all || !method_server_->needs_all_columns(), "client rule '", c_.clients.text("rule"),
                  "' keeps server state over the whole model: it must share every column");
    post_ = client_rule_->post_step();
    if (!post_) post_ = post_spec_from_section(c_.post);
    if (client_rule_->uses_second_model())
      for (int w = 0; w < threads; ++w)
        second_replicas_.push_back(make_model(c_.model.text("name"), shared.input, shared.train.num_classes, init_seed));
    if (!partition_.server.empty())
      server_data_.emplace(*replicas_[0], shared.train, partition_.server, shared.train_transform,
                           shared.eval_transform, c_.eval.integer("batch"), client_local_schedule(c_.client_rule));
    D_ = static_cast<int64_t>(global_.size());
    client_states_.resize(static_cast<size_t>(c_.data.integer("clients")));
    client_flags_.assign(client_states_.size(), 0);
    loaded_version_.assign(static_cast<size_t>(threads), -1);
    test_indices_.resize(static_cast<size_t>(shared.test.size()));
    std::iota(test_indices_.begin(), test_indices_.end(), int64_t{0});
    prepare_backdoor_test();
    if (c_.eval.boolean("personalized"))
      local_tests_ = make_local_test_sets(c_.data.text("local_test"), shared.train, shared.test, partition_,
                                          root_.fork(kLocalTest).next_u64());
  }

  void run(const RunOptions& options);
  RunSummary summary() const {
    return summarize_run(seed_, records_, timings_, c_.eval.text("report"), c_.eval.real("target_acc"));
  }
  const std::vector<RoundRecord>& records() const { return records_; }

 private:
  const ExperimentConfig& c_;
  const SharedData& shared_;
  uint64_t seed_;
  Generator root_;
  std::string dir_;
  ThreadPool pool_;
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
  std::optional<ModelServerData> server_data_;  // over replica 0, when data.server_fraction > 0
  AttackSet attacks_;
  std::vector<std::unique_ptr<Model>> replicas_;
  std::vector<std::unique_ptr<Model>> second_replicas_;  // rules that train two models (Ditto)
  std::vector<float> global_;
  int64_t P_ = 0, D_ = 0;
  SharedColumns sharing_;                    // what a client uploads (client_models.h)
  std::vector<ColumnRange> weight_columns_;  // conv/linear weight columns of an upload row (server_side.h)
  std::vector<float> global_shared_;         // the shared columns of global_ (when not every column is shared)
  std::vector<float> starts_;                // (m, D) per-client start states, when the server rule sends them
  std::optional<PostSpec> post_;             // post-training step before personalised evaluation
  LocalTestSets local_tests_;
  int64_t version_ = 0;                      // bumped when global_ changes; replicas compare before eval
  std::vector<int64_t> loaded_version_;
  std::vector<ClientState> client_states_;
  std::vector<uint8_t> client_flags_;        // the server rule's latest verdict per client (per-client detection)
  std::optional<BackdoorTest> backdoor_;
  std::vector<int64_t> test_indices_;        // 0..test size - 1, the clean evaluation's list
  std::vector<int64_t> backdoor_indices_;
  std::vector<RoundRecord> records_;
  std::vector<RoundTiming> timings_;
  RoundRecord pending_;                      // counters accumulated since the last evaluated round
  int64_t next_round_ = 1;
  double last_train_loss_ = kNoValue;

  bool spread() const { return net_.size() > 1; }
  bool is_server() const { return net_.rank() == 0; }
  bool attack_active(int64_t round) const {
    const int64_t end = c_.attack.integer("end_round");
    return !malicious_.empty() && round >= c_.attack.integer("start_round") && (end == 0 || round <= end);
  }
  void prepare_backdoor_test();
  std::vector<int64_t> round_clients(int64_t round, bool attack_on) const;
  std::span<const float> global_shared();
  void prepare_start_states(int64_t round, const std::vector<int64_t>& sampled, bool attack_on);
  void request_updates(int64_t round, const std::vector<int64_t>& sampled, bool attack_on);
  void train_clients(int64_t round, const std::vector<int64_t>& sampled, const std::vector<int64_t>& rows, bool attack_on,
                     std::vector<float>& uploads, std::vector<ClientResult>& results,
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
  void load_global(int worker);
  EvalResult evaluate_global(const std::vector<int64_t>& indices, const PoisonSpec* poison);
  double evaluate_local();
  PersonalRecord evaluate_personalized(int64_t round);
  void evaluate_round(int64_t round);
  void write_results() const;
  void log_progress(const RunOptions& options, int64_t round, double elapsed) const;
  CheckpointState checkpoint_state() const;
  void restore(const CheckpointState& state);
  friend void resume_seed(SeedRun& run, const std::string& config_toml, const RunOptions& options);
  friend void resume_seed_spread(SeedRun& run, const std::string& config_toml, const RunOptions& options);
};

void SeedRun::prepare_backdoor_test() {
  if (!attacks_.data) return;
  backdoor_ = attacks_.data->backdoor_test(shared_.test, shared_.eval_transform);
  if (!backdoor_) return;
  const bool include_target = c_.eval.boolean("asr_include_target");
  for (int64_t i = 0; i < shared_.test.size(); ++i)
    if (include_target || shared_.test.labels[i] != backdoor_->target) backdoor_indices_.push_back(i);
}

std::vector<int64_t> SeedRun::round_clients(int64_t round, bool attack_on) const {
  const int64_t clients = c_.data.integer("clients");
  if (client_rule_->every_client_trains()) {
    std::vector<int64_t> all(static_cast<size_t>(clients));
    std::iota(all.begin(), all.end(), int64_t{0});
    return all;
  }
  return sample_round(clients, c_.clients.integer("per_round"), malicious_,
                      attack_on ? c_.attack.integer("malicious_per_round") : 0,
                      root_.fork(kSampling).fork(static_cast<uint64_t>(round)));
}

// The global state's shared columns: the server rule's and the attacks' view of the global model.
std::span<const float> SeedRun::global_shared() {
  if (sharing_.all) return global_;
  global_shared_.resize(static_cast<size_t>(sharing_.width));
  sharing_.gather(global_, global_shared_.data());
  return global_shared_;
}

void SeedRun::prepare_start_states(int64_t round, const std::vector<int64_t>& sampled, bool attack_on) {
  starts_.clear();
  if (sharing_.width == 0 || !server_rule_->has_client_start_states()) return;
  request_updates(round, sampled, attack_on);
  client_start_states(*server_rule_, sharing_, global_, global_shared(), sampled, starts_);
}

// FedCAP's request path (ServerRule::request_clients): the asked clients train from the rule's base state
// on copies of their ClientState (their own state stays as it was), on their own random streams; model
// attacks act on these updates as on a round's uploads. Traffic: the base down, the update up.
void SeedRun::request_updates(int64_t round, const std::vector<int64_t>& sampled, bool attack_on) {
  const std::vector<int64_t> asked = server_rule_->request_clients(sampled);
  if (asked.empty()) return;
  // The request trains on copies of the asked clients' states, which live on their owners under mpirun.
  BASTION_CHECK(!spread(), "server rule '", c_.server.text("rule"), "' asks clients for updates outside the round ",
                "(its request path), which mpirun does not spread over ranks yet: run it in one process, or without ",
                "the requests (FedCAP: server.fedcap.non_uploaders = \"global\")");
  const std::span<const float> base = server_rule_->request_base();
  BASTION_CHECK(static_cast<int64_t>(base.size()) == sharing_.width, "server rule '", c_.server.text("rule"),
                "' gave a request base of ", base.size(), " values for ", sharing_.width, " shared columns");
  const int64_t m = static_cast<int64_t>(asked.size()), width = sharing_.width;
  std::vector<float> start(global_);
  sharing_.assign_into(base, start);
  starts_.clear();
  for (int64_t i = 0; i < m; ++i) starts_.insert(starts_.end(), start.begin(), start.end());
  std::vector<ClientState> scratch;
  for (int64_t client : asked) scratch.push_back(client_states_[client]);
  std::vector<float> updates(static_cast<size_t>(m * width));
  std::vector<ClientResult> results(static_cast<size_t>(m));
  messages_.clear();  // a request carries no method-server message
  std::vector<int64_t> every_row(static_cast<size_t>(m));
  std::iota(every_row.begin(), every_row.end(), int64_t{0});
  train_clients(round, asked, every_row, attack_on, updates, results, &scratch, kRequest);
  if (attack_on) attack_uploads(round, asked, updates, kRequestAttack);
  for (int64_t i = 0; i < m; ++i)
    server_rule_->receive_request(asked[i], std::span<const float>(updates.data() + i * width, static_cast<size_t>(width)));
  pending_.bytes_up += m * width * static_cast<int64_t>(sizeof(float));
  pending_.bytes_down += m * width * static_cast<int64_t>(sizeof(float));
  starts_.clear();
}

// The sampled clients at positions `rows` (this rank's; every position in one process). `scratch` (one
// ClientState per entry of `sampled`) replaces the clients' own states when given.
void SeedRun::train_clients(int64_t round, const std::vector<int64_t>& sampled, const std::vector<int64_t>& rows,
                            bool attack_on, std::vector<float>& uploads, std::vector<ClientResult>& results,
                            std::vector<ClientState>* scratch, uint64_t stream) {
  const Generator client_streams = root_.fork(stream).fork(static_cast<uint64_t>(round));
  const int64_t width = sharing_.width;
  pool_.run(static_cast<int64_t>(rows.size()), [&](int64_t k, int worker) {
    const int64_t i = rows[static_cast<size_t>(k)];
    Model& model = *replicas_[worker];
    const std::span<const float> start =
        starts_.empty() ? std::span<const float>(global_) : std::span<const float>(starts_.data() + i * D_, D_);
    std::copy(start.begin(), start.end(), model.flat_state().begin());
    loaded_version_[worker] = -1;  // the replica now holds a client's model, not the global one
    const int64_t client = sampled[i];
    const bool attacker = attack_on && is_malicious_[client];
    ClientState& state = scratch ? (*scratch)[static_cast<size_t>(i)] : client_states_[client];
    ClientTask task{model, shared_.train, partition_.train[client], shared_.train_transform, state,
                    client, round, client_streams.fork(static_cast<uint64_t>(client)).next_u64(),
                    root_.fork(kClientFixed).fork(static_cast<uint64_t>(client)).next_u64(),
                    attacker ? attacks_.data : nullptr, attacker ? attacker_index_.at(client) : 0,
                    second_replicas_.empty() ? nullptr : second_replicas_[worker].get(),
                    messages_.empty() ? nullptr : &messages_[static_cast<size_t>(i)]};
    results[i] = client_rule_->train(task);
    model.set_all_trainable(true);  // a rule that froze a part leaves the replica whole for the next client
    sharing_.difference(model.flat_state(), start, uploads.data() + i * width);
  });
}

// Model attacks act on what an attacker uploads: the shared columns (the first `parameters` of them are
// parameters), relative to the global model's shared columns.
void SeedRun::attack_uploads(int64_t round, const std::vector<int64_t>& sampled, std::vector<float>& uploads,
                             uint64_t stream) {
  std::vector<int64_t> attacker_rows, view_rows;
  const bool see_all = c_.attack.text("omniscient_view") == "all";
  for (size_t i = 0; i < sampled.size(); ++i) {
    if (is_malicious_[sampled[i]]) attacker_rows.push_back(static_cast<int64_t>(i));
    if (see_all || !is_malicious_[sampled[i]]) view_rows.push_back(static_cast<int64_t>(i));
  }
  if (attacker_rows.empty()) return;
  const int64_t m = static_cast<int64_t>(sampled.size());
  const int64_t width = sharing_.width, parameters = sharing_.parameters;
  const std::span<const float> global_part = global_shared();
  const Generator streams = root_.fork(stream).fork(static_cast<uint64_t>(round));
  if (attacks_.collusion) {
    if (view_rows.empty()) view_rows = attacker_rows;  // a round of attackers only: they see their own honest updates
    std::vector<float> view(view_rows.size() * static_cast<size_t>(parameters));
    for (size_t r = 0; r < view_rows.size(); ++r)
      std::copy_n(uploads.data() + view_rows[r] * width, parameters, view.data() + r * parameters);
    std::vector<float> malicious_update(static_cast<size_t>(parameters));
    CollusionContext context{view.data(), static_cast<int64_t>(view_rows.size()), parameters, m,
                             static_cast<int64_t>(attacker_rows.size()), global_part, streams.fork(0)};
    attacks_.collusion->collude(malicious_update, context);
    for (int64_t row : attacker_rows) std::copy(malicious_update.begin(), malicious_update.end(), uploads.data() + row * width);
  }
  for (int64_t row : attacker_rows) {
    for (const Attack* attack : attacks_.upload) {
      UploadAttackContext context{global_part, parameters, m, streams.fork(static_cast<uint64_t>(sampled[row]) + 1)};
      attack->corrupt_upload(std::span<float>(uploads.data() + row * width, static_cast<size_t>(width)), context);
    }
  }
}

// Serially, before training: the method server's message for each sampled client.
void SeedRun::prepare_messages(int64_t round, const std::vector<int64_t>& sampled) {
  messages_.clear();
  if (!method_server_) return;
  messages_.resize(sampled.size());
  const std::span<const float> parameters(global_.data(), static_cast<size_t>(P_));
  const uint64_t seed = root_.fork(kMethodServer).fork(static_cast<uint64_t>(round)).next_u64();
  method_server_->begin_round(RoundStart{round, seed, parameters, &sampled});
  for (size_t i = 0; i < sampled.size(); ++i) method_server_->message(sampled[i], parameters, messages_[i]);
}

// The method server's term and state update over the accepted uploads (rows in accepted_clients order).
void SeedRun::method_after_aggregation(const float* uploads, const std::vector<int64_t>& accepted_clients,
                                       const std::vector<int64_t>& sampled, const std::vector<ClientResult>& results,
                                       AggregationOutput& output) {
  std::map<int64_t, size_t> row_of;
  for (size_t i = 0; i < sampled.size(); ++i) row_of[sampled[i]] = i;
  std::vector<std::span<const float>> extra;
  for (int64_t client : accepted_clients) extra.emplace_back(results[row_of.at(client)].extra_upload);
  const MethodRound round{uploads, static_cast<int64_t>(accepted_clients.size()), sharing_.width, sharing_.parameters,
                          &accepted_clients, &extra, global_shared(), output.weights};
  method_server_->after_aggregation(round, output.update);
}

// Bytes of this round's method messages (what clients receive besides the model).
int64_t SeedRun::message_bytes() const {
  int64_t floats = 0;
  for (const ClientMessage& message : messages_)
    for (const auto& [name, values] : message) floats += static_cast<int64_t>(values.size());
  return floats * static_cast<int64_t>(sizeof(float));
}

void SeedRun::aggregate(int64_t round, const std::vector<int64_t>& sampled, bool attack_on, std::vector<float>& uploads,
                        const std::vector<ClientResult>& results) {
  const int64_t width = sharing_.width;
  const std::vector<int64_t> accepted_clients = compact_finite_uploads(uploads.data(), width, sampled, round,
                                                                       c_.server.text("on_invalid") == "fail");
  pending_.rejected += static_cast<int64_t>(sampled.size() - accepted_clients.size());
  std::vector<int64_t> samples;
  for (int64_t client : accepted_clients) samples.push_back(static_cast<int64_t>(partition_.train[client].size()));
  if (accepted_clients.empty()) return;  // every upload rejected: the global model stays
  const int64_t n = static_cast<int64_t>(accepted_clients.size());
  // The server's own data trains whole models; seen through the shared columns when clients keep a part.
  std::unique_ptr<ServerData> shared_server_data;
  ServerData* server_data = server_data_ ? &*server_data_ : nullptr;
  if (server_data && !sharing_.all) {
    shared_server_data = make_subset_server_data(*server_data, global_, sharing_.ranges);
    server_data = shared_server_data.get();
  }
  const AggregationInput input{.updates = uploads.data(), .n = n, .D = width, .num_parameters = sharing_.parameters,
                               .num_samples = samples, .clients = accepted_clients, .round = round,
                               .last_round = c_.experiment.integer("rounds"),
                               .seed = root_.fork(kServer).fork(static_cast<uint64_t>(round)).next_u64(),
                               .global = global_shared(), .expected_malicious = expected_malicious_count(c_, n),
                               .server_data = server_data, .pool = &pool_, .weight_columns = weight_columns_};
  loaded_version_[0] = -1;  // server data (if any) trains and evaluates on replica 0
  AggregationOutput output = server_rule_->aggregate(input);
  BASTION_CHECK(static_cast<int64_t>(output.update.size()) == width, "server rule '", c_.server.text("rule"),
                "' returned ", output.update.size(), " values for ", width, " shared columns");
  if (method_server_) method_after_aggregation(uploads.data(), accepted_clients, sampled, results, output);
  add_update_checked(sharing_, output.update, global_, c_.server.text("rule"), round);
  ++version_;
  record_verdicts(client_flags_, accepted_clients, output.flagged);
  for (size_t i = 0; i < output.flagged.size() && i < accepted_clients.size(); ++i) {
    const bool truth = attack_on && is_malicious_[accepted_clients[i]];
    const bool flagged = output.flagged[i] != 0;
    pending_.true_positive += truth && flagged;
    pending_.false_positive += !truth && flagged;
    pending_.true_negative += !truth && !flagged;
    pending_.false_negative += truth && !flagged;
  }
}

void SeedRun::load_global(int worker) {
  if (loaded_version_[worker] == version_) return;
  std::copy(global_.begin(), global_.end(), replicas_[worker]->flat_state().begin());
  loaded_version_[worker] = version_;
}

// Fixed-size chunks, one task each, combined in chunk order: the same sums for any thread count.
EvalResult SeedRun::evaluate_global(const std::vector<int64_t>& indices, const PoisonSpec* poison) {
  const int64_t chunk = c_.eval.integer("batch");
  const int64_t chunks = (static_cast<int64_t>(indices.size()) + chunk - 1) / chunk;
  std::vector<EvalResult> parts(static_cast<size_t>(chunks));
  const TransformSpec* transform = is_identity_transform(shared_.eval_transform) ? nullptr : &shared_.eval_transform;
  pool_.run(chunks, [&](int64_t k, int worker) {
    load_global(worker);
    Model& model = *replicas_[worker];
    const auto begin = indices.begin() + k * chunk;
    const std::vector<int64_t> part(begin, begin + std::min<int64_t>(chunk, indices.end() - begin));
    parts[k] = evaluate(model, shared_.test, chunk, part, transform, poison);
  });
  EvalResult total;
  for (const EvalResult& p : parts) {
    total.samples += p.samples;
    total.correct += p.correct;
    total.loss_sum += p.loss_sum;
  }
  if (total.samples > 0) {
    total.loss = total.loss_sum / total.samples;
    total.accuracy = static_cast<double>(total.correct) / total.samples;
  }
  return total;
}

// SPEC §4 for a global model: the mean over benign clients of the global model's accuracy on each
// client's local test split (clients without one are skipped).
double SeedRun::evaluate_local() {
  const int64_t clients = c_.data.integer("clients");
  std::vector<double> accuracy(static_cast<size_t>(clients), kNoValue);
  const TransformSpec* transform = is_identity_transform(shared_.eval_transform) ? nullptr : &shared_.eval_transform;
  pool_.run(clients, [&](int64_t client, int worker) {
    if (is_malicious_[client] || partition_.test[client].empty()) return;
    load_global(worker);
    accuracy[client] = evaluate(*replicas_[worker], shared_.train, c_.eval.integer("batch"), partition_.test[client],
                                transform).accuracy;
  });
  return mean_std(accuracy).mean;
}

PersonalRecord SeedRun::evaluate_personalized(int64_t round) {
  const TransformSpec* transform = is_identity_transform(shared_.eval_transform) ? nullptr : &shared_.eval_transform;
  PersonalEvalInput input{*client_rule_, post_, global_, client_states_,
                          personal_eval_clients(is_malicious_, c_.eval.integer("personal_clients"),
                                                root_.fork(kPersonalSubset).fork(static_cast<uint64_t>(round))),
                          local_tests_, shared_.train, partition_, shared_.train_transform, transform, shared_.test,
                          test_indices_, backdoor_ ? &*backdoor_ : nullptr, backdoor_indices_,
                          c_.eval.boolean("asr_include_target"), c_.eval.boolean("personal_global"),
                          c_.eval.text("personal_asr") == "local", c_.eval.integer("batch"), round,
                          c_.experiment.integer("rounds"), root_.fork(kPostStep)};
  const PersonalRecord record = evaluate_personal(input, pool_, replicas_, &net_);
  std::fill(loaded_version_.begin(), loaded_version_.end(), -1);  // the replicas hold client models now
  return record;
}

void SeedRun::evaluate_round(int64_t round) {
  // Training and evaluation cache buffers of other sizes: give each phase's back before the other
  // (ResNet18 / CIFAR-10 round: 2.66 GB max RSS with both cached, 2.33 GB without).
  storage_pool_release_all();
  RoundRecord record = pending_;
  record.round = round;
  const EvalResult clean = evaluate_global(test_indices_, nullptr);
  record.acc = clean.accuracy;
  record.loss = clean.loss;
  if (backdoor_) {
    PoisonSpec poison;
    poison.trigger = &backdoor_->trigger;
    poison.target = backdoor_->target;
    poison.per_batch = c_.eval.integer("batch");  // every sample of every batch
    record.asr = evaluate_global(backdoor_indices_, &poison).accuracy;
  }
  // Per client: truth is the client's identity (is_malicious_), whether or not its attack is active yet.
  record.client_detection = client_detection_rates(client_flags_, is_malicious_);
  if (c_.eval.boolean("local")) record.local_acc = evaluate_local();
  if (c_.eval.boolean("personalized")) record.personal = evaluate_personalized(round);
  records_.push_back(as_printed(record));
  pending_ = RoundRecord{};
  storage_pool_release_all();
}

void SeedRun::run(const RunOptions& options) {
  const int64_t rounds = c_.experiment.integer("rounds");
  const int64_t checkpoint_every = c_.run.integer("checkpoint_every");
  std::vector<float> uploads;
  std::vector<ClientResult> results;
  for (int64_t round = next_round_; round <= rounds; ++round) {
    const auto round_start = std::chrono::steady_clock::now();
    const bool attack_on = attack_active(round);
    const std::vector<int64_t> sampled = round_clients(round, attack_on);
    const int64_t m = static_cast<int64_t>(sampled.size());
    const std::vector<int64_t> rows = owned_rows(sampled, net_.rank(), net_.size());
    bytes_before_round_ = net_.bytes_moved();
    uploads.resize(static_cast<size_t>(m * sharing_.width));
    results.assign(static_cast<size_t>(m), ClientResult{});
    if (is_server()) {
      prepare_start_states(round, sampled, attack_on);
      prepare_messages(round, sampled);
    }
    if (spread()) send_client_inputs(sampled, rows);
    train_clients(round, sampled, rows, attack_on, uploads, results);
    if (spread()) collect_client_outputs(rows, uploads, results);
    const double train_seconds = seconds_since(round_start);
    const auto aggregate_start = std::chrono::steady_clock::now();
    if (sharing_.width > 0 && is_server()) {  // a rule that shares nothing (local) has no server step
      if (attack_on) attack_uploads(round, sampled, uploads);
      aggregate(round, sampled, attack_on, uploads, results);
    }
    if (sharing_.width > 0 && spread()) share_global();
    const double aggregate_seconds = seconds_since(aggregate_start);
    pending_.sampled = m;
    pending_.malicious = 0;
    double loss_sum = 0.0;
    for (size_t i = 0; i < sampled.size(); ++i) {
      pending_.malicious += attack_on && is_malicious_[sampled[i]];
      loss_sum += results[i].train_loss;
    }
    pending_.train_loss = last_train_loss_ = loss_sum / static_cast<double>(m);
    // Bytes over the shared columns only: what goes up, and what each client receives of the server's state.
    pending_.bytes_up += m * sharing_.width * static_cast<int64_t>(sizeof(float));
    pending_.bytes_down += m * sharing_.width * static_cast<int64_t>(sizeof(float));
    pending_.bytes_down += message_bytes();  // a method server's messages, and its clients' extra uploads
    for (const ClientResult& result : results)
      pending_.bytes_up += static_cast<int64_t>(result.extra_upload.size() * sizeof(float));
    const auto eval_start = std::chrono::steady_clock::now();
    if (round % c_.eval.integer("every") == 0 || round == rounds) {
      if (is_server()) evaluate_round(round);
      else if (c_.eval.boolean("personalized")) evaluate_personalized(round);  // this rank's share of it
    }
    timings_.push_back({round, train_seconds, aggregate_seconds, seconds_since(eval_start), seconds_since(round_start)});
    next_round_ = round + 1;
    if (is_server()) write_results();
    if (checkpoint_every > 0 && (round % checkpoint_every == 0 || round == rounds)) {
      if (spread()) collect_client_states();
      if (is_server()) save_checkpoint(dir_ + "/checkpoint.safetensors", checkpoint_state());
    }
    if (is_server()) log_progress(options, round, seconds_since(round_start));
    if (options.stop_after_round > 0 && round >= options.stop_after_round) return;
  }
}

// Spread over ranks (fl/core/spread_round.h): the owners' start rows and messages, from rank 0.
void SeedRun::send_client_inputs(const std::vector<int64_t>& sampled, const std::vector<int64_t>& rows) {
  std::vector<Bytes> parts;
  if (is_server()) parts = pack_client_inputs(sampled, net_.size(), starts_, D_, messages_);
  const Bytes mine = net_.scatter(parts);
  if (!is_server()) unpack_client_inputs(mine, rows, static_cast<int64_t>(sampled.size()), D_, starts_, messages_);
}

// The owners' upload rows and results, into their sampled positions on rank 0.
void SeedRun::collect_client_outputs(const std::vector<int64_t>& rows, std::vector<float>& uploads,
                                     std::vector<ClientResult>& results) {
  const Bytes mine = is_server() ? Bytes{} : pack_client_outputs(rows, uploads, sharing_.width, results);
  const std::vector<Bytes> parts = net_.gather(mine);
  if (is_server()) unpack_client_outputs(parts, sharing_.width, uploads, results);
}

// The aggregated global state, from rank 0 to every rank.
void SeedRun::share_global() {
  Bytes bytes;
  if (is_server()) {
    const char* p = reinterpret_cast<const char*>(global_.data());
    bytes.assign(p, p + global_.size() * sizeof(float));
  }
  net_.broadcast(bytes);
  if (is_server()) return;
  BASTION_CHECK(bytes.size() == global_.size() * sizeof(float), "MPI: a global state of ", bytes.size(), " bytes");
  std::memcpy(global_.data(), bytes.data(), bytes.size());
  ++version_;
}

// Before a checkpoint: every client's state onto rank 0, which writes them all (so any K can resume).
void SeedRun::collect_client_states() {
  const std::vector<Bytes> parts = net_.gather(pack_client_states(client_states_, net_.rank(), net_.size()));
  if (is_server()) unpack_client_states(parts, client_states_);
}

void SeedRun::write_results() const {
  write_file_atomic(dir_ + "/rounds.csv", rounds_csv(records_));
  write_file_atomic(dir_ + "/timing.csv", timing_csv(timings_));
}

void SeedRun::log_progress(const RunOptions& options, int64_t round, double round_seconds) const {
  if (!options.log) return;
  const int64_t rounds = c_.experiment.integer("rounds");
  double total = 0.0;
  for (const RoundTiming& t : timings_) total += t.round_seconds;
  const double eta = total / static_cast<double>(timings_.size()) * static_cast<double>(rounds - round);
  const RoundRecord last = records_.empty() ? RoundRecord{} : records_.back();
  char line[256];
  std::snprintf(line, sizeof line, "seed %llu round %lld/%lld  acc %s  asr %s  train_loss %.4f  %.2fs/round  eta %.0fs",
                static_cast<unsigned long long>(seed_), static_cast<long long>(round), static_cast<long long>(rounds),
                percent(last.acc).c_str(), percent(last.asr).c_str(), last_train_loss_,
                round_seconds, eta);
  std::string text = line;
  if (last.personal.present) text += "  p_acc " + percent(last.personal.acc.mean) + "  p_asr " + percent(last.personal.asr.mean);
  if (spread()) {  // what crossed between the ranks this round (fl/core/spread_round.h)
    std::snprintf(line, sizeof line, "  mpi %.3f MB", static_cast<double>(net_.bytes_moved() - bytes_before_round_) / 1e6);
    text += line;
  }
  options.log(text);
}

CheckpointState SeedRun::checkpoint_state() const {
  CheckpointState state;
  state.round = next_round_ - 1;
  state.seed = seed_;
  state.config_toml = config_to_toml(c_);
  state.global = global_;
  state.server_state = server_rule_->save_state();
  if (method_server_) state.method_state = method_server_->save_state();
  state.clients = client_states_;
  state.client_flags = client_flags_;
  state.records = records_;
  state.pending = pending_;
  state.timings = timings_;
  return state;
}

void SeedRun::restore(const CheckpointState& state) {
  BASTION_CHECK(state.seed == seed_, "checkpoint is for seed ", state.seed, ", this run is seed ", seed_);
  BASTION_CHECK(static_cast<int64_t>(state.global.size()) == D_, "checkpoint holds a model of ", state.global.size(),
                " values, this config's model has ", D_);
  BASTION_CHECK(state.clients.size() == client_states_.size(), "checkpoint has ", state.clients.size(),
                " clients, this config ", client_states_.size());
  BASTION_CHECK(state.round <= c_.experiment.integer("rounds"), "checkpoint is from round ", state.round,
                ", after this config's last round ", c_.experiment.integer("rounds"), ": rounds may grow, not shrink");
  global_ = state.global;
  ++version_;
  server_rule_->load_state(state.server_state);
  if (method_server_) method_server_->load_state(state.method_state);
  client_states_ = state.clients;
  // A checkpoint from before per-client detection holds no verdicts: every client starts unflagged.
  client_flags_ = state.client_flags.empty() ? std::vector<uint8_t>(client_states_.size(), 0) : state.client_flags;
  BASTION_CHECK(client_flags_.size() == client_states_.size(), "checkpoint has ", client_flags_.size(),
                " client verdicts for ", client_states_.size(), " clients");
  records_ = state.records;
  pending_ = state.pending;
  timings_ = state.timings;
  next_round_ = state.round + 1;
}

void resume_seed(SeedRun& run, const std::string& config_toml, const RunOptions& options) {
  const std::string path = run.dir_ + "/checkpoint.safetensors";
  if (!std::filesystem::exists(path)) {
    if (options.log) options.log("no checkpoint in " + run.dir_ + ": seed " + std::to_string(run.seed_) + " starts at round 1");
    return;
  }
  const CheckpointState state = load_checkpoint(path);
  check_resumable(path, state.config_toml, config_toml);
  run.restore(state);
  if (options.log) options.log("resumed seed " + std::to_string(run.seed_) + " after round " + std::to_string(state.round));
}

// K > 1: rank 0 reads the checkpoint (or finds none) and sends it to every rank, so the other ranks need
// not see the output folder; each rank then restores it whole (and uses its own clients' states).
void resume_seed_spread(SeedRun& run, const std::string& config_toml, const RunOptions& options) {
  const std::string path = run.dir_ + "/checkpoint.safetensors";
  std::string bytes;
  if (run.is_server() && std::filesystem::exists(path)) {
    const CheckpointState state = load_checkpoint(path);
    check_resumable(path, state.config_toml, config_toml);
    bytes = safetensors_bytes(checkpoint_file(state), path);
  }
  Bytes message(bytes.begin(), bytes.end());
  run.net_.broadcast(message);
  const bool server = run.is_server() && options.log;
  if (message.empty()) {
    if (server) options.log("no checkpoint in " + run.dir_ + ": seed " + std::to_string(run.seed_) + " starts at round 1");
    return;
  }
  const CheckpointState state = parse_checkpoint(
      parse_safetensors_bytes(reinterpret_cast<const uint8_t*>(message.data()), message.size(), path), path);
  run.restore(state);
  if (server) options.log("resumed seed " + std::to_string(run.seed_) + " after round " + std::to_string(state.round));
}

}  // namespace

std::vector<RunSummary> run_experiment(const ExperimentConfig& config, const RunOptions& options) {
  const int threads = options.threads > 0 ? options.threads : static_cast<int>(config.run.integer("threads"));
  const std::unique_ptr<RunTransport> net =
      options.spread_over_ranks ? make_run_transport() : std::make_unique<LocalTransport>();
  const bool server = net->rank() == 0;  // under mpirun only rank 0 touches the output folder
  const std::string config_toml = config_to_toml(config);
  if (server) {
    prepare_out_dir(options.out_dir, options);
    if (options.resume) check_resume_folder(options.out_dir, config_toml);
    write_file_atomic(options.out_dir + "/config.toml", config_toml);
  }
  set_num_threads(threads);
  const SharedData shared = load_shared_data(config);
  const int64_t repeat = config.experiment.integer("repeat");
  std::vector<RunSummary> summaries;
  std::vector<std::vector<RoundRecord>> curves;
  for (int64_t r = 0; r < repeat; ++r) {
    const uint64_t seed = static_cast<uint64_t>(config.experiment.integer("seed") + r);
    const std::string dir = repeat == 1 ? options.out_dir : options.out_dir + "/seed-" + std::to_string(seed);
    if (repeat > 1 && server) prepare_out_dir(dir, options);
    SeedRun run(config, shared, seed, threads, dir, options, *net);
    if (options.resume && net->size() > 1) resume_seed_spread(run, config_toml, options);
    else if (options.resume) resume_seed(run, config_toml, options);
    run.run(options);
    if (options.stop_after_round > 0) return summaries;  // simulated kill: no summary
    if (!server) continue;
    summaries.push_back(run.summary());
    curves.push_back(run.records());
  }
  if (!server) return summaries;  // empty: rank 0 reports
  const std::string name = config.experiment.text("name");
  write_file_atomic(options.out_dir + "/summary.json", summary_json(name, config.eval.text("report"), summaries));
  write_file_atomic(options.out_dir + "/curves.svg", curves_svg(name, curves));
  return summaries;
}

}  // namespace bastion
