// post_step: one mechanism for the steps taken on a client's own model after federated training,
// before it is evaluated (DESIGN.md "Personalized FL"):
//   st         Simple-Tuning (Qin et al. KDD'23, pFedSAM Tables I-III): re-initialise the head from the
//              model's default init (seeded per client), then train the head alone on the client's
//              clean training samples, body frozen.
//   head-tune  FedFSA's final round (PFL-FACTS §4a): train the head alone, body frozen, no re-init.
//   fine-tune  Qin et al.'s FT (PFL-FACTS §4c): train every parameter.
// `when`: at the final evaluation only (st, head-tune), or before every evaluation (fine-tune). The tuned
// model is used for that evaluation and then dropped: the client's state does not change, so a resumed
// run tunes exactly as an uninterrupted one.
// Plain SGD over the client's training samples without poisoning: only benign clients are evaluated.
// Cost: epochs x |D_k| forward/backward passes per evaluated client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "fl/base/params.h"
#include "nn/model.h"

namespace bastion {

struct ClientState;  // fl/clients/client_rule.h

struct PostSpec {
  enum class Kind { SimpleTuning, HeadTune, FineTune } kind = Kind::SimpleTuning;
  enum class When { Final, EveryEvaluation } when = When::Final;
  int64_t epochs = 5, batch = 64;
  double lr = 0.01, momentum = 0.0;
  double grad_clip = 0.0;       // clip the gradient's global L2 norm to this before each step (0 = off)
  double weight_decay = 0.0;    // L2 weight decay of the tuning SGD
  bool lr_from_client = false;  // tune at the client's own decayed lr (ClientState "lr") when it has one
  bool applies(int64_t round, int64_t rounds) const { return when == When::EveryEvaluation || round == rounds; }
};

// The spec one client tunes with: `spec`, at the client's decayed lr when lr_from_client and it has one.
PostSpec client_post_spec(const PostSpec& spec, const ClientState& state);

// "st" | "head-tune" | "fine-tune" (the [post] section's rule and fedavg-ft's variants).
PostSpec::Kind parse_post_kind(const std::string& name);
const char* post_kind_name(PostSpec::Kind kind);

// Trains `model` (holding the client's own model) as the spec says. init_seed seeds the re-initialised
// head (st); seed shuffles the loader. The model's trainable flags are restored (all trainable).
void apply_post_step(const PostSpec& spec, Model& model, const Dataset& data, const std::vector<int64_t>& indices,
                     const TransformSpec& transform, uint64_t seed, uint64_t init_seed);

// The [post] section: rule none | st | head-tune | fine-tune, epochs, batch, lr, momentum, when.
const std::vector<ParamSpec>& post_section_params();
// nullopt for rule = none.
std::optional<PostSpec> post_spec_from_section(const Params& post);

struct LocalSchedule;  // fl/clients/local_training.h
// The tuning keys of fedavg-ft, st and the SAM family: tune_epochs (default `epochs`), tune_batch,
// tune_lr (default `lr`), tune_momentum; 0 means "as in training" for epochs, batch and lr; tune_clip,
// tune_weight_decay (0 = off) and tune_lr_from (tune_lr | client: the client's decayed lr, FedFSA's code).
std::vector<ParamSpec> tuning_params(int64_t epochs, double lr);
PostSpec tuning_spec(const Params& p, const LocalSchedule& schedule, PostSpec::Kind kind, PostSpec::When when);

}  // namespace bastion
