// Who is malicious and who trains in a round (SPEC §3, §5).
//   choose_malicious: a fixed subset of `count` clients, drawn once per run from the seed ("random"),
//     or the `count` highest client ids ("last": SPMC's code marks the last int(n * rate) clients).
//   sample_round: m of N clients uniformly without replacement; with forced_malicious = k > 0, exactly
//     k attackers drawn uniformly from the malicious set plus m - k from the benign clients (pFedSAM's
//     continuous attack). Both lists come back sorted ascending, so the round's order (and with it the
//     aggregation order) never depends on the drawing order or on threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/random.h"

namespace bastion {

std::vector<int64_t> choose_malicious(int64_t clients, int64_t count, const std::string& selection, Generator rng);

std::vector<int64_t> sample_round(int64_t clients, int64_t per_round, const std::vector<int64_t>& malicious,
                                  int64_t forced_malicious, Generator rng);

// k distinct values of [0, n) uniformly (partial Fisher-Yates), in drawing order.
std::vector<int64_t> sample_without_replacement(int64_t n, int64_t k, Generator& rng);

}  // namespace bastion
