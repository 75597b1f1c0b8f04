// fedala: FedALA (Zhang et al. AAAI'23; PFL-FACTS §10). A sampled client does not overwrite its model
// with the global one: adaptive local aggregation (fedala.h) mixes the global model into its local model
// (lower layers replaced, the last p tensors mixed element-wise with learned weights W), then the usual
// local training (the schedule's SGD) runs from that model and the update w_trained - w_global is
// uploaded, aggregated by the server rule as FedAvg's. The client's own model for evaluation is its last
// trained model (ClientState "local"; stale until it is sampled again), W is kept per client ("ala_weights")
// and so is the end of the start phase ("ala_started").
// The local model of a client before its first training is the initial global model Θ^0: the paper
// initialises every local model from Θ^0, so a client first sampled in round t > 1 runs ALA between the
// global model and Θ^0 (the authors' code and FedFSA's copy do the same). The method server keeps Θ^0 and
// sends it to each client at its first participation after round 1 (first_visit = initial, default);
// first_visit = global starts such a client from the global model instead (ALA skipped).
// tune = final-head: FedFSA's extra round: after the last round every client runs ALA between the final
// global model and its local model (one epoch, or its start phase if it never ran ALA), then tunes the
// head (post step head-tune); a client never trained tunes the global model's head.
// Memory: one local model per client that has trained (N x D floats), W (the last p tensors) per client,
// Θ^0 on the server (D floats). Cost: ALA's passes (fedala.h) + E x |D_k| training passes.
#include "fl/clients/fedala.h"

#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops.h"
#include "data/loader.h"
#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "fl/clients/post_step.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kLocalKey = "local";          // ClientState: the model after the client's last training
constexpr const char* kWeightsKey = "ala_weights";  // ClientState: W
constexpr const char* kStartedKey = "ala_started";  // ClientState scalar: the start phase is over
constexpr const char* kInitialKey = "initial";      // message: Θ^0's parameters
constexpr uint64_t kAlaStream = 0x616c61ULL;

// The [begin, end) columns of the last `upper` parameter tensors, in model order.
std::vector<std::pair<int64_t, int64_t>> upper_columns(const Model& model, int64_t upper) {
  const std::vector<ParameterView>& params = model.parameters();
  BASTION_CHECK(upper >= 1 && upper <= static_cast<int64_t>(params.size()), "fedala: layers = ", upper, " but model ",
                model.name(), " has ", params.size(), " parameter tensors");
  std::vector<std::pair<int64_t, int64_t>> columns;
  for (size_t i = params.size() - static_cast<size_t>(upper); i < params.size(); ++i)
    columns.emplace_back(params[i].begin, params[i].end);
  return columns;
}

// Upper columns <- l + (g - l) (.) W.
void mix_upper(std::span<float> out, std::span<const float> g, std::span<const float> l, const std::vector<float>& w,
               const std::vector<std::pair<int64_t, int64_t>>& columns) {
  size_t k = 0;
  for (const auto& [begin, end] : columns)
    for (int64_t i = begin; i < end; ++i, ++k) out[i] = l[i] + (g[i] - l[i]) * w[k];
}

// W <- clip(W - eta * grad (.) (g - l), 0, 1) over the upper columns.
void step_weights(std::vector<float>& w, std::span<const float> grad, std::span<const float> g,
                  std::span<const float> l, const std::vector<std::pair<int64_t, int64_t>>& columns, float eta) {
  size_t k = 0;
  for (const auto& [begin, end] : columns)
    for (int64_t i = begin; i < end; ++i, ++k) w[k] = std::clamp(w[k] - eta * grad[i] * (g[i] - l[i]), 0.0f, 1.0f);
}

double population_std(const std::vector<double>& values, size_t last) {
  double mean = 0.0, squares = 0.0;
  for (size_t i = values.size() - last; i < values.size(); ++i) mean += values[i];
  mean /= static_cast<double>(last);
  for (size_t i = values.size() - last; i < values.size(); ++i) squares += (values[i] - mean) * (values[i] - mean);
  return std::sqrt(squares / static_cast<double>(last));
}

// Where ALA mixes the state and reads the upper gradients. A CPU model: its own flat buffers, in place.
// A device replica: host values, loaded whole after the first mix (the lower tensors and the buffers then
// hold the global model for good), then per step only the upper tensors' ranges move: their gradients
// down and their mixed values up (2 x the upper tensors' floats a step rather than 2 D). The host math
// is the CPU's, so both devices mix the same values from the same gradients.
class AlaBuffers {
 public:
  AlaBuffers(Model& model, const std::vector<std::pair<int64_t, int64_t>>& columns)
      : model_(model), columns_(columns), on_host_(model.device() == Device::CPU) {
    if (on_host_) return;
    state_.resize(static_cast<size_t>(model.state_tensor().numel()));
    grad_.resize(static_cast<size_t>(model.num_parameters()));
  }
  std::span<float> state() { return on_host_ ? model_.flat_state() : std::span<float>(state_); }
  // After writing the whole of state().
  void publish_state() {
    if (!on_host_) model_.load_state_values(state_);
  }
  // After mixing the upper tensors of state().
  void publish_upper() {
    if (on_host_) return;
    for (const auto& [begin, end] : columns_)
      model_.state_tensor()
          .slice_rows(begin, end)
          .copy_from(Tensor::from_vector(
              {end - begin},
              std::span<const float>(state_).subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin))));
  }
  // The gradient after a backward pass; on a device replica only the upper ranges are filled.
  std::span<const float> gradients() {
    if (on_host_) return model_.flat_gradients();
    for (const auto& [begin, end] : columns_) {
      const std::vector<float> part = model_.gradient_tensor().slice_rows(begin, end).to_vector();
      std::copy(part.begin(), part.end(), grad_.begin() + begin);
    }
    return grad_;
  }

 private:
  Model& model_;
  const std::vector<std::pair<int64_t, int64_t>>& columns_;
  bool on_host_;
  std::vector<float> state_, grad_;
};

// Freezes every tensor but the upper ones when they are exactly the head (a cheaper backward). Otherwise
// all parameters stay trainable and only the upper gradients are read.
void freeze_lower(Model& model, int64_t upper) {
  int64_t head = 0;
  for (const ParameterView& p : model.parameters()) head += p.is_head ? 1 : 0;
  const std::vector<ParameterView>& params = model.parameters();
  bool upper_is_head = head == upper;
  for (size_t i = params.size() - static_cast<size_t>(upper); i < params.size(); ++i)
    upper_is_head &= params[i].is_head;
  if (upper_is_head) model.set_trainable(/*head=*/false, false);
}
}  // namespace

int64_t ala_weight_count(const Model& model, int64_t upper_tensors) {
  int64_t n = 0;
  for (const auto& [begin, end] : upper_columns(model, upper_tensors)) n += end - begin;
  return n;
}

AlaOutcome adaptive_local_aggregation(Model& model, std::span<const float> global, std::span<const float> local,
                                      std::vector<float>& weights, bool start_phase, const AlaData& data,
                                      const AlaOptions& options) {
  const auto columns = upper_columns(model, options.upper_tensors);
  AlaBuffers buffers(model, columns);
  const std::span<float> state = buffers.state();
  BASTION_CHECK(global.size() == state.size() && local.size() == state.size(), "fedala: states of ", global.size(),
                " and ", local.size(), " values, the model has ", state.size());
  const ParameterView& first = model.parameters().front();
  AlaOutcome outcome;
  if (std::equal(global.begin() + first.begin, global.begin() + first.end, local.begin() + first.begin)) {
    std::copy(local.begin(), local.end(), state.begin());
    buffers.publish_state();
    outcome.skipped = true;
    return outcome;
  }
  const int64_t count = ala_weight_count(model, options.upper_tensors);
  if (weights.empty()) weights.assign(static_cast<size_t>(count), 1.0f);
  BASTION_CHECK(static_cast<int64_t>(weights.size()) == count, "fedala: stored weights of ", weights.size(),
                " values, the model's last ", options.upper_tensors, " tensors have ", count);
  std::copy(global.begin(), global.end(), state.begin());
  mix_upper(state, global, local, weights, columns);
  buffers.publish_state();

  const int64_t n = static_cast<int64_t>(data.indices.size());
  const int64_t slice = static_cast<int64_t>(options.sample_percent / 100.0 * static_cast<double>(n));
  BASTION_CHECK(slice > 0, "fedala: ", options.sample_percent, " % of ", n, " samples is no sample");
  Generator rng(data.seed);
  const int64_t offset = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - slice + 1)));
  BatchLoader loader(data.data, options.batch, /*shuffle=*/false, data.seed,
                     std::vector<int64_t>(data.indices.begin() + offset, data.indices.begin() + offset + slice));
  if (!is_identity_transform(data.transform)) loader.set_transform(data.transform);

  freeze_lower(model, options.upper_tensors);
  model.train(true);
  std::vector<double> losses;
  Tensor x;
  LabelTensor y;
  for (int64_t epoch = 0;; ++epoch) {
    loader.start_epoch(epoch);
    while (loader.next(x, y)) {
      model.zero_grad();
      Tensor loss = cross_entropy(model.forward(x.to(model.device())), y);  // batches are built on the host
      loss.backward();
      outcome.last_loss = loss.item();
      step_weights(weights, buffers.gradients(), global, local, columns, static_cast<float>(options.eta));
      mix_upper(state, global, local, weights, columns);
      buffers.publish_upper();
    }
    losses.push_back(outcome.last_loss);
    ++outcome.epochs;
    if (!start_phase || outcome.epochs >= options.max_start_epochs) break;
    const size_t window = static_cast<size_t>(options.window);
    if (losses.size() > window && population_std(losses, window) < options.threshold) break;
  }
  model.set_all_trainable(true);
  return outcome;
}

namespace {

// Keeps Θ^0 (the round-1 global parameters) and which clients have been sent a model before.
class FedAlaServer final : public MethodServer {
 public:
  FedAlaServer(int64_t clients, int64_t num_parameters)
      : seen_(static_cast<size_t>(clients), 0), num_parameters_(num_parameters) {}

  void begin_round(const RoundStart& start) override {
    if (initial_.empty()) initial_.assign(start.global.begin(), start.global.end());
    first_visit_.assign(seen_.size(), 0);
    for (int64_t client : *start.sampled) {
      first_visit_[static_cast<size_t>(client)] = start.round > 1 && !seen_[static_cast<size_t>(client)];
      seen_[static_cast<size_t>(client)] = 1;
    }
  }
  void message(int64_t client, std::span<const float>, ClientMessage& out) const override {
    if (first_visit_[static_cast<size_t>(client)]) out[kInitialKey] = initial_;
  }
  void after_aggregation(const MethodRound&, std::span<float>) override {}
  // Blocks: "initial" (Θ^0, P values, or none before round 1's) and "seen" (0/1 per client).
  RuleState save_state() const override {
    RuleState state("fedala");
    state.put_floats("initial", initial_);
    state.put_ints("seen", std::vector<int64_t>(seen_.begin(), seen_.end()));
    return state;
  }
  void load_state(const RuleState& state) override {
    if (!state.legacy().empty() || state.empty()) return load_legacy(state.legacy());
    const std::vector<float>& initial = state.floats("initial");
    BASTION_CHECK(initial.empty() || initial.size() == static_cast<size_t>(num_parameters_), "fedala: method state's ",
                  "initial model of ", initial.size(), " values; expected ", num_parameters_);
    const std::vector<int64_t>& seen = state.ids_below("seen", 2);
    BASTION_CHECK(seen.size() == seen_.size(), "fedala: method state of ", seen.size(), " client flags for ",
                  seen_.size(), " clients");
    initial_ = initial;
    seen_.assign(seen.begin(), seen.end());
  }
  // The float layout of checkpoints written before the codec: [Θ^0 (P values or none), n client flags].
  void load_legacy(std::span<const float> state) {
    const size_t n = seen_.size(), d = static_cast<size_t>(num_parameters_);
    BASTION_CHECK(state.size() == n || state.size() == n + d, "fedala: method state of ", state.size(),
                  " values; expected ", n + d, " (initial model + ", n, " client flags)");
    initial_.assign(state.begin(), state.end() - static_cast<std::ptrdiff_t>(n));
    for (size_t i = 0; i < n; ++i) seen_[i] = state[state.size() - n + i] != 0.0f;
  }

 private:
  std::vector<float> initial_;
  std::vector<uint8_t> seen_, first_visit_;
  int64_t num_parameters_;
};

class FedAlaClient final : public ClientRule {
 public:
  explicit FedAlaClient(const Params& p)
      : schedule_(local_schedule(p)), first_visit_initial_(p.text("first_visit") == "initial") {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: FedALA trains with SGD (rho must be 0)");
    ala_.upper_tensors = p.integer("layers");
    ala_.eta = p.real("eta");
    ala_.sample_percent = p.real("sample_percent");
    ala_.threshold = p.real("threshold");
    ala_.window = p.integer("window");
    ala_.max_start_epochs = p.integer("max_start_epochs");
    ala_.batch = schedule_.batch;
    if (p.text("tune") == "final-head")
      post_ = tuning_spec(p, schedule_, PostSpec::Kind::HeadTune, PostSpec::When::Final);
  }

  ClientResult train(ClientTask& task) const override {
    const std::vector<float> global = task.model.state_values();  // host values: the model may be a device replica
    std::vector<float> local = local_model(task, global);
    std::vector<float> weights = stored_weights(task.state);
    const bool start_phase = !task.state.scalars.count(kStartedKey);
    const AlaData data{task.data, task.indices, task.transform, Generator(task.seed).fork(kAlaStream).next_u64()};
    const AlaOutcome ala = adaptive_local_aggregation(task.model, global, local, weights, start_phase, data, ala_);
    if (!ala.skipped) {
      task.state.vectors[kWeightsKey] = std::move(weights);
      task.state.scalars[kStartedKey] = 1.0;
    }
    ClientResult result = train_with_schedule(task, schedule_);
    store_model(task.state, kLocalKey, task.model);
    return result;
  }

  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return copy_stored(state, kLocalKey, out, "fedala");
  }
  std::optional<PostSpec> post_step() const override { return post_; }

  // FedFSA's extra round: ALA of the final global model into the client's model before the head tuning.
  bool prepare_post_step(const ClientState& state, std::span<const float> global, Model& model,
                         const PostStartData& data) const override {
    std::vector<float> local(global.size());
    if (!copy_stored(state, kLocalKey, local, "fedala")) return false;
    std::vector<float> weights = stored_weights(state);
    const AlaData ala_data{data.data, data.indices, data.transform, Generator(data.seed).fork(kAlaStream).next_u64()};
    adaptive_local_aggregation(model, global, local, weights, !state.scalars.count(kStartedKey), ala_data, ala_);
    return true;
  }

  ClientTraits traits() const override { return {.on_device = true}; }

  std::unique_ptr<MethodServer> make_method_server(int64_t clients, int64_t num_parameters) const override {
    if (!first_visit_initial_) return nullptr;
    return std::make_unique<FedAlaServer>(clients, num_parameters);
  }

 private:
  LocalSchedule schedule_;
  AlaOptions ala_;
  bool first_visit_initial_;
  std::optional<PostSpec> post_;

  static std::vector<float> stored_weights(const ClientState& state) {
    const auto found = state.vectors.find(kWeightsKey);
    return found == state.vectors.end() ? std::vector<float>{} : found->second;
  }

  // The client's last trained model; before its first training Θ^0 (parameters from the message,
  // buffers from the global state), or the global model when no Θ^0 was sent.
  static std::vector<float> local_model(const ClientTask& task, const std::vector<float>& global) {
    std::vector<float> local(global.size());
    if (copy_stored(task.state, kLocalKey, local, "fedala")) return local;
    local = global;
    if (task.message) {
      const auto initial = task.message->find(kInitialKey);
      if (initial != task.message->end()) {
        BASTION_CHECK(initial->second.size() <= local.size(), "fedala: initial model of ", initial->second.size(),
                      " values, the model has ", local.size());
        std::copy(initial->second.begin(), initial->second.end(), local.begin());
      }
    }
    return local;
  }
};
}  // namespace

const std::vector<ParamSpec>& fedala_client_params() {
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> extra = {
        {"layers", ParamType::Integer, int64_t{2},
         "p: the last p parameter tensors are mixed element-wise (2 = last linear layer)", 1, 1e6},
        {"eta", ParamType::Real, 1.0, "learning rate of the aggregation weights W", 0, 1e6},
        {"sample_percent", ParamType::Real, 80.0, "s: % of the client's training samples W is learned on", 0.01, 100},
        {"threshold", ParamType::Real, 0.01,
         "start phase: stop when the std of the last `window` epoch losses is below this (0.01: FedALA paper, FedFSA; "
         "0.1: FedALA and PFLlib code)",
         0, 1e6},
        {"window", ParamType::Integer, int64_t{10}, "num_pre_loss: epoch losses the start phase's std looks at", 1,
         1e6},
        {"max_start_epochs", ParamType::Integer, int64_t{1000}, "bound on the start phase's epochs (the code has none)",
         1, 1e9},
        {"first_visit",
         ParamType::Text,
         std::string("initial"),
         "a client's local model before its first training: initial (Θ^0, the paper and codes) | global (ALA skipped)",
         -kInf,
         kInf,
         {"initial", "global"}},
        {"tune",
         ParamType::Text,
         std::string("none"),
         "none | final-head: after the last round every client runs ALA on the final global model, then tunes the head "
         "(FedFSA's extra round)",
         -kInf,
         kInf,
         {"none", "final-head"}}};
    for (ParamSpec& spec : tuning_params(0, 0.0)) extra.push_back(spec);
    return with_schedule_params(extra);
  }();
  return specs;
}

std::unique_ptr<ClientRule> make_fedala_client(const Params& params) { return std::make_unique<FedAlaClient>(params); }

}  // namespace bastion
