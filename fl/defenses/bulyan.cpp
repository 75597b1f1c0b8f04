// bulyan: Bulyan (El Mhamdi et al. 2018, "The hidden vulnerability of distributed learning in Byzantium",
// ICML).
//   dist[i, j] = |Delta_i - Delta_j|^2 over the P parameter columns (BatchNorm buffers left out)
//   S = theta = n - 2f uploads chosen by iterated Krum (krum_scores.h, KrumSelection::Iterative: Krum with
//       k = |R| - f - 2 on the remaining candidates R, argmin moved to S; scores recomputed while
//       |R| > 2f + 2, the last scores order the later picks: the paper's last Krum calls, on 2f + 1 to
//       2f + 2 candidates, would break Krum's own precondition)
//   update[d] = mean of the beta = theta - 2f values of S in column d closest to their median (even
//       theta: median = mean of the two middle values; at equal distance the smaller value is kept), for
//       every column d, BatchNorm buffers included (coordinate_wise.h, ClosestToMedian)
// Precondition: n >= 4f + 3 (so beta >= 3). Inputs are finite (the run loop rejects NaN/Inf first).
// Flags every upload outside S. Cost: O(n^2 P) (GEMM) + O(theta n^2 log n) + O(D theta log^2 theta).
// Variants from the SPMC code (Server/Bulyan.py, IMPLEMENTATION-FACTS §2.7), off by default:
//   momentum = m > 0: a server velocity v <- m v + update over all D columns, kept across rounds (checkpointed);
//     the rule returns v. The code's v <- 0.9 v - lr g with g = (global - local) / lr is this with m = 0.9.
//   base = "client-0": the new global starts from client 0's trained model, not the global one: its upload
//     is added to the result (the code reads nets_list[0]; when client 0 is not among the accepted uploads
//     the base is the global model, as there). Together with momentum 0.9 this is the code's server.
// The code's own Krum selection (Euclidean distances, every remaining distance summed) is not copied.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "fl/defenses/coordinate_wise.h"
#include "fl/defenses/defense_support.h"
#include "fl/defenses/krum_scores.h"
#include "fl/defenses/server_rule.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class Bulyan final : public ServerRule {
 public:
  explicit Bulyan(const Params& p)
      : params_(p), momentum_(p.real("momentum")), base_client_0_(p.text("base") == "client-0") {}

  std::string refusal(int64_t n, int64_t expected_malicious) const override {
    const int64_t f = resolved_f(params_, expected_malicious);
    if (n >= 4 * f + 3) return {};
    return "bulyan: needs n >= 4f + 3, got n = " + std::to_string(n) + ", f = " + std::to_string(f);
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    const std::string refused = refusal(in.n, in.expected_malicious);
    BASTION_CHECK(refused.empty(), refused);
    const int64_t n = in.n, f = resolved_f(params_, in);
    const int64_t theta = n - 2 * f, beta = theta - 2 * f;
    const std::vector<float> dist = pairwise_parameter_distances(in);
    std::vector<int64_t> selected = krum_select(dist, n, f, theta, KrumSelection::Iterative);
    std::sort(selected.begin(), selected.end());
    AggregationOutput out;
    out.update = coordinate_wise(in, selected, {CoordinateStatistic::ClosestToMedian, beta}, "bulyan");
    out.flagged = flags_except(n, selected);
    out.resolved = {
        {"f", static_cast<double>(f)}, {"theta", static_cast<double>(theta)}, {"beta", static_cast<double>(beta)}};
    if (momentum_ > 0.0) apply_momentum(out.update);
    if (base_client_0_) add_client_0_upload(in, out.update);
    return out;
  }

  RuleState save_state() const override {
    RuleState state("bulyan");
    if (!velocity_.empty()) state.put_floats("velocity", velocity_);
    return state;
  }

  // The "velocity" block, or a checkpoint's pre-codec vector, which was the velocity itself.
  void load_state(const RuleState& state) override {
    std::span<const float> velocity = state.legacy();
    if (state.has("velocity")) velocity = state.floats("velocity");
    BASTION_CHECK(velocity.empty() || momentum_ > 0.0, "bulyan: the checkpoint's server state holds a velocity of ",
                  velocity.size(), " values, but this run has momentum 0");
    for (float v : velocity)
      BASTION_CHECK(std::isfinite(v), "bulyan: the checkpoint's server state (velocity) is not finite");
    velocity_.assign(velocity.begin(), velocity.end());
  }

 private:
  void apply_momentum(std::vector<float>& update) {
    if (velocity_.empty()) velocity_.assign(update.size(), 0.0f);
    BASTION_CHECK(velocity_.size() == update.size(), "bulyan: the server velocity has ", velocity_.size(),
                  " values, the model ", update.size(), " (a checkpoint of another model?)");
    const int64_t D = static_cast<int64_t>(update.size());
    vector_scale_cpu(velocity_.data(), static_cast<float>(momentum_), D);
    vector_axpy_cpu(velocity_.data(), 1.0f, update.data(), D);
    update = velocity_;
  }

  static void add_client_0_upload(const AggregationInput& in, std::vector<float>& update) {
    const auto it = std::find(in.clients.begin(), in.clients.end(), int64_t{0});
    if (it == in.clients.end()) return;
    vector_axpy_cpu(update.data(), 1.0f, in.updates + (it - in.clients.begin()) * in.D, in.D);
  }

  Params params_;
  double momentum_;
  bool base_client_0_;
  std::vector<float> velocity_;  // D once the first round with momentum ran
};
}  // namespace

const std::vector<ParamSpec>& bulyan_params() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      f_param(),
      {"momentum", ParamType::Real, 0.0, "server velocity v <- m v + update, returned (SPMC code: 0.9); 0 = none", 0.0,
       0.999},
      {"base",
       ParamType::Text,
       std::string("global"),
       "global (paper); client-0: add client 0's upload, the SPMC code's base model",
       -inf,
       inf,
       {"global", "client-0"}},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_bulyan(const Params& params) { return std::make_unique<Bulyan>(params); }

}  // namespace bastion
