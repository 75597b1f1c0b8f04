// fedcr: FedCR (Zhang et al. ICML'23; PFL-FACTS §11; haozzh/FedCR code_FedCR/models/distributed_training_utils.py)
// on the stochastic-encoder model cnn-fedcr (nn/fedcr_model.h). Per round, a sampled client:
//   1. takes the global encoder (conv1, conv2, fc1, fc2, fc3) and keeps its own head fc4 (ClientState
//      "head"; the initial head before its first participation), as FedCR syncs only the shared keys;
//   2. trains every parameter with SGD for `epochs` epochs (clip grad_clip), per batch
//        loss = mean over S_train samples and the batch of CE(fc4(z), y)
//             + beta * mean_n KL( N(mu_y[n], sigma_y[n]) || N(mu(x_n), sigma(x_n)) )
//      with (mu_y, sigma_y) the server's global Gaussian of the sample's class (N(0, 1) before the server
//      has one; the message "fedcr_prior");
//   3. during its last local epoch fuses the encoder Gaussians of its samples per class by the running
//      two-expert product (fl/clients/fedcr.h) and sends them as its extra upload;
//   4. uploads the encoder only (shared_part = Body; fc4 never leaves the client).
// The server part (FedcrServer) keeps the global class-conditional Gaussians: after each round, per
// class, the product of experts of the accepted clients that have the class, with a N(0, 1) prior term,
// mixed in with weight beta2 (1 = replace). The server rule aggregates the encoders as for any rule.
// tune = final-head (default): after the last round every evaluated client trains its head fc4 alone
// (FedCR's last round; FedFSA's extra round), through the post step (fl/clients/post_step.h).
// Not supported: SAM (rho > 0) and step counts (steps > 0), since the fusion needs the last epoch; a
// Training attack replaces the whole step, so an attacker sends no Gaussians.
// Cost: S_train copies of fc4's forward/backward per sample (small next to the trunk); memory: one head
// per client, C x d_Z x 2 floats on the server. On a device replica (run.device = "cuda") the stored head
// goes in through a host copy of the state, the prior rows go up per batch, and the last epoch's
// encodings come down for the fusion (N x 2 d_Z floats a batch).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/fedcr.h"
#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "fl/clients/post_step.h"
#include "nn/fedcr_model.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kHeadKey = "head";          // ClientState: the client's fc4
constexpr const char* kPriorKey = "fedcr_prior";  // message: the packed global class Gaussians

FedcrCnn& network_of(Model& model) {
  FedcrCnn* net = fedcr_network(model);
  BASTION_CHECK(net, "fedcr: needs the stochastic-encoder model cnn-fedcr (nn/fedcr_model.h), got ", model.name());
  return *net;
}

// The rows (N, d) of the prior for labels y.
std::pair<Tensor, Tensor> prior_rows(const ClassGaussians& prior, const LabelTensor& y) {
  const int64_t N = y.size(), d = prior.dim;
  Tensor mu = Tensor::empty({N, d}), sigma = Tensor::empty({N, d});
  for (int64_t n = 0; n < N; ++n) {
    BASTION_CHECK(y[n] >= 0 && y[n] < prior.classes, "fedcr: label ", y[n], " outside [0, ", prior.classes, ")");
    const size_t at = static_cast<size_t>(y[n]) * static_cast<size_t>(d);
    for (int64_t j = 0; j < d; ++j) {
      mu.data()[n * d + j] = static_cast<float>(prior.mu[at + j]);
      sigma.data()[n * d + j] = static_cast<float>(prior.sigma[at + j]);
    }
  }
  return {mu, sigma};
}

class FedcrServer final : public MethodServer {
 public:
  explicit FedcrServer(double beta2) : beta2_(beta2) {}

  void message(int64_t, std::span<const float>, ClientMessage& out) const override {
    if (global_.classes > 0) out[kPriorKey] = pack_class_gaussians(global_);
  }

  // The round's Gaussians: every accepted client's finite upload (a non-finite one is skipped).
  void after_aggregation(const MethodRound& round, std::span<float>) override {
    std::vector<ClassGaussians> experts;
    for (const std::span<const float> extra : *round.extra) {
      if (extra.empty() || !std::all_of(extra.begin(), extra.end(), [](float v) { return std::isfinite(v); })) continue;
      experts.push_back(unpack_class_gaussians(extra));
    }
    if (experts.empty()) return;
    if (global_.classes == 0) global_ = ClassGaussians(experts[0].classes, experts[0].dim);  // N(0, 1) everywhere
    mix_product_of_experts(global_, experts, beta2_);
  }

  bool needs_all_columns() const override { return false; }

  // Blocks: "shape" (classes, d_Z), "present" (0/1 per class), "mu" and "sigma" (classes x d_Z, float64:
  // the server's Gaussians are doubles, so a resumed run continues exactly).
  RuleState save_state() const override {
    RuleState state("fedcr");
    if (global_.classes == 0) return state;
    state.put_ints("shape", {global_.classes, global_.dim});
    state.put_ints("present", std::vector<int64_t>(global_.present.begin(), global_.present.end()));
    state.put_reals("mu", global_.mu);
    state.put_reals("sigma", global_.sigma);
    return state;
  }

  void load_state(const RuleState& state) override {
    if (state.empty()) return void(global_ = ClassGaussians());
    if (!state.legacy().empty()) return void(global_ = unpack_class_gaussians(state.legacy()));
    const std::vector<int64_t>& shape = state.ids_below("shape", std::numeric_limits<int32_t>::max());
    BASTION_CHECK(shape.size() == 2 && shape[0] >= 1 && shape[1] >= 1, "fedcr state: shape should be (classes, d_Z)");
    ClassGaussians g(shape[0], shape[1]);
    const std::vector<int64_t>& present = state.ids_below("present", 2);
    BASTION_CHECK(present.size() == g.present.size() && state.reals("mu").size() == g.mu.size() &&
                      state.reals("sigma").size() == g.sigma.size(),
                  "fedcr state: blocks of other sizes than ", shape[0], " classes of d_Z ", shape[1]);
    g.present.assign(present.begin(), present.end());
    g.mu = state.reals("mu");
    g.sigma = state.reals("sigma");
    global_ = std::move(g);
  }

 private:
  double beta2_;
  ClassGaussians global_;  // classes = 0 until the first upload: every class N(0, 1)
};

class FedcrClient final : public ClientRule {
 public:
  explicit FedcrClient(const Params& p) : schedule_(local_schedule(p)), beta_(p.real("beta")), beta2_(p.real("beta2")) {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: FedCR trains with SGD (FedFSA applied no SAM to it)");
    BASTION_CHECK(schedule_.steps == 0, p.scope(), ".steps: FedCR fuses over its last local epoch: count epochs");
    if (p.text("tune") == "final-head")
      post_ = tuning_spec(p, schedule_, PostSpec::Kind::HeadTune, PostSpec::When::Final);
  }

  ClientResult train(ClientTask& task) const override {
    Model& model = task.model;
    FedcrCnn& net = network_of(model);
    const int64_t C = model.num_classes(), d = net.bottleneck().latent;
    const float alpha = net.bottleneck().alpha;
    // The state and the encodings go through host copies: the model may be a device replica.
    if (const auto stored = task.state.vectors.find(kHeadKey); stored != task.state.vectors.end()) {
      std::vector<float> state = model.state_values();
      scatter_head(model, stored->second, state);
      model.load_state_values(state);
    }
    const ClassGaussians prior = received_prior(task, C, d);
    ClassFusion fusion(C, d);
    const int64_t per_epoch = batches_per_epoch(static_cast<int64_t>(task.indices.size()));
    int64_t step = 0;
    const LossTerm regulariser = [&](Model&, const LabelTensor& y) {
      const Tensor& encoding = net.last_encoding();
      if (step++ / per_epoch == schedule_.epochs - 1) fusion.add_batch(encoding.to(Device::CPU), y, alpha);
      const auto [mu, sigma] = prior_rows(prior, y);
      return scale(gaussian_kl(encoding, mu.to(encoding.device()), sigma.to(encoding.device()), alpha),
                   static_cast<float>(beta_));
    };
    ClientResult result = train_with_schedule(task, schedule_, {.extra_loss = &regulariser});
    task.state.vectors[kHeadKey] = gather_head(model, model.state_values());
    if (std::any_of(fusion.gaussians().present.begin(), fusion.gaussians().present.end(), [](uint8_t p) { return p; }))
      result.extra_upload = pack_class_gaussians(fusion.gaussians());
    return result;
  }

  ClientTraits traits() const override { return {.shared = SharedPart::Body, .on_device = true}; }

  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return global_with_stored_head(state, kHeadKey, global, model, out);
  }

  std::optional<PostSpec> post_step() const override { return post_; }

  std::unique_ptr<MethodServer> make_method_server(int64_t, int64_t) const override {
    return std::make_unique<FedcrServer>(beta2_);
  }

 private:
  LocalSchedule schedule_;
  double beta_, beta2_;
  std::optional<PostSpec> post_;

  int64_t batches_per_epoch(int64_t n) const {
    const int64_t b = schedule_.batch;
    return std::max<int64_t>(1, schedule_.drop_last ? n / b : (n + b - 1) / b);
  }

  static ClassGaussians received_prior(const ClientTask& task, int64_t C, int64_t d) {
    if (task.message) {
      const auto found = task.message->find(kPriorKey);
      if (found != task.message->end()) {
        ClassGaussians prior = unpack_class_gaussians(found->second);
        BASTION_CHECK(prior.classes == C && prior.dim == d, "fedcr: the server's Gaussians are ", prior.classes, "x",
                      prior.dim, ", the model has ", C, " classes and d_Z ", d);
        return prior;
      }
    }
    return ClassGaussians(C, d);
  }
};
}  // namespace

const std::vector<ParamSpec>& fedcr_client_params() {
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> extra = {
        {"beta", ParamType::Real, 0.001, "weight of the KL regulariser (FedCR's beta; FedFSA Table 4: 0.001)", 0, 1e6},
        {"beta2", ParamType::Real, 1.0,
         "server mixing of the product of experts into the global Gaussians (1 = replace, the authors' command; "
         "options.py default 0 = never update)",
         0, 1},
        {"tune",
         ParamType::Text,
         std::string("final-head"),
         "final-head: after the last round every evaluated client trains its head fc4 alone (FedCR's last round, "
         "FedFSA's extra round) | none",
         -kInf,
         kInf,
         {"none", "final-head"}},
    };
    for (ParamSpec& spec : tuning_params(0, 0.0)) extra.push_back(spec);
    std::vector<ParamSpec> table = with_schedule_params(extra);
    // FedCR's options.py: lr 0.01, 2 local epochs, batch 48, no momentum, clip 10, lr x 0.997 per round.
    for (ParamSpec& spec : table) {
      if (spec.name == "lr") spec.default_value = 0.01;
      if (spec.name == "epochs") spec.default_value = int64_t{2};
      if (spec.name == "batch") spec.default_value = int64_t{48};
      if (spec.name == "momentum") spec.default_value = 0.0;
      if (spec.name == "grad_clip") spec.default_value = 10.0;
      if (spec.name == "lr_decay") spec.default_value = 0.997;
      if (spec.name == "rho") spec.max = 0.0, spec.doc = "must be 0 (FedCR trains with SGD)";
      if (spec.name == "steps") spec.max = 0.0, spec.doc = "must be 0 (the fusion runs over the last local epoch)";
    }
    return table;
  }();
  return specs;
}

std::unique_ptr<ClientRule> make_fedcr_client(const Params& params) { return std::make_unique<FedcrClient>(params); }

}  // namespace bastion
