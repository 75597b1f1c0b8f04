// local: local training only (PFL-FACTS §3). Every client trains its own model (ClientState "model",
// the common initial model until its first round) with the sgd schedule and never communicates:
// shared_part = None, so nothing is uploaded and the server rule never runs. The client's own model is
// evaluated. participation: sampled (PFLlib: only the round's sampled clients train) or all (FedCAP's
// Local: every client trains every round).
// Memory: N x D floats. Cost: as sgd, for the clients that train.
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kModelKey = "model";

class LocalClient final : public ClientRule {
 public:
  explicit LocalClient(const Params& p) : schedule_(local_schedule(p)), all_(p.text("participation") == "all") {}

  ClientResult train(ClientTask& task) const override {
    std::vector<float> own(static_cast<size_t>(task.model.state_tensor().numel()));
    if (copy_stored(task.state, kModelKey, own, "local"))
      task.model.load_state_values(own);  // else the common initial model
    ClientResult result = train_with_schedule(task, schedule_);
    store_model(task.state, kModelKey, task.model);
    return result;
  }
  ClientTraits traits() const override {
    return {.shared = SharedPart::None, .on_device = true, .every_client_trains = all_};
  }

  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return copy_stored(state, kModelKey, out, "local");
  }

 private:
  LocalSchedule schedule_;
  bool all_;
};
}  // namespace

const std::vector<ParamSpec>& local_client_params() {
  static const std::vector<ParamSpec> specs = with_schedule_params({
      {"participation",
       ParamType::Text,
       std::string("sampled"),
       "sampled (the round's sampled clients train; PFLlib) | all (every client trains every round; FedCAP)",
       -kInf,
       kInf,
       {"sampled", "all"}},
  });
  return specs;
}

std::unique_ptr<ClientRule> make_local_client(const Params& params) { return std::make_unique<LocalClient>(params); }

}  // namespace bastion
