// vector: flat-vector math for the FL layer. A model's parameters (or a client's update) are ONE
// contiguous run of D floats; the server sees n of them as an (n, D) row-major matrix X.
// Raw pointers, outputs first, no allocation, no Tensor. All functions are sequential (a server rule may
// run them over clients in parallel) except the GEMM inside the pairwise distances, whose panels are
// thread-count independent (gemm.h). Reductions accumulate in double, so they lose nothing but the final
// rounding, even for the D ~ 1e7 sums of ResNet18.
//
// vector_axpy_cpu:   y += a * x                                          PyTorch: y.add_(x, alpha=a)
// vector_scale_cpu:  x *= a                                              PyTorch: x.mul_(a)
// vector_dot_cpu:    returns sum_d a[d] * b[d]                           PyTorch: torch.dot (in float64)
// vector_norm_cpu:   returns sqrt(sum_d x[d]^2)                          PyTorch: torch.linalg.vector_norm
// vector_squared_norm_cpu: returns sum_d x[d]^2, in kNormLanes interleaved double partial sums (element d
//   goes to lane d mod kNormLanes) added in a fixed tree: the same number for the same input on every
//   run, and about 16x the speed of one serial double sum, which waits on each addition's latency (the
//   three norms of a SAM step were 15 % of a FedFSA round, issue 38).
//   _lanes / reduce_norm_lanes: the same sum built in pieces, so that a pass that writes a vector can also
//   measure it (nn/optim.cpp's SAM step): vector_squared_norm_lanes_cpu adds x[i]^2 to
//   lanes[(first + i) mod kNormLanes] for i = 0..D-1 in order (and, when part is not null, ASSIGNS part[]
//   the lanes of x alone, element i in part[i mod kNormLanes]); vector_reduce_norm_lanes adds the lanes in
//   the fixed tree (destroying them) and returns the sum. Runs x_0, x_1, ... at first = 0, |x_0|, ... give
//   bit for bit vector_squared_norm_cpu of their concatenation: every lane receives the same squares in
//   the same order (each square is exact in double, so no contraction into a fused multiply-add changes it).
//   _parts: returns vector_squared_norm_cpu(x, offsets[n_parts]) and ASSIGNS parts[k] =
//   vector_squared_norm_cpu(x + offsets[k], offsets[k + 1] - offsets[k]), bit for bit both, in one pass
//   (offsets[0] = 0, nondecreasing). The global norm a gradient clip needs and the per-tensor norms of a
//   SAM perturbation, from one read of the gradient.
// vector_cosine_cpu: returns a.b / (|a| |b|), clamped to [-1, 1] (rounding can overshoot by an ulp);
//   returns 0 when |a| = 0 or |b| = 0: a zero update (a client that did not train) is "unrelated" to
//   everything rather than NaN, which would poison every sort and softmax downstream.
//   (PyTorch's F.cosine_similarity instead divides by max(|a||b|, eps) — also 0 for a zero vector.)
// vector_squared_distance_cpu: returns sum_d (a[d] - b[d])^2, exact up to the final rounding.
//
// vector_pairwise_squared_distances_cpu: out (n, n) ASSIGNED, out[i, j] = |X_i - X_j|^2, through GEMM:
//   the rows are first centred on their mean row m (distances do not change under a common translation),
//   then G = C C^T for the centred rows C (gemm_cpu, float32, accumulated over column blocks of
//   kPairwiseBlockColumns so the centred copy fits a small workspace) and
//   out[i, j] = max(G[i, i] + G[j, j] - 2 G[i, j], 0), computed in double from the float G.
//   The diagonal is exactly 0 and out is exactly symmetric (each pair is computed once and mirrored).
//   Cost: O(n^2 D) in GEMM plus one pass over X, instead of n^2/2 passes over 2D floats.
//   workspace: vector_pairwise_workspace_floats(n, D) floats (n + 1 rows of one column block).
//   PyTorch equivalent: torch.cdist(X, X) ** 2
//   _strided variant: the same over the first D columns of rows that lie ld >= D floats apart (the
//   parameter columns of an (n, ld) upload matrix, without copying them out); identical results.
//   PRECISION CAVEAT: the formula cancels. Each G entry carries a float32 rounding error of about
//   sqrt(D) * 6e-8 * |C_i| |C_j| (worst case D * 6e-8 * ...), and that ABSOLUTE error stays in the result
//   however small the true distance is. Without centring, rows that sit close together far from the origin
//   (full weight vectors of models that started from one global model; similar honest updates) lose most
//   digits: 16% relative error measured for rows N(0,1) + 1e-3 noise, D = 4000 (tests/test_vector_ops.cpp);
//   with centring, < 1e-6. What centring cannot remove is spread around the mean: an outlier far from a
//   tight cluster moves the mean away from the cluster, so the cluster's mutual distances keep an error
//   of about sqrt(D) * 6e-8 * |C_i|^2. Two identical rows (colluding attackers uploading one vector) get a
//   distance of 0 or a tiny positive value, not necessarily exactly 0. Where exact ties or tiny distances
//   decide the outcome, use vector_squared_distance_cpu (double, no cancellation) per pair.
//
// vector_mean_rows_cpu: out (D) ASSIGNED = (1/n) sum_i X[i, :], summed in double over the rows in
//   column blocks on the stack (no allocation, X read once, row by row). n >= 1.   PyTorch: X.mean(0)
#pragma once

#include <cstdint>

namespace bastion {

void vector_axpy_cpu(float* y, float a, const float* x, int64_t D);
void vector_scale_cpu(float* x, float a, int64_t D);
double vector_dot_cpu(const float* a, const float* b, int64_t D);
double vector_norm_cpu(const float* x, int64_t D);
inline constexpr int64_t kNormLanes = 32;
double vector_squared_norm_cpu(const float* x, int64_t D);
void vector_squared_norm_lanes_cpu(double* lanes, double* part, const float* x, int64_t D, int64_t first);
double vector_reduce_norm_lanes(double* lanes);
double vector_squared_norm_parts_cpu(double* parts, const float* x, const int64_t* offsets, int64_t n_parts);
double vector_cosine_cpu(const float* a, const float* b, int64_t D);
double vector_squared_distance_cpu(const float* a, const float* b, int64_t D);

constexpr int64_t kPairwiseBlockColumns = 2048;
int64_t vector_pairwise_workspace_floats(int64_t n, int64_t D);
void vector_pairwise_squared_distances_cpu(float* out, float* workspace, const float* X, int64_t n, int64_t D);
void vector_pairwise_squared_distances_strided_cpu(float* out, float* workspace, const float* X, int64_t n, int64_t D,
                                                   int64_t ld);
void vector_mean_rows_cpu(float* out, const float* X, int64_t n, int64_t D);

}  // namespace bastion
