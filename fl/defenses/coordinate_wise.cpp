#include "fl/defenses/coordinate_wise.h"

#include <algorithm>

#include "fl/defenses/defense_support.h"
#include "tensor/error.h"

namespace bastion {

std::vector<std::pair<int32_t, int32_t>> sorting_network(int64_t r) {
  std::vector<std::pair<int32_t, int32_t>> network;
  if (r < 2) return network;
  int64_t t = 0;
  while ((int64_t{1} << t) < r) ++t;
  for (int64_t p = int64_t{1} << (t - 1); p > 0; p >>= 1) {  // Algorithm M, steps M2..M6
    int64_t q = int64_t{1} << (t - 1), parity = 0, d = p;
    while (true) {
      for (int64_t i = 0; i + d < r; ++i)
        if ((i & p) == parity) network.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(i + d));
      if (q == p) break;
      d = q - p;
      q >>= 1;
      parity = p;
    }
  }
  return network;
}

namespace {
constexpr int64_t T = kCoordinateTile;

// Sorts each of the T columns of the (r, T) tile ascending.
void sort_tile(float* tile, const std::vector<std::pair<int32_t, int32_t>>& network) {
  for (const auto& comparator : network) {
    float* __restrict lo = tile + comparator.first * T;
    float* __restrict hi = tile + comparator.second * T;
    for (int64_t c = 0; c < T; ++c) {
      const float a = lo[c], b = hi[c];
      lo[c] = a < b ? a : b;
      hi[c] = a < b ? b : a;
    }
  }
}

// out[c] for c < width from the column-sorted (r, T) tile; acc: T doubles of scratch.
void reduce_tile(float* out, const float* tile, int64_t r, int64_t width, const CoordinateSpec& spec, double* acc) {
  const int64_t h = r / 2;
  switch (spec.statistic) {
    case CoordinateStatistic::Median:
      for (int64_t c = 0; c < width; ++c)
        out[c] = r % 2 == 1 ? tile[h * T + c]
                            : static_cast<float>((static_cast<double>(tile[(h - 1) * T + c]) + tile[h * T + c]) / 2.0);
      return;
    case CoordinateStatistic::LowerMedian:
      for (int64_t c = 0; c < width; ++c) out[c] = tile[((r - 1) / 2) * T + c];
      return;
    case CoordinateStatistic::TrimmedMean: {
      const int64_t b = spec.count;
      std::fill_n(acc, T, 0.0);
      for (int64_t k = b; k < r - b; ++k)
        for (int64_t c = 0; c < T; ++c) acc[c] += tile[k * T + c];
      const double kept = static_cast<double>(r - 2 * b);
      for (int64_t c = 0; c < width; ++c) out[c] = static_cast<float>(acc[c] / kept);
      return;
    }
    case CoordinateStatistic::ClosestToMedian:
      for (int64_t c = 0; c < width; ++c) {
        const double median =
            r % 2 == 1 ? tile[h * T + c] : (static_cast<double>(tile[(h - 1) * T + c]) + tile[h * T + c]) / 2.0;
        int64_t lo = 0, hi = r - 1;  // the kept values are the window [lo, hi] of the sorted column
        while (hi - lo + 1 > spec.count) {
          if (median - tile[lo * T + c] > tile[hi * T + c] - median)
            ++lo;
          else
            --hi;  // equal distance: drop the larger value
        }
        double sum = 0.0;
        for (int64_t k = lo; k <= hi; ++k) sum += tile[k * T + c];
        out[c] = static_cast<float>(sum / static_cast<double>(spec.count));
      }
      return;
  }
}
}  // namespace

std::vector<float> coordinate_wise(const AggregationInput& in, std::span<const int64_t> rows,
                                   const CoordinateSpec& spec, const char* rule) {
  std::vector<int64_t> all;
  if (rows.empty()) {
    all.resize(static_cast<size_t>(in.n));
    for (int64_t i = 0; i < in.n; ++i) all[i] = i;
    rows = all;
  }
  const int64_t r = static_cast<int64_t>(rows.size());
  BASTION_CHECK(r >= 1, rule, ": no upload to aggregate");
  if (spec.statistic == CoordinateStatistic::TrimmedMean)
    BASTION_CHECK(spec.count >= 0 && r > 2 * spec.count, rule, ": needs n > 2b, got n = ", r, ", b = ", spec.count);
  if (spec.statistic == CoordinateStatistic::ClosestToMedian)
    BASTION_CHECK(spec.count >= 1 && spec.count <= r, rule, ": keeps ", spec.count, " values closest to the median of ",
                  r, "; needs 1 <= kept <= ", r);
  const std::vector<std::pair<int32_t, int32_t>> network = sorting_network(r);
  std::vector<float> out(static_cast<size_t>(in.D));
  for_column_blocks(in, in.D, kCoordinateTask, [&](int64_t begin, int64_t end) {
    std::vector<float> tile(static_cast<size_t>(r * T), 0.0f);
    std::vector<double> acc(static_cast<size_t>(T));
    for (int64_t d0 = begin; d0 < end; d0 += T) {
      const int64_t width = std::min(T, end - d0);
      for (int64_t k = 0; k < r; ++k) std::copy_n(in.updates + rows[k] * in.D + d0, width, tile.data() + k * T);
      sort_tile(tile.data(), network);  // columns past `width` hold stale values and are ignored
      reduce_tile(out.data() + d0, tile.data(), r, width, spec, acc.data());
    }
  });
  return out;
}

}  // namespace bastion
