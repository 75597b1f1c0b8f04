// spmc: LGAlign, the client part of SPMC (He et al., "SPMC: Self-Purifying Federated Backdoor Defense via
// Margin Contribution", §4.3, eqs. 5, 8, 9, Algorithm 1; authors' Optims/AlignedGradient.py and
// utils/training.py, IMPLEMENTATION-FACTS §2.5). Per round, client k:
//   1. rebuilds its coalition model (eq. 5, the "excepted model" of the code)
//        C_k = (w_g - a_k W_k^{t-1}) / (1 - a_k)
//      from the global model w_g it receives, its own trained model of the previous round W_k^{t-1}
//      (ClientState "spmc_previous") and the weight a_k the server rule gave that model (the message
//      "spmc_alpha", from the method server below); every column, BatchNorm buffers included, as the
//      code's state dict. Without a weight (round 1, or not aggregated last round) C_k = w_g: the code's
//      round-0 teacher is the common initial model.
//   2. trains with the sgd schedule; per batch (x, y), with s = f_w(x) and t = f_{C_k}(x) (no gradient):
//        G_d = grad CE(s, y)                                    (clipped by grad_clip as usual)
//        G_g = grad KL(softmax(t) || softmax(s))                (eq. 8, batch mean, T = 1; the code's
//                                                               soft-label CE has the same gradient)
//        G   = G_d projected off G_g where G_d . G_g < 0        (eq. 9, per tensor by default;
//                                                               fl/clients/lgalign.h), lambda = 1
//      and the SGD step uses G (weight decay added by the optimizer, after the projection, as PyTorch).
//   3. stores its trained model for the next round's coalition.
// The method server keeps a_k of the last round: the server rule's weights (AggregationOutput::weights),
// so the client rule runs with a rule that reports them (spmc: SPMC; fedavg: Table 1's "LGAlign only"),
// which the configuration check demands. The teacher runs in evaluation mode (the code's is in train
// mode: no difference for the BatchNorm- and dropout-free cnn-spmc).
// Not supported: SAM (rho > 0). A Training attack replaces the whole step, so an attacker of that kind
// takes no LGAlign step.
// Cost per step: one extra student forward/backward (the autograd releases the graph after a backward,
// so the distillation loss needs its own forward) and one teacher forward: about 2.3x an SGD step.
// Memory: one model (D floats) per client in ClientState, one weight per client on the server.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops.h"
#include "fl/clients/client_rule.h"
#include "fl/clients/lgalign.h"
#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kPreviousKey = "spmc_previous";  // ClientState: the client's last trained model
constexpr const char* kAlphaKey = "spmc_alpha";        // message: the client's last aggregation weight
// 1 - a_k below this: the client was (almost) the whole aggregate, no coalition to rebuild.
constexpr double kMinCoalitionShare = 1e-6;

// The server part: the weight each accepted upload got from the server rule, kept until the next round.
class SpmcServer final : public MethodServer {
 public:
  explicit SpmcServer(int64_t clients) : alpha_(static_cast<size_t>(clients), -1.0) {}

  void message(int64_t client, std::span<const float>, ClientMessage& out) const override {
    if (alpha_[static_cast<size_t>(client)] >= 0.0) out[kAlphaKey] = {static_cast<float>(alpha_[client])};
  }

  // Only this round's accepted clients keep a weight: a client that sat out has no coalition formula.
  void after_aggregation(const MethodRound& round, std::span<float>) override {
    BASTION_CHECK(static_cast<int64_t>(round.weights.size()) == round.n, "clients.rule = 'spmc' needs the server ",
                  "rule's aggregation weights (server.rule = \"spmc\" or \"fedavg\"); got ", round.weights.size(),
                  " weights for ", round.n, " uploads");
    std::fill(alpha_.begin(), alpha_.end(), -1.0);
    for (int64_t i = 0; i < round.n; ++i) alpha_[static_cast<size_t>((*round.clients)[i])] = round.weights[i];
  }

  bool needs_all_columns() const override { return false; }  // reads only the weights

  // Block "weights" (float64: exact across a resume; checkpoints written before the codec held floats).
  RuleState save_state() const override {
    RuleState state("spmc");
    state.put_reals("weights", alpha_);
    return state;
  }
  void load_state(const RuleState& state) override {
    const std::span<const float> legacy = state.legacy();
    const std::vector<double> weights =
        !legacy.empty() || state.empty() ? std::vector<double>(legacy.begin(), legacy.end()) : state.reals("weights");
    BASTION_CHECK(weights.size() == alpha_.size(), "spmc server state: ", weights.size(), " weights for ",
                  alpha_.size(), " clients");
    alpha_ = weights;
  }

 private:
  std::vector<double> alpha_;  // -1 = none
};

class SpmcClient final : public ClientRule {
 public:
  explicit SpmcClient(const Params& p)
      : schedule_(local_schedule(p)), lambda_(p.real("lambda")), per_tensor_(p.text("granularity") == "tensor") {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho must be 0: LGAlign edits plain SGD gradients");
  }

  ClientResult train(ClientTask& task) const override {
    BASTION_CHECK(task.second, "spmc: the run loop gave no teacher replica (traits().second_model)");
    Model& teacher = *task.second;
    std::vector<float> coalition = task.model.state_values();  // host copies: the models may be device replicas
    build_coalition(task, coalition);
    teacher.load_state_values(coalition);
    teacher.train(false);
    std::vector<float> ce_gradient, kl_gradient;
    const std::vector<GradientGroup> groups = gradient_groups(task.model);
    // On a device replica the projection runs on host copies of the two gradients (2 D floats down, D up
    // per step: small beside a step for SPMC's CNNs).
    const BatchHook align = [&](Model& model, const Tensor& x) {
      ce_gradient = model.gradient_tensor().to_vector();
      Tensor teacher_logits;
      {
        NoGradGuard no_grad;
        teacher_logits = teacher.forward(x);
      }
      model.zero_grad();
      kl_div(model.forward(x), teacher_logits, 1.0f).backward();  // grad now holds G_g
      kl_gradient = model.gradient_tensor().to_vector();
      align_gradient(ce_gradient, kl_gradient, groups, lambda_);
      model.gradient_tensor().copy_from(Tensor::from_vector({static_cast<int64_t>(ce_gradient.size())}, ce_gradient));
    };
    ClientResult result = train_with_schedule(task, schedule_, {.batch = &align});
    store_model(task.state, kPreviousKey, task.model);
    return result;
  }
  ClientTraits traits() const override {
    return {.second_model = true, .on_device = true, .needs_aggregation_weights = true};
  }
  std::unique_ptr<MethodServer> make_method_server(int64_t clients, int64_t) const override {
    return std::make_unique<SpmcServer>(clients);
  }

 private:
  LocalSchedule schedule_;
  double lambda_;
  bool per_tensor_;

  // C_k into `out` (eq. 5), which holds the global model on entry; the global model itself without a weight.
  void build_coalition(const ClientTask& task, std::span<float> out) const {
    const std::vector<float> global(out.begin(), out.end());
    if (!task.message) return;
    const auto found = task.message->find(kAlphaKey);
    if (found == task.message->end()) return;
    const double alpha = found->second.at(0);
    if (1.0 - alpha < kMinCoalitionShare) return;
    const auto previous = task.state.vectors.find(kPreviousKey);
    BASTION_CHECK(previous != task.state.vectors.end() && previous->second.size() == out.size(), "spmc: client ",
                  task.client, " has an aggregation weight but no stored model of ", out.size(), " values");
    for (size_t d = 0; d < out.size(); ++d)
      out[d] = static_cast<float>((global[d] - alpha * previous->second[d]) / (1.0 - alpha));
  }

  // One group per trainable parameter tensor (the code), or one for the whole trainable model.
  std::vector<GradientGroup> gradient_groups(const Model& model) const {
    std::vector<GradientGroup> groups;
    GradientGroup whole;
    for (const ParameterView& p : model.parameters()) {
      if (!p.value.requires_grad()) continue;
      if (per_tensor_)
        groups.push_back({{p.begin, p.end}});
      else
        whole.emplace_back(p.begin, p.end);
    }
    if (!per_tensor_) groups.push_back(std::move(whole));
    return groups;
  }
};
}  // namespace

const std::vector<ParamSpec>& spmc_client_params() {
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> table = with_schedule_params({
        {"lambda", ParamType::Real, 1.0, "projection strength lambda of eq. 9 (1: orthogonal to G_g; paper and code)",
         0, 10},
        {"granularity",
         ParamType::Text,
         std::string("tensor"),
         "where G_d . G_g is tested and projected: tensor = per parameter tensor (code) | model = the whole "
         "gradient as one vector",
         -kInf,
         kInf,
         {"tensor", "model"}},
    });
    // SPMC §5.1 and the code: 10 local epochs, SGD lr 0.01, momentum 0.9, weight decay 1e-5, batch 64;
    // the code's client loaders drop the last partial batch (IMPLEMENTATION-FACTS §2.3).
    for (ParamSpec& spec : table) {
      if (spec.name == "epochs") spec.default_value = int64_t{10};
      if (spec.name == "drop_last") spec.default_value = true;
      if (spec.name == "weight_decay") spec.default_value = 1e-5;
      if (spec.name == "rho") spec.max = 0.0, spec.doc = "must be 0 (LGAlign edits SGD gradients)";
    }
    return table;
  }();
  return specs;
}

std::unique_ptr<ClientRule> make_spmc_client(const Params& params) { return std::make_unique<SpmcClient>(params); }

}  // namespace bastion
