#include "fl/core/client_models.h"

#include <algorithm>

#include "tensor/error.h"

namespace bastion {

void SharedColumns::gather(std::span<const float> full, float* out) const {
  for (const ColumnRange& r : ranges) out = std::copy(full.begin() + r.begin, full.begin() + r.end, out);
}

void SharedColumns::difference(std::span<const float> trained, std::span<const float> start, float* out) const {
  for (const ColumnRange& r : ranges)
    for (int64_t d = r.begin; d < r.end; ++d) *out++ = trained[d] - start[d];
}

void SharedColumns::add_into(std::span<const float> update, std::span<float> full) const {
  size_t k = 0;
  for (const ColumnRange& r : ranges)
    for (int64_t d = r.begin; d < r.end; ++d) full[d] += update[k++];
}

void SharedColumns::assign_into(std::span<const float> part, std::span<float> full) const {
  size_t k = 0;
  for (const ColumnRange& r : ranges)
    for (int64_t d = r.begin; d < r.end; ++d) full[d] = part[k++];
}

SharedColumns shared_columns(const Model& model, SharedPart part) {
  SharedColumns shared;
  shared.all = part == SharedPart::All;
  if (part == SharedPart::None) return shared;
  auto take = [&](const ParameterView& view) {
    if (!shared.ranges.empty() && shared.ranges.back().end == view.begin)
      shared.ranges.back().end = view.end;
    else
      shared.ranges.push_back({view.begin, view.end});
    shared.width += view.end - view.begin;
  };
  for (const ParameterView& view : model.parameters()) {
    if (part == SharedPart::Body && view.is_head) continue;
    take(view);
    shared.parameters += view.end - view.begin;
  }
  for (const ParameterView& view : model.buffers()) take(view);
  return shared;
}

bool plan_start_states(ServerRule& rule, const SharedColumns& shared, std::span<const float> global,
                       std::span<const float> global_shared, const std::vector<int64_t>& sampled,
                       const RequestUpdates& request_updates, std::vector<float>& starts) {
  const size_t D = global.size(), width = global_shared.size();
  const std::optional<RoundPlan> plan = rule.plan_round({&sampled, global_shared, request_updates});
  BASTION_CHECK(!plan || (plan->starts.size() == sampled.size() * width && plan->personal.size() == sampled.size()),
                "server rule's round plan: ", plan ? plan->starts.size() : 0, " start values and ",
                plan ? plan->personal.size() : 0, " flags for ", sampled.size(), " clients of ", width, " columns");
  starts.clear();
  if (!plan) return false;  // every client starts from the global state: no (m, D) copy of it per round
  starts.resize(sampled.size() * D);
  for (size_t i = 0; i < sampled.size(); ++i) {
    const std::span<float> start(starts.data() + i * D, D);
    std::copy(global.begin(), global.end(), start.begin());
    if (plan->personal[i]) shared.assign_into(std::span<const float>(plan->starts.data() + i * width, width), start);
  }
  return true;
}

std::vector<ColumnRange> ranges_within_shared(const std::vector<ColumnRange>& ranges, const SharedColumns& shared) {
  return ranges_within(ranges, shared.ranges);
}

}  // namespace bastion
