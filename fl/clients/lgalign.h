// LGAlign's projection (SPMC, He et al., eq. 9; authors' Optims/AlignedGradient.py): per group of
// gradient columns (one parameter tensor, or the whole model),
//   g' = g                                   if g . r >= 0
//   g' = g - lambda (g . r / |r|^2) r        otherwise
// with g the cross-entropy gradient G_d and r the distillation gradient G_g. With lambda = 1, g' is
// orthogonal to r: the step no longer increases the distillation loss to first order. A zero r leaves g.
// Dot products in double over the group's columns in order, so the result is deterministic.
// Cost: O(columns) per call, no allocation.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace bastion {

// A set of column ranges [begin, end) of a flat gradient treated as one vector.
using GradientGroup = std::vector<std::pair<int64_t, int64_t>>;

// Projects `g` in place group by group against `reference` (same length); returns how many groups
// conflicted (g . r < 0) and were projected.
int64_t align_gradient(std::span<float> g, std::span<const float> reference, const std::vector<GradientGroup>& groups,
                       double lambda);

}  // namespace bastion
