// The SAM family of FedFSA's Table 1 (PFL-FACTS §§12-14, IMPLEMENTATION-FACTS §3.3): five clients that are
// one SAM step (nn/optim.h) with different options, plus a server part (method_server.h) for those that
// keep state on the server. Per batch every client takes the step
//   g = grad(w), clipped; e_k = rho_k (g - mu - s)_k / ||g - mu - s||; g' = alpha grad(w + e) + linear;
//   clip g'; SGD step (weight decay after the clip)
// with, per rule:
//   fedsam    rho = 0.05, alpha = 1, no linear term (FedSAM, Caldarola et al. 2022 / Qu et al. 2022).
//   mofedsam  rho = 0.1, alpha = 0.1, linear = (1 - alpha) m, m = -mean(Delta) / (K lr0) from the server:
//             the mean of the previous round's accepted updates over K = epochs x ceil(n_i / batch) steps
//             of the initial lr (Qu et al. ICML'22 as FedFSA's code runs it; m = 0 in round 1).
//   fedfsa    mofedsam with rho_k = rho_larger on the client's Top-C tensors, rho elsewhere (FedFSA, seed
//             paper). Top-C: the C weight tensors (not biases, BatchNorm, shortcut or norm tensors) of
//             largest perturbation sensitivity in the client's last participation, kept in ClientState
//             "fsa_layers" and written to client_notes.csv by name; before its first participation every
//             tensor takes rho. Sensitivity: paper =
//             ||w_after,k - w_before,k||^2 (Eq. 10-11), code = mean((minmax(w_after,k) - minmax(w_before,k))^2).
//             Default: head tuning of the final global model by every client after the last round.
//   fedspeed  rho = 0.1, alpha = 1, linear = lambda (h_i - w_g), weight decay + lambda; the server keeps
//             h_i += Delta_i per client and adds mean over ALL clients of h_i to the update (Sun et al.
//             ICLR'23 as both public codes run it: the paper's gradient merge is not used, decisions.md).
//   fedsmoo   fedspeed plus the corrected direction: mu_i (sent, updated each step by e - s, uploaded) and
//             s = rho mean(mu_i over the round's accepted clients) / (||.|| + 1e-7) (Sun et al. ICML'23).
// fedspeed and fedsmoo decay each client's lr by 0.998 per local epoch, kept across rounds (FedFSA's runs).
// Memory: fedspeed N x P floats for h (allocated at a client's first accepted upload); fedsmoo 2 N x P.
// Cost per step: two forward/backward passes (SAM) and a few passes over the P parameters.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "fl/clients/post_step.h"
#include "fl/clients/sam_family.h"
#include "tensor/error.h"

namespace bastion {

std::unique_ptr<MethodServer> ClientRule::make_method_server(int64_t, int64_t) const { return nullptr; }

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kLayersKey = "fsa_layers";    // ClientState: FedFSA's Top-C tensor indices
constexpr const char* kMeanUpdate = "mean_update";  // message: the previous round's mean accepted update
constexpr const char* kHistory = "h";               // message: FedSpeed / FedSMOO's h_i
constexpr const char* kDual = "mu";                 // message and extra upload: FedSMOO's mu_i
constexpr const char* kCorrection = "s";            // message: FedSMOO's global correction s

enum class Variant { FedSam, MoFedSam, FedFsa, FedSpeed, FedSmoo };

bool has_momentum(Variant v) { return v == Variant::MoFedSam || v == Variant::FedFsa; }
bool has_history(Variant v) { return v == Variant::FedSpeed || v == Variant::FedSmoo; }

const std::vector<float>* find_vector(const ClientMessage* message, const char* key) {
  if (!message) return nullptr;
  const auto found = message->find(key);
  return found == message->end() ? nullptr : &found->second;
}

// The server part: momentum (mean update), h_i, mu_i and s. Flat state layout for checkpoints:
//   [P, |mean_update|, mean_update..., |s|, s..., #h, (client, h...)..., #mu, (client, mu...)...]
class SamFamilyServer final : public MethodServer {
 public:
  SamFamilyServer(Variant variant, int64_t clients, int64_t parameters, float rho)
      : variant_(variant), clients_(clients), P_(parameters), rho_(rho) {}

  void message(int64_t client, std::span<const float>, ClientMessage& out) const override {
    if (!mean_update_.empty()) out[kMeanUpdate] = mean_update_;
    if (const auto h = h_.find(client); h != h_.end()) out[kHistory] = h->second;
    if (const auto mu = mu_.find(client); mu != mu_.end()) out[kDual] = mu->second;
    if (!s_.empty()) out[kCorrection] = s_;
  }

  void after_aggregation(const MethodRound& round, std::span<float> update) override {
    const size_t P = static_cast<size_t>(P_);
    if (has_momentum(variant_)) mean_update_ = mean_of_rows(round);
    if (!has_history(variant_)) return;
    for (int64_t r = 0; r < round.n; ++r) {
      std::vector<float>& h = h_.try_emplace((*round.clients)[r], P, 0.0f).first->second;
      const float* delta = round.uploads + r * round.width;
      for (size_t j = 0; j < P; ++j) h[j] += delta[j];
    }
    std::vector<double> sum(P, 0.0);  // in client order: a resumed run sums exactly as an uninterrupted one
    for (const auto& [client, h] : h_)
      for (size_t j = 0; j < P; ++j) sum[j] += h[j];
    for (size_t j = 0; j < P; ++j) update[j] += static_cast<float>(sum[j] / static_cast<double>(clients_));
    if (variant_ == Variant::FedSmoo) update_duals(round);
  }

  // Blocks: "parameters" (P), "mean_update" and "s" (0 or P values), the per-client "h" and "mu" (P each).
  RuleState save_state() const override {
    RuleState state("sam-family method server");
    state.put_int("parameters", P_);
    state.put_floats("mean_update", mean_update_);
    state.put_floats("s", s_);
    state.put_per_client("h", h_);
    state.put_per_client("mu", mu_);
    return state;
  }

  void load_state(const RuleState& state) override {
    if (state.empty()) return;  // a checkpoint from before the first round
    if (!state.legacy().empty()) return load_legacy(state.legacy());
    BASTION_CHECK(state.int_in("parameters", 0, std::numeric_limits<int64_t>::max()) == P_, "method state: written ",
                  "for models of ", state.ints("parameters")[0], " parameters, this model has ", P_);
    mean_update_ = model_block(state, "mean_update");
    s_ = model_block(state, "s");
    h_ = state.per_client("h", clients_, static_cast<size_t>(P_));
    mu_ = state.per_client("mu", clients_, static_cast<size_t>(P_));
  }

 private:
  Variant variant_;
  int64_t clients_, P_;
  float rho_;
  std::vector<float> mean_update_, s_;
  std::map<int64_t, std::vector<float>> h_, mu_;

  std::vector<float> mean_of_rows(const MethodRound& round) const {
    std::vector<double> sum(static_cast<size_t>(P_), 0.0);
    for (int64_t r = 0; r < round.n; ++r)
      for (int64_t j = 0; j < P_; ++j) sum[j] += round.uploads[r * round.width + j];
    std::vector<float> mean(sum.size());
    for (size_t j = 0; j < sum.size(); ++j) mean[j] = static_cast<float>(sum[j] / static_cast<double>(round.n));
    return mean;
  }

  // mu_i of each accepted client that sent a finite one; s = rho mean(mu) / (||mean|| + 1e-7).
  void update_duals(const MethodRound& round) {
    std::vector<double> sum(static_cast<size_t>(P_), 0.0);
    int64_t count = 0;
    for (int64_t r = 0; r < round.n; ++r) {
      const std::span<const float> mu = (*round.extra)[r];
      if (static_cast<int64_t>(mu.size()) != P_ ||
          !std::all_of(mu.begin(), mu.end(), [](float v) { return std::isfinite(v); }))
        continue;  // documented: a missing or non-finite dual keeps the client's previous one out of s
      mu_[(*round.clients)[r]].assign(mu.begin(), mu.end());
      for (int64_t j = 0; j < P_; ++j) sum[j] += mu[j];
      ++count;
    }
    if (count == 0) return;
    double squared = 0.0;
    for (double& v : sum) v /= static_cast<double>(count), squared += v * v;
    const double scale = rho_ / (std::sqrt(squared) + 1e-7);
    s_.resize(sum.size());
    for (size_t j = 0; j < sum.size(); ++j) s_[j] = static_cast<float>(sum[j] * scale);
  }

  // A block of 0 (not yet set) or P values.
  std::vector<float> model_block(const RuleState& state, const std::string& name) const {
    const std::vector<float>& block = state.floats(name);
    BASTION_CHECK(block.empty() || block.size() == static_cast<size_t>(P_), "method state: block '", name, "' of ",
                  block.size(), " values, expected 0 or ", P_);
    return block;
  }
  // The float layout of checkpoints written before the codec: [P, then blocks and client maps, each led by
  // its size or count, a client's row by its id].
  void load_legacy(std::span<const float> state) {
    size_t at = 0;
    BASTION_CHECK(static_cast<int64_t>(state[at++]) == P_, "method state: written for models of ", state[0],
                  " parameters, this model has ", P_);
    mean_update_ = read_block(state, at);
    s_ = read_block(state, at);
    h_ = read_clients(state, at);
    mu_ = read_clients(state, at);
    BASTION_CHECK(at == state.size(), "method state: ", state.size() - at, " values left over");
  }
  std::vector<float> read_block(std::span<const float> state, size_t& at) const {
    BASTION_CHECK(at < state.size(), "method state: truncated");
    const size_t size = static_cast<size_t>(state[at++]);
    BASTION_CHECK(size == 0 || size == static_cast<size_t>(P_), "method state: block of ", size,
                  " values, expected 0 or ", P_);
    BASTION_CHECK(at + size <= state.size(), "method state: truncated");
    std::vector<float> block(state.begin() + at, state.begin() + at + size);
    at += size;
    return block;
  }
  std::map<int64_t, std::vector<float>> read_clients(std::span<const float> state, size_t& at) const {
    BASTION_CHECK(at < state.size(), "method state: truncated");
    const int64_t count = static_cast<int64_t>(state[at++]);
    std::map<int64_t, std::vector<float>> out;
    for (int64_t k = 0; k < count; ++k) {
      BASTION_CHECK(at + 1 + static_cast<size_t>(P_) <= state.size(), "method state: truncated");
      const int64_t client = static_cast<int64_t>(state[at++]);
      BASTION_CHECK(client >= 0 && client < clients_, "method state: client ", client, " outside [0, ", clients_, ")");
      out[client].assign(state.begin() + at, state.begin() + at + P_);
      at += static_cast<size_t>(P_);
    }
    return out;
  }
};

class SamFamilyClient final : public ClientRule {
 public:
  SamFamilyClient(const Params& p, Variant variant) : variant_(variant), schedule_(local_schedule(p)) {
    BASTION_CHECK(schedule_.rho > 0.0f, p.scope(), ".rho must be > 0 (a SAM rule)");
    if (has_momentum(variant_)) alpha_ = static_cast<float>(p.real("alpha"));
    if (variant_ == Variant::FedFsa) {
      rho_larger_ = static_cast<float>(p.real("rho_larger"));
      top_c_ = p.integer("top_c");
      code_sensitivity_ = p.text("sensitivity") == "code";
    }
    if (has_history(variant_)) {
      lambda_ = static_cast<float>(p.real("lambda"));
      schedule_.sgd.weight_decay += lambda_;  // the codes' base optimizer: weight_decay = wd + lambda
    }
    if (p.text("tune") == "final-head")
      post_ = tuning_spec(p, schedule_, PostSpec::Kind::HeadTune, PostSpec::When::Final);
  }

  ClientResult train(ClientTask& task) const override {
    Model& model = task.model;
    const std::vector<float> start = model.parameter_values();
    SamOptions options = schedule_.sam_options(schedule_.rho);
    std::vector<float> linear = linear_term(task, start);
    if (!linear.empty()) options.linear_term = linear;
    if (has_momentum(variant_)) options.ascent_scale = alpha_;
    if (variant_ == Variant::FedFsa) options.tensor_rho = tensor_radii(model, task.state);
    std::vector<float> dual;
    const std::vector<float>* correction = find_vector(task.message, kCorrection);
    if (variant_ == Variant::FedSmoo) {
      const std::vector<float>* sent = find_vector(task.message, kDual);
      dual = sent ? *sent : std::vector<float>(start.size(), 0.0f);
      options.dual = dual;
      if (correction) options.dual_correction = *correction;
    }
    ClientResult result = train_with_schedule(task, schedule_, {.sam = &options});
    if (variant_ == Variant::FedFsa) {
      task.state.vectors[kLayersKey] = top_c_layers(model, start);
      result.note = tensor_names(model, task.state.vectors[kLayersKey]);  // client_notes.csv
    }
    if (variant_ == Variant::FedSmoo) result.extra_upload = std::move(dual);
    return result;
  }

  std::optional<PostSpec> post_step() const override { return post_; }
  ClientTraits traits() const override { return {.on_device = true}; }

  std::unique_ptr<MethodServer> make_method_server(int64_t clients, int64_t num_parameters) const override {
    if (variant_ == Variant::FedSam) return nullptr;
    return std::make_unique<SamFamilyServer>(variant_, clients, num_parameters, schedule_.rho);
  }

 private:
  Variant variant_;
  LocalSchedule schedule_;
  float alpha_ = 1.0f, rho_larger_ = 0.0f, lambda_ = 0.0f;
  int64_t top_c_ = 0;
  bool code_sensitivity_ = false;
  std::optional<PostSpec> post_;

  // (1 - alpha) m with m = -mean_update / (K lr0), or lambda (h_i - w_g); empty when there is none.
  std::vector<float> linear_term(const ClientTask& task, const std::vector<float>& global) const {
    std::vector<float> linear;
    if (has_momentum(variant_)) {
      const std::vector<float>* mean = find_vector(task.message, kMeanUpdate);
      if (!mean) return linear;  // round 1: m = 0
      const double scale = -(1.0 - alpha_) / (static_cast<double>(local_steps(task)) * schedule_.sgd.lr);
      linear.resize(mean->size());
      for (size_t j = 0; j < mean->size(); ++j) linear[j] = static_cast<float>((*mean)[j] * scale);
    } else if (has_history(variant_)) {
      const std::vector<float>* h = find_vector(task.message, kHistory);
      linear.resize(global.size());
      for (size_t j = 0; j < global.size(); ++j) linear[j] = lambda_ * ((h ? (*h)[j] : 0.0f) - global[j]);
    }
    return linear;
  }

  // K: the steps of one round on this client's data.
  int64_t local_steps(const ClientTask& task) const {
    if (schedule_.steps > 0) return schedule_.steps;
    const int64_t n = static_cast<int64_t>(task.indices.size());
    const int64_t per_epoch = schedule_.drop_last ? n / schedule_.batch : (n + schedule_.batch - 1) / schedule_.batch;
    return std::max<int64_t>(1, schedule_.epochs * per_epoch);
  }

  std::vector<float> tensor_radii(const Model& model, const ClientState& state) const {
    std::vector<float> radii(model.parameters().size(), schedule_.rho);
    const auto chosen = state.vectors.find(kLayersKey);
    if (chosen == state.vectors.end()) return radii;
    for (float index : chosen->second) {
      BASTION_CHECK(index >= 0 && index < static_cast<float>(radii.size()), "fedfsa: stored layer index ", index,
                    " outside the model's ", radii.size(), " tensors");
      radii[static_cast<size_t>(index)] = rho_larger_;
    }
    return radii;
  }

  // "fc1.weight fc2.weight": the chosen tensors by name, in the order chosen.
  static std::string tensor_names(const Model& model, const std::vector<float>& chosen) {
    std::string names;
    for (float index : chosen)
      names += (names.empty() ? "" : " ") + model.parameters()[static_cast<size_t>(index)].name;
    return names;
  }

  std::vector<float> top_c_layers(const Model& model, const std::vector<float>& before) const {
    const std::vector<double> sensitivity = fsa_sensitivity(model, before, code_sensitivity_);
    std::vector<float> chosen;
    for (size_t k : fsa_top_c(sensitivity, top_c_)) chosen.push_back(static_cast<float>(k));
    return chosen;
  }
};

double squared_change(std::span<const float> after, std::span<const float> before) {
  double sum = 0.0;
  for (size_t i = 0; i < after.size(); ++i)
    sum += (static_cast<double>(after[i]) - before[i]) * (static_cast<double>(after[i]) - before[i]);
  return sum;
}

// FedFSA's code: each tensor min-max normalised on its own, then the mean squared difference.
double normalised_mean_squared_change(std::span<const float> after, std::span<const float> before) {
  const auto [a_min, a_max] = std::minmax_element(after.begin(), after.end());
  const auto [b_min, b_max] = std::minmax_element(before.begin(), before.end());
  const double a_range = static_cast<double>(*a_max) - *a_min, b_range = static_cast<double>(*b_max) - *b_min;
  double sum = 0.0;
  for (size_t i = 0; i < after.size(); ++i) {
    const double d = (after[i] - *a_min) / a_range - (before[i] - *b_min) / b_range;  // 0/0 = NaN as in the code
    sum += d * d;
  }
  return sum / static_cast<double>(after.size());
}

std::vector<ParamSpec> sam_params(Variant variant) {
  const bool speed = has_history(variant);
  std::vector<ParamSpec> extra = {
      {"tune",
       ParamType::Text,
       std::string(variant == Variant::FedFsa ? "final-head" : "none"),
       "none | final-head: every client tunes the head of the final global model after the last round (FedFSA's "
       "protocol for every row of its Table 1)",
       -kInf,
       kInf,
       {"none", "final-head"}}};
  if (has_momentum(variant))
    extra.push_back(
        {"alpha", ParamType::Real, 0.1, "weight of the SAM gradient; 1 - alpha weighs the momentum m", 0, 1});
  if (variant == Variant::FedFsa) {
    extra.push_back({"rho_larger", ParamType::Real, 0.2, "SAM radius of the Top-C tensors (rho: the others)", 0, 10});
    extra.push_back({"top_c", ParamType::Integer, int64_t{2}, "tensors perturbed with rho_larger", 0, 1e6});
    extra.push_back({"sensitivity",
                     ParamType::Text,
                     std::string("paper"),
                     "paper: ||w_after - w_before||^2 per tensor (Eq. 10-11) | code: mean squared difference of the "
                     "min-max normalised tensors (FedFSA's code)",
                     -kInf,
                     kInf,
                     {"paper", "code"}});
  }
  if (speed)
    extra.push_back({"lambda", ParamType::Real, 0.1,
                     "prox weight: linear term lambda (h_i - w_g) and weight decay lambda", 0, 100});
  for (ParamSpec& spec : tuning_params(0, 0.0)) extra.push_back(spec);
  std::vector<ParamSpec> specs = with_schedule_params(extra);
  // FedFSA's Table 4 and code: lr 0.1, clip 10, no SGD momentum (momentumForSGD = 0: with the schedule's
  // usual 0.9 the constant linear term is amplified tenfold and MoFedSAM diverges in round 3 on FMNIST);
  // radii per rule; FedSpeed / FedSMOO decay per local epoch.
  const double rho = variant == Variant::FedSam ? 0.05 : 0.1;
  for (ParamSpec& spec : specs) {
    if (spec.name == "rho") spec.default_value = rho, spec.min = 1e-12, spec.doc = "SAM radius (FedFSA: rho_default)";
    if (spec.name == "lr") spec.default_value = 0.1;
    if (spec.name == "momentum") spec.default_value = 0.0;
    if (spec.name == "grad_clip") spec.default_value = 10.0;
    if (spec.name == "lr_decay" && speed) spec.default_value = 0.998;
    if (spec.name == "lr_decay_scope" && speed) spec.default_value = std::string("client-epoch");
  }
  return specs;
}

}  // namespace

bool fsa_candidate(const std::string& name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* excluded : {"bn", "downsample", "shortcut", "norm", "bias"})
    if (lower.find(excluded) != std::string::npos) return false;
  return true;
}

std::vector<size_t> fsa_top_c(const std::vector<double>& sensitivity, int64_t c) {
  std::vector<size_t> order;
  for (size_t k = 0; k < sensitivity.size(); ++k)
    if (std::isfinite(sensitivity[k])) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sensitivity[a] > sensitivity[b]; });
  if (static_cast<int64_t>(order.size()) > c) order.resize(static_cast<size_t>(c));
  return order;
}

std::vector<double> fsa_sensitivity(const Model& model, std::span<const float> before, bool code_variant) {
  const std::vector<float> after_values = model.parameter_values();
  const std::span<const float> after(after_values);
  std::vector<double> sensitivity;
  for (const ParameterView& p : model.parameters()) {
    if (!fsa_candidate(p.name)) {
      sensitivity.push_back(-kInf);
      continue;
    }
    const std::span<const float> a = after.subspan(p.begin, p.end - p.begin),
                                 b = before.subspan(p.begin, p.end - p.begin);
    sensitivity.push_back(code_variant ? normalised_mean_squared_change(a, b) : squared_change(a, b));
  }
  return sensitivity;
}

const std::vector<ParamSpec>& fedsam_client_params() {
  static const std::vector<ParamSpec> specs = sam_params(Variant::FedSam);
  return specs;
}
std::unique_ptr<ClientRule> make_fedsam_client(const Params& p) {
  return std::make_unique<SamFamilyClient>(p, Variant::FedSam);
}

const std::vector<ParamSpec>& mofedsam_client_params() {
  static const std::vector<ParamSpec> specs = sam_params(Variant::MoFedSam);
  return specs;
}
std::unique_ptr<ClientRule> make_mofedsam_client(const Params& p) {
  return std::make_unique<SamFamilyClient>(p, Variant::MoFedSam);
}

const std::vector<ParamSpec>& fedfsa_client_params() {
  static const std::vector<ParamSpec> specs = sam_params(Variant::FedFsa);
  return specs;
}
std::unique_ptr<ClientRule> make_fedfsa_client(const Params& p) {
  return std::make_unique<SamFamilyClient>(p, Variant::FedFsa);
}

const std::vector<ParamSpec>& fedspeed_client_params() {
  static const std::vector<ParamSpec> specs = sam_params(Variant::FedSpeed);
  return specs;
}
std::unique_ptr<ClientRule> make_fedspeed_client(const Params& p) {
  return std::make_unique<SamFamilyClient>(p, Variant::FedSpeed);
}

const std::vector<ParamSpec>& fedsmoo_client_params() {
  static const std::vector<ParamSpec> specs = sam_params(Variant::FedSmoo);
  return specs;
}
std::unique_ptr<ClientRule> make_fedsmoo_client(const Params& p) {
  return std::make_unique<SamFamilyClient>(p, Variant::FedSmoo);
}

}  // namespace bastion
