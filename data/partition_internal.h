// Pieces of make_partition (data/partition.cpp) kept in files of their own: the natural (per-user) split
// and its per-user server hold-out live in data/partition_groups.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/partition.h"

namespace bastion::partition_detail {

using Lists = std::vector<std::vector<int64_t>>;

// floor(fraction·n) for a decimal fraction: 0.29 is stored as 0.28999..., and 0.29·100 would floor to 28.
// The nudge is far below one sample for any realistic n (< 1e9 samples).
inline int64_t floor_fraction(double fraction, int64_t n) {
  return static_cast<int64_t>(std::floor(fraction * static_cast<double>(n) + 1e-9));
}

// The server's share of a grouped set: the last floor(fraction * n_g) samples of each group g, sorted.
std::vector<int64_t> hold_out_per_group(const Dataset& data, double fraction);

// One client per group id, in ascending id order; `server` (sorted) is held out. Throws when n is neither 0
// nor the number of groups.
Lists split_natural(const Dataset& data, const std::vector<int64_t>& server, int64_t n, const PartitionSpec& spec);

}  // namespace bastion::partition_detail
