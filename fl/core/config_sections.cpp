// The ParamSpec tables of the experiment file's sections (docs/config.md is the same table in prose).
// Unit tables ([clients.<rule>], [server.<rule>], [attack.<name>]) live with their units.
#include <limits>

#include "fl/clients/post_step.h"
#include "fl/core/config.h"

namespace bastion {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Specs = std::vector<ParamSpec>;

// Builders for the tables below: each row reads "name, default, [range or choices], doc".
ParamSpec integer_param(std::string name, int64_t value, double min, double max, std::string doc) {
  return ParamSpec{std::move(name), ParamType::Integer, value, std::move(doc), min, max, {}};
}
ParamSpec real_param(std::string name, double value, double min, double max, std::string doc) {
  return ParamSpec{std::move(name), ParamType::Real, value, std::move(doc), min, max, {}};
}
ParamSpec bool_param(std::string name, bool value, std::string doc) {
  return ParamSpec{std::move(name), ParamType::Boolean, value, std::move(doc), -kInf, kInf, {}};
}
ParamSpec text_param(std::string name, std::string value, std::vector<std::string> choices, std::string doc) {
  return ParamSpec{std::move(name), ParamType::Text, std::move(value), std::move(doc), -kInf, kInf, std::move(choices)};
}
ParamSpec list_param(std::string name, std::string doc) {
  return ParamSpec{std::move(name), ParamType::TextList, std::vector<std::string>{}, std::move(doc), -kInf, kInf, {}};
}

const Specs& experiment_specs() {
  static const Specs specs = {
      text_param("name", "experiment", {}, "experiment name; results go to results/<name>/ unless --out is given"),
      text_param("description", "", {}, "free text, copied into the results"),
      integer_param("seed", 1, 0, 9007199254740992.0,
                    "fixes partition, malicious set, sampling, init, training and attacks"),
      integer_param("rounds", 50, 1, 1e6, "federated rounds"),
      integer_param("repeat", 1, 1, 100, "run seeds seed .. seed+repeat-1 and report mean and std"),
  };
  return specs;
}

const Specs& data_specs() {
  static const Specs specs = {
      text_param("dataset", "fmnist", {}, "dataset name (bastion list datasets)"),
      text_param("data_dir", "", {}, "dataset folder; empty = $BASTION_DATA, ./data, /usr/share/datasets"),
      text_param("partition", "dirichlet:0.5", {},
                 "iid | dirichlet:BETA | pathological:S | emnist-groups | natural (docs/partitions.md)"),
      integer_param("clients", 100, 1, 1e6, "number of clients"),
      integer_param("min_size", 10, 0, 1e9, "dirichlet: redraw until every client has at least this many samples"),
      bool_param("dirichlet_cap", true, "dirichlet: NIID-Bench capping rule (clients above total/N get no more)"),
      bool_param("client_prior", false, "dirichlet: FedFSA's per-client class prior variant"),
      integer_param("max_per_client", 0, 0, 1e12, "cap on each client's samples (seeded subset); 0 = no cap"),
      real_param("client_test_fraction", 0, 0, 0.9, "share of each client's samples moved to its local test split"),
      text_param("local_test", "split", {"split", "like-train"},
                 "clients' local test sets: split = client_test_fraction of their own samples; like-train = the "
                 "global test set dealt out per class in each client's training proportions (FedRep, BapFL)"),
      bool_param("pool_train_test", false,
                 "partition the training and test sets pooled (FedFSA); the test set "
                 "stays the global test set"),
      real_param(
          "server_fraction", 0, 0, 0.9,
          "share of the training set held out as the server's own data (the last samples; natural: of each user)"),
      text_param("normalization", "dataset", {"dataset", "mnist", "imagenet", "half", "none"},
                 "input normalisation: the dataset's own statistics, or a fixed preset"),
      text_param(
          "augment", "default", {"default", "none", "spmc-digits"},
          "training augmentation: the dataset's default, none, or spmc-digits (SPMC's digit pipeline: "
          "resize to 32x32, random crop with zero padding 4, replicate to 3 channels; test: resize + replicate)"),
  };
  return specs;
}

const Specs& model_specs() {
  static const Specs specs = {
      text_param("name", "lenet", {}, "architecture (bastion list models)"),
      text_param("init", "", {},
                 "start from the weights in this .safetensors file (bastion train --save, run --save-model); "
                 "empty = the seed's random initialisation"),
  };
  return specs;
}

const Specs& clients_specs() {
  static const Specs specs = {
      text_param("rule", "sgd", {}, "client rule (bastion list); its parameters go in [clients.<rule>]"),
      integer_param("per_round", 10, 1, 1e6, "clients sampled each round"),
  };
  return specs;
}

const Specs& server_specs() {
  static const Specs specs = {
      text_param("rule", "fedavg", {}, "server rule (bastion list); its parameters go in [server.<rule>]"),
      text_param("on_invalid", "reject", {"reject", "fail"},
                 "NaN/Inf/wrong-length uploads: reject = drop and count them, fail = stop with an error"),
      text_param("inner", "", {},
                 "inner rule of a wrapper rule (bucketing, gas); its parameters go in [server.<inner>]"),
      real_param("expected_malicious", -1, -1, 1,
                 "share f/n of attackers the robust rules assume among a round's uploads; -1 = from [attack] "
                 "(malicious_per_round when forced, else the malicious share of the clients)"),
      list_param("apply_to",
                 "parameters the rule aggregates: [] = all, or any of \"body\", \"head\" and "
                 "parameter-name prefixes (\"conv1.\"); BatchNorm buffers follow their layer"),
      text_param("rest", "mean", {"mean", "keep"},
                 "columns outside apply_to: mean = sample-weighted FedAvg, keep = unchanged (personalised)"),
  };
  return specs;
}

const Specs& attack_specs() {
  static const Specs specs = {
      list_param("names", "attacks (bastion list); each one's parameters go in [attack.<name>]"),
      real_param("malicious_fraction", 0, 0, 1,
                 "share of the clients that are malicious (used when malicious_count = -1)"),
      integer_param("malicious_count", -1, -1, 1e6, "malicious clients; -1 = round(malicious_fraction * data.clients)"),
      integer_param("malicious_per_round", 0, 0, 1e6,
                    "force this many attackers into every round; 0 = uniform sampling"),
      text_param("selection", "random", {"random", "last"},
                 "which clients are malicious: a seeded random set, or the highest client ids (SPMC's code)"),
      integer_param("start_round", 1, 1, 1e6, "first round in which attackers attack"),
      integer_param("end_round", 0, 0, 1e6, "last round in which attackers attack; 0 = until the end"),
      text_param("omniscient_view", "benign", {"benign", "all"},
                 "what collusion attacks see: benign uploads only, or all incl. attackers' honest updates (FedCAP)"),
  };
  return specs;
}

const Specs& eval_specs() {
  static const Specs specs = {
      integer_param("every", 1, 1, 1e6, "evaluate every this many rounds"),
      integer_param("batch", 1000, 1, 1e6, "evaluation batch size"),
      text_param("report", "last", {},
                 "reported accuracy: last | best | last:K (mean of the evaluations in the last K rounds)"),
      bool_param("asr_include_target", false,
                 "count test samples whose true label is the backdoor target in the attack success rate"),
      real_param("target_acc", 0, 0, 1, "report the first round reaching this accuracy; 0 = off"),
      bool_param("local", false,
                 "also evaluate on each client's local test split (needs data.client_test_fraction > 0)"),
      bool_param("personalized", false,
                 "evaluate each benign client's own model on its local test split "
                 "(p_* columns: plain and weighted mean, min, median, max)"),
      integer_param("personal_clients", 0, 0, 1e6,
                    "personalized: evaluate a seeded subset of this many benign "
                    "clients per evaluation (0 = all)"),
      bool_param("personal_global", true, "personalized: also evaluate each client's model on the global test set"),
      bool_param("personal_received", false,
                 "personalized: also evaluate the model each client received (FedCAP's "
                 "customised model, else the global model) on its local test split "
                 "(p_racc columns; p_tacc = the better of p_acc_w and p_racc_w)"),
      text_param("personal_received_final", "received", {"received", "next"},
                 "personalized + personal_received: the received model at the final evaluation: received = the one "
                 "received before the last round's training | next = the one the server would send after the final "
                 "aggregation (FedCAP's code: its last customised models, evaluated in an extra send)"),
      text_param("personal_model", "rule", {"rule", "own-last"},
                 "personalized: the model judged: rule = the rule's personal model, else the global model | own-last = "
                 "the model each client itself last trained, the initial model before its first training (FedFSA's "
                 "code, for every rule); a round's post step starts as with rule"),
      text_param("client_accuracy", "samples", {"samples", "batch-mean"},
                 "personalized: a client's accuracy as correct / samples, or the mean of its per-batch accuracies "
                 "over batches of eval.batch (FedFSA's code, test batch 128)"),
      text_param("clients_csv", "auto", {"auto", "on", "off"},
                 "clients.csv, one row per client and evaluated round (sampled, malicious, flagged, own p_acc/p_asr): "
                 "auto = with personalised evaluation or malicious clients; on; off"),
      text_param("personal_asr", "local", {"local", "global"},
                 "personalized: ASR of each client's model on its triggered local test split or the global one"),
  };
  return specs;
}

const Specs& run_specs() {
  static const Specs specs = {
      integer_param("threads", 1, 1, 256,
                    "worker threads for client training (run.device = cuda: clients train one after another, and the "
                    "threads serve the server rule's math)"),
      text_param("device", "cpu", {"cpu", "cuda"},
                 "where clients train and models are evaluated: cpu, or cuda (one GPU; clients one after another, "
                 "server rules on the host; docs/cuda.md)"),
      integer_param("checkpoint_every", -1, -1, 1e6,
                    "write a checkpoint every this many rounds; 0 = none; -1 = at most once a minute, and the last "
                    "round of a run that wrote one"),
  };
  return specs;
}

}  // namespace

const std::vector<std::pair<std::string, std::vector<ParamSpec>>>& config_sections() {
  static const std::vector<std::pair<std::string, std::vector<ParamSpec>>> sections = {
      {"", experiment_specs()},     {"data", data_specs()},          {"model", model_specs()},
      {"clients", clients_specs()}, {"server", server_specs()},      {"attack", attack_specs()},
      {"eval", eval_specs()},       {"post", post_section_params()}, {"run", run_specs()},
  };
  return sections;
}

}  // namespace bastion
