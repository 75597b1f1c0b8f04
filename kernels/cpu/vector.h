// vector: flat-vector math for the FL layer. A model's parameters (or a client's update) are ONE
// contiguous run of D floats; the server sees n of them as an (n, D) row-major matrix X.
// Raw pointers, outputs first, no allocation, no Tensor. All functions are sequential (a server rule may
// run them over clients in parallel); reductions accumulate in double, so their results do not depend on
// a thread count and lose nothing but the final rounding for the D ~ 1e7 sums of ResNet18.
//
// vector_axpy_cpu:   y += a * x                                          PyTorch: y.add_(x, alpha=a)
// vector_scale_cpu:  x *= a                                              PyTorch: x.mul_(a)
// vector_dot_cpu:    returns sum_d a[d] * b[d]                           PyTorch: torch.dot (in float64)
// vector_norm_cpu:   returns sqrt(sum_d x[d]^2)                          PyTorch: torch.linalg.vector_norm
// vector_cosine_cpu: returns a.b / (|a| |b|), clamped to [-1, 1] (rounding can overshoot by an ulp);
//   returns 0 when |a| = 0 or |b| = 0: a zero update (a client that did not train) is "unrelated" to
//   everything rather than NaN, which would poison every sort and softmax downstream.
//   (PyTorch's F.cosine_similarity instead divides by max(|a||b|, eps) — also 0 for a zero vector.)
// vector_squared_distance_cpu: returns sum_d (a[d] - b[d])^2, exact up to the final rounding.
//
// vector_pairwise_squared_distances_cpu: out (n, n) ASSIGNED, out[i, j] = |X_i - X_j|^2, through ONE GEMM:
//   G = X X^T (gemm_cpu, float32), |X_i|^2 in double, out[i, j] = max(|X_i|^2 + |X_j|^2 - 2 G[i, j], 0);
//   the diagonal is exactly 0 and out is exactly symmetric (each pair is computed once and mirrored).
//   Cost O(n^2 D) in GEMM (fast) instead of n^2/2 separate passes over 2D floats.   PyTorch: torch.cdist(X, X)**2
//   PRECISION CAVEAT: the subtraction cancels. G[i, j] carries a float32 rounding error of roughly
//   sqrt(D) * 6e-8 * |X_i| |X_j| (blocked sums; worst case D * 6e-8 * ...), and that absolute error stays
//   in the result however small the true distance is. Relative to the distance it is amplified by
//   |X_i| |X_j| / |X_i - X_j|^2: harmless for client UPDATES (rows of similar size pointing in different
//   directions), but rows that sit close together far from the origin (full weight vectors of models
//   that started from the same global model) can lose most digits, and two identical rows (colluding
//   attackers uploading the same vector) get a small positive distance, not 0. For those, either
//   subtract the mean row first (distances do not change under translation; vector_mean_rows_cpu) or
//   use vector_squared_distance_cpu per pair.
//   The caller provides nothing extra: the diagonal of `out` is used as scratch for the norms.
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
double vector_cosine_cpu(const float* a, const float* b, int64_t D);
double vector_squared_distance_cpu(const float* a, const float* b, int64_t D);

void vector_pairwise_squared_distances_cpu(float* out, const float* X, int64_t n, int64_t D);
void vector_mean_rows_cpu(float* out, const float* X, int64_t n, int64_t D);

}  // namespace bastion
