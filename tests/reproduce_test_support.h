// The base experiment of the reproduce tests (single process and MPI grid): a tiny synthetic
// federation with personalised evaluation, two rounds.
#pragma once

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

}  // namespace bastion::testing
