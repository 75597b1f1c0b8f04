// local_training: the loop every client rule shares (sgd, fedavg-ft, st, ditto, fedrep, local, and the
// post-training steps): a shuffled loader over the client's samples (with the transform, and for an
// attacker the attack's poisoning), then steps of SGD or SAM:
//   for E epochs (or exactly K steps when steps > 0, cycling through epochs):
//     for each batch (x, y):  zero grads; CE(f_w(x), y).backward(); clip; batch hook; hook; optimizer step
//   lr_t = lr * lr_decay^floor((round - 1) / lr_decay_every)     (lr_decay_scope = round)
//   or the client's own lr, decayed after each of its local epochs   (lr_decay_scope = client-epoch)
// SAM steps (rho > 0, nn/optim.h) clip by sam_clip: before the ascent and/or on the final direction.
// The hook (Ditto's proximal term) edits the gradient after clipping, before the step. Frozen
// parameters (Model::set_trainable) get no gradient and do not move, so FedRep's phases and the head
// tuning of the post steps are the same loop over different trainable parts.
// A Training attack replaces the whole step (fl/attacks/attack.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "fl/clients/client_rule.h"
#include "nn/optim.h"
#include "tensor/random.h"

namespace bastion {

// The sgd client's schedule keys; every rule built on this loop starts its table with them.
struct LocalSchedule {
  int64_t epochs = 2, steps = 0, batch = 64;
  SgdOptions sgd;
  double lr_decay = 1.0;
  int64_t lr_decay_every = 1;
  bool keep_momentum = false;
  double grad_clip = 0.0;
  bool drop_last = false;
  bool shuffle = true;  // false: the client's samples in index order every epoch (FedCAP's code)
  float rho = 0.0f;     // > 0: SAM steps
  bool clip_before_ascent = true, clip_after_ascent = true;  // sam_clip: where grad_clip applies in a SAM step
  SamOptions::Perturbation sam_perturbation = SamOptions::Perturbation::Global;
  bool decay_per_client_epoch = false;         // lr_decay_scope = client-epoch
  double decay_at(int64_t round) const;        // lr_decay^floor((round - 1) / lr_decay_every); 1 for client-epoch
  float lr_at(int64_t round) const;            // lr * decay_at(round)
  SamOptions sam_options(float radius) const;  // radius and the clipping of sam_clip
};

// The schedule's ParamSpec rows (epochs, steps, batch, lr, momentum, weight_decay, nesterov, lr_decay,
// lr_decay_every, keep_momentum, grad_clip, drop_last, rho) with the sgd client's defaults.
std::vector<ParamSpec> local_schedule_params();
LocalSchedule local_schedule(const Params& params);
// A table made of the schedule rows followed by `extra`.
std::vector<ParamSpec> with_schedule_params(std::vector<ParamSpec> extra);

// Seeds of a client's round, all derived from task.seed so the random streams stay separate.
Generator attack_stream(const ClientTask& task);
uint64_t dropout_seed(const ClientTask& task);

// Gives `loader` the task's transform and, for an attacker, the attack's poisoning.
void prepare_loader(BatchLoader& loader, const ClientTask& task, Generator& attack_rng);

// A client pass's data, the start of every rule's round: the loader over the task's samples (seeded by
// task.seed, the schedule's batch, shuffle and drop_last) with the task's transform and, for an attacker,
// the attack's poisoning (prepare_loader), and the pass's attack stream (attack_stream(task)).
struct ClientLoader {
  ClientLoader(const ClientTask& task, const LocalSchedule& schedule);
  Generator attack_rng;
  BatchLoader loader;
};

// The epoch driver every local loop shares: `epochs` epochs (or exactly `steps` steps when steps > 0,
// cycling through epochs) over `loader`, its epochs numbered from first_epoch (the shuffle of epoch e
// depends on e). `step(x, y, k)` trains on the k-th batch (from 0) and returns its loss. The result counts
// samples and steps; train_loss is the mean step loss. Throws, naming `who` (e.g. "ditto: client 3"), when
// an epoch yields no batch.
using BatchStep = std::function<double(const Tensor& x, const LabelTensor& y, int64_t k)>;
ClientResult run_epochs(BatchLoader& loader, int64_t epochs, int64_t steps, int64_t first_epoch, const BatchStep& step,
                        const std::string& who);

using GradientHook = std::function<void(Model&)>;
// A gradient edit that needs the batch (SPMC's LGAlign: a second forward/backward for the teacher's loss,
// then the CE gradient projected): called after the cross-entropy backward and clipping, before `hook`,
// with the batch's inputs; it must leave the step's gradient in the model's gradient buffer.
using BatchHook = std::function<void(Model&, const Tensor& x)>;
// A term added to the step's cross-entropy before backward (FedCR's KL regulariser): called right after the
// forward with the batch's labels; the model's last forward is readable through it. Undefined = nothing.
using LossTerm = std::function<Tensor(Model&, const LabelTensor& y)>;

// One model's training run over a loader.
struct LocalPass {
  Model& model;
  BatchLoader& loader;
  Sgd& sgd;
  Sam* sam = nullptr;      // SAM steps when set
  const ClientTask& task;  // client id (errors) and the attack (malicious clients)
  Generator& attack_rng;
  double grad_clip = 0.0;
  const GradientHook* hook = nullptr;
  bool allow_attack = true;  // false: a Training attack's step is not used (clean phases)
  const LossTerm* extra_loss = nullptr;
  const BatchHook* batch_hook = nullptr;
};

// What a rule adds to the sgd client's round; every field optional (null = the plain step).
struct TrainingHooks {
  const SamOptions* sam = nullptr;         // every step's SAM options (the SAM family's radii, linear term, duals)
  const LossTerm* extra_loss = nullptr;    // added to every step's loss (FedCR's regulariser)
  const GradientHook* gradient = nullptr;  // edits every step's gradient after clipping (RSA's sign term)
  const BatchHook* batch = nullptr;        // edits it with the batch at hand (SPMC's LGAlign; LocalPass::batch_hook)
};

// The sgd client's whole round on task.model: loader (seeded by task.seed, with the attack's poisoning),
// SGD (or SAM when rho > 0, unless hooks.sam sets the options) with lr_t, momentum kept under "momentum"
// when keep_momentum; `hooks` as above.
ClientResult train_with_schedule(ClientTask& task, const LocalSchedule& schedule, const TrainingHooks& hooks = {});

// The lr a client starts its round with: lr_at(round), or with lr_decay_scope = client-epoch the client's
// own decayed lr (ClientState scalar "lr"; the initial lr before its first round).
float client_lr(const LocalSchedule& schedule, const ClientTask& task);
// The client's own decayed lr kept in its state (lr_decay_scope = client-epoch), else `fallback`.
double stored_client_lr(const ClientState& state, double fallback);
// The schedule's epochs (or steps) on the pass; with client-epoch decay, the lr decays after each epoch
// and the decayed lr is stored in `state`.
ClientResult run_scheduled_epochs(LocalPass& pass, const LocalSchedule& schedule, ClientState& state);

// One step of the pass on the batch (x, y); returns its loss. A model whose training forward returns S
// stacked copies of the batch's logits ((S*N, C), row s*N + n: cnn-fedcr's Monte-Carlo samples) is scored
// against the labels repeated S times, i.e. the mean CE over samples and batch.
double local_step(LocalPass& pass, const Tensor& x, const LabelTensor& y);

// y repeated to `rows` labels (rows a multiple of y's size; y itself when equal).
LabelTensor repeat_labels(const LabelTensor& y, int64_t rows);

// Runs `epochs` epochs (or exactly `steps` steps when steps > 0) on the pass's loader, numbering the
// loader's epochs from first_epoch (the shuffle of epoch e depends on e). Throws when an epoch has no batch.
ClientResult run_local_epochs(LocalPass& pass, int64_t epochs, int64_t steps, int64_t first_epoch = 0);

// Ditto's proximal term (lambda/2)||w - reference||^2 over the parameter columns: its value, and its
// gradient lambda (w - reference) ADDED to the model's gradient buffer (trainable parameters only).
double proximal_term(const Model& model, std::span<const float> reference, double lambda);
void add_proximal_gradient(Model& model, std::span<const float> reference, double lambda);
// The same with the reference on the model's device (a CUDA model: lambda w - lambda reference added by two
// fused multiply-adds per range, within a rounding of the CPU's lambda (w - reference)).
void add_proximal_gradient(Model& model, const Tensor& reference, double lambda);
// RSA's l1 consensus term lambda ||w - reference||_1 over the parameter columns: its subgradient
// lambda sign(w - reference) (sign(0) = 0: a coordinate equal to the reference gets nothing) ADDED to the
// model's gradient buffer (trainable parameters only).
void add_sign_gradient(Model& model, std::span<const float> reference, double lambda);

// Saves / restores the momentum buffer under `key` in the client's state (keep_momentum).
void restore_momentum(const LocalSchedule& schedule, const ClientState& state, Sgd& sgd, const std::string& key);
void save_momentum(const LocalSchedule& schedule, ClientState& state, Sgd& sgd, const std::string& key);

// A whole model state kept in ClientState under `key` (local's model, Ditto's personal model, fedavg-ft's
// tuned model): copy_stored writes it into `out` and returns true, or returns false when the client has
// none yet; a stored vector of the wrong length is an error naming `rule`.
bool copy_stored(const ClientState& state, const std::string& key, std::span<float> out, const char* rule);
void store(ClientState& state, const std::string& key, std::span<const float> values);
// The model's whole state (from any device) stored under `key`.
void store_model(ClientState& state, const std::string& key, const Model& model);

// The columns [begin, end) of the head parameters in the flat state, in model order.
std::vector<std::pair<int64_t, int64_t>> head_columns(const Model& model);
// Copies the head columns of `from` into `to` (both full flat states of `model`'s layout).
void copy_head(const Model& model, std::span<const float> from, std::span<float> to);
// The head columns of `state` as one vector, and back.
std::vector<float> gather_head(const Model& model, std::span<const float> state);
void scatter_head(const Model& model, std::span<const float> head, std::span<float> state);
// A body-sharing rule's personal model (FedRep, FedCR): `global` with the head stored under `key`;
// false (out untouched) when the client has stored no head yet.
bool global_with_stored_head(const ClientState& state, const std::string& key, std::span<const float> global,
                             const Model& model, std::span<float> out);

}  // namespace bastion
