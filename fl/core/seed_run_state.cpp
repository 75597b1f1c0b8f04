#include <cstring>
#include <filesystem>

#include "fl/core/seed_run.h"
#include "fl/core/spread_round.h"
#include "nn/model_file.h"
#include "tensor/error.h"
#include "tensor/safetensors.h"
#include "data/idx.h"  // read_text_file
#include "tensor/file_io.h"

namespace bastion {

// The steps between ranks (fl/core/spread_round.h); each does nothing in one process.
// The owners' start rows and messages, from rank 0.
void SeedRun::send_client_inputs(const std::vector<int64_t>& sampled, const std::vector<int64_t>& rows) {
  if (!spread()) return;
  std::vector<Bytes> parts;
  if (is_server()) parts = pack_client_inputs(sampled, net_.size(), starts_, D_, messages_);
  const Bytes mine = net_.scatter(parts);
  if (!is_server()) unpack_client_inputs(mine, rows, static_cast<int64_t>(sampled.size()), D_, starts_, messages_);
}

// The owners' upload rows and results, into their sampled positions on rank 0.
void SeedRun::collect_client_outputs(const std::vector<int64_t>& rows, std::vector<float>& uploads,
                                     std::vector<ClientResult>& results) {
  if (!spread()) return;
  const Bytes mine = is_server() ? Bytes{} : pack_client_outputs(rows, uploads, sharing_.width, results);
  const std::vector<Bytes> parts = net_.gather(mine);
  if (is_server()) unpack_client_outputs(parts, sharing_.width, uploads, results);
}

// The aggregated global state, from rank 0 to every rank.
void SeedRun::share_global() {
  if (!spread()) return;
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
  if (!spread()) return;
  const std::vector<Bytes> parts = net_.gather(pack_client_states(client_states_, net_.rank(), net_.size()));
  if (is_server()) unpack_client_states(parts, client_states_);
}
void SeedRun::save_models() {
  collect_client_states();
  if (!is_server()) return;
  Model& model = *replicas_[0];
  const std::map<std::string, std::string> metadata = {{"dataset", shared_.train.name},
                                                       {"seed", std::to_string(seed_)}};
  std::copy(global_.begin(), global_.end(), model.flat_state().begin());
  loaded_version_[0] = -1;
  save_model_file(model, dir_ + "/model.safetensors", metadata);
  SafetensorsFile personal;
  personal.metadata = metadata;
  personal.metadata["model"] = model.name();
  std::vector<float> own(global_.size());
  for (size_t k = 0; k < client_states_.size(); ++k) {
    if (is_malicious_[k] || !client_rule_->personal_model(client_states_[k], global_, model, own)) continue;
    std::copy(own.begin(), own.end(), model.flat_state().begin());
    const std::string prefix = "clients." + std::to_string(k) + ".";
    for (const ParameterView& p : model.parameters()) personal.f32.emplace_back(prefix + p.name, p.value.clone());
    for (const ParameterView& b : model.buffers()) personal.f32.emplace_back(prefix + b.name, b.value.clone());
  }
  if (!personal.f32.empty()) save_safetensors(dir_ + "/personal-models.safetensors", personal);
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
  restore_client_notes(state.round);
  // clients.csv's "sampled" since the last evaluated round: the sampling is a function of (seed, round).
  std::fill(sampled_since_eval_.begin(), sampled_since_eval_.end(), 0);
  for (int64_t round = records_.empty() ? 1 : records_.back().round + 1; round <= state.round; ++round)
    for (int64_t client : round_clients(round, attack_active(round))) sampled_since_eval_[client] = 1;
}

// client_notes.csv is not in the checkpoint (it holds text): a resumed run keeps the file's rows up to the
// checkpoint's round and writes the later ones again. A missing file starts empty (its rows are lost).
void SeedRun::restore_client_notes(int64_t round) {
  notes_.clear();
  client_rows_.clear();
  if (!is_server()) return;
  const std::string path = dir_ + "/client_notes.csv";
  if (std::filesystem::exists(path))
    for (ClientNote& note : parse_client_notes_csv(read_text_file(path)))
      if (note.round <= round) notes_.push_back(std::move(note));
  const std::string rows_path = dir_ + "/clients.csv";  // the same for clients.csv
  if (std::filesystem::exists(rows_path))
    for (const ClientRow& row : parse_clients_csv(read_text_file(rows_path)))
      if (row.round <= round) client_rows_.push_back(row);
}

void resume_seed(SeedRun& run, const std::string& config_toml, const RunOptions& options) {
  const std::string path = run.dir_ + "/checkpoint.safetensors";
  if (!std::filesystem::exists(path)) {
    if (options.log)
      options.log("no checkpoint in " + run.dir_ + ": seed " + std::to_string(run.seed_) + " starts at round 1");
    return;
  }
  const CheckpointState state = load_checkpoint(path);
  check_resumable(path, state.config_toml, config_toml);
  run.restore(state);
  if (options.log)
    options.log("resumed seed " + std::to_string(run.seed_) + " after round " + std::to_string(state.round));
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
    if (server)
      options.log("no checkpoint in " + run.dir_ + ": seed " + std::to_string(run.seed_) + " starts at round 1");
    return;
  }
  const CheckpointState state = parse_checkpoint(
      parse_safetensors_bytes(reinterpret_cast<const uint8_t*>(message.data()), message.size(), path), path);
  run.restore(state);
  if (server) options.log("resumed seed " + std::to_string(run.seed_) + " after round " + std::to_string(state.round));
}
}  // namespace bastion
