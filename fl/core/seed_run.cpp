#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <numeric>

#include "fl/clients/local_training.h"
#include "fl/core/sampling.h"
#include "fl/core/seed_run.h"
#include "fl/core/spread_round.h"
#include "fl/metrics/tensorboard.h"
#include "nn/model_file.h"
#include "nn/models.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU time of this process so far, every thread (client pool, BLAS), user + system: a round's difference is
// its core-seconds even when other work shares the cores, where wall time x threads counts the waits too.
double process_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return kNoValue;
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string percent(double value) {
  if (std::isnan(value)) return "   -  ";
  char text[32];
  std::snprintf(text, sizeof text, "%6.2f%%", 100.0 * value);
  return text;
}

// One GPU stream: on the device, clients train one after another. The server rule's math on the host
// (FedCPA's ranks, the coordinate-wise rules) still takes every thread (server_pool_).
int client_workers(int threads, Device device) { return device == Device::CUDA ? 1 : threads; }

}  // namespace

SeedRun::SeedRun(const ExperimentConfig& config, const SharedData& shared, uint64_t seed, int threads, Device device,
                 std::string dir, const RunOptions& options, RunTransport& net)
    : c_(config), shared_(shared), seed_(seed), root_(seed), dir_(std::move(dir)),
      pool_(client_workers(threads, device)), server_pool_(threads), net_(net) {
  threads = client_workers(threads, device);  // from here on: one model replica per client worker
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
  if (!c_.model.text("init").empty()) load_model_file(*replicas_[0], c_.model.text("init"));
  const std::span<const float> state = replicas_[0]->flat_state();
  global_.assign(state.begin(), state.end());
  own_last_ = c_.eval.boolean("personalized") && c_.eval.text("personal_model") == "own-last";
  if (own_last_) initial_ = global_;
  P_ = replicas_[0]->num_parameters();
  sharing_ = shared_columns(*replicas_[0], client_rule_->traits().shared);
  server_rule_ = build_server_rule(c_, *replicas_[0], sharing_);
  weight_columns_ = weight_columns(*replicas_[0], sharing_);
  if (options.wrap_server_rule) server_rule_ = options.wrap_server_rule(std::move(server_rule_));
  method_server_ = client_rule_->make_method_server(c_.data.integer("clients"), P_);
  BASTION_CHECK(!method_server_ || sharing_.all || !method_server_->needs_all_columns(), "client rule '",
                c_.clients.text("rule"), "' keeps server state over the whole model: it must share every column");
  post_ = client_rule_->post_step();
  if (!post_) post_ = post_spec_from_section(c_.post);
  if (device == Device::CUDA) {
    check_device_support(c_, *client_rule_);
    devices_ = DeviceReplicas(replicas_);
  }
  if (client_rule_->traits().second_model)
    for (int w = 0; w < threads; ++w)
      second_replicas_.push_back(make_model(c_.model.text("name"), shared.input, shared.train.num_classes, init_seed));
  if (device == Device::CUDA) second_devices_ = DeviceReplicas(second_replicas_);
  if (!partition_.server.empty())
    server_data_.emplace(*replicas_[0], shared.train, partition_.server, shared.train_transform, shared.eval_transform,
                         c_.eval.integer("batch"), client_local_schedule(c_.client_rule));
  D_ = static_cast<int64_t>(global_.size());
  client_states_.resize(static_cast<size_t>(c_.data.integer("clients")));
  client_flags_.assign(client_states_.size(), 0);
  sampled_since_eval_.assign(client_states_.size(), 0);
  const std::string clients_csv = c_.eval.text("clients_csv");
  clients_csv_ =
      clients_csv == "on" || (clients_csv == "auto" && (c_.eval.boolean("personalized") || !malicious_.empty()));
  loaded_version_.assign(static_cast<size_t>(threads), -1);
  test_indices_.resize(static_cast<size_t>(shared.test.size()));
  std::iota(test_indices_.begin(), test_indices_.end(), int64_t{0});
  prepare_backdoor_test();
  if (c_.eval.boolean("personalized"))
    local_tests_ = make_local_test_sets(c_.data.text("local_test"), shared.train, shared.test, partition_,
                                        root_.fork(kLocalTest).next_u64());
}

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
  if (client_rule_->traits().every_client_trains) {
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

// The server rule's round plan (ServerRule::plan_round): starts_ holds each sampled client's start state,
// or stays empty when every client starts from the global state.
void SeedRun::prepare_start_states(int64_t round, const std::vector<int64_t>& sampled, bool attack_on) {
  starts_.clear();
  if (sharing_.width == 0) return;
  const RequestUpdates request = [&](const std::vector<int64_t>& asked, std::span<const float> base) {
    return request_updates(round, asked, base, attack_on);
  };
  plan_start_states(*server_rule_, sharing_, global_, global_shared(), sampled, request, starts_);
}

// A round plan's request path (FedCAP's non-uploaders): the asked clients train from the rule's `base`
// state on copies of their ClientState (their own state stays as it was), on their own random streams;
// model attacks act on these updates as on a round's uploads. Traffic: the base down, the update up.
std::vector<float> SeedRun::request_updates(int64_t round, const std::vector<int64_t>& asked,
                                            std::span<const float> base, bool attack_on) {
  // The request trains on copies of the asked clients' states, which live on their owners under mpirun.
  BASTION_CHECK(!spread(), "server rule '", c_.server.text("rule"), "' asks clients for updates outside the round ",
                "(its request path), which mpirun does not spread over ranks yet: run it in one process, or without ",
                "the requests (FedCAP: server.fedcap.non_uploaders = \"global\")");
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
  pending_.bytes_up += m * width * static_cast<int64_t>(sizeof(float));
  pending_.bytes_down += m * width * static_cast<int64_t>(sizeof(float));
  starts_.clear();
  return updates;
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
    Model& host = *replicas_[worker];
    const std::span<const float> start =
        starts_.empty() ? std::span<const float>(global_) : std::span<const float>(starts_.data() + i * D_, D_);
    std::copy(start.begin(), start.end(), host.flat_state().begin());
    Model& model = devices_.upload(worker, host);  // the host replica itself on a CPU run
    loaded_version_[worker] = -1;                  // the replica now holds a client's model, not the global one
    const int64_t client = sampled[i];
    const bool attacker = attack_on && is_malicious_[client];
    ClientState& state = scratch ? (*scratch)[static_cast<size_t>(i)] : client_states_[client];
    ClientTask task{model,
                    shared_.train,
                    partition_.train[client],
                    shared_.train_transform,
                    state,
                    client,
                    round,
                    client_streams.fork(static_cast<uint64_t>(client)).next_u64(),
                    root_.fork(kClientFixed).fork(static_cast<uint64_t>(client)).next_u64(),
                    attacker ? attacks_.data : nullptr,
                    attacker ? attacker_index_.at(client) : 0,
                    second_replicas_.empty() ? nullptr : &second_devices_.model(worker, *second_replicas_[worker]),
                    messages_.empty() ? nullptr : &messages_[static_cast<size_t>(i)]};
    results[i] = client_rule_->train(task);
    model.set_all_trainable(true);  // a rule that froze a part leaves the replica whole for the next client
    devices_.download(worker, host);
    if (own_last_ && !scratch)
      store(state, kOwnLastKey, host.flat_state());  // a request's training is not the client's own
    sharing_.difference(host.flat_state(), start, uploads.data() + i * width);
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
    CollusionContext context{view.data(),
                             static_cast<int64_t>(view_rows.size()),
                             parameters,
                             m,
                             static_cast<int64_t>(attacker_rows.size()),
                             global_part,
                             streams.fork(0),
                             {}};
    attacks_.collusion->collude(malicious_update, context);
    for (const auto& [key, value] : context.resolved)
      resolved_["attack." + attacks_.collusion_name + "." + key] = value;
    for (int64_t row : attacker_rows)
      std::copy(malicious_update.begin(), malicious_update.end(), uploads.data() + row * width);
  }
  for (int64_t row : attacker_rows) {
    for (const Attack* attack : attacks_.upload) {
      UploadAttackContext context{global_part, parameters, m, streams.fork(static_cast<uint64_t>(sampled[row]) + 1)};
      attack->corrupt_upload(std::span<float>(uploads.data() + row * width, static_cast<size_t>(width)), context);
    }
  }
}

// One round reads configure -> train -> aggregate -> record -> evaluate -> finish; under mpirun every
// rank takes the same steps, and the transport steps inside them do nothing in one process.
void SeedRun::run(const RunOptions& options) {
  begin_run(options);
  RoundWork work;  // its buffers are reused from round to round
  for (int64_t round = next_round_; round <= c_.experiment.integer("rounds"); ++round) {
    configure_round(round, work);  // sample; the server's start states and messages reach the clients' owners
    train_round(work);             // this rank's clients train; their uploads reach the server
    aggregate_round(work);         // attacks on the uploads, the server rule, the new global model shared
    record_round(work);            // what the round did, into the counters the next evaluation reports
    evaluate_round_if_due(work);
    if (finish_round(options, work)) return;  // timing, results files, checkpoint, progress; a test's stop
  }
}

void SeedRun::begin_run(const RunOptions& options) {
  if (is_server()) write_partition();  // the same every time: a resumed run rewrites it unchanged
  tensorboard_dir_ = options.tensorboard_dir;
  last_checkpoint_ = last_results_write_ = std::chrono::steady_clock::now();
  auto_checkpoint_seconds_ = options.auto_checkpoint_seconds;
  results_write_seconds_ = options.results_write_seconds;
}

void SeedRun::configure_round(int64_t round, RoundWork& work) {
  work.start = std::chrono::steady_clock::now();
  work.cpu_start = process_cpu_seconds();
  work.round = round;
  work.attack_on = attack_active(round);
  work.sampled = round_clients(round, work.attack_on);
  work.rows = owned_rows(work.sampled, net_.rank(), net_.size());
  bytes_before_round_ = net_.bytes_moved();
  const int64_t m = static_cast<int64_t>(work.sampled.size());
  work.uploads.resize(static_cast<size_t>(m * sharing_.width));
  work.results.assign(static_cast<size_t>(m), ClientResult{});
  if (is_server()) {
    prepare_start_states(round, work.sampled, work.attack_on);
    prepare_messages(round, work.sampled);
  }
  send_client_inputs(work.sampled, work.rows);
}

void SeedRun::train_round(RoundWork& work) {
  train_clients(work.round, work.sampled, work.rows, work.attack_on, work.uploads, work.results);
  collect_client_outputs(work.rows, work.uploads, work.results);
  work.train_seconds = seconds_since(work.start);
}

void SeedRun::aggregate_round(RoundWork& work) {
  const auto start = std::chrono::steady_clock::now();
  if (sharing_.width > 0) {  // a rule that shares nothing (local) has no server step
    if (is_server() && work.attack_on) attack_uploads(work.round, work.sampled, work.uploads);
    if (is_server()) aggregate(work.round, work.sampled, work.attack_on, work.uploads, work.results);
    share_global();
  }
  work.aggregate_seconds = seconds_since(start);
}

// The round's counters (pending_ until the next evaluated round reports them) and client notes.
void SeedRun::record_round(const RoundWork& work) {
  const int64_t m = static_cast<int64_t>(work.sampled.size());
  pending_.sampled = m;
  pending_.malicious = 0;
  double loss_sum = 0.0;
  for (size_t i = 0; i < work.sampled.size(); ++i) {
    sampled_since_eval_[work.sampled[i]] = 1;
    pending_.malicious += work.attack_on && is_malicious_[work.sampled[i]];
    loss_sum += work.results[i].train_loss;
    if (!work.results[i].note.empty()) notes_.push_back({work.round, work.sampled[i], work.results[i].note});
  }
  pending_.train_loss = last_train_loss_ = loss_sum / static_cast<double>(m);
  // Bytes over the shared columns only: what goes up, and what each client receives of the server's state.
  pending_.bytes_up += m * sharing_.width * static_cast<int64_t>(sizeof(float));
  pending_.bytes_down += m * sharing_.width * static_cast<int64_t>(sizeof(float));
  pending_.bytes_down += message_bytes();  // a method server's messages, and its clients' extra uploads
  for (const ClientResult& result : work.results)
    pending_.bytes_up += static_cast<int64_t>(result.extra_upload.size() * sizeof(float));
}

void SeedRun::evaluate_round_if_due(RoundWork& work) {
  const auto start = std::chrono::steady_clock::now();
  if (work.round % c_.eval.integer("every") == 0 || work.round == c_.experiment.integer("rounds")) {
    if (is_server())
      evaluate_round(work.round);
    else if (c_.eval.boolean("personalized"))
      evaluate_personalized(work.round);  // this rank's share of it
  }
  work.eval_seconds = seconds_since(start);
}

// True when a test's RunOptions::stop_after_round says to stop here.
bool SeedRun::finish_round(const RunOptions& options, const RoundWork& work) {
  const int64_t round = work.round, rounds = c_.experiment.integer("rounds");
  // cpu_s only where this process ran the whole round: a run spread over ranks spends CPU in each.
  const double cpu_seconds = net_.size() == 1 ? process_cpu_seconds() - work.cpu_start : kNoValue;
  timings_.push_back(
      {round, work.train_seconds, work.aggregate_seconds, work.eval_seconds, seconds_since(work.start), cpu_seconds});
  next_round_ = round + 1;
  const bool checkpoint = checkpoint_due(round, rounds);  // collective under mpirun: every rank asks
  // The results files are rewritten whole (atomically), so rewriting them every round of a fast run costs
  // O(rounds^2) bytes: at most every results_write_seconds_, and always at a checkpoint, the last round and
  // a test's stop; a resume rewrites them from the checkpoint anyway.
  const bool stopping = options.stop_after_round > 0 && round >= options.stop_after_round;
  if (is_server() &&
      (checkpoint || round == rounds || stopping || seconds_since(last_results_write_) >= results_write_seconds_)) {
    write_results();
    last_results_write_ = std::chrono::steady_clock::now();
  }
  if (checkpoint) {
    collect_client_states();
    if (is_server()) save_checkpoint(dir_ + "/checkpoint.safetensors", checkpoint_state());
  }
  if (is_server()) log_progress(options, round, seconds_since(work.start));
  return stopping;
}

// run.checkpoint_every: N > 0 every N rounds and the last; 0 never; -1 (the default) at most once a
// minute by the server's clock, and the last round when one was written before (so a run of a minute or
// more can be extended with --resume). Under mpirun the server's decision is broadcast: saving the
// client states is collective.
bool SeedRun::checkpoint_due(int64_t round, int64_t rounds) {
  const int64_t every = c_.run.integer("checkpoint_every");
  if (every > 0) return round % every == 0 || round == rounds;
  if (every == 0) return false;
  bool due = is_server() && (seconds_since(last_checkpoint_) >= auto_checkpoint_seconds_ ||
                             (round == rounds && wrote_auto_checkpoint_));
  if (spread()) {
    Bytes flag{static_cast<char>(due)};
    net_.broadcast(flag);
    due = flag.at(0) != 0;
  }
  if (due) {
    last_checkpoint_ = std::chrono::steady_clock::now();
    wrote_auto_checkpoint_ = true;
  }
  return due;
}

void SeedRun::write_partition() const {
  std::vector<int64_t> test_sizes;
  for (const std::vector<int64_t>& test : partition_.test) test_sizes.push_back(static_cast<int64_t>(test.size()));
  write_file_atomic(dir_ + "/partition.csv",
                    partition_csv(class_histogram(shared_.train, partition_.train), test_sizes, malicious_));
}

void SeedRun::write_results() const {
  const std::string rounds = rounds_csv(records_);
  write_file_atomic(dir_ + "/rounds.csv", rounds);
  if (!tensorboard_dir_.empty()) {
    std::filesystem::create_directories(tensorboard_dir_);
    write_file_atomic(tensorboard_dir_ + "/" + kTensorboardEventFile, tensorboard_events(rounds, timings_));
  }
  write_file_atomic(dir_ + "/timing.csv", timing_csv(timings_));
  if (!notes_.empty()) write_file_atomic(dir_ + "/client_notes.csv", client_notes_csv(notes_));
  if (!client_rows_.empty() && client_rows_.back().round == next_round_ - 1)  // rows are added at evaluations only
    write_file_atomic(dir_ + "/clients.csv", clients_csv(client_rows_));
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
                percent(last.acc).c_str(), percent(last.asr).c_str(), last_train_loss_, round_seconds, eta);
  std::string text = line;
  if (last.personal.present)
    text += "  p_acc " + percent(last.personal.acc.mean) + "  p_asr " + percent(last.personal.asr.mean);
  if (spread()) {  // what crossed between the ranks this round (fl/core/spread_round.h)
    std::snprintf(line, sizeof line, "  mpi %.3f MB",
                  static_cast<double>(net_.bytes_moved() - bytes_before_round_) / 1e6);
    text += line;
  }
  options.log(text);
}
}  // namespace bastion
