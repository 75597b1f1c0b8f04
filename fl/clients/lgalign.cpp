#include "fl/clients/lgalign.h"

#include "tensor/error.h"

namespace bastion {

int64_t align_gradient(std::span<float> g, std::span<const float> reference, const std::vector<GradientGroup>& groups,
                       double lambda) {
  BASTION_CHECK(g.size() == reference.size(), "align_gradient: gradient of ", g.size(), " values, reference of ",
                reference.size());
  int64_t projected = 0;
  for (const GradientGroup& group : groups) {
    double dot = 0.0, reference_sq = 0.0;
    for (const auto& [begin, end] : group) {
      BASTION_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(g.size()), "align_gradient: range [",
                    begin, ", ", end, ") outside ", g.size(), " columns");
      for (int64_t d = begin; d < end; ++d) {
        dot += static_cast<double>(g[d]) * reference[d];
        reference_sq += static_cast<double>(reference[d]) * reference[d];
      }
    }
    if (dot >= 0.0 || reference_sq == 0.0) continue;  // no conflict: keep G_d
    const double factor = lambda * dot / reference_sq;
    for (const auto& [begin, end] : group)
      for (int64_t d = begin; d < end; ++d) g[d] = static_cast<float>(g[d] - factor * reference[d]);
    ++projected;
  }
  return projected;
}

}  // namespace bastion
