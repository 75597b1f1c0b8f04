#include "fl/defenses/server_training.h"

#include "tensor/error.h"

namespace bastion {

std::vector<ParamSpec> with_server_training_params(std::vector<ParamSpec> specs, int64_t default_epochs) {
  specs.push_back({"epochs", ParamType::Integer, default_epochs, "epochs over the server split", 1, 1e6});
  specs.push_back({"batch", ParamType::Integer, int64_t{64}, "batch size of the server's training", 1, 1e6});
  specs.push_back({"lr", ParamType::Real, 0.01, "learning rate of the server's training", 0, 100});
  specs.push_back({"momentum", ParamType::Real, 0.9, "SGD momentum of the server's training", 0, 0.999999});
  specs.push_back({"weight_decay", ParamType::Real, 1e-5, "weight decay of the server's training", 0, 1});
  return specs;
}

ServerTrainSpec server_train_spec(const Params& params, uint64_t seed) {
  ServerTrainSpec spec;
  spec.epochs = params.integer("epochs");
  spec.batch = params.integer("batch");
  spec.lr = params.real("lr");
  spec.momentum = params.real("momentum");
  spec.weight_decay = params.real("weight_decay");
  spec.seed = seed;
  return spec;
}

ServerData& require_server_data(const AggregationInput& in, const char* rule) {
  BASTION_CHECK(in.server_data != nullptr && in.server_data->size() > 0, rule,
                ": needs the server's own data; set data.server_fraction (e.g. 0.1)");
  return *in.server_data;
}

}  // namespace bastion
