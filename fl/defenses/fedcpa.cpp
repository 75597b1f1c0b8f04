// fedcpa: weight clients by how much their critical parameters agree with their peers' and with the global
// model's (Han et al., "Towards Attack-tolerant Federated Learning via Critical Parameter Analysis", ICCV
// 2023, Algorithm 1; the math is critical_parameters.h). Per round, over the K conv/linear weight columns
// (AggregationInput::weight_columns; every parameter column when the layout is unknown):
//   local importance   p_i = |Delta_i * w_i|,  w_i = g + Delta_i                       (Eq. 4)
//   global importance  p_g = |(g - g_prev) * g|  (g = the model sent this round, g_prev the one before;
//                      Section 4's p_global and the code's prev_global_w / prev_prev_global_w)
//   top/bottom-k sets, k = max(1, floor(k_fraction * K)); N_i = sim(i, g) + mean_j sim(i, j) (Eq. 5, 7)
//   lambda = clip(ln(Nt / (1 - Nt)) + 0.5), Nt = min-max(N)                               (Eq. 8)
//   update = sum_i lambda_i Delta_i / #{i : lambda_i > 0}   over all D columns             (Eq. 9)
// First round (no g_prev yet): first_round = skip leaves the global term out (Eq. 6, the paper's formula
// without a previous model); first_round = local-mean is the authors' code: g_prev := g, g := the plain mean
// of the round's local models M, local importances |(w_i - M) * w_i|, and M is the next round's g_prev.
// Clients with lambda_i = 0 are flagged. State: g_prev over the P parameter columns, the blocks "parameters" and
// "previous_global"; load_state refuses a non-finite or cut state (and reads checkpoints written before the
// codec, [P, values]).
// Preconditions: n >= 1, K >= 1, P the same in every round. Cost: O(n D) for importances and the sum, two
// passes over K per client to select its sets and, for Spearman, O(k log k) to order each set by value
// (critical_parameters.h), O(n^2 k) for similarities; the clients, then the pairs of clients, run on in.pool,
// each on its own vectors and slots, so the result does not depend on the thread count.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "fl/base/thread_pool.h"
#include "fl/defenses/critical_parameters.h"
#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kMaxExactCount = 16777216.0;  // 2^24: the pre-codec layout stored P in a float

class FedCpa final : public ServerRule {
 public:
  explicit FedCpa(const Params& p) : fraction_(p.real("k")), local_mean_first_(p.text("first_round") == "local-mean") {
    options_.correlation = p.text("correlation") == "pearson" ? CorrelationKind::Pearson : CorrelationKind::Spearman;
    const std::string& ablation = p.text("ablation");
    options_.use_top = ablation != "without-topk";
    options_.use_bottom = ablation != "without-bottomk";
    options_.use_global = ablation != "without-global";
    options_.use_local = ablation != "without-local";
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "fedcpa: no upload to aggregate");
    const int64_t n = in.n, P = in.num_parameters;
    BASTION_CHECK(prev_.empty() || static_cast<int64_t>(prev_.size()) == P, "fedcpa: previous global model has ",
                  prev_.size(), " parameters, uploads have ", P);
    BASTION_CHECK(static_cast<int64_t>(in.global.size()) == in.D, "fedcpa: global state of ", in.global.size(),
                  " values for uploads of ", in.D);
    const std::vector<ColumnRange> columns = weight_columns_of(in);
    int64_t K = 0;
    for (const ColumnRange& r : columns) K += r.end - r.begin;
    BASTION_CHECK(K >= 1, "fedcpa: no conv/linear weight column to analyse");
    const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::floor(fraction_ * static_cast<double>(K))));
    const bool first = prev_.empty();
    // The code's first round: the plain mean of the local models stands in for this round's global model.
    const std::vector<double> offset = first && local_mean_first_ ? mean_delta(in) : std::vector<double>{};
    const bool have_global = !first || local_mean_first_;
    std::vector<CriticalSets> sets(static_cast<size_t>(n + 1));
    const int workers = in.pool ? in.pool->size() : 1;
    std::vector<std::vector<float>> importance(static_cast<size_t>(workers)), scratch(static_cast<size_t>(workers));
    auto task = [&](int64_t t, int worker) {
      std::vector<float>& p = importance[static_cast<size_t>(worker)];
      p.resize(static_cast<size_t>(K));
      if (t < n)
        local_importance(in, t, columns, offset, p);
      else
        global_importance(in, columns, offset, p);
      CriticalSets& mine = sets[static_cast<size_t>(t)];
      mine = select_critical_sets(p, k, scratch[static_cast<size_t>(worker)]);
      if (options_.correlation == CorrelationKind::Spearman) order_by_value(mine.top), order_by_value(mine.bottom);
    };
    const int64_t tasks = have_global ? n + 1 : n;
    run_tasks(in.pool, tasks, task);
    const std::vector<double> normality =
        critical_normality(std::span<const CriticalSets>(sets.data(), static_cast<size_t>(n)),
                           have_global ? &sets[static_cast<size_t>(n)] : nullptr, options_, in.pool);
    AggregationOutput out = weighted_mean_of_kept(in, critical_weights(normality));
    remember_reference(in, offset);
    return out;
  }

  RuleState save_state() const override {
    RuleState state("fedcpa");
    if (prev_.empty()) return state;
    state.put_int("parameters", static_cast<int64_t>(prev_.size()));  // so a cut block is refused at load
    state.put_floats("previous_global", prev_);
    return state;
  }

  // Refuses a state that save_state cannot have written, before changing anything; reads the float layout
  // of checkpoints written before the codec ([P, then P values]) too.
  void load_state(const RuleState& state) override {
    if (state.empty()) {
      prev_.clear();
      return;
    }
    const std::span<const float> legacy = state.legacy();
    if (legacy.empty()) {
      const int64_t P = state.int_in("parameters", 1, std::numeric_limits<int32_t>::max());
      prev_ = state.finite_floats("previous_global", static_cast<size_t>(P));
      return;
    }
    const float count = legacy[0];
    BASTION_CHECK(count >= 1.0f && count < kMaxExactCount && count == std::floor(count) &&
                      static_cast<double>(legacy.size()) == 1.0 + count,
                  "fedcpa: state of ", legacy.size(), " floats does not hold a previous model of ", count, " values");
    BASTION_CHECK(std::all_of(legacy.begin() + 1, legacy.end(), [](float v) { return std::isfinite(v); }),
                  "fedcpa: state (previous global model) holds NaN or Inf");
    prev_.assign(legacy.begin() + 1, legacy.end());
  }

 private:
  double fraction_;
  bool local_mean_first_;
  CriticalSimilarityOptions options_;
  std::vector<float> prev_;  // g_prev over the P parameter columns; empty before the first round

  // in.weight_columns, checked; [0, P) when the layout is unknown.
  static std::vector<ColumnRange> weight_columns_of(const AggregationInput& in) {
    if (in.weight_columns.empty()) return {{0, in.num_parameters}};
    std::vector<ColumnRange> columns(in.weight_columns.begin(), in.weight_columns.end());
    int64_t last = 0;
    for (const ColumnRange& r : columns) {
      BASTION_CHECK(r.begin >= last && r.begin < r.end && r.end <= in.num_parameters, "fedcpa: weight columns [",
                    r.begin, ", ", r.end, ") not sorted, disjoint and inside the ", in.num_parameters, " parameters");
      last = r.end;
    }
    return columns;
  }

  // mean_i Delta_i over the P parameter columns, summed in double in row order.
  static std::vector<double> mean_delta(const AggregationInput& in) {
    std::vector<double> mean(static_cast<size_t>(in.num_parameters), 0.0);
    for (int64_t i = 0; i < in.n; ++i)
      for (int64_t d = 0; d < in.num_parameters; ++d) mean[d] += in.updates[i * in.D + d];
    for (double& m : mean) m /= static_cast<double>(in.n);
    return mean;
  }

  // |(w_i - reference) * w_i| with w_i = g + Delta_i; reference = g, or g + offset (the code's first round).
  static void local_importance(const AggregationInput& in, int64_t i, const std::vector<ColumnRange>& columns,
                               const std::vector<double>& offset, std::vector<float>& p) {
    const float* row = in.updates + i * in.D;
    size_t t = 0;
    for (const ColumnRange& r : columns)
      for (int64_t d = r.begin; d < r.end; ++d, ++t) {
        const double change = offset.empty() ? double{row[d]} : row[d] - offset[d];
        p[t] = critical_importance(change, double{in.global[d]} + row[d]);
      }
  }

  // |(g - g_prev) * g|; in the code's first round g_prev = g and g = g + mean Delta.
  void global_importance(const AggregationInput& in, const std::vector<ColumnRange>& columns,
                         const std::vector<double>& offset, std::vector<float>& p) const {
    size_t t = 0;
    for (const ColumnRange& r : columns)
      for (int64_t d = r.begin; d < r.end; ++d, ++t)
        p[t] = offset.empty() ? critical_importance(double{in.global[d]} - prev_[d], in.global[d])
                              : critical_importance(offset[d], in.global[d] + offset[d]);
  }

  // Eq. 9 and the flags: lambda_i / #kept on the kept rows; update 0 if none is kept (cannot happen: the
  // largest normality always gets lambda = 1).
  static AggregationOutput weighted_mean_of_kept(const AggregationInput& in, const std::vector<double>& lambda) {
    std::vector<int64_t> rows;
    std::vector<double> used;
    for (int64_t i = 0; i < in.n; ++i)
      if (lambda[i] > 0.0) rows.push_back(i), used.push_back(lambda[i]);
    AggregationOutput out;
    out.flagged.assign(static_cast<size_t>(in.n), 0);
    for (int64_t i = 0; i < in.n; ++i) out.flagged[i] = lambda[i] > 0.0 ? 0 : 1;
    if (rows.empty()) {
      out.update.assign(static_cast<size_t>(in.D), 0.0f);
      return out;
    }
    for (double& u : used) u /= static_cast<double>(rows.size());
    out.update = weighted_sum_of_rows(in, rows, used);
    return out;
  }

  // Next round's g_prev: this round's g (or, in the code's first round, the local mean), saturated to float.
  void remember_reference(const AggregationInput& in, const std::vector<double>& offset) {
    prev_.resize(static_cast<size_t>(in.num_parameters));
    for (int64_t d = 0; d < in.num_parameters; ++d) {
      const double v = offset.empty() ? double{in.global[d]} : in.global[d] + offset[d];
      prev_[d] = static_cast<float>(std::clamp(v, -double{FLT_MAX}, double{FLT_MAX}));
    }
  }
};
}  // namespace

const std::vector<ParamSpec>& fedcpa_params() {
  static const double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      {"k", ParamType::Real, 0.01,
       "top/bottom set size as a fraction of the conv/linear weights (k = max(1, floor(k K)); paper 1 %)", 1e-6, 0.5},
      {"correlation",
       ParamType::Text,
       std::string("spearman"),
       "rank correlation on the shared critical values: spearman (paper) or pearson (authors' code)",
       -inf,
       inf,
       {"spearman", "pearson"}},
      {"first_round",
       ParamType::Text,
       std::string("skip"),
       "before a previous global model exists: skip the global term (paper) or local-mean (code: the local mean "
       "serves as this round's global)",
       -inf,
       inf,
       {"skip", "local-mean"}},
      {"ablation",
       ParamType::Text,
       std::string("none"),
       "Table 5 variants: none, without-topk, without-bottomk, without-global, without-local",
       -inf,
       inf,
       {"none", "without-topk", "without-bottomk", "without-global", "without-local"}},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_fedcpa(const Params& params) { return std::make_unique<FedCpa>(params); }

}  // namespace bastion
