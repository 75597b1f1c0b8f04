// Helpers for the server-rule tests: an upload matrix that owns its storage and hands out an
// AggregationInput, and rules built from their parameter tables (no registry needed).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "fl/defenses/server_rule.h"
#include "tensor/random.h"

namespace bastion::testing {

// Sums of a few float rows taken in a different row order differ by a few float ulps of values of order 1.
inline constexpr float kSumOrderTolerance = 1e-5f;

// A server with a root dataset for the rules that need one (fltrust, sageflow, finetune): "training"
// moves every column by `step`; a model within distance 1 of `good` scores entropy and loss 0.1, any
// other entropy 5 and loss 10 (sageflow drops it). Distances in double, so a huge model is far, never NaN.
class StubServerData final : public ServerData {
 public:
  std::vector<float> step, good;
  int64_t size() const override { return 10; }
  // A run's client rule always has a schedule (fltrust's default trains with it).
  std::optional<ServerTrainSpec> client_schedule(int64_t) const override { return ServerTrainSpec{}; }
  std::vector<float> train(std::span<const float> state, const ServerTrainSpec&) override {
    std::vector<float> out(state.begin(), state.end());
    for (size_t d = 0; d < out.size(); ++d) out[d] += step[d];
    return out;
  }
  ServerEval evaluate(std::span<const float> state) override {
    double distance = 0.0;
    for (size_t d = 0; d < state.size(); ++d) distance += std::pow(static_cast<double>(state[d]) - good[d], 2);
    const bool near = std::sqrt(distance) < 1.0;
    return {near ? 0.1 : 10.0, near ? 0.1 : 5.0, 10};
  }
};

struct Uploads {
  std::vector<float> data;      // (n, D)
  int64_t n = 0, D = 0, P = 0;  // P = num_parameters (defaults to D)
  std::vector<int64_t> samples, clients;
  std::vector<float> global;  // D, zeros unless set
  int64_t f = 0;              // expected_malicious
  int64_t round = 1;
  int64_t last_round = 0;  // the run's final round; 0 = not known
  uint64_t seed = 7;
  ServerData* server_data = nullptr;
  ThreadPool* pool = nullptr;
  std::vector<ColumnRange> weight_columns;  // empty: layout unknown

  Uploads(std::vector<std::vector<float>> rows) {
    n = static_cast<int64_t>(rows.size());
    D = P = rows.empty() ? 0 : static_cast<int64_t>(rows[0].size());
    for (const auto& row : rows) data.insert(data.end(), row.begin(), row.end());
    samples.assign(static_cast<size_t>(n), 100);
    clients.resize(static_cast<size_t>(n));
    std::iota(clients.begin(), clients.end(), int64_t{0});
    global.assign(static_cast<size_t>(D), 0.0f);
  }

  // n rows of D values N(mean, std) from `seed`.
  static Uploads gaussian(int64_t n, int64_t D, uint64_t seed, float mean = 0.0f, float std = 1.0f) {
    Generator g(seed);
    std::vector<std::vector<float>> rows(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(D)));
    for (auto& row : rows)
      for (float& v : row) v = mean + std * static_cast<float>(g.normal());
    return Uploads(std::move(rows));
  }

  float* row(int64_t i) { return data.data() + i * D; }

  // Uniform mean of the chosen rows, in double.
  std::vector<float> mean_rows(const std::vector<int64_t>& rows) const {
    std::vector<float> out(static_cast<size_t>(D));
    for (int64_t d = 0; d < D; ++d) {
      double sum = 0.0;
      for (int64_t i : rows) sum += data[i * D + d];
      out[d] = static_cast<float>(sum / static_cast<double>(rows.size()));
    }
    return out;
  }

  AggregationInput input() const {
    AggregationInput in;
    in.updates = data.data();
    in.n = n;
    in.D = D;
    in.num_parameters = P;
    in.num_samples = samples;
    in.clients = clients;
    in.round = round;
    in.last_round = last_round;
    in.seed = seed;
    in.global = global;
    in.expected_malicious = f;
    in.server_data = server_data;
    in.pool = pool;
    in.weight_columns = weight_columns;
    return in;
  }

  // The same uploads with rows reordered: row k of the result is row order[k] of this one.
  Uploads permuted(const std::vector<int64_t>& order) const {
    Uploads out = *this;
    for (size_t k = 0; k < order.size(); ++k) {
      std::copy_n(data.data() + order[k] * D, D, out.data.data() + static_cast<int64_t>(k) * D);
      out.samples[k] = samples[order[k]];
      out.clients[k] = clients[order[k]];
    }
    return out;
  }
};

inline Params rule_params(const std::string& name, const std::vector<ParamSpec>& specs,
                          const std::map<std::string, ParamValue>& given = {}) {
  return Params("server." + name, specs, given);
}

using MakeRule = std::unique_ptr<ServerRule> (*)(const Params&);

// The rule `make` with parameters `given` (validated against `specs`) applied to `u`.
inline AggregationOutput run_rule(MakeRule make, const std::string& name, const std::vector<ParamSpec>& specs,
                                  const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return make(rule_params(name, specs, given))->aggregate(u.input());
}

inline void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t d = 0; d < got.size(); ++d) EXPECT_NEAR(got[d], want[d], tolerance) << "column " << d;
}

}  // namespace bastion::testing
