#include <algorithm>
#include <map>

#include "fl/core/seed_run.h"
#include "tensor/error.h"

namespace bastion {

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
  const MethodRound round{uploads,           static_cast<int64_t>(accepted_clients.size()),
                          sharing_.width,    sharing_.parameters,
                          &accepted_clients, &extra,
                          global_shared(),   output.weights};
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
  const std::vector<int64_t> accepted_clients =
      compact_finite_uploads(uploads.data(), width, sampled, round, c_.server.text("on_invalid") == "fail");
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
  const AggregationInput input{.updates = uploads.data(),
                               .n = n,
                               .D = width,
                               .num_parameters = sharing_.parameters,
                               .num_samples = samples,
                               .clients = accepted_clients,
                               .round = round,
                               .last_round = c_.experiment.integer("rounds"),
                               .seed = root_.fork(kServer).fork(static_cast<uint64_t>(round)).next_u64(),
                               .global = global_shared(),
                               .expected_malicious = expected_malicious_count(c_, n),
                               .server_data = server_data,
                               .pool = &server_pool_,
                               .weight_columns = weight_columns_};
  loaded_version_[0] = -1;  // server data (if any) trains and evaluates on replica 0
  AggregationOutput output = server_rule_->aggregate(input);
  for (const auto& [key, value] : output.resolved) resolved_["server." + c_.server.text("rule") + "." + key] = value;
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

Model& SeedRun::load_global(int worker) {
  Model& host = *replicas_[worker];
  if (loaded_version_[worker] == version_) return devices_.model(worker, host);
  std::copy(global_.begin(), global_.end(), host.flat_state().begin());
  loaded_version_[worker] = version_;
  return devices_.upload(worker, host);
}

// Fixed-size chunks, one task each, combined in chunk order: the same sums for any thread count.
EvalResult SeedRun::evaluate_global(const std::vector<int64_t>& indices, const PoisonSpec* poison) {
  const int64_t chunk = c_.eval.integer("batch");
  const int64_t chunks = (static_cast<int64_t>(indices.size()) + chunk - 1) / chunk;
  std::vector<EvalResult> parts(static_cast<size_t>(chunks));
  const TransformSpec* transform = is_identity_transform(shared_.eval_transform) ? nullptr : &shared_.eval_transform;
  pool_.run(chunks, [&](int64_t k, int worker) {
    Model& model = load_global(worker);
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
    accuracy[client] =
        evaluate(load_global(worker), shared_.train, c_.eval.integer("batch"), partition_.test[client], transform)
            .accuracy;
  });
  return mean_std(accuracy).mean;
}

PersonalRecord SeedRun::evaluate_personalized(int64_t round) {
  const TransformSpec* transform = is_identity_transform(shared_.eval_transform) ? nullptr : &shared_.eval_transform;
  PersonalEvalInput input{*client_rule_,
                          post_,
                          global_,
                          client_states_,
                          personal_eval_clients(is_malicious_, c_.eval.integer("personal_clients"),
                                                root_.fork(kPersonalSubset).fork(static_cast<uint64_t>(round))),
                          local_tests_,
                          shared_.train,
                          partition_,
                          shared_.train_transform,
                          transform,
                          shared_.test,
                          test_indices_,
                          backdoor_ ? &*backdoor_ : nullptr,
                          backdoor_indices_,
                          c_.eval.boolean("asr_include_target"),
                          c_.eval.boolean("personal_global"),
                          c_.eval.text("personal_asr") == "local",
                          c_.eval.integer("batch"),
                          round,
                          c_.experiment.integer("rounds"),
                          root_.fork(kPostStep),
                          c_.eval.boolean("personal_received"),
                          own_last_,
                          initial_,
                          c_.eval.text("client_accuracy") == "batch-mean",
                          {}};
  std::vector<float> next_received;
  if (input.received_acc && round == c_.experiment.integer("rounds") &&
      c_.eval.text("personal_received_final") == "next") {
    BASTION_CHECK(!spread(), "eval.personal_received_final = \"next\" asks the server rule for every client's next ",
                  "start state, which mpirun does not spread over ranks: run it in one process");
    if (!plan_start_states(*server_rule_, sharing_, global_, global_shared(), input.clients, {}, next_received))
      for (size_t i = 0; i < input.clients.size(); ++i)  // no plan: every client would receive the global state
        next_received.insert(next_received.end(), global_.begin(), global_.end());
    input.received_rows = next_received;
  }
  const PersonalRecord record = evaluate_personal(input, pool_, replicas_, &net_, &devices_);
  std::fill(loaded_version_.begin(), loaded_version_.end(), -1);  // the replicas hold client models now
  return record;
}

// clients.csv's rows of this evaluated round: every client, with its own figures when it was judged.
void SeedRun::record_client_rows(int64_t round, const PersonalRecord& personal) {
  std::vector<ClientRow> rows(client_states_.size());
  for (size_t k = 0; k < rows.size(); ++k)
    rows[k] = {round, static_cast<int64_t>(k), sampled_since_eval_[k] != 0, is_malicious_[k] != 0,
               client_flags_[k] != 0};
  for (const PersonalClient& judged : personal.per_client) {
    ClientRow& row = rows[static_cast<size_t>(judged.client)];
    row.p_acc = judged.acc;
    row.p_asr = judged.asr;
    row.samples = judged.samples;
  }
  client_rows_.insert(client_rows_.end(), rows.begin(), rows.end());
  std::fill(sampled_since_eval_.begin(), sampled_since_eval_.end(), 0);
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
  if (clients_csv_) record_client_rows(round, record.personal);
  records_.push_back(as_printed(record));
  pending_ = RoundRecord{};
  storage_pool_release_all();
}
}  // namespace bastion
