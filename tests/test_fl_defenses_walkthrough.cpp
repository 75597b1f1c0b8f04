// fl/README.md "A server rule, step by step", followed in a test (issue 41 item 8): the walk-through's
// example, a coordinate-wise minimum of |value| (abs-min), written against the AggregationInput /
// AggregationOutput fields the walk-through describes, checked on constructed rows, then run inside the
// run loop in place of the configured rule (RunOptions::wrap_server_rule, so no registry row is needed
// here; a real rule adds its row to fl/registry.cpp as the walk-through says).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fl/defenses/server_rule.h"
#include "fl_test_support.h"

namespace bastion {
namespace {

using testing::TinyRun;
using FlDefenseWalkthrough = testing::FlRunTest;

// update[d] = the Delta_i[d] of least |.| (ties: the first row). No f; nothing flagged.
class AbsMin final : public ServerRule {
 public:
  explicit AbsMin(int* calls = nullptr) : calls_(calls) {}
  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n > 0, "abs-min: no upload to aggregate");
    AggregationOutput out;
    out.update.assign(static_cast<size_t>(in.D), 0.0f);
    for (int64_t d = 0; d < in.D; ++d) {
      float best = in.updates[d];
      for (int64_t i = 1; i < in.n; ++i) {
        const float v = in.updates[i * in.D + d];
        if (std::fabs(v) < std::fabs(best)) best = v;
      }
      out.update[static_cast<size_t>(d)] = best;
    }
    if (calls_) ++*calls_;
    return out;
  }

 private:
  int* calls_;  // the test's counter (the rule dies with its run)
};

TEST(FlDefenseAbsMin, OnConstructedRows) {
  const std::vector<float> rows = {1.0f,  -2.0f, 3.0f,   //
                                   -0.5f, 4.0f,  -3.0f,  //
                                   2.0f,  1.5f,  0.25f};
  AggregationInput in;
  in.updates = rows.data(), in.n = 3, in.D = 3, in.num_parameters = 3;
  AbsMin rule;
  EXPECT_EQ(rule.aggregate(in).update, (std::vector<float>{-0.5f, 1.5f, 0.25f}));
  in.n = 0;
  testing::expect_error([&] { rule.aggregate(in); }, {"abs-min", "no upload"});
}

TEST_F(FlDefenseWalkthrough, AbsMinRunsInTheLoopInPlaceOfTheConfiguredRule) {
  int calls = 0;
  RunOptions options;
  options.out_dir = (dir_ / "walk").string();
  options.threads = 1;
  options.wrap_server_rule = [&](std::unique_ptr<ServerRule>) { return std::make_unique<AbsMin>(&calls); };
  const std::vector<RunSummary> summaries = run_experiment(TinyRun{{"rounds=3"}}.config(), options);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(parse_rounds_csv(file("walk", "rounds.csv")).size(), 3u);
  EXPECT_FALSE(std::isnan(summaries[0].acc));
}

}  // namespace
}  // namespace bastion
