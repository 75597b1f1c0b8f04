#include "fl/defenses/defense_support.h"

#include <algorithm>

#include "fl/base/thread_pool.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

ParamSpec f_param() {
  return {"f",         ParamType::Integer,
          int64_t{-1}, "attackers assumed among the uploads; -1 = server.expected_malicious",
          -1,          1e9};
}

int64_t resolved_f(const Params& params, const AggregationInput& in) {
  return resolved_f(params, in.expected_malicious);
}

int64_t resolved_f(const Params& params, int64_t expected_malicious) {
  const int64_t f = params.integer("f");
  return f >= 0 ? f : expected_malicious;
}

std::vector<float> weighted_sum_of_rows(const AggregationInput& in, std::span<const int64_t> rows,
                                        std::span<const double> weights) {
  BASTION_ASSERT(rows.size() == weights.size());
  std::vector<float> out(static_cast<size_t>(in.D));
  constexpr int64_t kBlock = 4096;  // a double accumulator block that stays in L1/L2
  for_column_blocks(in, in.D, kBlock, [&](int64_t begin, int64_t end) {
    double sum[kBlock] = {};
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = in.updates + rows[r] * in.D;
      const double w = weights[r];
      for (int64_t d = begin; d < end; ++d) sum[d - begin] += w * row[d];
    }
    for (int64_t d = begin; d < end; ++d) out[d] = static_cast<float>(sum[d - begin]);
  });
  return out;
}

std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[i] = i;
  return rows;
}

std::vector<double> row_weights(const AggregationInput& in, std::span<const int64_t> rows, bool sample_weighted,
                                const char* rule) {
  BASTION_CHECK(!rows.empty(), rule, ": no upload to aggregate");
  std::vector<double> weights(rows.size(), 1.0 / static_cast<double>(rows.size()));
  if (!sample_weighted) return weights;
  double total = 0.0;
  for (int64_t r : rows) total += static_cast<double>(in.num_samples[r]);
  BASTION_CHECK(total > 0, rule, ": sample weighting with zero samples in total");
  for (size_t k = 0; k < rows.size(); ++k) weights[k] = static_cast<double>(in.num_samples[rows[k]]) / total;
  return weights;
}

std::vector<float> mean_of_rows(const AggregationInput& in, std::span<const int64_t> rows, bool sample_weighted) {
  return weighted_sum_of_rows(in, rows, row_weights(in, rows, sample_weighted, "mean"));
}

std::vector<float> norm_clipped_mean(const AggregationInput& in, bool sample_weighted, double c, const char* rule) {
  const std::vector<int64_t> rows = all_rows(in.n);
  const std::vector<double> a = row_weights(in, rows, sample_weighted, rule);
  if (c <= 0) return weighted_sum_of_rows(in, rows, a);
  std::vector<double> clipped(a);
  for (int64_t i = 0; i < in.n; ++i) {
    const double norm = vector_norm_cpu(in.updates + i * in.D, in.num_parameters);
    if (norm > c) clipped[i] *= c / norm;
  }
  std::vector<float> out = weighted_sum_of_rows(in, rows, clipped);
  for (int64_t d = in.num_parameters; d < in.D; ++d) {  // buffers: only the few BatchNorm columns, unclipped
    double sum = 0.0;
    for (int64_t i = 0; i < in.n; ++i) sum += a[i] * in.updates[i * in.D + d];
    out[d] = static_cast<float>(sum);
  }
  return out;
}

AggregationOutput mean_of_kept(const AggregationInput& in, std::vector<int64_t> kept, bool sample_weighted) {
  std::sort(kept.begin(), kept.end());
  AggregationOutput out;
  out.update = mean_of_rows(in, kept, sample_weighted);
  out.flagged = flags_except(in.n, kept);
  return out;
}

std::vector<uint8_t> flags_except(int64_t n, std::span<const int64_t> kept) {
  std::vector<uint8_t> flags(static_cast<size_t>(n), 1);
  for (int64_t r : kept) flags[r] = 0;
  return flags;
}

std::vector<float> parameter_rows(const AggregationInput& in) {
  const int64_t P = in.num_parameters;
  std::vector<float> out(static_cast<size_t>(in.n * P));
  for (int64_t i = 0; i < in.n; ++i) std::copy_n(in.updates + i * in.D, P, out.data() + i * P);
  return out;
}

void for_column_blocks(const AggregationInput& in, int64_t D, int64_t block,
                       const std::function<void(int64_t, int64_t)>& body) {
  const int64_t blocks = (D + block - 1) / block;
  auto run_block = [&](int64_t b, int) { body(b * block, std::min(D, (b + 1) * block)); };
  if (in.pool == nullptr || blocks < 2) {
    for (int64_t b = 0; b < blocks; ++b) run_block(b, 0);
    return;
  }
  in.pool->run(blocks, run_block);
}

ParamSpec weighting_param(const char* default_value) {
  return {"weighting",
          ParamType::Text,
          std::string(default_value),
          "samples: weight kept uploads by local data size; uniform: plain mean",
          -std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::infinity(),
          {"samples", "uniform"}};
}

}  // namespace bastion
