// dnc: Divide-and-Conquer, Shejwalkar & Houmansadr 2021, "Manipulating the Byzantine: Optimizing Model
// Poisoning Attacks and Defenses for Federated Learning" (NDSS), Algorithm 2.
//   repeat `iterations` times (t = 0, 1, ...):
//     S_t = `subsample` distinct parameter coordinates drawn at random (all P when P is smaller)
//     X   = the (n, |S_t|) sub-matrix of the updates (normalize = true: each update first divided by its
//           parameter norm, as SPMC's Server/DnC.py; zero updates stay zero)
//     C   = X - mean row;  v = top right singular vector of C
//     score_i = <C_i, v>^2;  remove the r = floor(c * f) rows with the largest scores
//   K = the rows kept in every iteration (intersection); update = sum_{i in K} a_i Delta_i over all D
//   columns (buffers averaged like FedAvg), a_i = 1/|K| (weighting = uniform, the paper) or |D_i|/sum_K|D_j|.
// The removed rows are flagged. Defaults: one iteration, 10000 coordinates, c = 1 (SPMC and the NDSS code
// remove c * f with c = 1 in effect; the paper's Algorithm 2 names the filtering fraction c). SPMC then
// reads the kept *positions* as client ids; here kept rows are rows, nothing else.
// Singular vector: v = C^T u / |C^T u| for the top eigenvector u of the (n, n) Gram matrix G = C C^T, so
// <C_i, v> = (G u)_i / sqrt(u^T G u). u comes from power iteration in double, started from a normal draw
// per client id (Generator(seed).fork(kStream).fork(t).fork(1).fork(client)), stopped when |u' - u| <
// kPowerTolerance or after kPowerIterations; G is positive semi-definite, so u does not flip sign. With
// (nearly) equal top eigenvalues the iteration lands in the top eigenspace, whose direction then depends on
// the start. G = 0 (all sampled rows equal) gives every score 0.
// Randomness: the coordinates of iteration t come from Generator(in.seed).fork(kStream).fork(t).fork(0)
// (Floyd's sampling, then sorted), so they depend on (seed, round) and not on the rows or their order.
// Score ties are removed larger client id first, so the kept set does not depend on the row order.
// Preconditions: n >= 1, P >= 1, r < n; an empty intersection (possible when iterations * r >= n) is
// refused; inputs finite (the run loop rejects NaN/Inf first).
// Cost: per iteration O(n |S|) to gather, O(n^2 |S|) for G, O(n^2) per power step; O(n D) for the mean.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {

namespace {
constexpr uint64_t kStream = 0xD0C;        // this rule's stream off the round seed
constexpr double kPowerTolerance = 1e-10;  // |u' - u| of unit vectors in double: far below any score gap
constexpr int kPowerIterations = 10000;    // O(n^2) each: a cap only reached with a (near) tie on top

class Dnc final : public ServerRule {
 public:
  explicit Dnc(const Params& p)
      : params_(p), iterations_(p.integer("iterations")), subsample_(p.integer("subsample")), c_(p.real("c")),
        normalize_(p.boolean("normalize")), sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    const int64_t n = in.n, P = in.num_parameters;
    BASTION_CHECK(n >= 1, "dnc: no upload to aggregate");
    BASTION_CHECK(P >= 1, "dnc: no parameter columns to project");
    const int64_t f = resolved_f(params_, in);
    const auto removed = static_cast<int64_t>(std::floor(c_ * static_cast<double>(f)));
    BASTION_CHECK(removed < n, "dnc: removing floor(c * f) = floor(", c_, " * ", f, ") = ", removed, " of ", n,
                  " uploads leaves none");
    std::vector<double> row_scale(static_cast<size_t>(n), 1.0);
    if (normalize_)
      for (int64_t i = 0; i < n; ++i) {
        const double norm = vector_norm_cpu(in.updates + i * in.D, P);
        if (norm > 0) row_scale[i] = 1.0 / norm;
      }
    std::vector<uint8_t> good(static_cast<size_t>(n), 1);
    const Generator root = Generator(in.seed).fork(kStream);
    for (int64_t t = 0; t < iterations_ && removed > 0; ++t) {
      const Generator iteration = root.fork(static_cast<uint64_t>(t));
      const std::vector<double> score = scores(in, iteration, row_scale);
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return score[x] != score[y] ? score[x] > score[y] : in.clients[x] > in.clients[y];
      });
      for (int64_t k = 0; k < removed; ++k) good[order[k]] = 0;
    }
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < n; ++i)
      if (good[i]) kept.push_back(i);
    BASTION_CHECK(!kept.empty(), "dnc: no upload survives all ", iterations_, " iterations (removing ", removed, " of ",
                  n, " each)");
    return mean_of_kept(in, std::move(kept), sample_weighted_);
  }

 private:
  Params params_;
  int64_t iterations_, subsample_;
  double c_;
  bool normalize_, sample_weighted_;

  // score_i = <C_i, v>^2 for one random coordinate subset.
  std::vector<double> scores(const AggregationInput& in, const Generator& iteration,
                             const std::vector<double>& row_scale) const {
    const int64_t n = in.n, P = in.num_parameters;
    const std::vector<int64_t> coords = sample_coordinates(iteration.fork(0), P, std::min(subsample_, P));
    const auto b = static_cast<int64_t>(coords.size());
    std::vector<double> C(static_cast<size_t>(n * b)), mean(static_cast<size_t>(b), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < b; ++k) {
        C[i * b + k] = row_scale[i] * in.updates[i * in.D + coords[k]];
        mean[k] += C[i * b + k];
      }
    for (int64_t k = 0; k < b; ++k) mean[k] /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < b; ++k) C[i * b + k] -= mean[k];
    std::vector<double> G(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) {
        double dot = 0.0;
        for (int64_t k = 0; k < b; ++k) dot += C[i * b + k] * C[j * b + k];
        G[i * n + j] = G[j * n + i] = dot;
      }
    const Generator start = iteration.fork(1);
    std::vector<double> u(static_cast<size_t>(n)), Gu(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) u[i] = start.fork(static_cast<uint64_t>(in.clients[i])).normal();
    normalise(u);
    auto multiply = [&]() {
      for (int64_t i = 0; i < n; ++i) {
        double s = 0.0;
        for (int64_t j = 0; j < n; ++j) s += G[i * n + j] * u[j];
        Gu[i] = s;
      }
    };
    for (int iter = 0; iter < kPowerIterations; ++iter) {
      multiply();
      std::vector<double> next(Gu);
      if (normalise(next) == 0.0) break;  // G u = 0: G = 0 (or u in its null space; scores are then 0)
      double change = 0.0;
      for (int64_t i = 0; i < n; ++i) change += (next[i] - u[i]) * (next[i] - u[i]);
      u.swap(next);
      if (std::sqrt(change) < kPowerTolerance) break;
    }
    multiply();
    const double energy = std::inner_product(u.begin(), u.end(), Gu.begin(), 0.0);  // u^T G u = |C^T u|^2
    std::vector<double> score(static_cast<size_t>(n), 0.0);
    if (energy > 0)
      for (int64_t i = 0; i < n; ++i) score[i] = Gu[i] * Gu[i] / energy;
    return score;
  }

  static double normalise(std::vector<double>& x) {
    const double norm = std::sqrt(std::inner_product(x.begin(), x.end(), x.begin(), 0.0));
    if (norm > 0)
      for (double& v : x) v /= norm;
    return norm;
  }

  // `count` distinct indices of [0, P), ascending (Floyd's algorithm: O(count) draws, no O(P) array).
  static std::vector<int64_t> sample_coordinates(Generator g, int64_t P, int64_t count) {
    std::vector<int64_t> out;
    if (count == P) {
      out.resize(static_cast<size_t>(P));
      std::iota(out.begin(), out.end(), int64_t{0});
      return out;
    }
    std::unordered_set<int64_t> chosen;
    chosen.reserve(static_cast<size_t>(2 * count));
    for (int64_t j = P - count; j < P; ++j) {
      const auto t = static_cast<int64_t>(g.below(static_cast<uint64_t>(j + 1)));
      chosen.insert(chosen.count(t) ? j : t);
    }
    out.assign(chosen.begin(), chosen.end());
    std::sort(out.begin(), out.end());
    return out;
  }
};
}  // namespace

const std::vector<ParamSpec>& dnc_params() {
  static const std::vector<ParamSpec> specs = {
      {"iterations", ParamType::Integer, int64_t{1}, "random coordinate subsets; kept = kept in every one", 1, 1e6},
      {"subsample", ParamType::Integer, int64_t{10000}, "coordinates per subset (all P when P is smaller)", 1, 1e12},
      {"c", ParamType::Real, 1.0, "filtering fraction: remove floor(c * f) uploads per subset", 0, 1e6},
      f_param(),
      {"normalize", ParamType::Boolean, false, "divide each update by its parameter norm first (SPMC)"},
      weighting_param("uniform"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_dnc(const Params& params) { return std::make_unique<Dnc>(params); }

}  // namespace bastion
