#include "fl/defenses/krum_scores.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

std::vector<float> pairwise_parameter_distances(const AggregationInput& in) {
  std::vector<float> dist(static_cast<size_t>(in.n * in.n));
  std::vector<float> workspace(static_cast<size_t>(vector_pairwise_workspace_floats(in.n, in.num_parameters)));
  vector_pairwise_squared_distances_strided_cpu(dist.data(), workspace.data(), in.updates, in.n, in.num_parameters,
                                                in.D);
  if (std::all_of(dist.begin(), dist.end(), [](float v) { return std::isfinite(v); })) return dist;
  // Uploads near FLT_MAX overflow the float GEMM (Inf, then Inf - Inf = NaN), and NaN scores would hand
  // the choice to the row order (a 1e30 upload in row 0 won Krum). Then, and only then, every distance
  // again exactly in double; a pair farther apart than float's range is +Inf, the farthest of all.
  const int64_t n = in.n;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      const double d = vector_squared_distance_cpu(in.updates + i * in.D, in.updates + j * in.D, in.num_parameters);
      dist[i * n + j] = dist[j * n + i] = d > FLT_MAX ? INFINITY : static_cast<float>(d);
    }
  return dist;
}

std::vector<double> krum_scores(std::span<const float> dist, int64_t n, std::span<const int64_t> candidates,
                                int64_t neighbours) {
  BASTION_ASSERT(neighbours >= 0 && neighbours < static_cast<int64_t>(candidates.size()));
  std::vector<double> scores(candidates.size());
  std::vector<float> row;
  row.reserve(candidates.size());
  for (size_t a = 0; a < candidates.size(); ++a) {
    row.clear();
    for (size_t b = 0; b < candidates.size(); ++b)
      if (b != a) row.push_back(dist[candidates[a] * n + candidates[b]]);
    std::partial_sort(row.begin(), row.begin() + neighbours, row.end());
    double sum = 0.0;
    for (int64_t k = 0; k < neighbours; ++k) sum += row[k];
    scores[a] = sum;
  }
  return scores;
}

namespace {
// Position in `candidates` of the lowest score; ties go to the lowest row index.
size_t best_candidate(std::span<const double> scores, std::span<const int64_t> candidates) {
  size_t best = 0;
  for (size_t a = 1; a < scores.size(); ++a)
    if (scores[a] < scores[best] || (scores[a] == scores[best] && candidates[a] < candidates[best])) best = a;
  return best;
}
}  // namespace

std::vector<int64_t> krum_select(std::span<const float> dist, int64_t n, int64_t f, int64_t m,
                                 KrumSelection selection) {
  BASTION_ASSERT(n > 2 * f + 2 && m >= 1 && m <= n);
  BASTION_ASSERT(selection != KrumSelection::Ndss21 || m == n - 2 * f - 2);
  // Neighbours other than itself summed per score among r candidates: NDSS'21 counts its own zero
  // distance among the r - f - 2 columns it sums, so it sums one other distance fewer.
  const int64_t self_column = selection == KrumSelection::Ndss21 ? 1 : 0;
  const auto neighbours = [&](int64_t r) { return r - f - 2 - self_column; };
  std::vector<int64_t> remaining(static_cast<size_t>(n));
  std::iota(remaining.begin(), remaining.end(), int64_t{0});
  std::vector<double> scores = krum_scores(dist, n, remaining, neighbours(n));
  std::vector<int64_t> selected;
  while (static_cast<int64_t>(selected.size()) < m) {
    const int64_t r = static_cast<int64_t>(remaining.size());
    if (selection != KrumSelection::OneShot && !selected.empty() && r > 2 * f + 2)
      scores = krum_scores(dist, n, remaining, neighbours(r));
    const size_t best = best_candidate(scores, remaining);
    selected.push_back(remaining[best]);
    remaining.erase(remaining.begin() + static_cast<std::ptrdiff_t>(best));
    scores.erase(scores.begin() + static_cast<std::ptrdiff_t>(best));
  }
  return selected;
}

std::vector<int64_t> nearest_rows(std::span<const float> dist, int64_t n, int64_t row, int64_t count) {
  BASTION_ASSERT(count >= 1 && count <= n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  const float* d = dist.data() + row * n;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const float da = a == row ? -1.0f : d[a], db = b == row ? -1.0f : d[b];  // itself first, even at a 0 tie
    return da < db;
  });
  order.resize(static_cast<size_t>(count));
  return order;
}

}  // namespace bastion
