#include "fl/clients/post_step.h"

#include <limits>

#include "fl/clients/local_training.h"
#include "nn/models.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

void reinitialise_head(Model& model, uint64_t init_seed) {
  const std::unique_ptr<Model> fresh = make_model(model.name(), model.input_shape(), model.num_classes(), init_seed);
  std::vector<float> state = model.state_values();  // from any device
  copy_head(model, fresh->flat_state(), state);
  model.load_state_values(state);
}
}  // namespace

PostSpec::Kind parse_post_kind(const std::string& name) {
  if (name == "st") return PostSpec::Kind::SimpleTuning;
  if (name == "head-tune") return PostSpec::Kind::HeadTune;
  if (name == "fine-tune") return PostSpec::Kind::FineTune;
  BASTION_FAIL("unknown post-training step '", name, "'; valid: st, head-tune, fine-tune");
}

const char* post_kind_name(PostSpec::Kind kind) {
  switch (kind) {
    case PostSpec::Kind::SimpleTuning:
      return "st";
    case PostSpec::Kind::HeadTune:
      return "head-tune";
    case PostSpec::Kind::FineTune:
      return "fine-tune";
  }
  return "?";
}

void apply_post_step(const PostSpec& spec, Model& model, const Dataset& data, const std::vector<int64_t>& indices,
                     const TransformSpec& transform, uint64_t seed, uint64_t init_seed) {
  if (spec.kind == PostSpec::Kind::SimpleTuning) reinitialise_head(model, init_seed);
  const bool head_only = spec.kind != PostSpec::Kind::FineTune;
  if (head_only) model.set_trainable(/*head=*/false, false);
  ClientState scratch;
  ClientTask task{model, data, indices, transform, scratch, -1, 0, seed, seed};
  BatchLoader loader(data, spec.batch, /*shuffle=*/true, seed, indices);
  Generator attack_rng = attack_stream(task);
  prepare_loader(loader, task, attack_rng);
  Sgd sgd(model, {static_cast<float>(spec.lr), static_cast<float>(spec.momentum), static_cast<float>(spec.weight_decay),
                  false});
  model.reseed_dropout(dropout_seed(task));
  model.train(true);
  LocalPass pass{model, loader, sgd, nullptr, task, attack_rng, spec.grad_clip};
  run_local_epochs(pass, spec.epochs, 0);
  model.set_all_trainable(true);
}

const std::vector<ParamSpec>& post_section_params() {
  static const std::vector<ParamSpec> specs = {
      {"rule",
       ParamType::Text,
       std::string("none"),
       "post-training step before evaluation of each client's own model",
       -kInf,
       kInf,
       {"none", "st", "head-tune", "fine-tune"}},
      {"epochs", ParamType::Integer, int64_t{5}, "epochs of the post step", 1, 1e6},
      {"batch", ParamType::Integer, int64_t{64}, "batch size of the post step", 1, 1e6},
      {"lr", ParamType::Real, 0.01, "learning rate of the post step", 0, 100},
      {"momentum", ParamType::Real, 0.0, "momentum of the post step", 0, 0.999999},
      {"when",
       ParamType::Text,
       std::string("final"),
       "final = before the last evaluation only; every = before every evaluation",
       -kInf,
       kInf,
       {"final", "every"}},
  };
  return specs;
}

PostSpec tuning_spec(const Params& p, const LocalSchedule& schedule, PostSpec::Kind kind, PostSpec::When when) {
  PostSpec spec;
  spec.kind = kind;
  spec.when = when;
  spec.epochs = p.integer("tune_epochs") > 0 ? p.integer("tune_epochs") : std::max<int64_t>(schedule.epochs, 1);
  spec.batch = p.integer("tune_batch") > 0 ? p.integer("tune_batch") : schedule.batch;
  spec.lr = p.real("tune_lr") > 0 ? p.real("tune_lr") : schedule.sgd.lr;
  spec.momentum = p.real("tune_momentum");
  spec.grad_clip = p.real("tune_clip");
  spec.weight_decay = p.real("tune_weight_decay");
  spec.lr_from_client = p.text("tune_lr_from") == "client";
  return spec;
}

PostSpec client_post_spec(const PostSpec& spec, const ClientState& state) {
  PostSpec own = spec;
  if (spec.lr_from_client) own.lr = stored_client_lr(state, spec.lr);
  return own;
}

std::vector<ParamSpec> tuning_params(int64_t epochs, double lr) {
  return {
      {"tune_epochs", ParamType::Integer, epochs, "epochs of the tuning step (0 = the training epochs)", 0, 1e6},
      {"tune_batch", ParamType::Integer, int64_t{0}, "batch of the tuning step (0 = the training batch)", 0, 1e6},
      {"tune_lr", ParamType::Real, lr, "learning rate of the tuning step (0 = the training lr)", 0, 100},
      {"tune_momentum", ParamType::Real, 0.0, "momentum of the tuning step", 0, 0.999999},
      {"tune_clip", ParamType::Real, 0.0, "clip the tuning gradient's global L2 norm to this (0 = off)", 0, 1e30},
      {"tune_weight_decay", ParamType::Real, 0.0, "L2 weight decay of the tuning step", 0, 1},
      {"tune_lr_from",
       ParamType::Text,
       std::string("tune_lr"),
       "tune_lr: tune at tune_lr | client: at the client's own lr as its decay left it after its last training "
       "(lr_decay_scope = client-epoch; FedFSA's code), tune_lr when it never trained",
       -1e30,
       1e30,
       {"tune_lr", "client"}},
  };
}

std::optional<PostSpec> post_spec_from_section(const Params& post) {
  if (post.text("rule") == "none") return std::nullopt;
  PostSpec spec;
  spec.kind = parse_post_kind(post.text("rule"));
  spec.when = post.text("when") == "every" ? PostSpec::When::EveryEvaluation : PostSpec::When::Final;
  spec.epochs = post.integer("epochs");
  spec.batch = post.integer("batch");
  spec.lr = post.real("lr");
  spec.momentum = post.real("momentum");
  return spec;
}

}  // namespace bastion

namespace bastion {
std::optional<PostSpec> ClientRule::post_step() const { return std::nullopt; }
}  // namespace bastion
