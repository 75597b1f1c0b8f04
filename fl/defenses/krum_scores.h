// krum_scores: the distance math shared by krum, multi-krum and bulyan (Blanchard et al. 2017, El Mhamdi
// et al. 2018).
//   dist[i, j] = |Delta_i - Delta_j|^2 over the P parameter columns only (BatchNorm buffers are left out,
//                SPEC notation), through GEMM: vector_pairwise_squared_distances_strided_cpu reads the first
//                P of the D columns in place. dist is symmetric with an exactly zero diagonal.
//   score_i(S, k) = sum of the k smallest dist[i, j] over j in S, j != i, summed in double in ascending
//                order (so a score does not depend on the row order).
// Ties between scores go to the lowest row index.
// PRECISION (from the GEMM, kernels/cpu/vector.h): distances carry an absolute error of about
// sqrt(P) * 6e-8 * |Delta_i - mean|^2; a huge outlier inflates it for the whole cluster, so which of
// several nearly equivalent honest uploads Krum picks can then depend on rounding, but an outlier whose
// distances are far above that error never wins.
// Cost: O(n^2 P) in GEMM for the distances; the scores O(n^2 log n) per scoring.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fl/defenses/server_rule.h"

namespace bastion {

// (n, n) squared distances over the parameter columns of in.updates; never NaN: when the float GEMM
// overflows (uploads near FLT_MAX), all of them exactly in double, +Inf beyond float's range (O(n^2 P)).
std::vector<float> pairwise_parameter_distances(const AggregationInput& in);

// score_i(candidates, neighbours) for each i in candidates (aligned with it); every candidate needs at
// least `neighbours` other candidates.
std::vector<double> krum_scores(std::span<const float> dist, int64_t n, std::span<const int64_t> candidates,
                                int64_t neighbours);

enum class KrumSelection {
  // One scoring over all n uploads with k = n - f - 2; the m lowest scores (Blanchard et al.'s Multi-Krum;
  // FLPoison, ByzFL and FedCAP's mkrum).
  OneShot,
  // Krum repeated on the shrinking candidate set R (El Mhamdi et al.'s Bulyan selection): while fewer
  // than m are selected, score every r in R with k = |R| - f - 2 other neighbours inside R and move the
  // argmin to the selected set. Scores are recomputed only while |R| > 2f + 2 (Krum's own precondition on
  // R); after that the remaining picks follow the last scores (lowest first) instead of stopping. Why:
  // with k <= f - 1, f colluding identical uploads score 0 among themselves and would be picked first
  // (measured: the 13-upload, f = 3 outlier test), and with k = 1 two mutual nearest neighbours tie,
  // handing the pick to the row order.
  Iterative,
  // NDSS'21's multi_krum (Shejwalkar & Houmansadr, cifar10/release-fedsgd-*-mkrum.ipynb) as written:
  // while |R| > 2f + 2, score = the sum of the |R| - f - 2 smallest entries of the row *including its own
  // zero distance* (so |R| - f - 3 other neighbours), move the argmin to the selected set; it stops when
  // 2f + 2 remain, so exactly m = n - 2f - 2 are selected (the caller passes that m).
  Ndss21,
};

// Rows selected, in the order of selection. Needs n > 2f + 2 and 1 <= m <= n (m = n - 2f - 2 for Ndss21).
std::vector<int64_t> krum_select(std::span<const float> dist, int64_t n, int64_t f, int64_t m, KrumSelection selection);

// The `count` rows nearest to `row` (itself first, distance 0), ordered by (distance, index).
std::vector<int64_t> nearest_rows(std::span<const float> dist, int64_t n, int64_t row, int64_t count);

}  // namespace bastion
