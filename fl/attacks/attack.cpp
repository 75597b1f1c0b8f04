// attack: attack_kind_name, normal_quantile (LIE's Φ⁻¹) and the helpers the attack files share
// (attack_support.h): the poisoned-subset draw and backdoor set-up of badnets/dba, coordinate mean and
// std (LIE, min-max/min-sum with p = std), and the NDSS'21 deviation geometry and halving search.
#include "fl/attacks/attack.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fl/attacks/attack_support.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

const char* attack_kind_name(AttackKind kind) {
  switch (kind) {
    case AttackKind::Data:
      return "data";
    case AttackKind::Training:
      return "training";
    case AttackKind::Upload:
      return "upload";
    case AttackKind::Collusion:
      return "collusion";
  }
  return "unknown";
}

// ---------------------------------------------------------------- normal quantile

namespace {
// P. J. Acklam, "An algorithm for computing the inverse normal cumulative distribution function"
// (2003): rational approximations with relative error < 1.15e-9 on (0, 1).
constexpr double kAcklamA[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
constexpr double kAcklamB[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
constexpr double kAcklamC[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
constexpr double kAcklamD[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
constexpr double kAcklamTail = 0.02425;  // below: the tail approximation; above: the central one

// Acklam's approximation for p in (0, 0.5].
double acklam_lower_half(double p) {
  if (p < kAcklamTail) {
    const double q = std::sqrt(-2.0 * std::log(p));
    return (((((kAcklamC[0] * q + kAcklamC[1]) * q + kAcklamC[2]) * q + kAcklamC[3]) * q + kAcklamC[4]) * q +
            kAcklamC[5]) /
           ((((kAcklamD[0] * q + kAcklamD[1]) * q + kAcklamD[2]) * q + kAcklamD[3]) * q + 1.0);
  }
  const double q = p - 0.5, r = q * q;
  return (((((kAcklamA[0] * r + kAcklamA[1]) * r + kAcklamA[2]) * r + kAcklamA[3]) * r + kAcklamA[4]) * r +
          kAcklamA[5]) *
         q / (((((kAcklamB[0] * r + kAcklamB[1]) * r + kAcklamB[2]) * r + kAcklamB[3]) * r + kAcklamB[4]) * r + 1.0);
}
}  // namespace

double normal_quantile(double p) {
  BASTION_CHECK(p > 0.0 && p < 1.0, "normal_quantile: p must lie in (0, 1), got ", p);
  // Work in the lower half only: 1 - p is exact for p >= 0.5 (Sterbenz), and Φ(x) = erfc(-x/√2)/2 keeps
  // full relative precision for x <= 0, where the upper half would cancel in Φ(x) - p.
  if (p > 0.5) return -normal_quantile(1.0 - p);
  const double x = acklam_lower_half(p);
  // One Halley step on Φ(x) - p = 0 (Acklam's refinement): cubic convergence turns 1e-9 into ~1e-15.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2.0 * M_PI) * std::exp(x * x / 2.0);
  if (!std::isfinite(u)) return x;  // p below ~1e-300: exp overflows; Acklam alone is still 1e-9
  return x - u / (1.0 + x * u / 2.0);
}

// ---------------------------------------------------------------- data attacks

namespace {
constexpr uint64_t kSubsetStream = 0x737562736574ULL;         // "subset": forks the rng for the subset draw
constexpr uint64_t kAugmentOnceStream = 0x6175676f6e6365ULL;  // "augonce": the attacker's fixed augmentations
}  // namespace

std::vector<int64_t> draw_local_subset(const DataAttackContext& context, double fraction, bool redraw) {
  BASTION_CHECK(fraction >= 0.0 && fraction <= 1.0, "attack: fraction must lie in [0, 1], got ", fraction);
  std::vector<int64_t> pool = context.indices;
  // round(), i.e. half away from zero: 0.5 of 5 samples poisons 3.
  const size_t count = static_cast<size_t>(std::llround(fraction * static_cast<double>(pool.size())));
  Generator rng = (redraw ? context.rng : context.client_rng).fork(kSubsetStream);
  for (size_t i = 0; i < count; ++i) std::swap(pool[i], pool[i + rng.below(pool.size() - i)]);
  pool.resize(count);
  return pool;
}

void check_trigger_name(const std::string& name, const std::string& scope) {
  const std::vector<std::string> names = trigger_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  std::string valid;
  for (const std::string& known : names) valid += (valid.empty() ? "" : ", ") + known;
  BASTION_FAIL(scope, ": unknown trigger '", name, "'; valid: ", valid);
}

Trigger make_trigger_for(const std::string& name, const Dataset& data, const TransformSpec* transform) {
  const TransformSpec identity;
  const SampleShape shape = trigger_stage_shape(data, transform ? *transform : identity, trigger_space(name));
  return make_trigger(name, shape.channels, shape.height, shape.width);
}

const std::vector<ParamSpec>& backdoor_poisoning_params() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      {"target", ParamType::Integer, int64_t{2}, "target label (SPMC/pFedSAM 2, FedCPA 1)", 0, 1e6},
      {"mode",
       ParamType::Text,
       std::string("per-batch"),
       "per-batch: the first per_batch samples of every batch; fraction: a random fraction of the local data",
       -kInf,
       kInf,
       {"per-batch", "fraction"}},
      {"per_batch", ParamType::Integer, int64_t{20},
       "poisoned samples per batch in per-batch mode (pFedSAM, DBA MNIST: 20 of 64)", 0, 1e9},
      {"fraction", ParamType::Real, 0.3, "poisoned share of the local data in fraction mode (SPMC 0.3, FedCPA 0.8)", 0,
       1},
      {"redraw", ParamType::Boolean, true,
       "fraction mode: draw the poisoned subset anew each round (FedCPA) or once (SPMC)"},
      {"augment_once", ParamType::Boolean, false,
       "augment each of the attacker's samples once for the whole run, not anew each epoch (SPMC's code)"},
  };
  return specs;
}

BackdoorPoisoning read_backdoor_poisoning(const Params& params, std::string trigger) {
  BackdoorPoisoning poisoning;
  poisoning.trigger = std::move(trigger);
  poisoning.target = static_cast<int32_t>(params.integer("target"));
  poisoning.per_batch_mode = params.text("mode") == "per-batch";
  poisoning.per_batch = params.integer("per_batch");
  poisoning.fraction = params.real("fraction");
  poisoning.redraw = params.boolean("redraw");
  poisoning.augment_once = params.boolean("augment_once");
  return poisoning;
}

void set_backdoor_poison(BatchLoader& loader, const DataAttackContext& context, const BackdoorPoisoning& poisoning) {
  const Trigger trigger = make_trigger_for(poisoning.trigger, context.data, context.transform);
  PoisonSpec spec;
  spec.trigger = &trigger;
  spec.target = poisoning.target;
  if (poisoning.per_batch_mode) {
    spec.per_batch = poisoning.per_batch;
  } else {
    spec.sample_mask.assign(static_cast<size_t>(context.data.size()), 0);
    for (int64_t index : draw_local_subset(context, poisoning.fraction, poisoning.redraw)) spec.sample_mask[index] = 1;
  }
  loader.set_poison(spec);
  if (poisoning.augment_once) loader.set_augment_once(context.client_rng.fork(kAugmentOnceStream));
}

BackdoorTest make_backdoor_test(const std::string& trigger, int32_t target, const Dataset& test,
                                const TransformSpec& transform) {
  return {make_trigger_for(trigger, test, &transform), target};
}

// ---------------------------------------------------------------- upload attacks

void check_upload_context(std::span<float> update, const UploadAttackContext& context, const char* attack) {
  BASTION_CHECK(0 <= context.num_parameters && context.num_parameters <= static_cast<int64_t>(update.size()), "attack ",
                attack, ": num_parameters ", context.num_parameters, " outside the update of ", update.size(),
                " values");
}

// ---------------------------------------------------------------- collusion attacks

void coordinate_mean_std(float* mean, float* std, const float* X, int64_t n, int64_t D) {
  BASTION_CHECK(n >= 1 && D >= 0, "coordinate_mean_std: need n >= 1 rows, got n = ", n, ", D = ", D);
  // Column blocks on the stack: X is read row by row (contiguous) twice per block, no allocation, and the
  // two-pass std in double does not cancel the way sum(x^2) - n mean^2 would.
  constexpr int64_t kBlock = 512;
  double sum[kBlock], squares[kBlock];
  for (int64_t c0 = 0; c0 < D; c0 += kBlock) {
    const int64_t width = std::min(kBlock, D - c0);
    std::fill(sum, sum + width, 0.0);
    std::fill(squares, squares + width, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < width; ++j) sum[j] += X[i * D + c0 + j];
    for (int64_t j = 0; j < width; ++j) sum[j] /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < width; ++j) {
        const double d = X[i * D + c0 + j] - sum[j];
        squares[j] += d * d;
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      mean[c0 + j] = static_cast<float>(sum[j]);
      std[c0 + j] = n > 1 ? static_cast<float>(std::sqrt(squares[j] / static_cast<double>(n - 1))) : 0.0f;
    }
  }
}

void check_collusion_context(std::span<float> out, const CollusionContext& context, const char* attack) {
  BASTION_CHECK(context.benign != nullptr && context.n_benign >= 1, "attack ", attack,
                ": needs at least one benign update, got ", context.n_benign);
  BASTION_CHECK(context.D >= 1 && static_cast<int64_t>(out.size()) == context.D, "attack ", attack, ": output has ",
                out.size(), " coordinates but D = ", context.D);
}

Deviation parse_deviation(const std::string& name) {
  if (name == "std") return Deviation::Std;
  if (name == "unit") return Deviation::Unit;
  if (name == "sign") return Deviation::Sign;
  BASTION_FAIL("unknown deviation '", name, "'; valid: std, unit, sign");
}

double DeviationGeometry::distance(int64_t i, double gamma, bool squared) const {
  const double sq = std::max(mean_distance_sq[i] - 2.0 * gamma * cross[i] + gamma * gamma * direction_sq, 0.0);
  return squared ? sq : std::sqrt(sq);
}

double DeviationGeometry::pairwise(int64_t i, int64_t j, bool squared) const {
  const double sq = pairwise_sq[i * n + j];
  return squared ? sq : std::sqrt(sq);
}

void DeviationGeometry::write_malicious(std::span<float> out, double gamma) const {
  for (int64_t d = 0; d < D; ++d) out[d] = static_cast<float>(mean[d] - gamma * direction[d]);
}

namespace {
void fill_direction(DeviationGeometry& g, const float* X, Deviation deviation) {
  if (deviation == Deviation::Std) {
    coordinate_mean_std(g.mean.data(), g.direction.data(), X, g.n, g.D);
    return;
  }
  vector_mean_rows_cpu(g.mean.data(), X, g.n, g.D);
  const double norm = vector_norm_cpu(g.mean.data(), g.D);
  for (int64_t d = 0; d < g.D; ++d) {
    const float m = g.mean[d];
    g.direction[d] = deviation == Deviation::Sign ? static_cast<float>((m > 0.0f) - (m < 0.0f))
                     : norm > 0.0                 ? static_cast<float>(m / norm)
                                                  : 0.0f;
  }
}

void fill_pairwise(DeviationGeometry& g, const float* X) {
  std::vector<float> distances(static_cast<size_t>(g.n * g.n));
  std::vector<float> workspace(static_cast<size_t>(vector_pairwise_workspace_floats(g.n, g.D)));
  vector_pairwise_squared_distances_cpu(distances.data(), workspace.data(), X, g.n, g.D);
  g.pairwise_sq.assign(distances.begin(), distances.end());
}
}  // namespace

DeviationGeometry make_deviation_geometry(const CollusionContext& context, Deviation deviation) {
  DeviationGeometry g;
  g.n = context.n_benign;
  g.D = context.D;
  g.mean.resize(static_cast<size_t>(g.D));
  g.direction.resize(static_cast<size_t>(g.D));
  fill_direction(g, context.benign, deviation);
  g.direction_sq = vector_dot_cpu(g.direction.data(), g.direction.data(), g.D);
  g.mean_distance_sq.assign(static_cast<size_t>(g.n), 0.0);
  g.cross.assign(static_cast<size_t>(g.n), 0.0);
  for (int64_t i = 0; i < g.n; ++i) {
    const float* row = context.benign + i * g.D;
    double sq = 0.0, cross = 0.0;
    for (int64_t d = 0; d < g.D; ++d) {
      const double diff = static_cast<double>(g.mean[d]) - row[d];
      sq += diff * diff;
      cross += diff * g.direction[d];
    }
    g.mean_distance_sq[i] = sq;
    g.cross[i] = cross;
  }
  fill_pairwise(g, context.benign);
  return g;
}

double halving_gamma_search(double gamma0, double tolerance, const std::function<bool(double)>& feasible) {
  double gamma = gamma0, step = gamma0, gamma_succ = 0.0;
  for (int k = 0; k < kMaxGammaSearchSteps && std::abs(gamma_succ - gamma) > tolerance; ++k) {
    if (feasible(gamma)) {
      gamma_succ = gamma;
      gamma += step / 2.0;
    } else {
      gamma -= step / 2.0;
    }
    step /= 2.0;
  }
  return gamma_succ;
}

}  // namespace bastion
