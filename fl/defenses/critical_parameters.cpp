#include "fl/defenses/critical_parameters.h"

#include <algorithm>
#include <numeric>

#include "fl/base/thread_pool.h"
#include "tensor/error.h"

namespace bastion {

namespace {

// Indices of `importance` beyond `cut` (greater for the top set, smaller for the bottom set), plus the first
// `equal` indices whose value equals `cut`: the k entries of a sort by (value, index).
CriticalSet collect(std::span<const float> importance, float cut, int64_t equal, bool largest) {
  CriticalSet set;
  const int64_t K = static_cast<int64_t>(importance.size());
  for (int64_t d = 0; d < K; ++d) {
    const float v = importance[d];
    const bool beyond = largest ? v > cut : v < cut;
    if (!beyond && !(v == cut && equal > 0)) continue;
    if (!beyond) --equal;
    set.index.push_back(d);
    set.value.push_back(v);
  }
  return set;
}

}  // namespace

CriticalSets select_critical_sets(std::span<const float> importance, int64_t k, std::vector<float>& scratch) {
  const int64_t K = static_cast<int64_t>(importance.size());
  BASTION_CHECK(k >= 1 && k <= K, "fedcpa: k = ", k, " critical parameters out of ", K, " (1 <= k <= K needed)");
  scratch.assign(importance.begin(), importance.end());
  CriticalSets sets;
  // Top: after nth_element, [K - k, K) holds the k largest and scratch[K - k] the smallest of them (the cut).
  std::nth_element(scratch.begin(), scratch.begin() + (K - k), scratch.end());
  const float top_cut = scratch[K - k];
  const int64_t above = std::count_if(scratch.begin() + (K - k), scratch.end(), [&](float v) { return v > top_cut; });
  sets.top = collect(importance, top_cut, k - above, /*largest=*/true);
  // Bottom: [0, k) holds the k smallest and scratch[k - 1] the largest of them.
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end());
  const float bottom_cut = scratch[k - 1];
  const int64_t below = std::count_if(scratch.begin(), scratch.begin() + k, [&](float v) { return v < bottom_cut; });
  sets.bottom = collect(importance, bottom_cut, k - below, /*largest=*/false);
  BASTION_ASSERT(static_cast<int64_t>(sets.top.index.size()) == k &&
                 static_cast<int64_t>(sets.bottom.index.size()) == k);
  return sets;
}

std::vector<double> average_ranks(std::span<const double> x) {
  const size_t n = x.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(n);
  for (size_t start = 0; start < n;) {
    size_t end = start + 1;
    while (end < n && x[order[end]] == x[order[start]]) ++end;
    const double shared = 0.5 * static_cast<double>(start + 1 + end);  // mean of ranks start+1 .. end
    for (size_t t = start; t < end; ++t) rank[order[t]] = shared;
    start = end;
  }
  return rank;
}

double correlation_01(std::span<const double> x, std::span<const double> y, CorrelationKind kind) {
  BASTION_CHECK(x.size() == y.size(), "fedcpa: correlation of ", x.size(), " and ", y.size(), " values");
  const size_t n = x.size();
  auto constant = [](std::span<const double> v) {
    return std::all_of(v.begin(), v.end(), [&](double e) { return e == v[0]; });
  };
  if (n < 2 || constant(x) || constant(y)) return 0.0;  // undefined: no evidence either way
  std::vector<double> a(x.begin(), x.end()), b(y.begin(), y.end());
  if (kind == CorrelationKind::Spearman) a = average_ranks(x), b = average_ranks(y);
  const double mean_a = std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(n);
  const double mean_b = std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(n);
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (size_t t = 0; t < n; ++t) {
    const double da = a[t] - mean_a, db = b[t] - mean_b;
    ab += da * db;
    aa += da * da;
    bb += db * db;
  }
  if (aa == 0.0 || bb == 0.0) return 0.0;
  const double rho = std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0);
  return (rho + 1.0) / 2.0;
}

double critical_set_similarity(const CriticalSet& a, const CriticalSet& b, CorrelationKind kind) {
  std::vector<double> shared_a, shared_b;
  for (size_t s = 0, t = 0; s < a.index.size() && t < b.index.size();) {
    if (a.index[s] < b.index[t]) {
      ++s;
    } else if (b.index[t] < a.index[s]) {
      ++t;
    } else {
      shared_a.push_back(a.value[s++]);
      shared_b.push_back(b.value[t++]);
    }
  }
  const double common = static_cast<double>(shared_a.size());
  const double united = static_cast<double>(a.index.size() + b.index.size()) - common;
  const double jaccard = united > 0.0 ? common / united : 0.0;
  return jaccard + correlation_01(shared_a, shared_b, kind);
}

double critical_similarity(const CriticalSets& a, const CriticalSets& b, const CriticalSimilarityOptions& options) {
  double sim = 0.0;
  if (options.use_top) sim += critical_set_similarity(a.top, b.top, options.correlation);
  if (options.use_bottom) sim += critical_set_similarity(a.bottom, b.bottom, options.correlation);
  return sim;
}

std::vector<double> critical_normality(std::span<const CriticalSets> clients, const CriticalSets* global,
                                       const CriticalSimilarityOptions& options, ThreadPool* pool) {
  const size_t n = clients.size();
  std::vector<double> normality(n, 0.0);
  // Every similarity the scores need, one task each: the client pairs i <= j, then client i against global.
  std::vector<std::pair<size_t, size_t>> pairs;
  if (options.use_local)
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i; j < n; ++j) pairs.emplace_back(i, j);
  const bool with_global = options.use_global && global != nullptr;
  const size_t pair_count = pairs.size(), tasks = pair_count + (with_global ? n : 0);
  std::vector<double> similarity(tasks);
  auto task = [&](int64_t t, int /*worker*/) {
    const size_t k = static_cast<size_t>(t);
    similarity[k] = k < pair_count ? critical_similarity(clients[pairs[k].first], clients[pairs[k].second], options)
                                   : critical_similarity(clients[k - pair_count], *global, options);
  };
  run_tasks(pool, static_cast<int64_t>(tasks), task);
  if (options.use_local) {
    std::vector<double> sim(n * n);
    for (size_t k = 0; k < pair_count; ++k)
      sim[pairs[k].first * n + pairs[k].second] = sim[pairs[k].second * n + pairs[k].first] = similarity[k];
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> row(sim.begin() + static_cast<std::ptrdiff_t>(i * n),
                              sim.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
      std::sort(row.begin(), row.end());  // a sum in value order: the same for any order of the peers
      normality[i] = std::accumulate(row.begin(), row.end(), 0.0) / static_cast<double>(n);
    }
  }
  if (with_global)
    for (size_t i = 0; i < n; ++i) normality[i] += similarity[pair_count + i];
  return normality;
}

std::vector<double> critical_weights(std::span<const double> normality) {
  BASTION_CHECK(!normality.empty(), "fedcpa: no normality score to turn into weights");
  const auto [lo_it, hi_it] = std::minmax_element(normality.begin(), normality.end());
  const double lo = *lo_it, hi = *hi_it;
  std::vector<double> weight(normality.size(), 1.0);
  if (!(hi - lo > 1e-12 * std::max(1.0, std::fabs(hi)))) return weight;  // all equal: scaling undefined
  for (size_t i = 0; i < normality.size(); ++i) {
    const double scaled = (normality[i] - lo) / (hi - lo);
    if (scaled >= 1.0) continue;  // ln(inf): 1 (the code's 0.99 gives 5.1, clipped to 1 as well)
    weight[i] = scaled <= 0.0 ? 0.0 : std::clamp(std::log(scaled / (1.0 - scaled)) + 0.5, 0.0, 1.0);
  }
  return weight;
}

}  // namespace bastion
