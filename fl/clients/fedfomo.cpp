// fedfomo: FedFomo (Zhang et al. ICLR'21, "Personalized FL with First Order Model Optimization"; PFL-FACTS §9;
// NVlabs/FedFomo is the reference code, PFLlib clientfomo.py / serverfomo.py the second reading).
// Each client keeps its own model theta_i (ClientState "model"; the common initial model before its first
// participation) and splits its samples: the first round(train_split n) train, the LAST ones validate
// (PFLlib and FedCAP take the last 20 %; NVlabs a seeded random split). When sampled, the client:
//   1. weighs its own current model and the M - 1 models the server offers (fedfomo_server.cpp):
//        w_n = (L_val(theta_ref) - L_val(theta_n)) / (||theta_n - theta_ref|| + eps)
//      L_val = mean cross-entropy over the validation samples; the distance over the parameters only;
//      theta_ref = baseline previous-start: the model it started its previous training from (after that
//      round's mixing; NVlabs first_model, PFLlib old_model; the initial model at the first participation)
//      | current: its current model (the paper's theta_i^{t-1} read literally: its own weight is then 0);
//   2. w+ = max(w, 0) / sum max(w, 0) and theta_i <- sum_n w+_n theta_n (parameters and BatchNorm buffers:
//      NVlabs mixes whole state_dicts). This IS the paper's theta_ref + sum w+_n (theta_n - theta_ref), the
//      w+ summing to 1. When no w_n > 0: fallback own (keep the current model; PFLlib) | reference (go back
//      to theta_ref; NVlabs);
//   3. remembers theta_ref <- theta_i (baseline previous-start), trains theta_i for the local epochs on the
//      train split, keeps it, and uploads it (the run loop sends theta_i - global) with the (id, w_n) pairs
//      of step 1 as extra upload; the server adds them to P[i, .].
// aggregate = false reproduces FedCAP's FedFomo (PFL-FACTS §9 QUIRK): no weighing, no mixing; each client
// trains its own model in isolation on its train split, and the server keeps no models.
// A malicious client's data attack poisons its training batches, not its validation split.
// Memory: per client that has trained, theta_i and theta_ref (2 x D floats; D only with baseline current or
// aggregate false): 100 clients x LeNet (D = 44,426 on 1x28x28) 35.5 MB, x cnn-fedfsa (D = 1,258,798) 1.01 GB;
// the server's N x D more (fedfomo_server.cpp). Cost per participation: M + 1 validation passes, then training.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "fl/clients/client_rule.h"
#include "fl/clients/fedfomo.h"
#include "fl/clients/local_training.h"
#include "fl/evaluate.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kModelKey = "model";          // theta_i after its last training
constexpr const char* kReferenceKey = "reference";  // theta_ref: theta_i after the last mixing, before training

struct Split {
  std::vector<int64_t> train, validation;
};

// The deterministic part of the training transform (resize, channels): no augmentation on validation.
std::optional<TransformSpec> validation_transform(const TransformSpec& t) {
  TransformSpec v;
  v.resize = t.resize;
  v.replicate_channels = t.replicate_channels;
  if (is_identity_transform(v)) return std::nullopt;
  return v;
}

class FomoClient final : public ClientRule {
 public:
  explicit FomoClient(const Params& p)
      : schedule_(local_schedule(p)), models_(p.integer("models")), epsilon_(p.real("epsilon")),
        epsilon_decay_(p.real("epsilon_decay")), train_split_(p.real("train_split")), eps_(p.real("distance_eps")),
        aggregate_(p.boolean("aggregate")), previous_start_(p.text("baseline") == "previous-start"),
        fallback_reference_(p.text("fallback") == "reference"), l1_(p.text("distance") == "l1"),
        pool_all_(p.text("pool") == "all"), normalised_affinity_(p.text("affinity") == "normalised") {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: FedFomo trains with SGD (rho must be 0)");
  }

  ClientResult train(ClientTask& task) const override {
    Model& model = task.model;                      // read and written through host copies: it may be a device replica
    std::vector<float> own = model.state_values();  // the start state: the initial model
    copy_stored(task.state, kModelKey, own, "fedfomo");
    const Split split = split_samples(task.indices);
    std::vector<float> pairs;
    std::vector<float> start = aggregate_ ? mix(task, own, split.validation, pairs) : own;
    if (aggregate_ && previous_start_) store(task.state, kReferenceKey, start);
    model.load_state_values(start);
    ClientTask train_task{model,       task.data, split.train,      task.transform, task.state,          task.client,
                          task.round,  task.seed, task.client_seed, task.attack,    task.attacker_index, task.second,
                          task.message};
    ClientResult result = train_with_schedule(train_task, schedule_);
    store_model(task.state, kModelKey, model);
    result.extra_upload = std::move(pairs);
    return result;
  }
  ClientTraits traits() const override { return {.on_device = true}; }

  bool personal_model(const ClientState& state, std::span<const float>, const Model&,
                      std::span<float> out) const override {
    return copy_stored(state, kModelKey, out, "fedfomo");
  }

  std::unique_ptr<MethodServer> make_method_server(int64_t clients, int64_t) const override {
    FomoServerOptions o;
    o.models = models_;
    o.epsilon = epsilon_;
    o.epsilon_decay = epsilon_decay_;
    o.pool_all = pool_all_;
    o.normalised_affinity = normalised_affinity_;
    o.store_models = aggregate_;
    return make_fomo_server(clients, o);
  }

 private:
  LocalSchedule schedule_;
  int64_t models_;
  double epsilon_, epsilon_decay_, train_split_, eps_;
  bool aggregate_, previous_start_, fallback_reference_, l1_, pool_all_, normalised_affinity_;

  // First round(train_split n) samples train (at least one), the rest validate.
  Split split_samples(const std::vector<int64_t>& indices) const {
    const int64_t n = static_cast<int64_t>(indices.size());
    const int64_t train = std::min(n, std::max<int64_t>(1, std::llround(train_split_ * static_cast<double>(n))));
    return {std::vector<int64_t>(indices.begin(), indices.begin() + train),
            std::vector<int64_t>(indices.begin() + train, indices.end())};
  }

  double validation_loss(const ClientTask& task, std::span<const float> candidate,
                         const std::vector<int64_t>& validation) const {
    task.model.load_state_values(candidate);
    const std::optional<TransformSpec> transform = validation_transform(task.transform);
    return evaluate(task.model, task.data, schedule_.batch, validation, transform ? &*transform : nullptr).loss;
  }

  // Steps 1 and 2 of the header: returns the mixed model and writes the (id, w_n) pairs.
  std::vector<float> mix(const ClientTask& task, const std::vector<float>& own, const std::vector<int64_t>& validation,
                         std::vector<float>& pairs) const {
    const size_t D = own.size(), P = static_cast<size_t>(task.model.num_parameters());
    std::vector<float> reference = own;
    if (previous_start_) copy_stored(task.state, kReferenceKey, reference, "fedfomo");
    std::vector<int64_t> ids = {task.client};
    std::vector<std::span<const float>> candidates = {own};
    offered(task, D, ids, candidates);
    if (validation.empty()) return own;  // no validation sample: nothing to weigh with (documented)
    const double reference_loss = validation_loss(task, reference, validation);
    std::vector<double> raw;
    for (const std::span<const float> candidate : candidates) {
      const double distance = fomo_distance(candidate.first(P), std::span<const float>(reference).first(P), l1_);
      raw.push_back(fomo_weight(reference_loss, validation_loss(task, candidate, validation), distance, eps_));
    }
    for (size_t n = 0; n < ids.size(); ++n) {
      pairs.push_back(static_cast<float>(ids[n]));
      pairs.push_back(static_cast<float>(raw[n]));
    }
    const std::vector<double> w = fomo_mixing_weights(raw);
    if (w.empty()) return fallback_reference_ ? reference : own;
    std::vector<double> sum(D, 0.0);
    for (size_t n = 0; n < candidates.size(); ++n)
      if (w[n] > 0.0)
        for (size_t j = 0; j < D; ++j) sum[j] += w[n] * candidates[n][j];
    return std::vector<float>(sum.begin(), sum.end());
  }

  // The server's offer (message "fomo_ids", "fomo_models"), appended to ids / candidates.
  static void offered(const ClientTask& task, size_t D, std::vector<int64_t>& ids,
                      std::vector<std::span<const float>>& candidates) {
    if (!task.message) return;
    const auto found_ids = task.message->find(kFomoIds);
    const auto found_models = task.message->find(kFomoModels);
    if (found_ids == task.message->end()) return;
    BASTION_CHECK(found_models != task.message->end() && found_models->second.size() == found_ids->second.size() * D,
                  "fedfomo: the server offered ", found_ids->second.size(), " models of ", D, " values but sent ",
                  found_models == task.message->end() ? 0 : found_models->second.size(), " values");
    const std::span<const float> models = found_models->second;
    for (size_t k = 0; k < found_ids->second.size(); ++k) {
      ids.push_back(static_cast<int64_t>(found_ids->second[k]));
      candidates.push_back(models.subspan(k * D, D));
    }
  }
};
}  // namespace

const std::vector<ParamSpec>& fedfomo_client_params() {
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> s = with_schedule_params({
        {"models", ParamType::Integer, int64_t{5},
         "M: models a client weighs, its own included (M - 1 downloaded): the paper's 5 (NVlabs: own + 4; PFLlib M = "
         "5)",
         1, 1e6},
        {"epsilon", ParamType::Real, 0.3, "e-greedy: chance that a download slot takes a random pool client (NVlabs)",
         0, 1},
        {"epsilon_decay", ParamType::Real, 0.05, "epsilon decreases by this per round, down to 0 (NVlabs)", 0, 1},
        {"train_split", ParamType::Real, 0.8, "fraction of the client's samples it trains on; the last ones validate",
         1e-6, 1},
        {"aggregate", ParamType::Boolean, true,
         "false: FedCAP's FedFomo, no weighing or mixing (each client trains alone)"},
        {"baseline",
         ParamType::Text,
         std::string("previous-start"),
         "theta_ref: previous-start (the model the client last started training from; NVlabs, PFLlib) | current "
         "(its current model)",
         -kInf,
         kInf,
         {"previous-start", "current"}},
        {"fallback",
         ParamType::Text,
         std::string("own"),
         "no positive weight: own (keep the current model; PFLlib) | reference (go back to theta_ref; NVlabs)",
         -kInf,
         kInf,
         {"own", "reference"}},
        {"distance",
         ParamType::Text,
         std::string("l2"),
         "||theta_n - theta_ref||: l2 (paper, PFLlib) | l1 (NVlabs' default)",
         -kInf,
         kInf,
         {"l2", "l1"}},
        {"distance_eps", ParamType::Real, 1e-5, "added to the distance (PFLlib 1e-5; FedCAP 1e-9)", 0, 1},
        {"pool",
         ParamType::Text,
         std::string("last-round"),
         "who may be offered: last-round (last round's accepted uploaders; NVlabs, FedCAP) | all (every client that "
         "ever uploaded; PFLlib)",
         -kInf,
         kInf,
         {"last-round", "all"}},
        {"affinity",
         ParamType::Text,
         std::string("raw"),
         "P[i, n] += raw w_n (paper, PFLlib) | normalised: w_n / |sum w| (NVlabs)",
         -kInf,
         kInf,
         {"raw", "normalised"}},
    });
    // NVlabs README command: 5 local epochs, batch 50, lr 0.1 decayed 0.99 per round, no momentum.
    for (ParamSpec& spec : s) {
      if (spec.name == "epochs") spec.default_value = int64_t{5};
      if (spec.name == "batch") spec.default_value = int64_t{50};
      if (spec.name == "lr") spec.default_value = 0.1;
      if (spec.name == "lr_decay") spec.default_value = 0.99;
      if (spec.name == "momentum") spec.default_value = 0.0;
    }
    return s;
  }();
  return specs;
}

std::unique_ptr<ClientRule> make_fedfomo_client(const Params& params) { return std::make_unique<FomoClient>(params); }

}  // namespace bastion
