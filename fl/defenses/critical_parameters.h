// critical_parameters: the pure math of FedCPA (Han et al., "Towards Attack-tolerant Federated Learning via
// Critical Parameter Analysis", ICCV 2023, Section 5 and Algorithm 1); the rule around it is fedcpa.cpp.
//   importance   p[d] = |(x[d] - y[d]) * x[d]|          (Eq. 4: x a model, y the model it moved from)
//   critical sets  T = the k largest, B = the k smallest importances (Algorithm 1's argsort slices)
//   sim(a, b)  = J(T_a, T_b) + J(B_a, B_b) + rho01(a, b on T_a & T_b) + rho01(a, b on B_a & B_b)  (Eq. 5)
//                J = |A & B| / |A | B|, rho01 = (rho + 1) / 2 with rho Spearman (paper) or Pearson (code),
//                computed on the importance values at the shared indices; range [0, 4] (one half: [0, 2])
//   N_i = sim(i, global) + (1/n) sum_{j in C} sim(i, j)                     (Eq. 7; j = i included)
//   lambda_i = clip_[0,1](ln(Nt_i / (1 - Nt_i)) + 0.5), Nt = min-max scaled N  (Eq. 8)
// Sets are index-sorted; ties in importance go to the lower index (as if sorted by (value, index)), so the
// sets depend only on the values, never on the row order or the thread count.
// GUARDS (choices the paper leaves open, docs/decisions.md): rho01 = 0 when the shared set has fewer than 2
// indices or either side is constant (Pearson/Spearman undefined; the authors' code gets NaN); an
// importance above FLT_MAX (products of huge uploads) saturates at FLT_MAX; when every N_i is equal (to
// 1e-12 relative) min-max scaling is undefined and every client gets lambda = 1.
// Cost: selection O(K) per vector (a histogram pass and a collecting pass; K = weight count); similarity O(k)
// per pair (merges of sorted index lists), with Spearman's ranks read off each set's value order (O(k log k)
// once per set), else O(k log k) per pair.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace bastion {

class ThreadPool;

// Eq. 4 for one coordinate, in double, saturated at FLT_MAX so that it never becomes Inf or NaN for finite
// inputs: |change * value|.
inline float critical_importance(double change, double value) {
  const double p = std::fabs(change * value);
  return p < double{FLT_MAX} ? static_cast<float>(p) : FLT_MAX;
}

struct CriticalSet {
  std::vector<int64_t> index;  // ascending
  std::vector<float> value;    // importance at index[t]
  // Positions t in ascending value order, ties by position (order_by_value fills it): Spearman reads the
  // ranks of any shared subset off it in O(k) instead of sorting the subset for every pair. When it is
  // empty, the shared values are ranked by average_ranks; the ranks are the same.
  std::vector<uint32_t> value_order;
};

struct CriticalSets {
  CriticalSet top, bottom;
};

// The k largest (top) and k smallest (bottom) of `importance`, ties to the lower index. Precondition:
// 1 <= k <= importance.size(), no NaN. `scratch` is reused (it holds a cut bucket's values).
CriticalSets select_critical_sets(std::span<const float> importance, int64_t k, std::vector<float>& scratch);

// Fills set.value_order: once per set, O(k log k), so that every Spearman similarity with it is O(k).
void order_by_value(CriticalSet& set);

enum class CorrelationKind { Spearman, Pearson };

// 1-based ranks of x, ties sharing the mean of their ranks (scipy.stats.rankdata "average").
std::vector<double> average_ranks(std::span<const double> x);

// (rho(x, y) + 1) / 2 in [0, 1]; 0 when undefined (fewer than 2 pairs, or x or y constant).
// Precondition: x.size() == y.size(), finite values.
double correlation_01(std::span<const double> x, std::span<const double> y, CorrelationKind kind);

// J(A, B) + rho01 of the two sets' values on A & B: one half of Eq. 5. Both sets index-sorted.
double critical_set_similarity(const CriticalSet& a, const CriticalSet& b, CorrelationKind kind);

struct CriticalSimilarityOptions {
  CorrelationKind correlation = CorrelationKind::Spearman;
  bool use_top = true, use_bottom = true;    // Table 5 "without topk" / "without bottomk"
  bool use_local = true, use_global = true;  // Table 5 "without local" / "without global"
};

// Eq. 5 with the halves the options keep.
double critical_similarity(const CriticalSets& a, const CriticalSets& b, const CriticalSimilarityOptions& options);

// Eq. 7 for every client: N_i = [use_global and global] sim(i, global) + [use_local] mean_j sim(i, j), the
// mean over all n clients, i itself included (the sum runs over the sorted values, so N_i does not depend
// on the row order). global == nullptr: no reference model this round (the global term is left out).
// The n(n+1)/2 pair similarities (and the n global ones) run on `pool` when given, each into its own slot:
// the result does not depend on the thread count.
std::vector<double> critical_normality(std::span<const CriticalSets> clients, const CriticalSets* global,
                                       const CriticalSimilarityOptions& options, ThreadPool* pool = nullptr);

// Eq. 8: min-max scaling, then the clipped inverse sigmoid (Nt = 1 gives 1, Nt = 0 gives 0). Every weight is
// 1 when the normalities are all equal. Precondition: finite values, at least one.
std::vector<double> critical_weights(std::span<const double> normality);

}  // namespace bastion
