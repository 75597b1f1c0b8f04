// The table of every FL unit. Add a unit: write its file (header with the math, parameter table,
// make function), declare the pair in its folder's header, and add one row here.
#include "fl/registry.h"

#include "tensor/error.h"

namespace bastion {

const std::vector<ClientRuleEntry>& client_rule_registry() {
  static const std::vector<ClientRuleEntry> table = {
      {{"sgd", "local SGD for E epochs or K steps (FedAvg's client)", "McMahan et al. 2017", &sgd_client_params()},
       make_sgd_client},
  };
  return table;
}

const std::vector<ServerRuleEntry>& server_rule_registry() {
  static const std::vector<ServerRuleEntry> table = {
      {{"fedavg", "sample-weighted (or uniform) mean of the updates, times a server learning rate",
        "McMahan et al. 2017", &fedavg_params()},
       make_fedavg},
  };
  return table;
}

const std::vector<AttackEntry>& attack_registry() {
  static const std::vector<AttackEntry> table = {
      {{"badnets", "pixel-trigger backdoor on a share of the attackers' samples", "Gu et al. 2017; SPMC, FedCPA, pFedSAM", &badnets_params()},
       AttackKind::Data, make_badnets},
      {{"dba", "distributed backdoor: attacker j plants part j mod 4 of the global trigger", "Xie et al. 2020 (DBA)", &dba_params()},
       AttackKind::Data, make_dba},
      {{"bapfl", "backdoor of the shared body only, trained against a noisy head", "Ye et al. 2024 (BapFL)", &bapfl_params()},
       AttackKind::Training, make_bapfl},
      {{"label-flip", "relabel a share of the attackers' samples (shift, reverse or random permutation)", "FedCAP A1, SPMC, FedCPA", &label_flip_params()},
       AttackKind::Data, make_label_flip},
      {{"sign-flip", "upload the negated update", "FedCAP A4", &sign_flip_params()},
       AttackKind::Upload, make_sign_flip},
      {{"scale", "model replacement: upload lambda times the update", "Bagdasaryan et al. 2020", &scale_params()},
       AttackKind::Upload, make_scale},
      {{"gaussian", "upload Gaussian noise instead of the update", "FedCAP A2, FedCPA", &gaussian_params()},
       AttackKind::Upload, make_gaussian},
      {{"lie", "a little is enough: mean - z * std of the benign updates", "Baruch et al. 2019", &lie_params()},
       AttackKind::Collusion, make_lie},
      {{"min-max", "largest deviation from the benign mean within the benign max pairwise distance", "Shejwalkar & Houmansadr 2021", &min_max_params()},
       AttackKind::Collusion, make_min_max},
      {{"min-sum", "largest deviation whose summed distance to the benign updates stays within theirs", "Shejwalkar & Houmansadr 2021", &min_sum_params()},
       AttackKind::Collusion, make_min_sum},
      {{"ipm", "inner product manipulation: -epsilon times the benign mean", "Xie et al. 2020 (IPM)", &ipm_params()},
       AttackKind::Collusion, make_ipm},
  };
  return table;
}

namespace {
template <typename Entry>
const Entry& find_entry(const std::vector<Entry>& table, const std::string& name, const char* what) {
  std::string valid;
  for (const Entry& entry : table) {
    if (entry.info.name == name) return entry;
    valid += (valid.empty() ? "" : ", ") + entry.info.name;
  }
  BASTION_FAIL("unknown ", what, " '", name, "'; valid: ", valid);
}
}  // namespace

const ClientRuleEntry& find_client_rule(const std::string& name) { return find_entry(client_rule_registry(), name, "client rule"); }
const ServerRuleEntry& find_server_rule(const std::string& name) { return find_entry(server_rule_registry(), name, "server rule"); }
const AttackEntry& find_attack(const std::string& name) { return find_entry(attack_registry(), name, "attack"); }

}  // namespace bastion
