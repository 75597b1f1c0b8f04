#include "fl/core/personal_eval.h"

#include <algorithm>

#include "data/sampling.h"
#include "fl/core/spread_round.h"
#include "fl/evaluate.h"
#include "tensor/error.h"

namespace bastion {

namespace {

// One client's figures and their weights.
struct ClientFigures {
  double acc = kNoValue, global_acc = kNoValue, asr = kNoValue, received_acc = kNoValue;
  double local_samples = 0, asr_samples = 0;
};

std::vector<int64_t> without_target(const Dataset& data, const std::vector<int64_t>& indices, int32_t target) {
  std::vector<int64_t> kept;
  for (int64_t i : indices)
    if (data.labels[i] != target) kept.push_back(i);
  return kept;
}

// The client's own last trained model, or the run's initial model before its first training.
void load_own_last(const PersonalEvalInput& in, int64_t client, std::span<float> out) {
  const auto& vectors = in.states[client].vectors;
  const auto found = vectors.find(kOwnLastKey);
  const std::span<const float> source = found == vectors.end() ? in.initial : std::span<const float>(found->second);
  BASTION_CHECK(source.size() == out.size(), "eval.personal_model = own-last: client ", client, " holds a model of ",
                source.size(), " values, the model has ", out.size());
  std::copy(source.begin(), source.end(), out.begin());
}

void load_evaluated_model(const PersonalEvalInput& in, int64_t client, Model& model, bool post_now) {
  const std::span<float> state = model.flat_state();
  if (in.own_last && !post_now) return load_own_last(in, client, state);
  if (!in.rule.personal_model(in.states[client], in.global, model, state))
    std::copy(in.global.begin(), in.global.end(), state.begin());
}

// The client's received model: the given row, else the rule's received_model, else the global model.
void load_received(const PersonalEvalInput& in, size_t row, std::span<float> out) {
  if (!in.received_rows.empty()) {
    const std::span<const float> given = in.received_rows.subspan(row * out.size(), out.size());
    std::copy(given.begin(), given.end(), out.begin());
    return;
  }
  if (!in.rule.received_model(in.states[in.clients[row]], out))
    std::copy(in.global.begin(), in.global.end(), out.begin());
}

double client_accuracy(const EvalResult& result, bool batch_mean) {
  return batch_mean ? result.batch_mean_accuracy() : result.accuracy;
}

// The client's model is assembled on `host`; `devices` (or the host replica itself) runs it.
ClientFigures evaluate_client(const PersonalEvalInput& in, size_t row, Model& host, const DeviceReplicas& devices,
                              int worker) {
  const int64_t client = in.clients[row];
  const bool post_now = in.post && in.post->applies(in.round, in.rounds);
  load_evaluated_model(in, client, host, post_now);
  const Generator streams = in.post_streams.fork(static_cast<uint64_t>(in.round)).fork(static_cast<uint64_t>(client));
  const PostStartData start{in.train, in.partition.train[client], in.train_transform, streams.fork(2).next_u64()};
  if (post_now) in.rule.prepare_post_step(in.states[client], in.global, host, start);
  Model& model = devices.upload(worker, host);
  if (post_now) {
    apply_post_step(client_post_spec(*in.post, in.states[client]), model, in.train, in.partition.train[client],
                    in.train_transform, streams.fork(0).next_u64(), streams.fork(1).next_u64());
  }
  ClientFigures figures;
  const std::vector<int64_t>& local = in.local.indices[client];
  if (!local.empty()) {
    figures.acc = client_accuracy(evaluate(model, *in.local.data, in.batch, local, in.eval_transform), in.batch_mean);
    figures.local_samples = static_cast<double>(local.size());
  }
  if (in.global_acc)
    figures.global_acc =
        client_accuracy(evaluate(model, in.test, in.batch, in.test_indices, in.eval_transform), in.batch_mean);
  if (in.backdoor) {
    PoisonSpec poison;
    poison.trigger = &in.backdoor->trigger;
    poison.target = in.backdoor->target;
    poison.per_batch = in.batch;
    const std::vector<int64_t> triggered =
        in.local_asr ? (in.asr_include_target ? local : without_target(*in.local.data, local, in.backdoor->target))
                     : in.backdoor_indices;
    const Dataset& data = in.local_asr ? *in.local.data : in.test;
    if (!triggered.empty()) {
      figures.asr = evaluate(model, data, in.batch, triggered, in.eval_transform, &poison).accuracy;
      figures.asr_samples = static_cast<double>(triggered.size());
    }
  }
  if (in.received_acc && !local.empty()) {
    load_received(in, row, host.flat_state());
    figures.received_acc = client_accuracy(
        evaluate(devices.upload(worker, host), *in.local.data, in.batch, local, in.eval_transform), in.batch_mean);
  }
  return figures;
}

// Owners send (row, figures) to rank 0, which fills them in; false on the other ranks.
bool gather_figures(RunTransport& transport, const std::vector<int64_t>& rows, std::vector<ClientFigures>& figures) {
  ByteWriter out;
  if (transport.rank() != 0)
    for (int64_t i : rows) {
      const ClientFigures& f = figures[static_cast<size_t>(i)];
      out.put<int64_t>(i);
      for (double value : {f.acc, f.global_acc, f.asr, f.received_acc, f.local_samples, f.asr_samples})
        out.put<double>(value);
    }
  const std::vector<Bytes> parts = transport.gather(out.take());
  if (transport.rank() != 0) return false;
  for (const Bytes& part : parts) {
    ByteReader in(part);
    while (!in.done()) {
      const int64_t i = in.get<int64_t>();
      BASTION_CHECK(i >= 0 && i < static_cast<int64_t>(figures.size()), "MPI message names evaluated client ", i);
      ClientFigures& f = figures[static_cast<size_t>(i)];
      for (double* value : {&f.acc, &f.global_acc, &f.asr, &f.received_acc, &f.local_samples, &f.asr_samples})
        *value = in.get<double>();
    }
  }
  return true;
}

}  // namespace

LocalTestSets make_local_test_sets(const std::string& mode, const Dataset& train, const Dataset& test,
                                   const Partition& partition, uint64_t seed) {
  LocalTestSets sets;
  if (mode == "split") {
    sets.data = &train;
    sets.indices = partition.test;
    return sets;
  }
  BASTION_CHECK(mode == "like-train", "data.local_test: unknown mode '", mode, "'; valid: split, like-train");
  const int64_t clients = partition.num_clients();
  sets.data = &test;
  sets.indices.assign(static_cast<size_t>(clients), {});
  const std::vector<std::vector<int64_t>> counts = class_histogram(train, partition.train);
  Generator rng(seed);
  for (int32_t c = 0; c < test.num_classes; ++c) {
    std::vector<int64_t> pool;
    for (int64_t i = 0; i < test.size(); ++i)
      if (test.labels[i] == c) pool.push_back(i);
    Generator class_rng = rng.fork(static_cast<uint64_t>(c));
    shuffle_indices(pool, class_rng);
    int64_t total = 0;
    for (int64_t k = 0; k < clients; ++k) total += counts[k][c];
    if (total == 0) continue;
    int64_t cumulative = 0, begin = 0;
    for (int64_t k = 0; k < clients; ++k) {
      cumulative += counts[k][c];
      // Integer cut points: exact, and the last client's cut is the whole pool.
      const int64_t end =
          static_cast<int64_t>((static_cast<__int128>(cumulative) * static_cast<int64_t>(pool.size())) / total);
      sets.indices[k].insert(sets.indices[k].end(), pool.begin() + begin, pool.begin() + end);
      begin = end;
    }
  }
  for (std::vector<int64_t>& list : sets.indices) std::sort(list.begin(), list.end());
  return sets;
}

std::vector<int64_t> personal_eval_clients(const std::vector<uint8_t>& is_malicious, int64_t k, Generator rng) {
  std::vector<int64_t> benign;
  for (size_t i = 0; i < is_malicious.size(); ++i)
    if (!is_malicious[i]) benign.push_back(static_cast<int64_t>(i));
  if (k <= 0 || k >= static_cast<int64_t>(benign.size())) return benign;
  shuffle_indices(benign, rng);
  benign.resize(static_cast<size_t>(k));
  std::sort(benign.begin(), benign.end());
  return benign;
}

PersonalRecord evaluate_personal(const PersonalEvalInput& input, ThreadPool& pool,
                                 std::vector<std::unique_ptr<Model>>& replicas, RunTransport* transport,
                                 const DeviceReplicas* devices) {
  const DeviceReplicas none;
  std::vector<ClientFigures> figures(input.clients.size());
  const int ranks = transport ? transport->size() : 1, rank = transport ? transport->rank() : 0;
  const std::vector<int64_t> rows = owned_rows(input.clients, rank, ranks);
  pool.run(static_cast<int64_t>(rows.size()), [&](int64_t k, int worker) {
    const int64_t i = rows[static_cast<size_t>(k)];
    figures[i] = evaluate_client(input, static_cast<size_t>(i), *replicas[worker], devices ? *devices : none, worker);
  });
  if (ranks > 1 && !gather_figures(*transport, rows, figures)) return PersonalRecord{};
  std::vector<double> acc, global_acc, asr, received_acc, local_weights, asr_weights;
  for (const ClientFigures& f : figures) {
    acc.push_back(f.acc);
    global_acc.push_back(f.global_acc);
    asr.push_back(f.asr);
    received_acc.push_back(f.received_acc);
    local_weights.push_back(f.local_samples);
    asr_weights.push_back(f.asr_samples);
  }
  PersonalRecord record;
  for (size_t i = 0; i < figures.size(); ++i)
    record.per_client.push_back(
        {input.clients[i], figures[i].acc, figures[i].asr, static_cast<int64_t>(figures[i].local_samples)});
  record.present = true;
  record.clients = static_cast<int64_t>(input.clients.size());
  record.acc = client_spread(acc, local_weights);
  record.global_acc = client_spread(global_acc, local_weights);
  record.asr = client_spread(asr, asr_weights);
  record.received = input.received_acc;
  if (record.received) record.received_acc = client_spread(received_acc, local_weights);
  return record;
}

}  // namespace bastion
