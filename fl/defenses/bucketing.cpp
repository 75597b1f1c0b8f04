// bucketing: reduce heterogeneity before a robust rule (Karimireddy, He & Jaggi, "Byzantine-Robust
// Learning on Heterogeneous Datasets via Bucketing", ICLR 2022, Algorithm 1).
//   pi = a random permutation of the n uploads; k = ceil(n / s) buckets
//   bucket b = plain mean of uploads pi(b s), ..., pi(min(n, (b + 1) s) - 1)   (the last bucket holds
//              n - (k - 1) s uploads when s does not divide n)
//   update = inner rule applied to the k bucket means (all D columns)
// The inner rule sees: n = k, the bucket means, num_samples = sum of the members' samples, clients = the
// bucket index b (a stateful inner rule keys its memory by bucket), expected_malicious = f
// (inner_f = unchanged, the default: Algorithm 1 runs the robust aggregator with the same f, since f
// attackers can spoil up to f buckets; FLPoison does the same) or floor(k f / n) (inner_f = scaled,
// FedCAP's floor(#buckets * attack_ratio)), and round, seed, global, server_data and pool unchanged.
// An inner rule whose precondition fails on (k, f) (Krum needs k > 2f + 2: 10 uploads in pairs give 5
// buckets, too few for f = 2) is refused before it runs, with the numbers and the settings of s and
// inner_f that would fit, if any.
// Permutation: reshuffle = round draws pi from the round's seed (a new permutation each round, the
// paper); reshuffle = fixed draws it from this rule's own `seed` parameter, the same permutation of
// upload positions every round (FedCAP re-seeds numpy with the run seed before each shuffle).
// Flags: an upload is flagged when the inner rule flags its bucket.
// State: exactly the inner rule's save_state (bucketing itself keeps nothing).
// Preconditions: n >= 1; 0 <= f <= n. Cost: O(n D) for the means plus the inner rule on k rows.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {

namespace {
class Bucketing final : public ServerRule {
 public:
  Bucketing(const Params& p, std::unique_ptr<ServerRule> inner)
      : params_(p), s_(p.integer("s")), fixed_(p.text("reshuffle") == "fixed"),
        seed_(static_cast<uint64_t>(p.integer("seed"))), scaled_f_(p.text("inner_f") == "scaled"),
        inner_(std::move(inner)) {
    BASTION_CHECK(inner_ != nullptr, "bucketing: no inner rule");
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    const int64_t n = in.n;
    BASTION_CHECK(n >= 1, "bucketing: no upload to aggregate");
    const int64_t f = resolved_f(params_, in);
    BASTION_CHECK(f >= 0 && f <= n, "bucketing: f = ", f, " outside [0, n = ", n, "]");
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    Generator g(fixed_ ? seed_ : in.seed);
    for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
      std::swap(order[i], order[static_cast<int64_t>(g.below(static_cast<uint64_t>(i + 1)))]);

    const int64_t k = (n + s_ - 1) / s_, inner_f = scaled_f_ ? (k * f) / n : f;
    const std::string refused = inner_->refusal(k, inner_f);
    BASTION_CHECK(refused.empty(), "bucketing: n = ", n, " uploads in buckets of s = ", s_, " give k = ", k,
                  " bucket means with f = ", inner_f,
                  " for the inner rule (inner_f = ", scaled_f_ ? "scaled" : "unchanged", ", f = ", f,
                  "), and it refuses them: ", refused, "; ", fitting_settings(n, f));
    std::vector<float> means(static_cast<size_t>(k * in.D));
    std::vector<int64_t> samples(static_cast<size_t>(k), 0), ids(static_cast<size_t>(k));
    std::iota(ids.begin(), ids.end(), int64_t{0});
    for (int64_t b = 0; b < k; ++b) {
      const std::span<const int64_t> members(order.data() + b * s_, std::min(n, (b + 1) * s_) - b * s_);
      for (int64_t r : members) samples[b] += in.num_samples[r];
      const std::vector<float> mean = mean_of_rows(in, members, false);
      std::copy(mean.begin(), mean.end(), means.begin() + b * in.D);
    }
    AggregationInput sub = in;
    sub.updates = means.data();
    sub.n = k;
    sub.num_samples = samples;
    sub.clients = ids;
    sub.expected_malicious = inner_f;
    AggregationOutput inner = inner_->aggregate(sub);
    AggregationOutput out;
    out.update = std::move(inner.update);
    if (!inner.flagged.empty()) {
      BASTION_CHECK(static_cast<int64_t>(inner.flagged.size()) == k, "bucketing: inner rule flagged ",
                    inner.flagged.size(), " of ", k, " buckets");
      out.flagged.assign(static_cast<size_t>(n), 0);
      for (int64_t pos = 0; pos < n; ++pos) out.flagged[order[pos]] = inner.flagged[pos / s_];
    }
    return out;
  }

  // The settings of s and inner_f under which the inner rule accepts n uploads with f attackers.
  std::string fitting_settings(int64_t n, int64_t f) const {
    std::string fits;
    for (const bool scaled : {false, true})
      for (int64_t s = s_; s >= 1; --s) {
        const int64_t k = (n + s - 1) / s;
        if (!inner_->refusal(k, scaled ? (k * f) / n : f).empty()) continue;
        fits += (fits.empty() ? "" : " or ") + std::string("s = ") + std::to_string(s) +
                " with inner_f = " + (scaled ? "\"scaled\"" : "\"unchanged\"") + " (k = " + std::to_string(k) + ")";
        break;  // the largest fitting s for this inner_f
      }
    return fits.empty() ? "no s or inner_f fits: assume fewer attackers (server.expected_malicious or the "
                          "inner rule's f) or sample more clients per round"
                        : "would fit: " + fits;
  }

  RuleState save_state() const override { return inner_->save_state(); }
  void load_state(const RuleState& state) override { inner_->load_state(state); }

 private:
  Params params_;
  int64_t s_;
  bool fixed_;
  uint64_t seed_;
  bool scaled_f_;
  std::unique_ptr<ServerRule> inner_;
};
}  // namespace

const std::vector<ParamSpec>& bucketing_params() {
  static const double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      {"s", ParamType::Integer, int64_t{2}, "uploads per bucket (the last bucket may hold fewer)", 1, 1e9},
      {"reshuffle",
       ParamType::Text,
       std::string("round"),
       "round: new permutation each round (paper); fixed: one permutation from `seed` (FedCAP)",
       -inf,
       inf,
       {"round", "fixed"}},
      {"seed", ParamType::Integer, int64_t{0}, "seed of the permutation when reshuffle = fixed", 0, 9.0e15},
      {"inner_f",
       ParamType::Text,
       std::string("unchanged"),
       "unchanged: the inner rule assumes the same f (paper, FLPoison) | scaled: floor(#buckets * f / n) "
       "(FedCAP's code)",
       -inf,
       inf,
       {"unchanged", "scaled"}},
      f_param(),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_bucketing(const Params& params, std::unique_ptr<ServerRule> inner) {
  return std::make_unique<Bucketing>(params, std::move(inner));
}

}  // namespace bastion
