// Experiment configuration: one TOML file (toml++ from Debian) describes a federated experiment.
//
//   name = "demo"            # results go to results/<name>/ unless --out is given
//   seed = 1                 # fixes partition, malicious set, sampling, init, training and attacks
//   rounds = 30
//   repeat = 1               # run seeds seed, seed+1, ..., seed+repeat-1 and report mean ± std
//   [data]     dataset, data_dir, partition, clients, min_size, ...
//   [model]    name
//   [clients]  rule, per_round           [clients.<rule>]   the client rule's parameters
//   [server]   rule, inner, expected_malicious, apply_to, rest, on_invalid
//              [server.<rule>] the rule's parameters; [server.<inner>] a wrapper's inner rule
//   [attack]   names, malicious_fraction, malicious_per_round, ...   [attack.<name>] per attack
//   [eval]     every, batch, report, asr_include_target, target_acc, personalized, ...
//   [post]     rule (st | head-tune | fine-tune), epochs, batch, lr, momentum, when
//   [run]      threads, checkpoint_every
//
// Every key of every section is declared in a ParamSpec table (config.cpp for the sections, the
// registry for the units), so `bastion list config` prints them all with defaults and docs, and
// docs/config.md is the same table. Unknown sections and keys, wrong types and out-of-range values are
// errors naming the dotted key ("clients.sgd.lr"). A [clients.X] / [server.X] / [attack.X] table for a
// unit that is not selected is an error too (it would silently do nothing).
//
// Overrides: `--set key=value` with a dotted key; the value is parsed as a TOML value, and a bare word
// that is not a TOML value is taken as a string, so `--set clients.sgd.lr=0.05`, `--set
// data.partition=iid` and `--set 'attack.names=["lie"]'` all work. Overrides are applied to the TOML
// tree before validation, so they are checked exactly like the file.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fl/base/params.h"

namespace bastion {

struct ExperimentConfig {
  Params experiment;  // top-level keys: name, description, seed, rounds, repeat
  Params data, model, clients, server, attack, eval, post, run;
  Params client_rule;                                   // [clients.<clients.rule>]
  Params server_rule;                                   // [server.<server.rule>]
  Params server_inner_rule;                             // [server.<server.inner>] for a wrapper rule (bucketing, gas)
  std::vector<std::pair<std::string, Params>> attacks;  // [attack.<name>] for each of attack.names, in order
};

// Parses, applies the overrides ("key=value") in order, validates. `source` names the text in errors
// (the file path). Throws bastion::Error.
ExperimentConfig parse_config(std::string_view toml_text, const std::string& source,
                              const std::vector<std::string>& overrides = {});
ExperimentConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The resolved configuration as TOML: every key of every section with its value (defaults included),
// in a fixed order, so parse_config(config_to_toml(c)) == c and two equal configs give equal text.
std::string config_to_toml(const ExperimentConfig& config);

// The number of malicious clients: attack.malicious_count, or round(malicious_fraction * data.clients)
// when the count is -1 (halves round up).
int64_t resolved_malicious_count(const ExperimentConfig& config);

// The section tables (config_sections.cpp), for `bastion list config` and docs: ("data", specs), ("model", specs), ...;
// the top-level keys under the name "".
const std::vector<std::pair<std::string, std::vector<ParamSpec>>>& config_sections();

}  // namespace bastion
