// Partition summaries: per-client class histograms and the size / heterogeneity statistics that
// `bastion data stats` prints (contract in data/partition.h).
#include <algorithm>
#include <numeric>

#include "data/partition.h"

namespace bastion {

std::vector<std::vector<int64_t>> class_histogram(const Dataset& data, const std::vector<std::vector<int64_t>>& lists) {
  std::vector<std::vector<int64_t>> counts(lists.size(),
                                           std::vector<int64_t>(static_cast<size_t>(data.num_classes), 0));
  for (size_t j = 0; j < lists.size(); ++j) {
    for (int64_t index : lists[j]) {
      BASTION_CHECK(index >= 0 && index < data.size(), "class_histogram: client ", j, " holds index ", index,
                    " outside '", data.name, "' (", data.size(), " samples)");
      const int32_t label = data.labels[static_cast<size_t>(index)];
      BASTION_CHECK(label >= 0 && label < data.num_classes, "class_histogram: sample ", index, " has label ", label,
                    " outside [0, ", data.num_classes, ")");
      ++counts[j][static_cast<size_t>(label)];
    }
  }
  return counts;
}

PartitionStats partition_stats(const Dataset& data, const std::vector<std::vector<int64_t>>& lists) {
  return partition_stats(class_histogram(data, lists));
}

PartitionStats partition_stats(const std::vector<std::vector<int64_t>>& histogram) {
  PartitionStats stats;
  stats.clients = static_cast<int64_t>(histogram.size());
  if (histogram.empty()) return stats;
  std::vector<int64_t> sizes, classes;
  for (const auto& row : histogram) {
    classes.push_back(std::count_if(row.begin(), row.end(), [](int64_t c) { return c > 0; }));
    sizes.push_back(std::accumulate(row.begin(), row.end(), int64_t{0}));
  }
  stats.total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  std::sort(sizes.begin(), sizes.end());
  const size_t mid = sizes.size() / 2;
  stats.min_size = sizes.front();
  stats.max_size = sizes.back();
  stats.median_size =
      sizes.size() % 2 ? static_cast<double>(sizes[mid]) : 0.5 * static_cast<double>(sizes[mid - 1] + sizes[mid]);
  stats.mean_classes = static_cast<double>(std::accumulate(classes.begin(), classes.end(), int64_t{0})) /
                       static_cast<double>(classes.size());
  stats.min_classes = *std::min_element(classes.begin(), classes.end());
  stats.max_classes = *std::max_element(classes.begin(), classes.end());
  return stats;
}

}  // namespace bastion
