#include "fl/defenses/column_subset.h"

#include <algorithm>
#include <optional>

#include "fl/defenses/defense_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {

// Copies the selected columns of `full` into `out` (width values), in range order.
void gather_into(float* out, const float* full, const std::vector<ColumnRange>& ranges) {
  for (const ColumnRange& r : ranges) out = std::copy(full + r.begin, full + r.end, out);
}

std::vector<float> gather(std::span<const float> full, const std::vector<ColumnRange>& ranges, int64_t width) {
  std::vector<float> out(static_cast<size_t>(width));
  gather_into(out.data(), full.data(), ranges);
  return out;
}

void scatter(std::span<float> full, std::span<const float> sub, const std::vector<ColumnRange>& ranges) {
  size_t k = 0;
  for (const ColumnRange& r : ranges) {
    std::copy_n(sub.begin() + k, r.end - r.begin, full.begin() + r.begin);
    k += static_cast<size_t>(r.end - r.begin);
  }
}

// Server data seen through the subset: a sub-state is completed with the global state's other columns.
class SubsetServerData final : public ServerData {
 public:
  SubsetServerData(ServerData& full, std::span<const float> global, const std::vector<ColumnRange>& ranges,
                   int64_t width)
      : full_(full), global_(global), ranges_(ranges), width_(width) {}
  int64_t size() const override { return full_.size(); }
  std::vector<float> train(std::span<const float> state, const ServerTrainSpec& spec) override {
    return gather(full_.train(complete(state), spec), ranges_, width_);
  }
  ServerEval evaluate(std::span<const float> state) override { return full_.evaluate(complete(state)); }
  std::optional<ServerTrainSpec> client_schedule(int64_t round) const override { return full_.client_schedule(round); }

 private:
  ServerData& full_;
  std::span<const float> global_;
  const std::vector<ColumnRange>& ranges_;
  int64_t width_;
  std::vector<float> complete(std::span<const float> sub) const {
    std::vector<float> state(global_.begin(), global_.end());
    scatter(state, sub, ranges_);
    return state;
  }
};

class ColumnSubset final : public ServerRule {
 public:
  ColumnSubset(std::unique_ptr<ServerRule> inner, std::vector<ColumnRange> ranges, bool rest_mean)
      : inner_(std::move(inner)), ranges_(std::move(ranges)), rest_mean_(rest_mean) {
    BASTION_CHECK(!ranges_.empty(), "server.apply_to selects no parameter");
    for (const ColumnRange& r : ranges_) width_ += r.end - r.begin;
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(ranges_.back().end <= in.D, "server.apply_to: column ", ranges_.back().end, " beyond the model's ",
                  in.D);
    std::vector<float> sub(static_cast<size_t>(in.n * width_));
    for (int64_t i = 0; i < in.n; ++i) gather_into(sub.data() + i * width_, in.updates + i * in.D, ranges_);
    const std::vector<float> sub_global = gather(in.global, ranges_, width_);
    std::optional<SubsetServerData> sub_data;
    if (in.server_data != nullptr) sub_data.emplace(*in.server_data, in.global, ranges_, width_);
    AggregationInput inner_in = in;
    inner_in.updates = sub.data();
    inner_in.D = width_;
    inner_in.num_parameters = sub_parameters(in.num_parameters);
    inner_in.global = sub_global;
    inner_in.server_data = sub_data ? &*sub_data : nullptr;
    const std::vector<ColumnRange> sub_weights = ranges_within(in.weight_columns, ranges_);
    inner_in.weight_columns = sub_weights;
    AggregationOutput inner_out = inner_->aggregate(inner_in);
    BASTION_CHECK(static_cast<int64_t>(inner_out.update.size()) == width_, "server rule returned ",
                  inner_out.update.size(), " values for a subset of ", width_);
    AggregationOutput out;
    if (rest_mean_) {
      out.update = mean_of_rows(in, all_rows(in.n), /*sample_weighted=*/true);
    } else {
      out.update.assign(static_cast<size_t>(in.D), 0.0f);
    }
    scatter(out.update, inner_out.update, ranges_);
    out.flagged = std::move(inner_out.flagged);
    return out;
  }
  // The inner rule plans over its columns; the others start from the global state. It is asked for no
  // request updates: they would be trained over every column, and no rule needs them under apply_to yet.
  std::optional<RoundPlan> plan_round(const RoundPlanInput& input) override {
    const size_t D = input.global.size();
    BASTION_CHECK(ranges_.back().end <= static_cast<int64_t>(D), "server.apply_to: column ", ranges_.back().end,
                  " beyond the model's ", D);
    const std::vector<float> sub_global = gather(input.global, ranges_, width_);
    std::optional<RoundPlan> plan = inner_->plan_round({input.sampled, sub_global, {}});
    if (!plan) return plan;
    const size_t m = input.sampled->size(), width = static_cast<size_t>(width_);
    std::vector<float> starts(m * D);
    for (size_t i = 0; i < m; ++i) {
      const std::span<float> row(starts.data() + i * D, D);
      std::copy(input.global.begin(), input.global.end(), row.begin());
      scatter(row, std::span<const float>(plan->starts.data() + i * width, width), ranges_);
    }
    plan->starts = std::move(starts);
    return plan;
  }
  RuleState save_state() const override { return inner_->save_state(); }
  void load_state(const RuleState& state) override { inner_->load_state(state); }

 private:
  std::unique_ptr<ServerRule> inner_;
  std::vector<ColumnRange> ranges_;
  bool rest_mean_;
  int64_t width_ = 0;

  int64_t sub_parameters(int64_t num_parameters) const {
    int64_t count = 0;
    for (const ColumnRange& r : ranges_)
      if (r.end <= num_parameters) count += r.end - r.begin;
    return count;
  }
};

}  // namespace

std::unique_ptr<ServerData> make_subset_server_data(ServerData& full, std::span<const float> global,
                                                    const std::vector<ColumnRange>& ranges) {
  int64_t width = 0;
  for (const ColumnRange& r : ranges) width += r.end - r.begin;
  return std::make_unique<SubsetServerData>(full, global, ranges, width);
}

std::vector<ColumnRange> ranges_within(std::span<const ColumnRange> ranges, std::span<const ColumnRange> subset) {
  std::vector<ColumnRange> out;
  int64_t offset = 0;  // the sub-row position of the current subset range's first column
  for (const ColumnRange& s : subset) {
    for (const ColumnRange& r : ranges) {
      const int64_t begin = std::max(r.begin, s.begin), end = std::min(r.end, s.end);
      if (begin >= end) continue;
      const ColumnRange mapped{offset + begin - s.begin, offset + end - s.begin};
      if (!out.empty() && out.back().end == mapped.begin)
        out.back().end = mapped.end;
      else
        out.push_back(mapped);
    }
    offset += s.end - s.begin;
  }
  std::sort(out.begin(), out.end(), [](const ColumnRange& a, const ColumnRange& b) { return a.begin < b.begin; });
  return out;
}

std::unique_ptr<ServerRule> make_column_subset(std::unique_ptr<ServerRule> inner, std::vector<ColumnRange> ranges,
                                               bool rest_mean) {
  return std::make_unique<ColumnSubset>(std::move(inner), std::move(ranges), rest_mean);
}

}  // namespace bastion
