#include "fl/core/sampling.h"

#include <algorithm>
#include <numeric>

#include "tensor/error.h"

namespace bastion {

std::vector<int64_t> sample_without_replacement(int64_t n, int64_t k, Generator& rng) {
  BASTION_CHECK(k >= 0 && k <= n, "cannot draw ", k, " distinct values out of ", n);
  std::vector<int64_t> pool(static_cast<size_t>(n));
  std::iota(pool.begin(), pool.end(), 0);
  for (int64_t i = 0; i < k; ++i) std::swap(pool[i], pool[i + static_cast<int64_t>(rng.below(n - i))]);
  pool.resize(static_cast<size_t>(k));
  return pool;
}

std::vector<int64_t> choose_malicious(int64_t clients, int64_t count, const std::string& selection, Generator rng) {
  BASTION_CHECK(count >= 0 && count <= clients, "malicious count ", count, " must be in [0, ", clients, "]");
  std::vector<int64_t> chosen;
  if (selection == "last") {
    for (int64_t c = clients - count; c < clients; ++c) chosen.push_back(c);
  } else {
    BASTION_CHECK(selection == "random", "attack.selection '", selection, "': valid: random, last");
    chosen = sample_without_replacement(clients, count, rng);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<int64_t> sample_round(int64_t clients, int64_t per_round, const std::vector<int64_t>& malicious,
                                  int64_t forced_malicious, Generator rng) {
  BASTION_CHECK(per_round >= 1 && per_round <= clients, "clients per round ", per_round, " must be in [1, ", clients,
                "]");
  std::vector<int64_t> round;
  if (forced_malicious <= 0) {
    round = sample_without_replacement(clients, per_round, rng);
  } else {
    const int64_t f = static_cast<int64_t>(malicious.size());
    BASTION_CHECK(forced_malicious <= f && forced_malicious <= per_round, "cannot force ", forced_malicious,
                  " attackers into rounds of ", per_round, " with ", f, " malicious clients");
    std::vector<int64_t> benign;
    for (int64_t c = 0, j = 0; c < clients; ++c) {
      if (j < f && malicious[j] == c)
        ++j;
      else
        benign.push_back(c);
    }
    BASTION_CHECK(per_round - forced_malicious <= static_cast<int64_t>(benign.size()), "only ", benign.size(),
                  " benign clients for ", per_round - forced_malicious, " benign places per round");
    for (int64_t i : sample_without_replacement(f, forced_malicious, rng)) round.push_back(malicious[i]);
    for (int64_t i : sample_without_replacement(static_cast<int64_t>(benign.size()), per_round - forced_malicious, rng))
      round.push_back(benign[i]);
  }
  std::sort(round.begin(), round.end());
  return round;
}

}  // namespace bastion
