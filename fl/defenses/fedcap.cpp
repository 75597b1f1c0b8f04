// fedcap: FedCAP's server (customised aggregation, calibration, detection; the math and the paper are in
// fl/defenses/fedcap.h). It sends every sampled client a customised start state (its round plan,
// ServerRule::plan_round), so an upload delta_j is relative to what client j received; it remembers
// those states for the round's recovery and keeps last round's valid uploads (the pool: recovered
// models W_j, similarity vectors u_j, the global model w they are relative to) for the next customisation.
//
// Per round, in the run loop's order:
//   1. plan_round asks for request updates (non_uploaders = request, FedCAP's code): a sampled client that
//      is not in the pool and not removed trains an update from the pool's w on its data (servercap.py
//      get_update; a malicious client's attacks act on it), its request vector u_c;
//   2. plan_round's start states: w_c = sum_j p_j W_j (fedcap.h), remembered as s_c; removed clients, and
//      every client while the pool is empty (round 1), get the global model;
//   3. aggregate: recover, calibrate, detect (removed clients' uploads are flagged and never aggregated
//      again), global = sample-weighted mean of the valid recovered models; the valid rows become the pool.
// Options (FedCAP Table IV ablations): calibration = false uses the raw uploads delta_j as similarity
// vectors and detects nothing (FedCAP1, FedCAP4); customise = false sends the global model to everyone,
// which makes the rule FedAvg (FedCAP2, with the fedcap client's personal model).
// If every upload of a round is removed the global model stays and the pool empties (FedCAP's code would
// zero the global model: docs/decisions.md).
// State (checkpointed, named blocks): the removed clients, the pool and its w. Columns: parameters decide norms and
// cosines; BatchNorm buffers are recovered and averaged like parameters (server_rule.h).
#include "fl/defenses/fedcap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kStateTag = 20240.0f;  // first value of a pre-codec state: a state of another rule is refused

class FedcapRule final : public ServerRule {
 public:
  explicit FedcapRule(const Params& p)
      : alpha_(p.real("alpha")), phi_(p.real("phi")), threshold_(p.real("norm_threshold")),
        calibration_(p.boolean("calibration")), customise_(p.boolean("customise")),
        request_(p.text("non_uploaders") == "request") {
    BASTION_CHECK(phi_ == -1.0 || (phi_ >= 0.0 && phi_ <= 1.0), p.scope(), ".phi: -1 (1 / uploads) or in [0, 1], got ",
                  phi_);
  }

  AggregationOutput aggregate(const AggregationInput& in) override;

  std::optional<RoundPlan> plan_round(const RoundPlanInput& input) override;

  RuleState save_state() const override;
  void load_state(const RuleState& state) override;

 private:
  double alpha_, phi_, threshold_;
  bool calibration_, customise_, request_;
  std::set<int64_t> removed_;
  std::vector<int64_t> pool_clients_;
  std::vector<float> pool_models_, pool_updates_, pool_base_;  // (k, D), (k, D), D
  int64_t pool_D_ = 0, pool_P_ = 0;
  std::map<int64_t, std::vector<float>> sent_;  // this round's customised start states

  std::vector<int64_t> request_clients(const std::vector<int64_t>& sampled) const;
  void load_legacy(std::span<const float> state);
  // w_c into `out` and remembered as s_c; false (the global model) for a removed client, an empty pool, or
  // a non-uploader without a request vector (`request` empty).
  bool start_state(int64_t client, std::span<const float> request, std::span<float> out);

  int64_t pool_row(int64_t client) const {
    const auto found = std::find(pool_clients_.begin(), pool_clients_.end(), client);
    return found == pool_clients_.end() ? -1 : static_cast<int64_t>(found - pool_clients_.begin());
  }
};

AggregationOutput FedcapRule::aggregate(const AggregationInput& in) {
  BASTION_CHECK(in.n >= 1, "fedcap: no upload to aggregate");
  const int64_t D = in.D, P = in.num_parameters;
  std::vector<float> models(static_cast<size_t>(in.n * D)), updates(models.size());
  AggregationOutput out;
  out.flagged.assign(static_cast<size_t>(in.n), 0);
  std::vector<int64_t> valid;
  for (int64_t i = 0; i < in.n; ++i) {
    const int64_t client = in.clients[i];
    const auto sent = sent_.find(client);
    const float* base = sent == sent_.end() ? in.global.data() : sent->second.data();
    const float* delta = in.updates + i * D;
    float* W = models.data() + i * D;
    float* u = updates.data() + i * D;
    for (int64_t d = 0; d < D; ++d) {
      W[d] = base[d] + delta[d];                             // recover
      u[d] = calibration_ ? W[d] - in.global[d] : delta[d];  // calibrate (or the raw upload)
    }
    if (calibration_) {
      const double norm = fedcap_norm(std::span<const float>(u, static_cast<size_t>(D)), P);
      if (removed_.contains(client) || std::isnan(norm) || norm > threshold_) removed_.insert(client);
    }
    out.flagged[i] = removed_.contains(client);
    if (!out.flagged[i]) valid.push_back(i);
  }
  double total = 0.0;
  for (int64_t i : valid) total += static_cast<double>(in.num_samples[i]);
  std::vector<double> global(static_cast<size_t>(D), 0.0);
  for (int64_t i : valid)
    for (int64_t d = 0; d < D; ++d) global[d] += static_cast<double>(in.num_samples[i]) / total * models[i * D + d];
  out.update.assign(static_cast<size_t>(D), 0.0f);
  if (!valid.empty())
    for (int64_t d = 0; d < D; ++d) out.update[d] = static_cast<float>(global[d] - in.global[d]);
  pool_clients_.clear();
  pool_models_.clear();
  pool_updates_.clear();
  for (int64_t i : valid) {
    pool_clients_.push_back(in.clients[i]);
    pool_models_.insert(pool_models_.end(), models.begin() + i * D, models.begin() + (i + 1) * D);
    pool_updates_.insert(pool_updates_.end(), updates.begin() + i * D, updates.begin() + (i + 1) * D);
  }
  pool_base_.assign(in.global.begin(), in.global.end());
  pool_D_ = D, pool_P_ = P;
  sent_.clear();
  return out;
}

std::optional<RoundPlan> FedcapRule::plan_round(const RoundPlanInput& input) {
  if (!customise_) return std::nullopt;
  const std::vector<int64_t>& sampled = *input.sampled;
  std::map<int64_t, std::vector<float>> requests;  // this round's request vectors
  const std::vector<int64_t> asked = input.request_updates ? request_clients(sampled) : std::vector<int64_t>{};
  if (!asked.empty()) {
    const std::vector<float> updates = input.request_updates(asked, pool_base_);
    for (size_t i = 0; i < asked.size(); ++i)
      requests[asked[i]].assign(updates.begin() + i * pool_D_, updates.begin() + (i + 1) * pool_D_);
  }
  const size_t width = input.global.size();
  RoundPlan plan{std::vector<float>(sampled.size() * width), std::vector<uint8_t>(sampled.size(), 0)};
  for (size_t i = 0; i < sampled.size(); ++i) {
    const auto found = requests.find(sampled[i]);
    const std::span<const float> request = found == requests.end() ? std::span<const float>() : found->second;
    plan.personal[i] = start_state(sampled[i], request, std::span<float>(plan.starts.data() + i * width, width));
  }
  return plan;
}

bool FedcapRule::start_state(int64_t client, std::span<const float> request, std::span<float> out) {
  sent_.erase(client);  // a round whose uploads were all rejected never reached aggregate() to clear it
  if (pool_clients_.empty() || removed_.contains(client)) return false;
  BASTION_CHECK(static_cast<int64_t>(out.size()) == pool_D_, "fedcap: start state of ", out.size(),
                " values, the pool holds models of ", pool_D_);
  const int64_t k = static_cast<int64_t>(pool_clients_.size());
  const int64_t self = pool_row(client);
  if (self >= 0)
    request = std::span<const float>(pool_updates_.data() + self * pool_D_, static_cast<size_t>(pool_D_));
  else if (request.empty())
    return false;  // a non-uploader without a request (non_uploaders = global): the global model
  const std::vector<double> weights =
      fedcap_mixture_weights(pool_updates_.data(), k, pool_P_, pool_D_, request, self, alpha_, phi_);
  fedcap_mix(pool_models_.data(), k, pool_D_, weights, out);
  sent_[client].assign(out.begin(), out.end());
  return true;
}

std::vector<int64_t> FedcapRule::request_clients(const std::vector<int64_t>& sampled) const {
  std::vector<int64_t> asked;
  if (!request_ || pool_clients_.empty()) return asked;
  for (int64_t client : sampled)
    if (!removed_.contains(client) && pool_row(client) < 0) asked.push_back(client);
  return asked;
}

// Blocks: "removed" (ids), "pool_clients" (k ids), "widths" (D, P), "pool_base" (D), "pool_models" and
// "pool_updates" (k D each).
RuleState FedcapRule::save_state() const {
  RuleState s("fedcap");
  s.put_ints("removed", std::vector<int64_t>(removed_.begin(), removed_.end()));
  s.put_ints("pool_clients", pool_clients_);
  s.put_ints("widths", {pool_D_, pool_P_});
  s.put_floats("pool_base", pool_base_);
  s.put_floats("pool_models", pool_models_);
  s.put_floats("pool_updates", pool_updates_);
  return s;
}

void FedcapRule::load_state(const RuleState& s) {
  if (!s.legacy().empty()) return load_legacy(s.legacy());
  removed_.clear(), pool_clients_.clear(), pool_models_.clear(), pool_updates_.clear(), pool_base_.clear();
  pool_D_ = pool_P_ = 0;
  sent_.clear();
  if (s.empty()) return;  // a fresh start (a checkpoint taken before any round)
  const std::vector<int64_t>& removed = s.ids_below("removed", std::numeric_limits<int64_t>::max());
  const std::vector<int64_t>& widths = s.ids_below("widths", std::numeric_limits<int32_t>::max());
  BASTION_CHECK(widths.size() == 2 && widths[1] <= widths[0], "fedcap state: widths should be (D, P <= D)");
  const int64_t D = widths[0];
  pool_clients_ = s.ids_below("pool_clients", std::numeric_limits<int64_t>::max());
  const size_t k = pool_clients_.size();
  removed_.insert(removed.begin(), removed.end());
  pool_base_ = s.finite_floats("pool_base", static_cast<size_t>(D));
  pool_models_ = s.finite_floats("pool_models", k * static_cast<size_t>(D));
  pool_updates_ = s.finite_floats("pool_updates", k * static_cast<size_t>(D));
  pool_D_ = D, pool_P_ = widths[1];
}

// The float layout of checkpoints written before the codec: [tag, R, removed ids (R), k, D, P, pool
// clients (k), w (D), models (k D), updates (k D)], ids and sizes as floats.
void FedcapRule::load_legacy(std::span<const float> s) {
  size_t at = 0;
  const auto next_count = [&](const char* what) {
    BASTION_CHECK(at < s.size() && s[at] >= 0 && s[at] == std::trunc(s[at]) && s[at] < 16777216.0f,
                  "fedcap state: ", what, " missing or not a count");
    return static_cast<int64_t>(s[at++]);
  };
  BASTION_CHECK(!s.empty() && s[0] == kStateTag, "fedcap state: not a state this rule saved");
  at = 1;
  removed_.clear();
  for (int64_t r = next_count("removed count"); r > 0; --r) removed_.insert(next_count("removed client"));
  const int64_t k = next_count("pool size"), D = next_count("model width"), P = next_count("parameter count");
  pool_clients_.clear();
  for (int64_t j = 0; j < k; ++j) pool_clients_.push_back(next_count("pool client"));
  const size_t rest = static_cast<size_t>(D + 2 * k * D);
  BASTION_CHECK(P <= D && s.size() - at == rest, "fedcap state: ", s.size() - at, " values after the header, expected ",
                rest);
  pool_base_.assign(s.begin() + at, s.begin() + at + D);
  pool_models_.assign(s.begin() + at + D, s.begin() + at + D + k * D);
  pool_updates_.assign(s.begin() + at + D + k * D, s.end());
  pool_D_ = D, pool_P_ = P;
  sent_.clear();
}

}  // namespace

std::vector<double> fedcap_mixture_weights(const float* updates, int64_t k, int64_t P, int64_t stride,
                                           std::span<const float> request, int64_t self_row, double alpha, double phi) {
  BASTION_CHECK(k >= 1 && P >= 0 && stride >= P && static_cast<int64_t>(request.size()) >= P, "fedcap weights: k = ", k,
                ", P = ", P, ", stride = ", stride, ", request of ", request.size());
  BASTION_CHECK(self_row >= -1 && self_row < k, "fedcap weights: self row ", self_row, " outside [-1, ", k, ")");
  std::vector<double> weights(static_cast<size_t>(k), 0.0);
  if (self_row >= 0 && k == 1) {
    weights[0] = 1.0;
    return weights;
  }
  const double request_norm = fedcap_norm(request, P);
  std::vector<double> logits(static_cast<size_t>(k), -kInf);
  double top = -kInf;
  for (int64_t j = 0; j < k; ++j) {
    if (j == self_row) continue;
    const float* row = updates + j * stride;
    double dot = 0.0;
    for (int64_t d = 0; d < P; ++d) dot += static_cast<double>(request[d]) * row[d];
    // torch's cosine_similarity: dot / max(|a||b|, 1e-8), so a zero vector gives 0; NaN -> -1 (FedCAP).
    double similarity =
        dot / std::max(request_norm * fedcap_norm(std::span<const float>(row, static_cast<size_t>(P)), P), 1e-8);
    if (std::isnan(similarity)) similarity = -1.0;
    logits[j] = alpha * similarity;
    top = std::max(top, logits[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j)
    if (j != self_row) sum += weights[j] = std::exp(logits[j] - top);
  const double self_weight = self_row < 0 ? 0.0 : (phi < 0 ? 1.0 / static_cast<double>(k) : phi);
  for (int64_t j = 0; j < k; ++j) weights[j] = j == self_row ? self_weight : weights[j] / sum * (1.0 - self_weight);
  return weights;
}

void fedcap_mix(const float* models, int64_t k, int64_t D, std::span<const double> weights, std::span<float> out) {
  BASTION_CHECK(static_cast<int64_t>(weights.size()) == k && static_cast<int64_t>(out.size()) == D,
                "fedcap mix: ", weights.size(), " weights for ", k, " models, out of ", out.size(), " for D = ", D);
  for (int64_t d = 0; d < D; ++d) {
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += weights[j] * models[j * D + d];
    out[d] = static_cast<float>(sum);
  }
}

double fedcap_norm(std::span<const float> row, int64_t P) {
  double sum = 0.0;
  for (int64_t d = 0; d < P; ++d) sum += static_cast<double>(row[d]) * row[d];
  return std::sqrt(sum);
}

const std::vector<ParamSpec>& fedcap_params() {
  static const std::vector<ParamSpec> specs = {
      {"alpha", ParamType::Real, 10.0, "scale factor alpha of softmax(alpha cos) (FedCAP grid 2, 5, 10)", 0, 1e6},
      {"phi", ParamType::Real, 0.3,
       "self weight phi of an uploader's customised model (grid 0.1, 0.2, 0.3; -1 = 1/uploads)", -1, 1},
      {"norm_threshold", ParamType::Real, 10.0,
       "T_norm: a calibrated update with a larger L2 norm removes its client for good", 0, 1e30},
      {"calibration", ParamType::Boolean, true,
       "calibrate against the global model and detect (false: raw uploads as similarity vectors, no detection; "
       "FedCAP1/4)"},
      {"customise", ParamType::Boolean, true,
       "send customised models (false: everyone gets the global model; FedCAP2)"},
      {"non_uploaders",
       ParamType::Text,
       std::string("request"),
       "a sampled client absent from last round's uploads: request (trains an update from the global model first; "
       "FedCAP) | global (starts from the global model)",
       -kInf,
       kInf,
       {"request", "global"}},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_fedcap(const Params& params) { return std::make_unique<FedcapRule>(params); }

}  // namespace bastion
