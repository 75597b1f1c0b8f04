// Helpers shared by the attack files (fl/attacks/*.cpp), defined in attack.cpp. Not part of the Attack
// API: the run loop and the tests use fl/attacks/attack.h; these exist so that the same draw or the same
// search is written once (badnets and dba share the backdoor set-up; min-max and min-sum share the
// deviation search).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fl/attacks/attack.h"

namespace bastion {

// ---------------------------------------------------------------- data attacks

// round(fraction * |indices|) of the client's samples, as dataset indices, drawn without replacement by
// a partial Fisher-Yates shuffle of the client's index list. redraw: from context.rng (a new subset every
// round); else from context.client_rng (the same subset every round). fraction in [0, 1].
std::vector<int64_t> draw_local_subset(const DataAttackContext& context, double fraction, bool redraw);

// Throws "<scope>: unknown trigger 'x'; valid: ..." unless `name` is in trigger_names(), so that a typo
// fails when the attack is built rather than in the first malicious client's round.
void check_trigger_name(const std::string& name, const std::string& scope);

// A trigger made for the shape it meets in the pipeline (trigger_stage_shape): the stored C×H×W for raw
// triggers, the transformed shape for normalised ones. transform null = identity.
Trigger make_trigger_for(const std::string& name, const Dataset& data, const TransformSpec* transform);

// Where a trigger backdoor poisons (badnets, dba): the first per_batch rows of every batch, or a
// subset of round(fraction * local size) samples (redrawn each round or fixed).
struct BackdoorPoisoning {
  std::string trigger;
  int32_t target = 2;
  bool per_batch_mode = true;
  int64_t per_batch = 0;
  double fraction = 0.0;
  bool redraw = true;
  bool augment_once = false;  // one augmentation per sample for the run (BatchLoader::set_augment_once)
};
BackdoorPoisoning read_backdoor_poisoning(const Params& params, std::string trigger);
// The keys read_backdoor_poisoning reads (target, mode, per_batch, fraction, redraw, augment_once), shared by
// badnets and dba.
const std::vector<ParamSpec>& backdoor_poisoning_params();
void set_backdoor_poison(BatchLoader& loader, const DataAttackContext& context, const BackdoorPoisoning& poisoning);
BackdoorTest make_backdoor_test(const std::string& trigger, int32_t target, const Dataset& test,
                                const TransformSpec& transform);

// ---------------------------------------------------------------- upload attacks

// Throws (naming `attack`) unless 0 <= num_parameters <= update.size().
void check_upload_context(std::span<float> update, const UploadAttackContext& context, const char* attack);

// ---------------------------------------------------------------- collusion attacks

// Coordinate-wise mean and sample standard deviation (n - 1 denominator, torch.std's default) of the
// (n, D) row-major X, accumulated in double; std = 0 when n == 1. mean, std: (D) ASSIGNED. Cost O(nD).
void coordinate_mean_std(float* mean, float* std, const float* X, int64_t n, int64_t D);

// Throws (naming `attack`) unless benign is set, n_benign >= 1, D >= 1 and out.size() == D.
void check_collusion_context(std::span<float> out, const CollusionContext& context, const char* attack);

// NDSS'21 deviation directions p (malicious = mean - gamma * p): std = coordinate std, unit =
// mean / |mean| (0 when the mean is 0), sign = sign(mean) (sign(0) = 0, as torch.sign).
enum class Deviation { Std, Unit, Sign };
Deviation parse_deviation(const std::string& name);

// The geometry of malicious(gamma) = mean - gamma * p against the benign rows, precomputed once so each
// step of the gamma search is O(n):
//   |malicious(gamma) - X_i|^2 = |mean - X_i|^2 - 2 gamma (mean - X_i).p + gamma^2 |p|^2
// and the benign pairwise squared distances |X_i - X_j|^2 (GEMM, vector.h; < 1e-6 relative after
// centring) for the bounds. Cost O(n^2 D) once.
struct DeviationGeometry {
  int64_t n = 0, D = 0;
  std::vector<float> mean, direction;    // (D): the benign mean and p
  std::vector<double> mean_distance_sq;  // (n): |mean - X_i|^2
  std::vector<double> cross;             // (n): (mean - X_i).p
  double direction_sq = 0.0;             // |p|^2
  std::vector<double> pairwise_sq;       // (n, n): |X_i - X_j|^2

  // d(malicious(gamma), X_i): squared L2 or, with squared false, plain L2.
  double distance(int64_t i, double gamma, bool squared) const;
  double pairwise(int64_t i, int64_t j, bool squared) const;
  void write_malicious(std::span<float> out, double gamma) const;  // out = mean - gamma * p
};
DeviationGeometry make_deviation_geometry(const CollusionContext& context, Deviation deviation);

// NDSS'21 halving search (IMPLEMENTATION-FACTS §6.6), the notebooks' loop:
//   gamma = gamma0, step = gamma0, gamma_succ = 0
//   while |gamma_succ - gamma| > tolerance:
//     if feasible(gamma): gamma_succ = gamma; gamma += step / 2   else: gamma -= step / 2
//     step /= 2
// Returns gamma_succ (0 when no gamma tried was feasible: the caller then sends the benign mean). When
// feasibility is monotone (true up to some gamma*, false beyond; both NDSS'21 criteria are, since the
// distances are convex in gamma), gamma* lies in [gamma_succ, gamma_succ + 2 tolerance) unless
// gamma* >= 2 gamma0 (the search never tries beyond 2 gamma0). Capped at kMaxGammaSearchSteps iterations
// so that tolerance = 0 ends too (the step underflows long before).
constexpr int kMaxGammaSearchSteps = 200;
double halving_gamma_search(double gamma0, double tolerance, const std::function<bool(double)>& feasible);

}  // namespace bastion
