// clustered: keep the larger of two clusters of similar updates — FedCAP's "cluster" baseline
// (utils/defense.py), after the bi-partition idea of clustered FL (Sattler et al. 2020, "Clustered
// Federated Learning: Model-Agnostic Distributed Multi-Task Optimization under Privacy Constraints").
//   dist(i, j) = 1 - cos(Delta_i[0, P), Delta_j[0, P))        (cos = 0 when either update is zero)
//   agglomerative clustering, complete linkage (cluster distance = the largest pairwise distance), merged
//   until 2 clusters remain (as sklearn's AgglomerativeClustering(n_clusters=2, metric="cosine",
//   linkage="complete") that FedCAP calls);
//   K = the larger cluster; a tie goes to the cluster holding the smallest client id (uploads arrive in
//   ascending client order, so this is the one with the lowest row; keyed on ids, it survives reordering);
//   update = sum_{i in K} a_i Delta_i over all D columns (buffers averaged like FedAvg),
//   a_i = |D_i| / sum_K |D_j| (weighting = samples, FedCAP) or 1/|K| (uniform).
// The other cluster is flagged. n = 1: the one upload is kept. n = 2: two singletons, the tie rule keeps
// the smaller client id. Equal linkage distances merge the pair whose smallest client ids are smallest,
// so the partition does not depend on the row order.
// Preconditions: n >= 1; inputs finite (the run loop rejects NaN/Inf first).
// Cost: O(n^2 P) for the cosines (pairs spread over in.pool, each written to its own slot) + O(n^3) merging.
#include <algorithm>
#include <limits>

#include "fl/base/thread_pool.h"
#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class Clustered final : public ServerRule {
 public:
  explicit Clustered(const Params& p) : sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "clustered: no upload to aggregate");
    const int64_t n = in.n;
    const std::vector<double> dist = cosine_distances(in);
    // clusters[c]: member rows; min_id[c]: smallest client id in it (tie-breaks).
    std::vector<std::vector<int64_t>> clusters(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) clusters[i] = {i};
    auto min_id = [&](const std::vector<int64_t>& c) {
      int64_t id = std::numeric_limits<int64_t>::max();
      for (int64_t r : c) id = std::min(id, in.clients[r]);
      return id;
    };
    auto linkage = [&](const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
      double worst = 0.0;
      for (int64_t i : x)
        for (int64_t j : y) worst = std::max(worst, dist[i * n + j]);
      return worst;
    };
    while (clusters.size() > 2) {
      size_t best_x = 0, best_y = 1;
      double best = std::numeric_limits<double>::infinity();
      std::pair<int64_t, int64_t> best_ids{0, 0};
      for (size_t x = 0; x < clusters.size(); ++x)
        for (size_t y = x + 1; y < clusters.size(); ++y) {
          const double l = linkage(clusters[x], clusters[y]);
          const int64_t a = min_id(clusters[x]), b = min_id(clusters[y]);
          const std::pair<int64_t, int64_t> ids{std::min(a, b), std::max(a, b)};
          if (l < best || (l == best && ids < best_ids)) {
            best = l;
            best_ids = ids;
            best_x = x;
            best_y = y;
          }
        }
      clusters[best_x].insert(clusters[best_x].end(), clusters[best_y].begin(), clusters[best_y].end());
      clusters.erase(clusters.begin() + static_cast<std::ptrdiff_t>(best_y));
    }
    size_t keep = 0;
    if (clusters.size() == 2) {
      const size_t s0 = clusters[0].size(), s1 = clusters[1].size();
      keep = s0 != s1 ? (s0 > s1 ? 0 : 1) : (min_id(clusters[0]) < min_id(clusters[1]) ? 0 : 1);
    }
    std::vector<int64_t> kept = clusters[keep];
    return mean_of_kept(in, std::move(kept), sample_weighted_);
  }

 private:
  bool sample_weighted_;

  // (n, n) row-major 1 - cos over the parameter columns; one task per row i computes j > i.
  static std::vector<double> cosine_distances(const AggregationInput& in) {
    const int64_t n = in.n, P = in.num_parameters;
    std::vector<double> dist(static_cast<size_t>(n * n), 0.0);
    auto row_task = [&](int64_t i, int) {
      for (int64_t j = i + 1; j < n; ++j)
        dist[i * n + j] = 1.0 - vector_cosine_cpu(in.updates + i * in.D, in.updates + j * in.D, P);
    };
    if (in.pool == nullptr) {
      for (int64_t i = 0; i < n; ++i) row_task(i, 0);
    } else {
      in.pool->run(n, row_task);
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) dist[j * n + i] = dist[i * n + j];
    return dist;
  }
};
}  // namespace

const std::vector<ParamSpec>& clustered_params() {
  static const std::vector<ParamSpec> specs = {
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_clustered(const Params& params) { return std::make_unique<Clustered>(params); }

}  // namespace bastion
