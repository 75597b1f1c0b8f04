// The table of every FL unit. Add a unit: write its file (header with the math, parameter table,
// make function), declare the pair in its folder's header, and add one row here.
#include "fl/registry.h"

#include "tensor/error.h"

namespace bastion {

const std::vector<ClientRuleEntry>& client_rule_registry() {
  static const std::vector<ClientRuleEntry> table = {
      {{"sgd", "local SGD for E epochs or K steps (FedAvg's client)", "McMahan et al. 2017", &sgd_client_params()},
       make_sgd_client},
      {{"local", "local training only: every client trains its own model and never uploads",
        "PFL-FACTS §3 (FedCAP, PFLlib)", &local_client_params()},
       make_local_client},
      {{"fedavg-ft", "FedAvg, judged on a fine-tuned model (after-local | final-head | before-eval)",
        "PFL-FACTS §4 (FedCAP, FedFSA, Qin et al. 2023)", &fedavg_ft_client_params()},
       make_fedavg_ft_client},
      {{"ditto", "a personal model with (lambda/2)||v - w||^2 beside FedAvg's global model", "Li et al. 2021 (Ditto)",
        &ditto_client_params()},
       make_ditto_client},
      {{"fedrep", "head epochs (body frozen), then body epochs (head frozen); only the body is shared",
        "Collins et al. 2021 (FedRep)", &fedrep_client_params()},
       make_fedrep_client},
      {{"pfedsam", "FedRep whose body epochs take SAM steps (rho 0.05); only the body is shared",
        "pFedSAM (seed paper, ICC 2025)", &pfedsam_client_params()},
       make_pfedsam_client},
      {{"fedala",
        "adaptive local aggregation: the global model mixed into the local one (last p tensors, learned weights), then "
        "SGD",
        "Zhang et al. 2023 (FedALA)", &fedala_client_params()},
       make_fedala_client},
      {{"fedrod",
        "balanced-softmax generic model (shared) + a personal head on its features, judged on the sum of both heads",
        "Chen & Chao ICLR'22 (FedRoD; PFL-FACTS §8)", &fedrod_client_params()},
       make_fedrod_client},
      {{"fedsam", "every local step a SAM step (rho 0.05, global-norm perturbation, clip 10)",
        "Caldarola et al. 2022; Qu et al. 2022 (PFL-FACTS §12)", &fedsam_client_params()},
       make_fedsam_client},
      {{"mofedsam", "SAM steps with alpha g' + (1 - alpha) m, m from the server's mean update",
        "Qu et al. ICML'22 (PFL-FACTS §13)", &mofedsam_client_params()},
       make_mofedsam_client},
      {{"fedfsa", "MoFedSAM with a larger radius on the client's Top-C most sensitive tensors; final head tuning",
        "FedFSA (seed paper; PFL-FACTS §15.3)", &fedfsa_client_params()},
       make_fedfsa_client},
      {{"fedspeed", "SAM steps with the prox term lambda (h_i - w_g); the server adds the mean of all h_i",
        "Sun et al. ICLR'23 (PFL-FACTS §14.1)", &fedspeed_client_params()},
       make_fedspeed_client},
      {{"fedsmoo", "FedSpeed with the corrected ascent direction g - mu_i - s (dynamic dual, global correction)",
        "Sun et al. ICML'23 (PFL-FACTS §14.2)", &fedsmoo_client_params()},
       make_fedsmoo_client},
      {{"fedfomo",
        "each client mixes the offered models that lower its validation loss, weighted by loss drop / distance",
        "Zhang et al. ICLR'21 (PFL-FACTS §9)", &fedfomo_client_params()},
       make_fedfomo_client},
      {{"fedcr",
        "stochastic encoder with a KL pull to the server's class-conditional Gaussians (product of experts); personal "
        "head fc4",
        "Zhang et al. ICML'23 (PFL-FACTS §11)", &fedcr_client_params()},
       make_fedcr_client},
      {{"rsa",
        "a persistent own model x_i trained with lambda sign(x_i - x_0); uploads x_i - x_0 for the server rule rsa",
        "Li et al. AAAI'19 (RSA)", &rsa_client_params()},
       make_rsa_client},
      {{"fedcap",
        "FedCAP's client: Ditto-style personal model (lambda) beside the customised model it uploads (server rule "
        "fedcap)",
        "FedCAP (seed paper, §IV-C)", &fedcap_client_params()},
       make_fedcap_client},
      {{"st", "FedAvg, then Simple-Tuning: re-initialise the head and retrain it on clean local data",
        "Qin et al. 2023 (pFedSAM's ST)", &st_client_params()},
       make_st_client},
      {{"spmc", "LGAlign: CE gradient projected off the coalition teacher's distillation gradient where they conflict",
        "SPMC (seed paper, §4.3 LGAlign)", &spmc_client_params()},
       make_spmc_client},
  };
  return table;
}

const std::vector<ServerRuleEntry>& server_rule_registry() {
  static const std::vector<ServerRuleEntry> table = {
      {{"fedavg", "sample-weighted (or uniform) mean of the updates, times a server learning rate",
        "McMahan et al. 2017", &fedavg_params()},
       make_fedavg,
       nullptr,
       false,
       true},
      {{"krum", "the upload with the smallest sum of squared distances to its n - f - 2 nearest",
        "Blanchard et al. 2017", &krum_params()},
       make_krum,
       nullptr,
       false},
      {{"multi-krum", "mean of the m = n - f uploads with the best Krum scores",
        "Blanchard et al. 2017 (options: El Mhamdi et al. 2018, NDSS'21)", &multi_krum_params()},
       make_multi_krum,
       nullptr,
       false},
      {{"bulyan", "n - 2f uploads picked by Krum, then per coordinate the mean of the values closest to the median",
        "El Mhamdi et al. 2018", &bulyan_params()},
       make_bulyan,
       nullptr,
       false},
      {{"median", "coordinate-wise median", "Yin et al. 2018", &median_params()}, make_median, nullptr, false},
      {{"trimmed-mean", "coordinate-wise mean without the b largest and b smallest values", "Yin et al. 2018",
        &trimmed_mean_params()},
       make_trimmed_mean,
       nullptr,
       false},
      {{"norm-clip", "clip each update's norm to c, then average (NC)", "Sun et al. 2019", &norm_clip_params()},
       make_norm_clip,
       nullptr,
       false},
      {{"add-noise", "average, then add Gaussian noise to the aggregate (AD, weak DP)", "Sun et al. 2019",
        &add_noise_params()},
       make_add_noise,
       nullptr,
       false},
      {{"norm-bound", "drop the uploads whose norm is too large, average the rest", "Sun et al. 2019; FedCPA",
        &norm_bound_params()},
       make_norm_bound,
       nullptr,
       false},
      {{"crfl", "average, clip the global model's norm, add Gaussian smoothing noise", "Xie et al. 2021 (CRFL)",
        &crfl_params()},
       make_crfl,
       nullptr,
       false},
      {{"rlr", "robust learning rate: negate the step where too few signs agree", "Ozdayi et al. 2021", &rlr_params()},
       make_rlr,
       nullptr,
       false},
      {{"rsa",
        "RSA's master step: alpha (lambda sum_i sign(x_i - x_0) - weight_decay x_0); pair with the rsa client rule",
        "Li et al. AAAI'19 (RSA)", &rsa_params()},
       make_rsa,
       nullptr,
       false},
      {{"rsa-server",
        "SPMC's server-only RSA: the master step on plain clients' models, sign sum capped at 3 (running, in client "
        "order)",
        "Li et al. 2019 (RSA); SPMC", &rsa_server_params()},
       make_rsa_server,
       nullptr,
       false},
      {{"foolsgold", "down-weight clients whose update histories are too similar (sybils)", "Fung et al. 2020",
        &foolsgold_params()},
       make_foolsgold,
       nullptr,
       false},
      {{"dnc", "divide and conquer: drop the largest projections on the top singular vector",
        "Shejwalkar & Houmansadr 2021", &dnc_params()},
       make_dnc,
       nullptr,
       false},
      {{"clustered", "two clusters by cosine distance (complete linkage); keep the larger",
        "Sattler et al. 2020; FedCAP", &clustered_params()},
       make_clustered,
       nullptr,
       false},
      {{"rfa", "geometric median by smoothed Weiszfeld", "Pillutla et al. 2022 (RFA)", &rfa_params()},
       make_rfa,
       nullptr,
       false},
      {{"residual-base", "residual-based reweighting with repeated-median regression per coordinate",
        "Fu et al. 2019; FedCPA", &residual_base_params()},
       make_residual_base,
       nullptr,
       false},
      {{"fedcpa",
        "weight clients by agreement of their top/bottom-k critical parameters with peers and the global model",
        "Han et al. 2023 (FedCPA)", &fedcpa_params()},
       make_fedcpa,
       nullptr,
       false},
      {{"spmc", "margin contribution: softmax weights from each upload's cosine with the mean of the others",
        "SPMC (seed paper, §4.2 MCAgg)", &spmc_params()},
       make_spmc,
       nullptr,
       false,
       true},
      {{"fltrust", "trust = ReLU(cos) with the server's update on its root set; updates rescaled to its norm",
        "Cao et al. 2021 (FLTrust)", &fltrust_params()},
       make_fltrust,
       nullptr,
       true},
      {{"sageflow", "entropy filter and loss-weighted average on the server's public set",
        "Park et al. 2021 (Sageflow)", &sageflow_params()},
       make_sageflow,
       nullptr,
       true},
      {{"finetune", "average, then fine-tune the global model on the server's validation split", "SPMC baseline",
        &finetune_params()},
       make_finetune,
       nullptr,
       true},
      {{"fedcap",
        "customised models softmax(alpha cos) over recovered uploads; calibrated norm > T_norm removes a client for "
        "good",
        "FedCAP (seed paper, §IV)", &fedcap_params()},
       make_fedcap,
       nullptr,
       false},
      {{"bucketing", "average random buckets of s uploads, then apply the inner rule", "Karimireddy et al. 2022",
        &bucketing_params()},
       nullptr,
       make_bucketing,
       false},
      {{"gas", "score clients by an inner rule on p coordinate groups; average the n - f best", "Liu et al. 2023 (GAS)",
        &gas_params()},
       nullptr,
       make_gas,
       false},
  };
  return table;
}

const std::vector<AttackEntry>& attack_registry() {
  static const std::vector<AttackEntry> table = {
      {{"badnets", "pixel-trigger backdoor on a share of the attackers' samples",
        "Gu et al. 2017; SPMC, FedCPA, pFedSAM", &badnets_params()},
       AttackKind::Data,
       make_badnets},
      {{"dba", "distributed backdoor: attacker j plants part j mod 4 of the global trigger", "Xie et al. 2020 (DBA)",
        &dba_params()},
       AttackKind::Data,
       make_dba},
      {{"bapfl", "backdoor of the shared body only, trained against a noisy head", "Ye et al. 2024 (BapFL)",
        &bapfl_params()},
       AttackKind::Training,
       make_bapfl},
      {{"label-flip", "relabel a share of the attackers' samples (shift, reverse or random permutation)",
        "FedCAP A1, SPMC, FedCPA", &label_flip_params()},
       AttackKind::Data,
       make_label_flip},
      {{"sign-flip", "upload the negated update", "FedCAP A4", &sign_flip_params()},
       AttackKind::Upload,
       make_sign_flip},
      {{"scale", "model replacement: upload lambda times the update", "Bagdasaryan et al. 2020", &scale_params()},
       AttackKind::Upload,
       make_scale},
      {{"gaussian", "upload Gaussian noise instead of the update", "FedCAP A2, FedCPA", &gaussian_params()},
       AttackKind::Upload,
       make_gaussian},
      {{"lie", "a little is enough: mean - z * std of the benign updates", "Baruch et al. 2019", &lie_params()},
       AttackKind::Collusion,
       make_lie},
      {{"min-max", "largest deviation from the benign mean within the benign max pairwise distance",
        "Shejwalkar & Houmansadr 2021", &min_max_params()},
       AttackKind::Collusion,
       make_min_max},
      {{"min-sum", "largest deviation whose summed distance to the benign updates stays within theirs",
        "Shejwalkar & Houmansadr 2021", &min_sum_params()},
       AttackKind::Collusion,
       make_min_sum},
      {{"ipm", "inner product manipulation: -epsilon times the benign mean", "Xie et al. 2020 (IPM)", &ipm_params()},
       AttackKind::Collusion,
       make_ipm},
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

const ClientRuleEntry& find_client_rule(const std::string& name) {
  return find_entry(client_rule_registry(), name, "client rule");
}
const ServerRuleEntry& find_server_rule(const std::string& name) {
  return find_entry(server_rule_registry(), name, "server rule");
}
const AttackEntry& find_attack(const std::string& name) { return find_entry(attack_registry(), name, "attack"); }

std::unique_ptr<ServerRule> make_server_rule(const std::string& name, const Params& params,
                                             const std::string& inner_name, const Params& inner_params) {
  const ServerRuleEntry& entry = find_server_rule(name);
  if (!entry.wrap) {
    BASTION_CHECK(inner_name.empty(), "server.inner = '", inner_name, "' is given but server rule '", name,
                  "' does not wrap another rule (wrappers: bucketing, gas)");
    return entry.make(params);
  }
  BASTION_CHECK(!inner_name.empty(), "server rule '", name, "' wraps another rule: set server.inner (e.g. \"median\")");
  const ServerRuleEntry& inner = find_server_rule(inner_name);
  BASTION_CHECK(!inner.wrap, "server.inner = '", inner_name, "': a wrapper cannot wrap another wrapper");
  return entry.wrap(params, inner.make(inner_params));
}

}  // namespace bastion
