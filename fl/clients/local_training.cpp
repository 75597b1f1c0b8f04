#include "fl/clients/local_training.h"

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include <memory>

#include "fl/attacks/attack.h"
#include "kernels/cuda/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kClientLrKey = "lr";  // ClientState scalar: the client's decayed lr (client-epoch)
constexpr uint64_t kAttackStream = 0x61747461636bULL, kDropoutStream = 0x64726f70ULL;

}  // namespace

double local_step(LocalPass& pass, const Tensor& host_x, const LabelTensor& y) {
  // The loader builds batches on the host; a device replica (run.device = "cuda") gets a copy.
  const Tensor x = host_x.to(pass.model.device());
  const Attack* attack = pass.task.attack;
  if (pass.allow_attack && attack && attack->kind() == AttackKind::Training) {
    TrainingStepContext context{pass.model, pass.sgd, x, y, pass.attack_rng};
    return attack->training_step(context);
  }
  auto loss_and_backward = [&]() {
    pass.model.zero_grad();
    const Tensor logits = pass.model.forward(x);
    Tensor loss = cross_entropy(logits, repeat_labels(y, logits.size(0)));
    if (pass.extra_loss) loss = add(loss, (*pass.extra_loss)(pass.model, y));
    loss.backward();
    if (!pass.sam) clip_gradient_norm(pass.model, pass.grad_clip);  // SAM clips per its options
    if (pass.batch_hook) (*pass.batch_hook)(pass.model, x);
    if (pass.hook) (*pass.hook)(pass.model);
    return loss.item();
  };
  if (pass.sam) return pass.sam->step(loss_and_backward);
  const float loss = loss_and_backward();
  pass.sgd.step();
  return loss;
}

LabelTensor repeat_labels(const LabelTensor& y, int64_t rows) {
  const int64_t n = y.size();
  if (rows == n) return y;
  BASTION_CHECK(n > 0 && rows % n == 0, "the model returned ", rows, " rows of logits for a batch of ", n);
  std::vector<int32_t> repeated(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) repeated[i] = y[i % n];
  return LabelTensor::from_vector(std::move(repeated));
}

double LocalSchedule::decay_at(int64_t round) const {
  if (decay_per_client_epoch) return 1.0;  // the client's own lr carries the decay (client_lr)
  return std::pow(lr_decay, (round - 1) / lr_decay_every);
}

SamOptions LocalSchedule::sam_options(float radius) const {
  SamOptions options;
  options.rho = radius;
  options.clip_before = clip_before_ascent ? grad_clip : 0.0;
  options.clip_after = clip_after_ascent ? grad_clip : 0.0;
  options.perturbation = sam_perturbation;
  return options;
}

float client_lr(const LocalSchedule& schedule, const ClientTask& task) {
  if (!schedule.decay_per_client_epoch) return schedule.lr_at(task.round);
  return static_cast<float>(stored_client_lr(task.state, schedule.sgd.lr));
}

double stored_client_lr(const ClientState& state, double fallback) {
  const auto found = state.scalars.find(kClientLrKey);
  return found == state.scalars.end() ? fallback : found->second;
}

ClientResult run_scheduled_epochs(LocalPass& pass, const LocalSchedule& schedule, ClientState& state) {
  if (!schedule.decay_per_client_epoch) return run_local_epochs(pass, schedule.epochs, schedule.steps);
  ClientResult total;
  double loss_sum = 0.0;
  for (int64_t epoch = 0; epoch < schedule.epochs; ++epoch) {
    const ClientResult one = run_local_epochs(pass, 1, 0, epoch);
    loss_sum += one.train_loss * static_cast<double>(one.steps);
    total.steps += one.steps;
    total.samples += one.samples;
    // StepLR(step_size = 1 epoch, gamma = lr_decay), stored in double so a long run does not drift.
    const auto found = state.scalars.find(kClientLrKey);
    const double lr = (found == state.scalars.end() ? schedule.sgd.lr : found->second) * schedule.lr_decay;
    state.scalars[kClientLrKey] = lr;
    pass.sgd.set_lr(static_cast<float>(lr));
  }
  total.train_loss = total.steps > 0 ? loss_sum / static_cast<double>(total.steps) : 0.0;
  return total;
}

float LocalSchedule::lr_at(int64_t round) const { return static_cast<float>(sgd.lr * decay_at(round)); }

std::vector<ParamSpec> local_schedule_params() {
  return {
      {"epochs", ParamType::Integer, int64_t{2}, "local epochs per round (ignored when steps > 0)", 0, 1e6},
      {"steps", ParamType::Integer, int64_t{0},
       "exactly this many local steps per round instead of epochs (0 = use epochs)", 0, 1e9},
      {"batch", ParamType::Integer, int64_t{64}, "batch size", 1, 1e6},
      {"lr", ParamType::Real, 0.01, "learning rate", 0, 100},
      {"momentum", ParamType::Real, 0.9, "SGD momentum (PyTorch semantics)", 0, 0.999999},
      {"weight_decay", ParamType::Real, 0.0, "L2 weight decay", 0, 1},
      {"nesterov", ParamType::Boolean, false, "Nesterov momentum"},
      {"lr_decay", ParamType::Real, 1.0, "multiply lr by this every lr_decay_every rounds", 1e-6, 1},
      {"lr_decay_every", ParamType::Integer, int64_t{1}, "rounds between lr decays", 1, 1e6},
      {"keep_momentum", ParamType::Boolean, false, "keep the momentum buffer across rounds (client state)"},
      {"grad_clip", ParamType::Real, 0.0, "clip the gradient's global L2 norm to this (0 = off)", 0, kInf},
      {"drop_last", ParamType::Boolean, false, "drop the last partial batch of each epoch"},
      {"shuffle", ParamType::Boolean, true,
       "shuffle the client's samples every epoch (false: in index order every epoch, FedCAP's code)"},
      {"rho", ParamType::Real, 0.0, "SAM radius: > 0 makes every step a SAM step (FedSAM's client); 0 = plain SGD", 0,
       10},
      {"sam_clip",
       ParamType::Text,
       std::string("both"),
       "SAM steps: where grad_clip applies: both (before the ascent and on the final direction; FedFSA's codes) | "
       "after (the final direction only; FL-Simulator) | before",
       -kInf,
       kInf,
       {"both", "after", "before"}},
      {"sam_perturbation",
       ParamType::Text,
       std::string("global"),
       "SAM steps: e = rho d / ||d|| over every trainable tensor (global) | rho d_k / ||d_k|| per tensor (per-tensor) "
       "| "
       "rho d (none) | rho w^2 d / || |w| d || (adaptive: ASAM)",
       -kInf,
       kInf,
       {"global", "per-tensor", "none", "adaptive"}},
      {"lr_decay_scope",
       ParamType::Text,
       std::string("round"),
       "round: lr_t = lr * lr_decay^floor((round - 1) / lr_decay_every) | client-epoch: the client's own lr decays "
       "by lr_decay after each of its local epochs and is kept across rounds (FedFSA's codes)",
       -kInf,
       kInf,
       {"round", "client-epoch"}},
  };
}

std::vector<ParamSpec> with_schedule_params(std::vector<ParamSpec> extra) {
  std::vector<ParamSpec> specs = local_schedule_params();
  specs.insert(specs.end(), extra.begin(), extra.end());
  return specs;
}

LocalSchedule local_schedule(const Params& p) {
  LocalSchedule s;
  s.epochs = p.integer("epochs");
  s.steps = p.integer("steps");
  s.batch = p.integer("batch");
  s.sgd = {static_cast<float>(p.real("lr")), static_cast<float>(p.real("momentum")),
           static_cast<float>(p.real("weight_decay")), p.boolean("nesterov")};
  s.lr_decay = p.real("lr_decay");
  s.lr_decay_every = p.integer("lr_decay_every");
  s.keep_momentum = p.boolean("keep_momentum");
  s.grad_clip = p.real("grad_clip");
  s.drop_last = p.boolean("drop_last");
  s.shuffle = p.boolean("shuffle");
  s.rho = static_cast<float>(p.real("rho"));
  s.clip_before_ascent = p.text("sam_clip") != "after";
  s.clip_after_ascent = p.text("sam_clip") != "before";
  const std::string perturbation = p.text("sam_perturbation");
  s.sam_perturbation = perturbation == "per-tensor" ? SamOptions::Perturbation::PerTensor
                       : perturbation == "none"     ? SamOptions::Perturbation::None
                       : perturbation == "adaptive" ? SamOptions::Perturbation::Adaptive
                                                    : SamOptions::Perturbation::Global;
  s.decay_per_client_epoch = p.text("lr_decay_scope") == "client-epoch";
  BASTION_CHECK(!s.decay_per_client_epoch || s.steps == 0, p.scope(),
                ".lr_decay_scope = \"client-epoch\" decays per local epoch: count epochs, not steps");
  BASTION_CHECK(s.epochs > 0 || s.steps > 0, p.scope(), ": set epochs or steps to at least 1");
  BASTION_CHECK(!s.sgd.nesterov || s.sgd.momentum > 0.0f, p.scope(), ".nesterov needs momentum > 0");
  return s;
}

Generator attack_stream(const ClientTask& task) { return Generator(task.seed).fork(kAttackStream); }
uint64_t dropout_seed(const ClientTask& task) { return Generator(task.seed).fork(kDropoutStream).next_u64(); }

void prepare_loader(BatchLoader& loader, const ClientTask& task, Generator& attack_rng) {
  if (!is_identity_transform(task.transform)) loader.set_transform(task.transform);
  if (!task.attack) return;
  DataAttackContext context{task.data,  task.indices,       task.attacker_index,         task.client,
                            task.round, attack_rng.fork(0), Generator(task.client_seed), &task.transform};
  task.attack->poison_loader(loader, context);
}

ClientLoader::ClientLoader(const ClientTask& task, const LocalSchedule& schedule)
    : attack_rng(attack_stream(task)),
      loader(task.data, schedule.batch, schedule.shuffle, task.seed, task.indices, schedule.drop_last) {
  prepare_loader(loader, task, attack_rng);
}

ClientResult run_epochs(BatchLoader& loader, int64_t epochs, int64_t steps, int64_t first_epoch, const BatchStep& step,
                        const std::string& who) {
  ClientResult result;
  double loss_sum = 0.0;
  const int64_t total_steps = steps > 0 ? steps : std::numeric_limits<int64_t>::max();
  Tensor x;
  LabelTensor y;
  for (int64_t epoch = 0; result.steps < total_steps && (steps > 0 || epoch < epochs); ++epoch) {
    loader.start_epoch(first_epoch + epoch);
    int64_t batches = 0;
    while (result.steps < total_steps && loader.next(x, y)) {
      loss_sum += step(x, y, result.steps);
      result.samples += x.size(0);
      ++result.steps;
      ++batches;
    }
    BASTION_CHECK(batches > 0, who, " has no batch (", loader.num_samples(), " samples, batch ", loader.batch_size(),
                  ")");
  }
  result.train_loss = result.steps > 0 ? loss_sum / static_cast<double>(result.steps) : 0.0;
  return result;
}

ClientResult run_local_epochs(LocalPass& pass, int64_t epochs, int64_t steps, int64_t first_epoch) {
  return run_epochs(
      pass.loader, epochs, steps, first_epoch,
      [&](const Tensor& x, const LabelTensor& y, int64_t) { return local_step(pass, x, y); },
      "client " + std::to_string(pass.task.client));
}

ClientResult train_with_schedule(ClientTask& task, const LocalSchedule& schedule, const TrainingHooks& hooks) {
  ClientLoader data(task, schedule);
  SgdOptions options = schedule.sgd;
  options.lr = client_lr(schedule, task);
  Sgd sgd(task.model, options);
  restore_momentum(schedule, task.state, sgd, "momentum");
  task.model.reseed_dropout(dropout_seed(task));
  task.model.train(true);
  std::unique_ptr<Sam> sam;
  if (hooks.sam)
    sam = std::make_unique<Sam>(task.model, sgd, *hooks.sam);
  else if (schedule.rho > 0.0f)
    sam = std::make_unique<Sam>(task.model, sgd, schedule.sam_options(schedule.rho));
  LocalPass pass{task.model, data.loader, sgd, sam.get(), task, data.attack_rng, schedule.grad_clip};
  pass.extra_loss = hooks.extra_loss;
  pass.hook = hooks.gradient;
  pass.batch_hook = hooks.batch;
  ClientResult result = run_scheduled_epochs(pass, schedule, task.state);
  if (sam) sam->finish_pass();  // FedSMOO's dual back from the device before the rule uploads it
  save_momentum(schedule, task.state, sgd, "momentum");
  return result;
}

double proximal_term(const Model& model, std::span<const float> reference, double lambda) {
  const std::span<const float> w = model.flat_parameters();
  double sum = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double d = static_cast<double>(w[i]) - reference[i];
    sum += d * d;
  }
  return 0.5 * lambda * sum;
}

void add_proximal_gradient(Model& model, std::span<const float> reference, double lambda) {
  const std::span<const float> w = model.flat_parameters();
  const std::span<float> grad = model.flat_gradients();
  const float l = static_cast<float>(lambda);
  for (const ParameterView& p : model.parameters()) {
    if (!p.value.requires_grad()) continue;
    for (int64_t i = p.begin; i < p.end; ++i) grad[i] += l * (w[i] - reference[i]);
  }
}

void add_proximal_gradient(Model& model, const Tensor& reference, double lambda) {
  BASTION_CHECK(reference.device() == model.device() && reference.numel() >= model.num_parameters(),
                "proximal gradient: reference of ", reference.numel(), " values on ", device_name(reference.device()),
                " for a model of ", model.num_parameters(), " parameters on ", device_name(model.device()));
  if (model.device() == Device::CPU)
    return add_proximal_gradient(
        model, std::span<const float>(reference.data(), static_cast<size_t>(reference.numel())), lambda);
  const float l = static_cast<float>(lambda);
  float* grad = model.gradient_tensor().data();
  const float* w = model.state_tensor().data();
  for (const ParameterView& p : model.parameters()) {
    if (!p.value.requires_grad()) continue;
    vector_axpy_cuda(grad + p.begin, l, w + p.begin, p.end - p.begin, cuda_stream());
    vector_axpy_cuda(grad + p.begin, -l, reference.data() + p.begin, p.end - p.begin, cuda_stream());
  }
}

namespace {
void add_sign_gradient_host(const float* w, float* grad, const Model& model, std::span<const float> reference,
                            float l) {
  for (const ParameterView& p : model.parameters()) {
    if (!p.value.requires_grad()) continue;
    for (int64_t i = p.begin; i < p.end; ++i)
      grad[i] += l * static_cast<float>((w[i] > reference[i]) - (w[i] < reference[i]));
  }
}
}  // namespace

void add_sign_gradient(Model& model, std::span<const float> reference, double lambda) {
  const float l = static_cast<float>(lambda);
  if (model.device() == Device::CPU)
    return add_sign_gradient_host(model.flat_parameters().data(), model.flat_gradients().data(), model, reference, l);
  // A device replica: on host copies of w and the gradient (2 D floats down, D up per step); the sign
  // term is exact, so the two devices add the same values.
  const std::vector<float> w = model.parameter_values();
  std::vector<float> grad = model.gradient_tensor().to_vector();
  add_sign_gradient_host(w.data(), grad.data(), model, reference, l);
  model.gradient_tensor().copy_from(Tensor::from_vector({static_cast<int64_t>(grad.size())}, grad));
}

void restore_momentum(const LocalSchedule& schedule, const ClientState& state, Sgd& sgd, const std::string& key) {
  if (!schedule.keep_momentum || schedule.sgd.momentum <= 0.0f) return;
  const auto found = state.vectors.find(key);
  if (found != state.vectors.end()) sgd.load_momentum(found->second);
}

void save_momentum(const LocalSchedule& schedule, ClientState& state, Sgd& sgd, const std::string& key) {
  if (!schedule.keep_momentum || schedule.sgd.momentum <= 0.0f) return;
  state.vectors[key] = sgd.momentum_values();
}

bool copy_stored(const ClientState& state, const std::string& key, std::span<float> out, const char* rule) {
  const auto found = state.vectors.find(key);
  if (found == state.vectors.end()) return false;
  BASTION_CHECK(found->second.size() == out.size(), rule, ": stored ", key, " of ", found->second.size(),
                " values, the model has ", out.size());
  std::copy(found->second.begin(), found->second.end(), out.begin());
  return true;
}

void store(ClientState& state, const std::string& key, std::span<const float> values) {
  state.vectors[key].assign(values.begin(), values.end());
}

void store_model(ClientState& state, const std::string& key, const Model& model) {
  state.vectors[key] = model.state_values();
}

std::vector<std::pair<int64_t, int64_t>> head_columns(const Model& model) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const ParameterView& p : model.parameters())
    if (p.is_head) ranges.emplace_back(p.begin, p.end);
  return ranges;
}

void copy_head(const Model& model, std::span<const float> from, std::span<float> to) {
  for (const auto& [begin, end] : head_columns(model))
    std::copy(from.begin() + begin, from.begin() + end, to.begin() + begin);
}

std::vector<float> gather_head(const Model& model, std::span<const float> state) {
  std::vector<float> head;
  for (const auto& [begin, end] : head_columns(model))
    head.insert(head.end(), state.begin() + begin, state.begin() + end);
  return head;
}

void scatter_head(const Model& model, std::span<const float> head, std::span<float> state) {
  size_t next = 0;
  for (const auto& [begin, end] : head_columns(model)) {
    BASTION_CHECK(next + static_cast<size_t>(end - begin) <= head.size(), "stored head of ", head.size(),
                  " values is too short for model ", model.name());
    std::copy_n(head.begin() + static_cast<std::ptrdiff_t>(next), end - begin, state.begin() + begin);
    next += static_cast<size_t>(end - begin);
  }
  BASTION_CHECK(next == head.size(), "stored head of ", head.size(), " values, model ", model.name(), " has ", next);
}

bool global_with_stored_head(const ClientState& state, const std::string& key, std::span<const float> global,
                             const Model& model, std::span<float> out) {
  const auto stored = state.vectors.find(key);
  if (stored == state.vectors.end()) return false;
  std::copy(global.begin(), global.end(), out.begin());
  scatter_head(model, stored->second, out);
  return true;
}

}  // namespace bastion
