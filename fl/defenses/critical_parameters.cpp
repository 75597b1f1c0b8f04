#include "fl/defenses/critical_parameters.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "fl/base/thread_pool.h"
#include "tensor/error.h"

namespace bastion {

namespace {

// The selection finds each end's cut bucket in a histogram of the values' top 12 bits (4,096 buckets, in
// L1), then, in one more pass, takes every value of the buckets beyond the cut and gathers the cut bucket's
// few values to choose among exactly: two streaming passes over K, where a copy, two std::nth_element
// passes and two collecting passes were five (bench/RESULTS.md, "FedCPA's server step on the AMD EPYC Zen 3").
constexpr int kBucketBits = 12;
constexpr size_t kBuckets = size_t{1} << kBucketBits;

// A key whose unsigned order is the float order (negative values' bits reversed, the sign bit flipped on
// the others); -0 is read as +0, since the two are equal as values and one cut must find both.
inline uint32_t order_key(float v) {
  uint32_t u;
  const float canonical = v + 0.0f;  // -0 + 0 = +0 under round-to-nearest
  std::memcpy(&u, &canonical, sizeof u);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

inline size_t bucket_of(float v) { return order_key(v) >> (32 - kBucketBits); }

// Where the k-th value from one end falls: bucket `bucket` holds it, and `outside` values lie in the
// buckets beyond it (above it for the top, below it for the bottom).
struct CutBucket {
  size_t bucket = 0;
  int64_t outside = 0;
};

CutBucket cut_bucket(const std::vector<int64_t>& histogram, int64_t k, bool largest) {
  int64_t seen = 0;
  for (size_t step = 0; step < kBuckets; ++step) {
    const size_t b = largest ? kBuckets - 1 - step : step;
    if (seen + histogram[b] >= k) return {b, seen};
    seen += histogram[b];
  }
  BASTION_ASSERT(false);  // k <= K: the buckets hold every value
  return {};
}

void append(CriticalSet& set, int64_t index, float value) {
  set.index.push_back(index);
  set.value.push_back(value);
}

// Completes `set` (the values beyond the cut bucket, index-sorted, with room for k) with the `want` first
// entries of the cut bucket's values `edge` (index-sorted) in a sort by (value from that end, index);
// `scratch` is reused.
void complete_from_edge(CriticalSet& set, const CriticalSet& edge, int64_t want, bool largest,
                        std::vector<float>& scratch) {
  scratch.assign(edge.value.begin(), edge.value.end());
  const auto nth = scratch.begin() + (want - 1);
  if (largest)
    std::nth_element(scratch.begin(), nth, scratch.end(), std::greater<float>());
  else
    std::nth_element(scratch.begin(), nth, scratch.end());
  const float cut = *nth;
  auto beyond = [&](float v) { return largest ? v > cut : v < cut; };
  int64_t equal = want - std::count_if(scratch.begin(), nth, beyond);  // ties at the cut: lowest indices first
  CriticalSet picked;
  picked.index.reserve(static_cast<size_t>(want));
  picked.value.reserve(static_cast<size_t>(want));
  for (size_t t = 0; t < edge.index.size(); ++t)
    if (beyond(edge.value[t]) || (edge.value[t] == cut && equal-- > 0)) append(picked, edge.index[t], edge.value[t]);
  // Merge the two index-sorted lists from the back, in place.
  size_t s = set.index.size(), t = picked.index.size(), w = s + t;
  set.index.resize(w);
  set.value.resize(w);
  while (t > 0) {
    --w;
    if (s > 0 && set.index[s - 1] > picked.index[t - 1])
      --s, set.index[w] = set.index[s], set.value[w] = set.value[s];
    else
      --t, set.index[w] = picked.index[t], set.value[w] = picked.value[t];
  }
}

}  // namespace

CriticalSets select_critical_sets(std::span<const float> importance, int64_t k, std::vector<float>& scratch) {
  const int64_t K = static_cast<int64_t>(importance.size());
  BASTION_CHECK(k >= 1 && k <= K, "fedcpa: k = ", k, " critical parameters out of ", K, " (1 <= k <= K needed)");
  std::vector<int64_t> histogram(kBuckets, 0);
  for (const float v : importance) ++histogram[bucket_of(v)];
  const CutBucket top = cut_bucket(histogram, k, /*largest=*/true);
  const CutBucket bottom = cut_bucket(histogram, k, /*largest=*/false);
  CriticalSets sets;
  CriticalSet top_edge, bottom_edge;
  for (CriticalSet* set : {&sets.top, &sets.bottom})
    set->index.reserve(static_cast<size_t>(k)), set->value.reserve(static_cast<size_t>(k));
  top_edge.index.reserve(static_cast<size_t>(histogram[top.bucket]));
  top_edge.value.reserve(static_cast<size_t>(histogram[top.bucket]));
  bottom_edge.index.reserve(static_cast<size_t>(histogram[bottom.bucket]));
  bottom_edge.value.reserve(static_cast<size_t>(histogram[bottom.bucket]));
  for (int64_t d = 0; d < K; ++d) {
    const float v = importance[d];
    const size_t b = bucket_of(v);
    if (b > top.bucket)
      append(sets.top, d, v);
    else if (b == top.bucket)
      append(top_edge, d, v);
    if (b < bottom.bucket)
      append(sets.bottom, d, v);
    else if (b == bottom.bucket)
      append(bottom_edge, d, v);
  }
  complete_from_edge(sets.top, top_edge, k - top.outside, /*largest=*/true, scratch);
  complete_from_edge(sets.bottom, bottom_edge, k - bottom.outside, /*largest=*/false, scratch);
  BASTION_ASSERT(static_cast<int64_t>(sets.top.index.size()) == k &&
                 static_cast<int64_t>(sets.bottom.index.size()) == k);
  return sets;
}

void order_by_value(CriticalSet& set) {
  BASTION_CHECK(set.value.size() < (size_t{1} << 31), "fedcpa: ", set.value.size(),
                " critical parameters in one set (2^31 at most)");
  set.value_order.resize(set.value.size());
  std::iota(set.value_order.begin(), set.value_order.end(), uint32_t{0});
  std::stable_sort(set.value_order.begin(), set.value_order.end(),
                   [&](uint32_t a, uint32_t b) { return set.value[a] < set.value[b]; });
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

namespace {

// (rho + 1) / 2 for Pearson's rho of a and b; 0 when either side has no spread.
double pearson_01(std::span<const double> a, std::span<const double> b) {
  const size_t n = a.size();
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

bool constant(std::span<const double> v) {
  return std::all_of(v.begin(), v.end(), [&](double e) { return e == v[0]; });
}

// average_ranks of the shared values of `set` into `rank` (slot[t]: where position t's value sits in the
// shared list, or -1), read off set.value_order: the shared positions in ascending value order, runs of
// equal values sharing the mean of their ranks.
void shared_ranks(std::vector<double>& rank, const CriticalSet& set, const std::vector<int32_t>& slot,
                  std::vector<uint32_t>& run) {
  size_t next = 0;  // ranks given so far
  auto close_run = [&] {
    const double mean = 0.5 * static_cast<double>(next + 1 + next + run.size());  // ranks next+1 .. next+run
    for (const uint32_t t : run) rank[static_cast<size_t>(slot[t])] = mean;
    next += run.size();
    run.clear();
  };
  run.clear();
  for (const uint32_t t : set.value_order) {
    if (slot[t] < 0) continue;
    if (!run.empty() && set.value[t] != set.value[run.front()]) close_run();
    run.push_back(t);
  }
  if (!run.empty()) close_run();
}

// What one similarity needs beside its two sets, kept per worker so that a round's pairs reuse it.
struct SimilarityScratch {
  std::vector<double> shared_a, shared_b, rank_a, rank_b;
  std::vector<int32_t> slot_a, slot_b;
  std::vector<uint32_t> run;
};

double set_similarity(const CriticalSet& a, const CriticalSet& b, CorrelationKind kind, SimilarityScratch& w) {
  const bool ordered = kind == CorrelationKind::Spearman && a.value_order.size() == a.value.size() &&
                       b.value_order.size() == b.value.size();
  w.shared_a.clear();
  w.shared_b.clear();
  if (ordered) w.slot_a.assign(a.index.size(), -1), w.slot_b.assign(b.index.size(), -1);
  for (size_t s = 0, t = 0; s < a.index.size() && t < b.index.size();) {
    if (a.index[s] < b.index[t]) {
      ++s;
    } else if (b.index[t] < a.index[s]) {
      ++t;
    } else {
      if (ordered) w.slot_a[s] = w.slot_b[t] = static_cast<int32_t>(w.shared_a.size());
      w.shared_a.push_back(a.value[s++]);
      w.shared_b.push_back(b.value[t++]);
    }
  }
  const double common = static_cast<double>(w.shared_a.size());
  const double united = static_cast<double>(a.index.size() + b.index.size()) - common;
  const double jaccard = united > 0.0 ? common / united : 0.0;
  if (!ordered) return jaccard + correlation_01(w.shared_a, w.shared_b, kind);
  if (w.shared_a.size() < 2 || constant(w.shared_a) || constant(w.shared_b)) return jaccard;
  w.rank_a.resize(w.shared_a.size());
  w.rank_b.resize(w.shared_b.size());
  shared_ranks(w.rank_a, a, w.slot_a, w.run);
  shared_ranks(w.rank_b, b, w.slot_b, w.run);
  return jaccard + pearson_01(w.rank_a, w.rank_b);
}

double similarity_of(const CriticalSets& a, const CriticalSets& b, const CriticalSimilarityOptions& options,
                     SimilarityScratch& w) {
  double sim = 0.0;
  if (options.use_top) sim += set_similarity(a.top, b.top, options.correlation, w);
  if (options.use_bottom) sim += set_similarity(a.bottom, b.bottom, options.correlation, w);
  return sim;
}

}  // namespace

double correlation_01(std::span<const double> x, std::span<const double> y, CorrelationKind kind) {
  BASTION_CHECK(x.size() == y.size(), "fedcpa: correlation of ", x.size(), " and ", y.size(), " values");
  if (x.size() < 2 || constant(x) || constant(y)) return 0.0;  // undefined: no evidence either way
  if (kind == CorrelationKind::Pearson) return pearson_01(x, y);
  return pearson_01(average_ranks(x), average_ranks(y));
}

double critical_set_similarity(const CriticalSet& a, const CriticalSet& b, CorrelationKind kind) {
  SimilarityScratch scratch;
  return set_similarity(a, b, kind, scratch);
}

double critical_similarity(const CriticalSets& a, const CriticalSets& b, const CriticalSimilarityOptions& options) {
  SimilarityScratch scratch;
  return similarity_of(a, b, options, scratch);
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
  std::vector<SimilarityScratch> scratch(static_cast<size_t>(pool ? pool->size() : 1));
  auto task = [&](int64_t t, int worker) {
    const size_t k = static_cast<size_t>(t);
    SimilarityScratch& w = scratch[static_cast<size_t>(worker)];
    similarity[k] = k < pair_count ? similarity_of(clients[pairs[k].first], clients[pairs[k].second], options, w)
                                   : similarity_of(clients[k - pair_count], *global, options, w);
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
