// residual-base: residual-based reweighting (Fu, Xie, Li & Chen, "Attack-Resistant Federated Learning
// with Residual-based Reweighting", arXiv:1912.11464, 2019), as in the authors' code that FedCPA reuses
// (defense_utils.py IRLS_aggregation_split_restricted / reweight_algorithm_restricted). For each parameter
// coordinate d, with y_i the n clients' values and r_i the rank of y_i among them (0-based; ties broken
// by client id):
//   repeated-median line: s = sorted y; b = median_r median_{j != r} (s_r - s_j) / (r - j);
//                         a = median(y) - b (n - 1) / 2;   fitted value l_i = a + b r_i
//   residual e_i = (y_i - l_i) / tau,  tau = 1.4826 (1 + 5 / (n - 1)) M + 1e-7, M = median of the n - 1
//                  largest |y_j - l_j| (the smallest is left out)
//   leverage h_i = 1/n + (r_i - (n-1)/2)^2 / sum_r (r - (n-1)/2)^2  (hat matrix of the design [1, r])
//   weight psi_i = min(1, K / |e_i / sqrt(1 - h_i)|),  K = lambda sqrt(2 / n)   (psi_i = 1 when e_i = 0)
//   clipped value c_i = y_i if psi_i >= delta, else l_i           (delta = threshold)
// Client score S_i = sum_d psi_id * std_d(psi) (std over clients, n - 1 denominator: coordinates where the
// weights disagree count more); client weight omega_i = (S_i / max S)^2 / sum_j (S_j / max S)^2; output
// per parameter coordinate = sum_i omega_i c_id. BatchNorm buffer columns (not regressed) are averaged
// with omega over the raw values (the authors' code regresses every state-dict tensor; we leave buffers
// out of the fit, SPEC notation). When every S_i = 0 (every coordinate gives all clients the same psi,
// e.g. identical uploads) omega is uniform.
// Simplifications against the authors' code: one weight function min(1, K/|u|) written directly instead
// of (sqrt(1-h)/e) * clamp(e/sqrt(1-h), -K, K) (equal, without the 0/0 -> NaN -> 1 patch); float64
// arithmetic; coordinates processed in shards of 2000 columns (kShardColumns) as the authors' SHARD_SIZE,
// which here bounds nothing but the per-task work (no shard-sized copies are kept).
// Flags nobody (a weighting). Preconditions: n >= 3 (the leverage of n = 2 is 1 for both clients).
// Cost: O(n^2 P) per pass (the repeated median), two passes (scores, then the clipped weighted mean,
// which recomputes the fit instead of storing an n x P clipped copy).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr int64_t kShardColumns = 2000;

// Median of v[0, m) (mean of the two middle values for even m), reordering v.
double median_in_place(double* v, int64_t m) {
  std::nth_element(v, v + m / 2, v + m);
  const double upper = v[m / 2];
  if (m % 2 == 1) return upper;
  return 0.5 * (*std::max_element(v, v + m / 2) + upper);
}

class ResidualBase final : public ServerRule {
 public:
  explicit ResidualBase(const Params& p) : lambda_(p.real("confidence")), delta_(p.real("threshold")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    const int64_t n = in.n, P = in.num_parameters;
    BASTION_CHECK(n >= 3, "residual-base: needs at least 3 uploads, got ", n);
    const double center = 0.5 * static_cast<double>(n - 1);
    double sxx = 0.0;
    for (int64_t r = 0; r < n; ++r) sxx += (r - center) * (r - center);
    std::vector<double> root_one_minus_h(static_cast<size_t>(n));  // by rank
    for (int64_t r = 0; r < n; ++r)
      root_one_minus_h[r] = std::sqrt(1.0 - (1.0 / n + (r - center) * (r - center) / sxx));
    const double K = lambda_ * std::sqrt(2.0 / static_cast<double>(n));

    // Pass 1: per-shard partial scores, summed in shard order (independent of the thread count).
    const int64_t shards = (P + kShardColumns - 1) / kShardColumns;
    std::vector<double> partial(static_cast<size_t>(shards * n), 0.0);
    for_column_blocks(in, P, kShardColumns, [&](int64_t begin, int64_t end) {
      Fit fit(n);
      double* score = partial.data() + (begin / kShardColumns) * n;
      for (int64_t d = begin; d < end; ++d) {
        fit.run(in, d, root_one_minus_h, K);
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < n; ++i) mean += fit.psi[i];
        mean /= static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) var += (fit.psi[i] - mean) * (fit.psi[i] - mean);
        const double sd = std::sqrt(var / static_cast<double>(n - 1));
        for (int64_t i = 0; i < n; ++i) score[i] += fit.psi[i] * sd;
      }
    });
    std::vector<double> omega(static_cast<size_t>(n), 0.0);
    for (int64_t s = 0; s < shards; ++s)
      for (int64_t i = 0; i < n; ++i) omega[i] += partial[s * n + i];
    const double top = *std::max_element(omega.begin(), omega.end());
    for (double& w : omega) w = top > 0.0 ? (w / top) * (w / top) : 1.0;
    const double total = std::accumulate(omega.begin(), omega.end(), 0.0);
    for (double& w : omega) w /= total;

    // Pass 2: clipped weighted mean of the parameters; buffers: plain omega-weighted mean.
    AggregationOutput out;
    out.update.assign(static_cast<size_t>(in.D), 0.0f);
    for_column_blocks(in, P, kShardColumns, [&](int64_t begin, int64_t end) {
      Fit fit(n);
      for (int64_t d = begin; d < end; ++d) {
        fit.run(in, d, root_one_minus_h, K);
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) sum += omega[i] * (fit.psi[i] >= delta_ ? fit.y[i] : fit.line[i]);
        out.update[d] = static_cast<float>(sum);
      }
    });
    for (int64_t d = P; d < in.D; ++d) {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += omega[i] * in.updates[i * in.D + d];
      out.update[d] = static_cast<float>(sum);
    }
    return out;
  }

 private:
  double lambda_, delta_;

  // The fit of one coordinate, with its workspace (one per task, reused across the shard's columns).
  struct Fit {
    int64_t n;
    std::vector<double> y, line, psi, sorted, slopes, medians;
    std::vector<int64_t> order, rank;
    explicit Fit(int64_t n_)
        : n(n_), y(n_), line(n_), psi(n_), sorted(n_), slopes(n_), medians(n_), order(n_), rank(n_) {}

    void run(const AggregationInput& in, int64_t d, const std::vector<double>& root_one_minus_h, double K) {
      for (int64_t i = 0; i < n; ++i) y[i] = in.updates[i * in.D + d];
      std::iota(order.begin(), order.end(), int64_t{0});
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        if (y[a] != y[b]) return y[a] < y[b];
        return in.clients.empty() ? a < b : in.clients[a] < in.clients[b];
      });
      for (int64_t r = 0; r < n; ++r) {
        rank[order[r]] = r;
        sorted[r] = y[order[r]];
      }
      for (int64_t r = 0; r < n; ++r) {
        int64_t m = 0;
        for (int64_t j = 0; j < n; ++j)
          if (j != r) slopes[m++] = (sorted[r] - sorted[j]) / static_cast<double>(r - j);
        medians[r] = median_in_place(slopes.data(), m);
      }
      const double b = median_in_place(medians.data(), n);
      std::copy(sorted.begin(), sorted.end(), slopes.begin());
      const double a = median_in_place(slopes.data(), n) - b * 0.5 * static_cast<double>(n - 1);
      for (int64_t i = 0; i < n; ++i) {
        line[i] = a + b * static_cast<double>(rank[i]);
        medians[i] = std::abs(y[i] - line[i]);
      }
      std::sort(medians.begin(), medians.end());
      const double M = median_in_place(medians.data() + 1, n - 1);
      const double tau = 1.4826 * (1.0 + 5.0 / static_cast<double>(n - 1)) * M + 1e-7;
      for (int64_t i = 0; i < n; ++i) {
        const double u = std::abs((y[i] - line[i]) / tau) / root_one_minus_h[rank[i]];
        psi[i] = u <= K ? 1.0 : K / u;
      }
    }
  };
};
}  // namespace

const std::vector<ParamSpec>& residual_base_params() {
  static const std::vector<ParamSpec> specs = {
      {"confidence", ParamType::Real, 2.0,
       "lambda: residuals beyond lambda sqrt(2/n) standardised units are down-weighted", 1e-6, 1e6},
      {"threshold", ParamType::Real, 0.05, "delta: values with weight < delta are replaced by the fitted line", 0, 1},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_residual_base(const Params& params) { return std::make_unique<ResidualBase>(params); }

}  // namespace bastion
