// Attacks (SPEC §5, IMPLEMENTATION-FACTS §6). Malicious clients are a fixed seeded subset; an attack
// declares where it acts (STYLE §8):
//   Data       changes what a malicious client trains on: configures its BatchLoader for the round
//              (trigger + target on some samples, or relabelled samples). badnets, dba, label-flip.
//   Training   replaces each local optimisation step of a malicious client. bapfl.
//   Upload     rewrites the malicious client's own update after training. sign-flip, scale, gaussian.
//   Collusion  sees the round's benign updates and computes one malicious update that every attacker
//              of the round uploads (omniscient). lie, min-max, min-sum, ipm.
// Attacks compose: at most one Data-or-Training attack and at most one Collusion attack per
// experiment, any number of Upload attacks; a round applies collusion first, then the upload attacks in
// the order listed (e.g. names = ["dba", "scale"] is DBA with model replacement).
//
// Model attacks act on the PARAMETER part of an update only (the first num_parameters coordinates);
// BatchNorm running statistics are uploaded as trained (negating a running variance would make it
// negative and the aggregate NaN — docs/decisions.md).
//
// Determinism: every random draw comes from the Generator in the context, which the run loop derives
// from (seed, round, client) — never from thread order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/triggers.h"
#include "fl/base/params.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tensor/random.h"

namespace bastion {

enum class AttackKind { Data, Training, Upload, Collusion };
const char* attack_kind_name(AttackKind kind);  // "data", "training", "upload", "collusion"

// What a Data or Training attack gets for one malicious client in one round.
struct DataAttackContext {
  const Dataset& data;                  // the shared training set
  const std::vector<int64_t>& indices;  // this client's samples (indices into data)
  int64_t attacker_index = 0;           // position of the client in the sorted malicious set (DBA part)
  int64_t client = 0, round = 0;
  Generator rng;                             // (seed, round, client)-derived: changes every round
  Generator client_rng;                      // (seed, client)-derived: the same every round (fixed choices,
                                             // e.g. label-flip's random permutation)
  const TransformSpec* transform = nullptr;  // the loader's transform (shape a normalised trigger must fit)
};

// The backdoor a data attack plants, for measuring ASR on the test set: the trigger made for the test
// set's sample shape in its space, and the target label.
struct BackdoorTest {
  Trigger trigger;
  int32_t target = 0;
};

// One optimisation step of a malicious client (Training attacks). x, y: the batch as the loader made it
// (with the attack's poisoning applied). The attack must do the whole step: zero gradients, forward,
// backward, optimizer step. Returns the step's training loss (for logging).
struct TrainingStepContext {
  Model& model;
  Sgd& optimizer;
  const Tensor& x;
  const LabelTensor& y;
  Generator& rng;
};

struct UploadAttackContext {
  std::span<const float> global_state;  // the model the round started from (parameters then buffers)
  int64_t num_parameters = 0;           // the attack acts on update[0, num_parameters)
  int64_t participants = 0;             // m: uploads this round (model replacement's default scale)
  Generator rng;
};

struct CollusionContext {
  const float* benign = nullptr;  // (n_benign, D) row-major benign updates of the round, D = parameters
  int64_t n_benign = 0, D = 0;
  int64_t participants = 0;             // m: all uploads of the round
  int64_t malicious = 0;                // f: attackers in this round
  std::span<const float> global_state;  // parameters (first D) then buffers
  Generator rng;
  std::vector<std::pair<std::string, double>> resolved;  // OUT: values the attack derived (LIE's z): summary.json
};

class Attack {
 public:
  virtual ~Attack() = default;
  virtual AttackKind kind() const = 0;

  // Data and Training attacks: set up this malicious client's loader for the round (set_poison /
  // label overrides). The loader has its transform set already.
  virtual void poison_loader(BatchLoader& loader, const DataAttackContext& context) const {}

  // Training attacks only: one full local step (see TrainingStepContext).
  virtual float training_step(TrainingStepContext& context) const { return 0.0f; }

  // Upload attacks: rewrite update[0, num_parameters) in place.
  virtual void corrupt_upload(std::span<float> update, UploadAttackContext& context) const {}

  // Collusion attacks: out (D) ASSIGNED with the malicious update every attacker of the round uploads.
  // n_benign may be small (>= 1; with 1 the std is 0); called only when the round has attackers.
  virtual void collude(std::span<float> out, CollusionContext& context) const {}

  // Data/Training backdoor attacks: the trigger and target for ASR on a test set shaped like `test`
  // (after `transform` when the trigger acts in normalised space). Others: nullopt (no ASR column).
  virtual std::optional<BackdoorTest> backdoor_test(const Dataset& test, const TransformSpec& transform) const {
    return std::nullopt;
  }
};

// Factories and parameter tables, one pair per file in fl/attacks/ (listed by fl/registry.cpp).
const std::vector<ParamSpec>& badnets_params();
std::unique_ptr<Attack> make_badnets(const Params& params);
const std::vector<ParamSpec>& dba_params();
std::unique_ptr<Attack> make_dba(const Params& params);
const std::vector<ParamSpec>& bapfl_params();
std::unique_ptr<Attack> make_bapfl(const Params& params);
const std::vector<ParamSpec>& label_flip_params();
std::unique_ptr<Attack> make_label_flip(const Params& params);
const std::vector<ParamSpec>& sign_flip_params();
std::unique_ptr<Attack> make_sign_flip(const Params& params);
const std::vector<ParamSpec>& scale_params();
std::unique_ptr<Attack> make_scale(const Params& params);
const std::vector<ParamSpec>& gaussian_params();
std::unique_ptr<Attack> make_gaussian(const Params& params);
const std::vector<ParamSpec>& lie_params();
std::unique_ptr<Attack> make_lie(const Params& params);
const std::vector<ParamSpec>& min_max_params();
std::unique_ptr<Attack> make_min_max(const Params& params);
const std::vector<ParamSpec>& min_sum_params();
std::unique_ptr<Attack> make_min_sum(const Params& params);
const std::vector<ParamSpec>& ipm_params();
std::unique_ptr<Attack> make_ipm(const Params& params);

// Standard normal quantile Φ⁻¹(p), p in (0, 1) (Acklam's rational approximation refined by one Halley
// step: |error| < 1e-12). Used by LIE.
double normal_quantile(double p);

}  // namespace bastion
