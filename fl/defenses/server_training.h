// The training parameters shared by the rules that train on the server's own data (fltrust, finetune):
// epochs, batch, lr, momentum, weight_decay (SPMC's public training: SGD lr 0.01, momentum 0.9, wd 1e-5).
#pragma once

#include <vector>

#include "fl/base/params.h"
#include "fl/defenses/server_rule.h"

namespace bastion {

// Appends the five training parameters to `specs` with the given default epoch count.
std::vector<ParamSpec> with_server_training_params(std::vector<ParamSpec> specs, int64_t default_epochs);
ServerTrainSpec server_train_spec(const Params& params, uint64_t seed);
// The server data of `in`, or an error naming `rule` when the run has none.
ServerData& require_server_data(const AggregationInput& in, const char* rule);

}  // namespace bastion
