// coordinate_wise: per-column order statistics of the upload matrix, shared by median, trimmed-mean and
// bulyan. For every column d in [0, D) (parameters and BatchNorm buffers alike) the r chosen uploads'
// values x_1..x_r are sorted, x_(1) <= ... <= x_(r), and reduced to one number:
//   Median          x_((r+1)/2) for odd r; (x_(r/2) + x_(r/2+1)) / 2 for even r
//   LowerMedian     x_(floor((r+1)/2)) = x_((r-1)/2 + 1), the lower middle value for even r (torch.median)
//   TrimmedMean     mean of x_(b+1) .. x_(r-b), b = count: the b largest and b smallest dropped; r > 2b
//   ClosestToMedian mean of the `count` values closest to the Median above (El Mhamdi et al. 2018's
//                   Bulyan step; SPMC's "TrimmedMean"); at equal distance the smaller value is kept,
//                   so the kept set never depends on the row order; 1 <= count <= r
// Sums run in double in ascending sorted order, so the result is bitwise independent of the row order
// and of the thread count. Inputs are finite (the run loop rejects NaN/Inf first).
//
// Layout (why it is fast): columns are processed in tiles of kCoordinateTile = 64 adjacent columns. A tile
// of the r rows is copied into an (r, 64) scratch (64 contiguous floats per row: r * 256 bytes, which stays
// in L1 for r <= 150) and sorted column-wise by one fixed Batcher merge-exchange network applied to whole
// rows of the tile (each compare-exchange is a vector min/max over 64 columns; no data-dependent branches).
// Threads take column ranges of kCoordinateTask columns through for_column_blocks(in.pool). Scratch is
// allocated once per task, never per column.
// Cost: O(D r log^2 r) comparisons, vectorised across columns, plus one pass over the (r, D) values.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "fl/defenses/server_rule.h"

namespace bastion {

enum class CoordinateStatistic { Median, LowerMedian, TrimmedMean, ClosestToMedian };

struct CoordinateSpec {
  CoordinateStatistic statistic = CoordinateStatistic::Median;
  int64_t count = 0;  // TrimmedMean: b dropped at each end; ClosestToMedian: values kept
};

constexpr int64_t kCoordinateTile = 64;
constexpr int64_t kCoordinateTask = 8192;

// out (D): the statistic of the rows `rows` (all n rows when empty) in every column of in.updates.
// Checks r >= 1 and the count's range, naming `rule` in the message.
std::vector<float> coordinate_wise(const AggregationInput& in, std::span<const int64_t> rows,
                                   const CoordinateSpec& spec, const char* rule);

// Batcher's merge-exchange network (Knuth TAOCP 5.2.2, Algorithm M) for r inputs: applying
// compare-exchange (min to .first, max to .second) in this order sorts any r values ascending.
std::vector<std::pair<int32_t, int32_t>> sorting_network(int64_t r);

}  // namespace bastion
