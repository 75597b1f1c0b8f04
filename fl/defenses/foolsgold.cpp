// foolsgold: down-weight clients whose update histories point the same way (Fung, Yoon & Beschastnikh,
// "The Limitations of Federated Learning in Sybil Settings", RAID 2020, Algorithm 1).
//   history   H_c += Delta_c                           (history = sum, the paper)
//             H_c += Delta_c / (|Delta_c| + 0.1)       (history = normalized, SPMC's Server/FoolsGold.py)
//   cs_ij = cos(H_i, H_j) for i != j among this round's clients, cs_ii = 0;  v_i = max_j cs_ij
//   pardoning: cs_ij *= v_i / v_j  when v_i < v_j
//   w_i = clip(1 - max_j cs_ij, 0, 1);  w /= max w;  w_i = 1 -> 0.99
//   w_i = clip(kappa * (ln(w_i / (1 - w_i)) + 0.5), 0, 1)      (kappa = confidence; ln 0 -> w_i = 0)
//   update = sum_i w_i Delta_i / sum_i w_i                     (aggregate = weighted, paper and SPMC)
//          = sum_i w_i Delta_i / #{i : w_i > 0}                (aggregate = nonzero-mean, FedCPA)
// over all D columns (BatchNorm buffers follow the same weights); histories and cosines use the P
// parameter columns only. When every weight is 0 (all histories mutually identical, or max w = 0) the
// update is 0: the server keeps the global model. Clients with w_i = 0 are flagged.
// State: one history per client id ever seen (P floats each; memory O(#clients * P), as in the paper).
// save_state blocks (fl/base/rule_state.h): "width" (P), "ids" (ascending), "histories" (ids x P). A history
// saturates at +-FLT_MAX. load_state refuses an inconsistent state with an error and keeps what it had; it
// also reads the float layout of checkpoints written before the codec ([count, P, then (id, P values)
// records]).
// Preconditions: n >= 1; P equal in every round. Cost: O(n P) for histories + O(n^2 P) for cosines.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kMaxExactId = 16777216.0;  // 2^24: larger integers are not exact in a float

// a.b / sqrt(|a|^2 |b|^2) in double, 0 when either is 0. Unlike sqrt|a|^2 * sqrt|b|^2 (vector_cosine_cpu),
// this is exactly 1 for identical histories (sqrt of a correctly rounded square is exact), so colluding
// sybils that upload one vector get w = 0 exactly instead of 1e-16 (which the rescaling would turn into 1).
double history_cosine(const float* a, const float* b, int64_t P) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (int64_t d = 0; d < P; ++d) {
    const double x = a[d], y = b[d];
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  if (aa == 0.0 || bb == 0.0) return 0.0;
  return std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0);
}

// A non-negative integer small enough to index a state (false for NaN, Inf and fractions).
bool is_count(float x) { return x >= 0.0f && x < 1e15f && x == std::floor(x); }

class FoolsGold final : public ServerRule {
 public:
  explicit FoolsGold(const Params& p)
      : normalized_(p.text("history") == "normalized"), nonzero_mean_(p.text("aggregate") == "nonzero-mean"),
        confidence_(p.real("confidence")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "foolsgold: no upload to aggregate");
    const int64_t n = in.n, P = in.num_parameters;
    BASTION_CHECK(width_ < 0 || width_ == P, "foolsgold: history has ", width_, " parameters, uploads have ", P);
    width_ = P;
    std::vector<const float*> h(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float>& hist = history_[in.clients[i]];
      if (hist.empty()) hist.assign(static_cast<size_t>(P), 0.0f);
      const float* row = in.updates + i * in.D;
      const double scale = normalized_ ? 1.0 / (vector_norm_cpu(row, P) + 0.1) : 1.0;
      for (int64_t d = 0; d < P; ++d) {
        // Saturate at +-FLT_MAX: a history at Inf has NaN cosines, which drop out of every max below and
        // give repeated huge sybils weight 1. Only uploads near FLT_MAX, repeated, get here.
        const double step = std::clamp(scale * row[d], -double{FLT_MAX}, double{FLT_MAX});
        hist[d] = std::clamp(hist[d] + static_cast<float>(step), -FLT_MAX, FLT_MAX);
      }
      h[i] = hist.data();
    }
    const std::vector<double> w = weights(h, n, P);
    std::vector<int64_t> rows;
    std::vector<double> used;
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (w[i] <= 0.0) continue;
      rows.push_back(i);
      used.push_back(w[i]);
      total += w[i];
    }
    AggregationOutput out;
    out.flagged.assign(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) out.flagged[i] = w[i] <= 0.0 ? 1 : 0;
    if (rows.empty()) {
      out.update.assign(static_cast<size_t>(in.D), 0.0f);
      return out;
    }
    const double denominator = nonzero_mean_ ? static_cast<double>(rows.size()) : total;
    for (double& u : used) u /= denominator;
    out.update = weighted_sum_of_rows(in, rows, used);
    return out;
  }

  RuleState save_state() const override {
    RuleState state("foolsgold");
    if (history_.empty()) return state;
    std::vector<int64_t> ids;
    std::vector<float> histories;
    for (const auto& [id, history] : history_) {
      ids.push_back(id);
      histories.insert(histories.end(), history.begin(), history.end());
    }
    state.put_int("width", width_);
    state.put_ints("ids", std::move(ids));
    state.put_floats("histories", std::move(histories));
    return state;
  }

  // Refuses a state that save_state cannot have written (a client twice, a negative id, histories of
  // another size, non-finite values) before changing anything: a checkpoint is a file from outside.
  void load_state(const RuleState& state) override {
    std::map<int64_t, std::vector<float>> history;
    int64_t width = -1;
    if (!state.legacy().empty()) {
      load_legacy(state.legacy(), history, width);
    } else if (!state.empty()) {
      width = state.int_in("width", 0, std::numeric_limits<int32_t>::max());
      const std::vector<int64_t>& ids = state.ids_below("ids", std::numeric_limits<int64_t>::max());
      const std::vector<float>& values = state.finite_floats("histories", ids.size() * static_cast<size_t>(width));
      for (size_t c = 0; c < ids.size(); ++c) {
        BASTION_CHECK(!history.count(ids[c]), "foolsgold: state holds client ", ids[c], " twice");
        history[ids[c]].assign(values.begin() + c * width, values.begin() + (c + 1) * width);
      }
    }
    history_ = std::move(history);
    width_ = width;
  }

 private:
  // The float layout of checkpoints written before the codec.
  static void load_legacy(std::span<const float> state, std::map<int64_t, std::vector<float>>& history,
                          int64_t& width) {
    BASTION_CHECK(state.size() >= 2, "foolsgold: state of ", state.size(), " floats has no header");
    BASTION_CHECK(is_count(state[0]) && is_count(state[1]) &&
                      static_cast<double>(state.size()) == 2.0 + double{state[0]} * (1.0 + state[1]),
                  "foolsgold: state of ", state.size(), " floats does not hold ", state[0], " histories of ", state[1],
                  " values");
    const auto count = static_cast<int64_t>(state[0]);
    width = static_cast<int64_t>(state[1]);
    for (int64_t c = 0; c < count; ++c) {
      const float* record = state.data() + 2 + c * (1 + width);
      BASTION_CHECK(is_count(record[0]) && record[0] < kMaxExactId, "foolsgold: state record ", c, " has client id ",
                    record[0], " (an integer in [0, 2^24) expected)");
      const auto id = static_cast<int64_t>(record[0]);
      BASTION_CHECK(!history.count(id), "foolsgold: state holds client ", id, " twice");
      BASTION_CHECK(std::all_of(record + 1, record + 1 + width, [](float v) { return std::isfinite(v); }),
                    "foolsgold: state history of client ", id, " holds NaN or Inf");
      history[id].assign(record + 1, record + 1 + width);
    }
  }

  bool normalized_, nonzero_mean_;
  double confidence_;
  int64_t width_ = -1;                             // P of the stored histories; -1 = none yet
  std::map<int64_t, std::vector<float>> history_;  // client id -> summed (normalised) updates

  std::vector<double> weights(const std::vector<const float*>& h, int64_t n, int64_t P) const {
    std::vector<double> cs(static_cast<size_t>(n * n), 0.0), v(static_cast<size_t>(n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) cs[i * n + j] = cs[j * n + i] = history_cosine(h[i], h[j], P);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) v[i] = std::max(v[i], cs[i * n + j]);  // includes cs_ii = 0
    std::vector<double> w(static_cast<size_t>(n));
    double top = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double m = 0.0;  // cs_ii = 0 takes part in the max, as in the paper's code
      for (int64_t j = 0; j < n; ++j) {
        double c = cs[i * n + j];
        if (j != i && v[i] < v[j]) c *= v[i] / v[j];
        m = std::max(m, c);
      }
      w[i] = std::clamp(1.0 - m, 0.0, 1.0);
      top = std::max(top, w[i]);
    }
    if (top <= 0.0) return std::vector<double>(static_cast<size_t>(n), 0.0);
    for (double& x : w) {
      x /= top;
      if (x >= 1.0) x = 0.99;
      x = x <= 0.0 ? 0.0 : std::clamp(confidence_ * (std::log(x / (1.0 - x)) + 0.5), 0.0, 1.0);
    }
    return w;
  }
};
}  // namespace

const std::vector<ParamSpec>& foolsgold_params() {
  static const double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      {"history",
       ParamType::Text,
       std::string("sum"),
       "sum: H += Delta (paper); normalized: H += Delta / (|Delta| + 0.1) (SPMC)",
       -inf,
       inf,
       {"sum", "normalized"}},
      {"aggregate",
       ParamType::Text,
       std::string("weighted"),
       "weighted: sum w_i Delta_i / sum w_i (paper); nonzero-mean: / #{w_i > 0} (FedCPA)",
       -inf,
       inf,
       {"weighted", "nonzero-mean"}},
      {"confidence", ParamType::Real, 1.0, "kappa in w = kappa * (ln(w / (1 - w)) + 0.5)", 1e-6, 1e6},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_foolsgold(const Params& params) { return std::make_unique<FoolsGold>(params); }

}  // namespace bastion
