// Pieces every server rule shares: the `f` parameter, means over chosen rows, detection flags, a copy of
// the parameter columns for distance math, and deterministic column blocks for threading.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "fl/base/params.h"
#include "fl/defenses/server_rule.h"

namespace bastion {

// The "f" parameter of robust rules: attackers assumed among the n uploads; -1 = the run's
// server.expected_malicious (AggregationInput::expected_malicious).
ParamSpec f_param();
int64_t resolved_f(const Params& params, const AggregationInput& in);
int64_t resolved_f(const Params& params, int64_t expected_malicious);

// sum_i w_i * row_i over all D columns, accumulated in double in the given row order (weights are used
// as given, not normalised). rows.size() == weights.size().
std::vector<float> weighted_sum_of_rows(const AggregationInput& in, std::span<const int64_t> rows,
                                        std::span<const double> weights);
// 0, 1, ..., n - 1.
std::vector<int64_t> all_rows(int64_t n);
// FedAvg weights of the chosen rows: |D_i| / sum_j |D_j| (sample_weighted) or 1 / |rows|; `rule` names the
// rule in the error for a zero sample total.
std::vector<double> row_weights(const AggregationInput& in, std::span<const int64_t> rows, bool sample_weighted,
                                const char* rule);
// Mean of the chosen rows: weights |D_i| / sum |D_j| (sample_weighted) or 1/|rows|. rows non-empty.
std::vector<float> mean_of_rows(const AggregationInput& in, std::span<const int64_t> rows, bool sample_weighted);
// FedAvg weights a_i with each upload's parameter part clipped to L2 norm c first: parameter column d
// gets sum_i a_i min(1, c / |Delta_i[0, P)|) Delta_i[d]; BatchNorm buffer columns the unclipped
// sum_i a_i Delta_i[d]. c <= 0: no clipping (plain FedAvg). Shared by norm-clip and add-noise.
std::vector<float> norm_clipped_mean(const AggregationInput& in, bool sample_weighted, double c, const char* rule);
// The selection rules' output: the mean of the kept rows (summed in row order, so `kept` is sorted first)
// and a flag on every other row. kept non-empty.
AggregationOutput mean_of_kept(const AggregationInput& in, std::vector<int64_t> kept, bool sample_weighted);
// n flags: 1 for every row not in `kept`.
std::vector<uint8_t> flags_except(int64_t n, std::span<const int64_t> kept);
// Contiguous (n, num_parameters) copy of the parameter columns (distances and similarities ignore
// BatchNorm buffers, SPEC notation).
std::vector<float> parameter_rows(const AggregationInput& in);
// Runs body(begin, end) over [0, D) in fixed blocks of `block` columns on in.pool (serial when null).
// The blocks do not depend on the thread count, so a rule that writes only its own columns is
// deterministic.
void for_column_blocks(const AggregationInput& in, int64_t D, int64_t block,
                       const std::function<void(int64_t begin, int64_t end)>& body);
// The "weighting" choice shared by averaging rules: "samples" or "uniform".
ParamSpec weighting_param(const char* default_value);

}  // namespace bastion
