// The one explicit table of FL units (DESIGN.md, STYLE §8): client rules, server rules, attacks and
// models, each with a one-line description, the paper it comes from and its parameter table. No
// self-registering statics: fl/registry.cpp lists every unit by hand, so grep finds every call path.
// Unknown names fail with the list of valid ones.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fl/attacks/attack.h"
#include "fl/clients/client_rule.h"
#include "fl/base/params.h"
#include "fl/defenses/server_rule.h"

namespace bastion {

struct UnitInfo {
  std::string name;         // kebab-case, as written in configs
  std::string description;  // one line
  std::string paper;        // where it comes from
  const std::vector<ParamSpec>* params = nullptr;
};

struct ClientRuleEntry {
  UnitInfo info;
  std::function<std::unique_ptr<ClientRule>(const Params&)> make;
};

struct ServerRuleEntry {
  UnitInfo info;
  std::function<std::unique_ptr<ServerRule>(const Params&)> make;  // null for wrappers
  // Wrappers only (bucketing, gas): build around an inner rule.
  std::function<std::unique_ptr<ServerRule>(const Params&, std::unique_ptr<ServerRule>)> wrap = nullptr;
  bool needs_server_data = false;  // fltrust, sageflow, finetune: data.server_fraction > 0 required
  // The rule reports its upload weights (AggregationOutput::weights): fedavg, spmc. A client rule that
  // needs them (ClientRule::needs_aggregation_weights, SPMC's) can only run with such a rule.
  bool reports_weights = false;
};

struct AttackEntry {
  UnitInfo info;
  AttackKind kind;
  std::function<std::unique_ptr<Attack>(const Params&)> make;
};

const std::vector<ClientRuleEntry>& client_rule_registry();
const std::vector<ServerRuleEntry>& server_rule_registry();
const std::vector<AttackEntry>& attack_registry();

// Throw bastion::Error "unknown <what> 'x'; valid: a, b, c" for an unknown name.
const ClientRuleEntry& find_client_rule(const std::string& name);
const ServerRuleEntry& find_server_rule(const std::string& name);
const AttackEntry& find_attack(const std::string& name);

// A server rule from its parameters; a wrapper gets its inner rule built from `inner_name` and
// `inner_params` (a wrapper cannot wrap a wrapper).
std::unique_ptr<ServerRule> make_server_rule(const std::string& name, const Params& params,
                                             const std::string& inner_name = "", const Params& inner_params = {});

}  // namespace bastion
