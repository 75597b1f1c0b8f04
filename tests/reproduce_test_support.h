// The base experiment of the reproduce tests (single process and MPI grid): a tiny synthetic
// federation with personalised evaluation, two rounds; and the small preset the reproduce and preset
// tests share.
#pragma once

#include <string>

namespace bastion::testing {

inline constexpr const char* kReproduceBase = R"(
name = "base"
seed = 3
rounds = 2
[data]
dataset = "synthetic"
partition = "dirichlet:0.5"
clients = 8
min_size = 5
local_test = "like-train"
[model]
name = "mlp"
[clients]
per_round = 4
[eval]
batch = 128
personalized = true
)";

// A two-column preset (ACC from p_acc with tolerance 3, global from acc; 2 seeds, quick = 1 round) over
// base.toml, followed by `rows`; and two rows for it (FedAvg, FedRep) with paper numbers.
inline std::string preset_text(const std::string& rows) {
  return std::string(R"(title = "A tiny table"
paper = "nobody 2026"
base = "base.toml"
seeds = 2
quick = ["rounds=1"]
[[columns]]
name = "ACC"
metric = "p_acc"
tolerance = 3
[[columns]]
name = "global"
metric = "acc"
)") + rows;
}

inline constexpr const char* kTwoRows = R"(
[[rows]]
name = "FedAvg"
set = ["clients.rule=sgd", "clients.sgd.epochs=1", "clients.sgd.batch=16"]
paper = [50.0, "-"]
[[rows]]
name = "FedRep"
set = ["clients.rule=fedrep", "clients.fedrep.batch=16"]
paper = [60, 10.5]
)";

}  // namespace bastion::testing
