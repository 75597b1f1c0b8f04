// The server's side of a round around the rule itself: the rule built from the config (inner rule of a
// wrapper, restriction to server.apply_to), the number f of attackers the robust rules assume, and the
// server's own data (data.server_fraction) through a Model replica for FLTrust, SageFlow and finetune.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "fl/core/client_models.h"
#include "fl/core/config.h"
#include "fl/defenses/column_subset.h"
#include "fl/defenses/server_rule.h"
#include "nn/model.h"

namespace bastion {

// f among `uploads` uploads: floor(server.expected_malicious * uploads) when that is >= 0; else
// min(attack.malicious_per_round, uploads) when attackers are forced into every round; else
// floor(uploads * malicious clients / clients) (FedCAP's f = floor(n * attack_ratio)).
int64_t expected_malicious_count(const ExperimentConfig& config, int64_t uploads);

// Upload validation before the server rule: a row with NaN or Inf never reaches it. Accepted rows are
// moved up in place over rejected ones (a round without rejections copies nothing); returns the
// accepted clients in order. fail = true (server.on_invalid = fail) throws on the first invalid row.
std::vector<int64_t> compact_finite_uploads(float* uploads, int64_t D, const std::vector<int64_t>& sampled,
                                            int64_t round, bool fail);

// The server's step global[shared columns] += update, refused (bastion::Error naming the rule and the
// round, global untouched) when the update holds NaN or Inf or when a sum overflows float: a rule must
// never return a non-finite update, and even a finite one (huge uploads, fedavg's lr > 1) can carry the
// global model past FLT_MAX. Either way the run stops here instead of training on Inf or NaN.
void add_update_checked(const SharedColumns& sharing, std::span<const float> update, std::span<float> global,
                        const std::string& rule, int64_t round);

// The column ranges of server.apply_to on `model` ([] = every column: returns empty). Entries: "all",
// "body" (every parameter outside the head, and every buffer), "head", or a parameter-name prefix (also
// matched against buffer names, so "bn1." selects bn1's running statistics). An entry that selects
// nothing is an error listing the model's parameter names.
std::vector<ColumnRange> apply_to_columns(const Model& model, const std::vector<std::string>& apply_to);

// AggregationInput::weight_columns: the conv and linear weights of `model` (parameter tensors with 2 or 4
// dimensions; biases, BatchNorm affine parameters and buffers excluded, as FedCPA's code selects them),
// restricted to the shared columns and renumbered in upload-row coordinates.
std::vector<ColumnRange> weight_columns(const Model& model, const SharedColumns& shared);

// server.rule (with server.inner for wrappers) over the shared columns (the upload rows), restricted to
// server.apply_to when given (its columns intersected with the shared ones).
std::unique_ptr<ServerRule> build_server_rule(const ExperimentConfig& config, const Model& model,
                                              const SharedColumns& shared);

// The SGD part of a client rule's schedule keys (fl/clients/local_training.h) as a ServerTrainSpec for
// `round` (lr decayed as the clients' lr_t; SAM's rho is not carried: the server's copy takes plain SGD
// steps), or none when the rule's table lacks them.
std::optional<LocalSchedule> client_local_schedule(const Params& client_rule);
ServerTrainSpec server_spec_of(const LocalSchedule& schedule, int64_t round);

// ServerData over the run's server split: training runs the sgd client rule on a Model replica (so the
// server trains exactly like a client: same loader, augmentation, SAM when rho > 0), evaluation uses
// the deterministic eval transform. The replica is the caller's scratch: its state is overwritten.
// `clients` is the clients' schedule that client_schedule() reports (none: it reports none).
class ModelServerData final : public ServerData {
 public:
  ModelServerData(Model& model, const Dataset& data, const std::vector<int64_t>& indices,
                  const TransformSpec& train_transform, const TransformSpec& eval_transform, int64_t eval_batch,
                  std::optional<LocalSchedule> clients = std::nullopt);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  std::vector<float> train(std::span<const float> state, const ServerTrainSpec& spec) override;
  ServerEval evaluate(std::span<const float> state) override;
  std::optional<ServerTrainSpec> client_schedule(int64_t round) const override;
  int64_t last_train_steps() const { return last_train_steps_; }  // SGD steps of the last train()

 private:
  Model& model_;
  const Dataset& data_;
  const std::vector<int64_t>& indices_;
  const TransformSpec& train_transform_;
  const TransformSpec& eval_transform_;
  int64_t eval_batch_;
  std::optional<LocalSchedule> clients_;
  int64_t last_train_steps_ = 0;
};

}  // namespace bastion
