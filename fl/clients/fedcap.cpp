// fedcap (client part): FedCAP's client (FedCAP §IV-C; IMPLEMENTATION-FACTS §4.3, clientcap.py per_train).
// The client receives its customised model w_c (the start state the `fedcap` server rule sends,
// fl/defenses/fedcap.cpp) and, per batch,
//   1. steps its personal model v on  F_k(v) + (lambda/2) ||v - w_c||^2   (Ditto's proximal step),
//   2. steps w_c with plain SGD on the same batch;
// it uploads w_c^E - w_c (the run loop computes the difference from the start state), which the server
// recovers against the model it sent. This is Ditto's interleaved order (fl/clients/ditto.cpp), built
// here from this rule's parameters, so both methods share one implementation of the personal step.
// The customised model it last received is kept (ClientState "customised"): it is the received model of
// personalised evaluation (FedCAP's "g" curve, evaluated before local training; TAcc takes the better of g
// and the personal models' p, FedCAP §VI-A), and with personal = false (FedCAP Table IV ablations FedCAP1
// and FedCAP3: no personal model) also the client's own model. Memory: D floats per client.
// Schedule defaults: FedCAP's (IMPLEMENTATION-FACTS §4.2): 5 epochs, batch 10, lr 0.01, no momentum,
// drop_last. Cost: 2 x epochs x |D_k| forward/backward passes (1 x without the personal model).
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "tensor/error.h"

namespace bastion {

namespace {

constexpr const char* kCustomisedKey = "customised";

// The keys of `values` that `specs` declares (Ditto's or SGD's table), plus `extra`.
std::map<std::string, ParamValue> subset(const Params& p, const std::vector<ParamSpec>& specs,
                                         std::map<std::string, ParamValue> extra = {}) {
  for (const ParamSpec& spec : specs)
    if (!extra.contains(spec.name) && p.values().contains(spec.name)) extra[spec.name] = p.values().at(spec.name);
  return extra;
}

class FedcapClient final : public ClientRule {
 public:
  explicit FedcapClient(const Params& p) : personal_(p.boolean("personal")), schedule_(local_schedule(p)) {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: FedCAP trains with SGD (rho must be 0)");
    if (personal_)
      ditto_ = make_ditto_client(Params(p.scope(), ditto_client_params(),
                                        subset(p, ditto_client_params(), {{"order", std::string("interleaved")}})));
  }

  ClientResult train(ClientTask& task) const override {
    // What it received: the evaluated model without a personal model, FedCAP's "g" figure with one.
    store_model(task.state, kCustomisedKey, task.model);
    if (personal_) return ditto_->train(task);
    return train_with_schedule(task, schedule_);
  }

  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    if (personal_) return ditto_->personal_model(state, global, model, out);
    return copy_stored(state, kCustomisedKey, out, "fedcap");
  }
  bool received_model(const ClientState& state, std::span<float> out) const override {
    return copy_stored(state, kCustomisedKey, out, "fedcap");
  }
  ClientTraits traits() const override { return {.second_model = personal_, .on_device = true}; }

 private:
  bool personal_;
  LocalSchedule schedule_;
  std::unique_ptr<ClientRule> ditto_;
};

}  // namespace

const std::vector<ParamSpec>& fedcap_client_params() {
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> s = with_schedule_params({
        {"lambda", ParamType::Real, 0.1,
         "lambda of the personal model's proximal term (lambda/2)||v - w_c||^2 (FedCAP grid 0.1, 0.5, 1; Table IV 0.1)",
         0, 1e6},
        {"personal_lr", ParamType::Real, 0.0, "learning rate of the personal model (0 = lr; FedCAP: lr)", 0, 100},
        {"personal", ParamType::Boolean, true,
         "train the Ditto-style personal model (false: FedCAP1 / FedCAP3 of Table IV, evaluate the customised model)"},
    });
    for (ParamSpec& spec : s) {  // FedCAP's training defaults (IMPLEMENTATION-FACTS §4.2)
      if (spec.name == "epochs") spec.default_value = int64_t{5};
      if (spec.name == "batch") spec.default_value = int64_t{10};
      if (spec.name == "lr") spec.default_value = 0.01;
      if (spec.name == "momentum") spec.default_value = 0.0;
      if (spec.name == "drop_last") spec.default_value = true;
    }
    return s;
  }();
  return specs;
}

std::unique_ptr<ClientRule> make_fedcap_client(const Params& params) { return std::make_unique<FedcapClient>(params); }

}  // namespace bastion
