// Experiment configuration: TOML text -> toml++ tree -> overrides applied to the tree -> every section
// and unit table checked against its ParamSpec table -> cross-checks between sections. Overrides go into
// the tree (not into the validated values) so a `--set` is checked exactly like a line of the file.
// The section tables live in config_sections.cpp. This is the only file that includes toml++ (it is slow to compile); everything else sees Params.
#include "fl/core/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "data/partition.h"
#include "fl/clients/post_step.h"
#include "fl/core/toml_guard.h"
#include "fl/metrics/metrics.h"
#include "fl/registry.h"
#include "nn/models.h"
#include "nn/fedcr_model.h"
#include "tensor/error.h"

namespace bastion {

namespace {

using Specs = std::vector<ParamSpec>;
using Values = std::map<std::string, ParamValue>;

const Specs& section_specs(const std::string& name) {
  for (const auto& [section, specs] : config_sections()) {
    if (section == name) return specs;
  }
  BASTION_FAIL("internal: no config section '", name, "'");
}

bool is_section(const std::string& name) {
  const auto& sections = config_sections();
  return !name.empty() && std::any_of(sections.begin(), sections.end(), [&](const auto& s) { return s.first == name; });
}

std::vector<std::string> spec_names(const Specs& specs) {
  std::vector<std::string> names;
  for (const ParamSpec& spec : specs) names.push_back(spec.name);
  return names;
}

bool has_spec(const Specs& specs, const std::string& name) {
  return std::any_of(specs.begin(), specs.end(), [&](const ParamSpec& s) { return s.name == name; });
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string dotted(const std::string& scope, const std::string& name) {
  return scope.empty() ? name : scope + "." + name;
}

// Runs fn; a bastion::Error it throws is rethrown with `key: ` in front, so registry and partition
// errors ("unknown attack 'x'; valid: ...") say which config key held the bad name.
void with_key(const std::string& key, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    BASTION_FAIL(key, ": ", e.what());
  }
}

// ---- TOML tree -> values ----------------------------------------------------------------------------

toml::table parse_toml(std::string_view text, const std::string& source) {
  check_toml_text(text, source);
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    BASTION_FAIL(source, ":", e.source().begin.line, ":", e.source().begin.column, ": ", e.description());
  }
}

ParamValue node_to_value(const toml::node& node, const std::string& key) {
  switch (node.type()) {
    case toml::node_type::integer:
      return node.as_integer()->get();
    case toml::node_type::floating_point:
      return node.as_floating_point()->get();
    case toml::node_type::boolean:
      return node.as_boolean()->get();
    case toml::node_type::string:
      return node.as_string()->get();
    case toml::node_type::array: {
      std::vector<std::string> items;
      for (const toml::node& element : *node.as_array()) {
        BASTION_CHECK(element.is_string(), key, ": list elements must be text, got ", element.type());
        items.push_back(element.as_string()->get());
      }
      return items;
    }
    case toml::node_type::table:
      BASTION_FAIL(key, ": expected a value, got a table");
    default:
      BASTION_FAIL(key, ": dates and times are not supported, got ", node.type());
  }
}

// One section as written: its values, and (clients/server/attack only) its unit subtables by name.
struct RawSection {
  Values values;
  std::map<std::string, Values> units;
};

Values read_values(const toml::table& table, const std::string& scope) {
  Values values;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    BASTION_CHECK(!node.is_table(), dotted(scope, name), ": expected a value, got a table");
    values[name] = node_to_value(node, dotted(scope, name));
  }
  return values;
}

RawSection read_section(const toml::table& table, const std::string& scope) {
  const Specs& specs = section_specs(scope);
  const bool has_units = scope == "clients" || scope == "server" || scope == "attack";
  RawSection raw;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const std::string full = dotted(scope, name);
    if (!node.is_table()) {
      raw.values[name] = node_to_value(node, full);
      continue;
    }
    // A table under a known key is a type error; under another name it is a unit's table or unknown.
    BASTION_CHECK(!has_spec(specs, name), full, ": expected a value, got a table");
    BASTION_CHECK(has_units, "unknown table [", full, "]; [", scope,
                  "] has no subtables; valid keys: ", join(spec_names(specs)));
    raw.units[name] = read_values(*node.as_table(), full);
  }
  return raw;
}

std::string valid_top_level() {
  std::vector<std::string> sections;
  for (const auto& [name, specs] : config_sections()) {
    if (!name.empty()) sections.push_back("[" + name + "]");
  }
  return join(spec_names(section_specs(""))) + "; sections: " + join(sections);
}

// The whole tree by section ("" = top-level keys).
std::map<std::string, RawSection> read_tree(const toml::table& root) {
  std::map<std::string, RawSection> tree;
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (is_section(name)) {
      BASTION_CHECK(node.is_table(), name, ": expected a table [", name, "], got ", node.type());
      tree[name] = read_section(*node.as_table(), name);
    } else if (has_spec(section_specs(""), name)) {
      tree[""].values[name] = node_to_value(node, name);
    } else {
      BASTION_FAIL("unknown ", node.is_table() ? "section [" + name + "]" : "key '" + name + "'",
                   "; valid top-level keys: ", valid_top_level());
    }
  }
  return tree;
}

// ---- overrides ----------------------------------------------------------------------------------------

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> split_key(const std::string& key, const std::string& override_text) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    BASTION_CHECK(!parts.back().empty(), "override '", override_text, "': empty part in key '", key, "'");
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// "key=value": the value as TOML when it parses as exactly one TOML value, else the raw text as a
// string, so `data.partition=dirichlet:0.1` needs no quotes.
void apply_override(toml::table& root, const std::string& override_text) {
  const auto eq = override_text.find('=');
  BASTION_CHECK(eq != std::string::npos, "override '", override_text, "': expected key=value");
  const std::string key = trim(std::string_view(override_text).substr(0, eq));
  const std::string value = trim(std::string_view(override_text).substr(eq + 1));
  BASTION_CHECK(!key.empty(), "override '", override_text, "': empty key");
  const std::vector<std::string> parts = split_key(key, override_text);

  toml::table* table = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* child = table->get(parts[i]);
    if (child == nullptr) {
      table->insert_or_assign(parts[i], toml::table{});
      child = table->get(parts[i]);
    }
    BASTION_CHECK(child->is_table(), "override '", override_text, "': '", join({parts.begin(), parts.begin() + i + 1}),
                  "' is a value, not a table");
    table = child->as_table();
  }
  try {
    const std::string line = "v = " + value;
    check_toml_text(line, "override");  // the text toml++ parses, in value position; unsafe text is no TOML value
    toml::table parsed = toml::parse(line, std::string_view("override"));
    if (parsed.size() == 1 && parsed.contains("v")) {
      table->insert_or_assign(parts.back(), std::move(*parsed.get("v")));
      return;
    }
  } catch (const toml::parse_error&) {
    // not a TOML value: fall through to the string
  } catch (const Error&) {
    // rejected by the guard (e.g. a bare non-ASCII word): the string too
  }
  // A text value must be valid UTF-8, or config_to_toml would write a config.toml that cannot be read
  // back (fuzz_config: an override holding a lone 0xBC byte).
  BASTION_CHECK(valid_utf8(value), "override '", override_text, "': the value is not valid UTF-8");
  table->insert_or_assign(parts.back(), value);
}

// ---- validation -------------------------------------------------------------------------------------------

// last:K averages the evaluations in the last K rounds (fl/metrics/metrics.h): with K <= eval.every that
// window holds only the final evaluation, which is "last" under another name, so say so.
void check_report(const ExperimentConfig& c) {
  const std::string& report = c.eval.text("report");
  ReportMode mode;
  with_key("eval.report", [&] { mode = parse_report_mode(report); });
  const int64_t every = c.eval.integer("every");
  BASTION_CHECK(mode.kind != ReportMode::LastMean || every == 1 || mode.k > every, "eval.report = '", report,
                "' averages the evaluations of the last ", mode.k, " rounds, but with eval.every = ", every,
                " those rounds hold only the final one: write 'last', or K > ", every);
}

// The experiment name becomes the folder results/<name>/ (cli/run.cpp): one plain path component, so a name
// can never write outside results/ ("../..") or into results/ itself ("").
void check_experiment_name(const ExperimentConfig& c) {
  const std::string& name = c.experiment.text("name");
  const bool plain = !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
                     std::none_of(name.begin(), name.end(),
                                  [](unsigned char ch) { return ch < 0x20 || ch == 0x7f || ch == '/' || ch == '\\'; });
  BASTION_CHECK(plain, "name: '", printable(name),
                "' is not a plain folder name (it becomes results/<name>/): 1-255 bytes ",
                "without '/', '\\' or control characters, and not '.' or '..'");
}

// Text values whose valid set lives elsewhere (the registry, the model zoo, the partition parser).
void check_names(const ExperimentConfig& c) {
  with_key("data.partition", [&] { parse_partition(c.data.text("partition")); });
  const std::string& model = c.model.text("name");
  std::vector<std::string> models;
  for (const ModelInfo& info : model_catalog()) models.push_back(info.name);
  bool known = std::find(models.begin(), models.end(), model) != models.end();
  // cnn-fedcr-<d_Z>-<S_train>-<S_test> (nn/fedcr_model.h): a malformed suffix says what is expected.
  with_key("model.name", [&] { known = known || parse_fedcr_name(model).has_value(); });
  BASTION_CHECK(known, "model.name: unknown model '", model, "'; valid: ", join(models));
  with_key("clients.rule", [&] { find_client_rule(c.clients.text("rule")); });
  with_key("server.rule", [&] { find_server_rule(c.server.text("rule")); });
  const bool wrapper = static_cast<bool>(find_server_rule(c.server.text("rule")).wrap);
  const std::string& inner = c.server.text("inner");
  BASTION_CHECK(wrapper || inner.empty(), "server.inner = '", inner, "' but server.rule = '", c.server.text("rule"),
                "' does not wrap another rule (wrappers: bucketing, gas)");
  BASTION_CHECK(!wrapper || !inner.empty(), "server.rule = '", c.server.text("rule"),
                "' wraps another rule: set server.inner (e.g. \"median\")");
  if (wrapper) {
    with_key("server.inner", [&] { find_server_rule(inner); });
    BASTION_CHECK(!find_server_rule(inner).wrap, "server.inner = '", inner, "': a wrapper cannot wrap another wrapper");
  }
  const std::vector<std::string>& names = c.attack.list("names");
  for (size_t i = 0; i < names.size(); ++i) {
    with_key("attack.names", [&] { find_attack(names[i]); });
    BASTION_CHECK(std::find(names.begin(), names.begin() + i, names[i]) == names.begin() + i, "attack.names: '",
                  names[i], "' is listed twice");
  }
  check_report(c);
}

const Specs& specs_or_none(const Specs* specs) {
  static const Specs none;
  return specs != nullptr ? *specs : none;
}

// [section.X] tables: X must be the selected unit (`selected` lists them), else the table would be
// silently ignored.
void check_units_selected(const RawSection& raw, const std::string& section, const std::string& selector,
                          const std::vector<std::string>& selected) {
  for (const auto& [name, values] : raw.units) {
    BASTION_CHECK(std::find(selected.begin(), selected.end(), name) != selected.end(), "[", section, ".", name,
                  "] is given but ", section, ".", selector, " = ",
                  param_value_to_toml(selector == "names" ? ParamValue(selected) : ParamValue(selected.front())),
                  " does not select '", name, "': the table would do nothing");
  }
}

void build_units(ExperimentConfig& c, std::map<std::string, RawSection>& tree) {
  const std::string& client_rule = c.clients.text("rule");
  const std::string& server_rule = c.server.text("rule");
  check_units_selected(tree["clients"], "clients", "rule", {client_rule});
  const std::string& server_inner = c.server.text("inner");
  std::vector<std::string> server_units = {server_rule};
  if (!server_inner.empty()) server_units.push_back(server_inner);
  check_units_selected(tree["server"], "server", "rule", server_units);
  check_units_selected(tree["attack"], "attack", "names", c.attack.list("names"));
  c.client_rule = Params("clients." + client_rule, specs_or_none(find_client_rule(client_rule).info.params),
                         tree["clients"].units[client_rule]);
  c.server_rule = Params("server." + server_rule, specs_or_none(find_server_rule(server_rule).info.params),
                         tree["server"].units[server_rule]);
  if (!server_inner.empty()) {
    c.server_inner_rule = Params("server." + server_inner, specs_or_none(find_server_rule(server_inner).info.params),
                                 tree["server"].units[server_inner]);
  }
  for (const std::string& name : c.attack.list("names")) {
    c.attacks.emplace_back(
        name, Params("attack." + name, specs_or_none(find_attack(name).info.params), tree["attack"].units[name]));
  }
}

}  // namespace

int64_t resolved_malicious_count(const ExperimentConfig& c) {
  const int64_t count = c.attack.integer("malicious_count");
  if (count >= 0) return count;
  return std::llround(c.attack.real("malicious_fraction") * static_cast<double>(c.data.integer("clients")));
}

namespace {

void check_attack_composition(const ExperimentConfig& c) {
  std::vector<std::string> local, collusion;  // Data/Training attacks change local training; one at a time
  for (const std::string& name : c.attack.list("names")) {
    const AttackKind kind = find_attack(name).kind;
    if (kind == AttackKind::Data || kind == AttackKind::Training) local.push_back(name);
    if (kind == AttackKind::Collusion) collusion.push_back(name);
  }
  BASTION_CHECK(local.size() <= 1, "attack.names: at most one data or training attack, got ", join(local));
  BASTION_CHECK(collusion.size() <= 1, "attack.names: at most one collusion attack, got ", join(collusion));
}

void check_personalization(const ExperimentConfig& c) {
  const bool like_train = c.data.text("local_test") == "like-train";
  const bool has_split = like_train || c.data.real("client_test_fraction") > 0;
  BASTION_CHECK(!like_train || c.data.real("client_test_fraction") == 0,
                "data.local_test = like-train deals out the global test set: set data.client_test_fraction = 0");
  BASTION_CHECK(!like_train || !c.data.boolean("pool_train_test"),
                "data.local_test = like-train deals out the test set, which data.pool_train_test = true puts into the "
                "clients' training data: use client_test_fraction for local test sets of pooled data (FedFSA)");
  BASTION_CHECK(!c.eval.boolean("personalized") || has_split,
                "eval.personalized = true needs local test sets: data.local_test = \"like-train\" or "
                "data.client_test_fraction > 0");
  const std::string& post = c.post.text("rule");
  BASTION_CHECK(post == "none" || c.eval.boolean("personalized"), "post.rule = '", post,
                "' tunes each client's own model before personalised evaluation: set eval.personalized = true");
  const bool rule_has_post = find_client_rule(c.clients.text("rule")).make(c.client_rule)->post_step().has_value();
  BASTION_CHECK(post == "none" || !rule_has_post, "clients.rule = '", c.clients.text("rule"),
                "' already takes a post-training step; remove post.rule = '", post, "'");
  BASTION_CHECK(!rule_has_post || c.eval.boolean("personalized"), "clients.rule = '", c.clients.text("rule"),
                "' is judged on tuned client models: set eval.personalized = true");
}

// A client rule that rebuilds its coalition from the server rule's upload weights (SPMC's LGAlign) runs
// only with a rule that reports them; naming those rules here keeps the error actionable.
void check_weight_pairing(const ExperimentConfig& c) {
  if (!find_client_rule(c.clients.text("rule")).make(c.client_rule)->traits().needs_aggregation_weights) return;
  std::vector<std::string> reporting;
  for (const ServerRuleEntry& entry : server_rule_registry())
    if (entry.reports_weights) reporting.push_back(entry.info.name);
  BASTION_CHECK(
      find_server_rule(c.server.text("rule")).reports_weights, "clients.rule = '", c.clients.text("rule"),
      "' rebuilds each client's coalition model from the server rule's aggregation weights, but server.rule = '",
      c.server.text("rule"), "' reports none; use one of: ", join(reporting),
      " (SPMC = clients.rule \"spmc\" + server.rule \"spmc\"; fedavg = the LGAlign-only ablation)");
}

void cross_check(const ExperimentConfig& c) {
  const int64_t clients = c.data.integer("clients"), per_round = c.clients.integer("per_round");
  BASTION_CHECK(per_round <= clients, "clients.per_round = ", per_round, " exceeds data.clients = ", clients);
  const int64_t malicious = resolved_malicious_count(c);
  const std::string malicious_key =
      c.attack.integer("malicious_count") >= 0 ? "attack.malicious_count" : "attack.malicious_fraction";
  BASTION_CHECK(malicious <= clients, malicious_key, " gives ", malicious,
                " malicious clients, more than data.clients = ", clients);
  const int64_t forced = c.attack.integer("malicious_per_round");
  BASTION_CHECK(forced <= per_round, "attack.malicious_per_round = ", forced,
                " exceeds clients.per_round = ", per_round);
  BASTION_CHECK(forced <= malicious, "attack.malicious_per_round = ", forced, " exceeds the ", malicious,
                " malicious clients (", malicious_key, ")");
  BASTION_CHECK(c.attack.list("names").empty() || malicious >= 1,
                "attack.names = ", param_value_to_toml(c.attack.list("names")),
                " but no client is malicious: set attack.malicious_fraction or attack.malicious_count");
  check_attack_composition(c);
  BASTION_CHECK(!c.eval.boolean("local") || c.data.real("client_test_fraction") > 0,
                "eval.local = true needs data.client_test_fraction > 0");
  for (const std::string& rule : {c.server.text("rule"), c.server.text("inner")}) {
    BASTION_CHECK(rule.empty() || !find_server_rule(rule).needs_server_data || c.data.real("server_fraction") > 0,
                  "server rule '", rule,
                  "' needs the server's own data: set data.server_fraction (SPMC holds out 0.1)");
  }
  check_personalization(c);
  check_weight_pairing(c);
  const int64_t start = c.attack.integer("start_round"), end = c.attack.integer("end_round");
  BASTION_CHECK(end == 0 || end >= start, "attack.end_round = ", end, " is before attack.start_round = ", start);
}

// ---- writing ---------------------------------------------------------------------------------------------

// A TOML key: bare when it only has A-Za-z0-9_- (all registry and section names), quoted otherwise.
std::string toml_key(const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  return bare ? key : param_value_to_toml(key);
}

void write_table(std::ostringstream& out, const std::string& header, const Specs& specs, const Params& params) {
  if (!header.empty()) out << "\n[" << header << "]\n";
  for (const ParamSpec& spec : specs) {
    out << toml_key(spec.name) << " = " << param_value_to_toml(params.values().at(spec.name)) << "\n";
  }
}

}  // namespace

ExperimentConfig parse_config(std::string_view toml_text, const std::string& source,
                              const std::vector<std::string>& overrides) {
  toml::table root = parse_toml(toml_text, source);
  for (const std::string& override_text : overrides) apply_override(root, override_text);
  std::map<std::string, RawSection> tree = read_tree(root);

  ExperimentConfig c;
  c.experiment = Params("", section_specs(""), tree[""].values);
  c.data = Params("data", section_specs("data"), tree["data"].values);
  c.model = Params("model", section_specs("model"), tree["model"].values);
  c.clients = Params("clients", section_specs("clients"), tree["clients"].values);
  c.server = Params("server", section_specs("server"), tree["server"].values);
  c.attack = Params("attack", section_specs("attack"), tree["attack"].values);
  c.eval = Params("eval", section_specs("eval"), tree["eval"].values);
  c.post = Params("post", section_specs("post"), tree["post"].values);
  c.run = Params("run", section_specs("run"), tree["run"].values);
  check_names(c);
  check_experiment_name(c);
  build_units(c, tree);
  cross_check(c);
  return c;
}

constexpr uintmax_t kMaxConfigBytes = uintmax_t{16} << 20;

ExperimentConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  BASTION_CHECK(std::filesystem::is_regular_file(path, ec), "config file '", path, "' does not exist or is not a file");
  BASTION_CHECK(std::filesystem::file_size(path, ec) <= kMaxConfigBytes, "config file '", path, "' is over ",
                kMaxConfigBytes >> 20, " MiB: refused (a config is a few KiB of TOML)");
  std::ifstream in(path, std::ios::binary);
  BASTION_CHECK(in.is_open(), "cannot open config file '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  BASTION_CHECK(!in.bad(), "cannot read config file '", path, "'");
  return parse_config(without_utf8_bom(text.str()), path, overrides);
}

std::string config_to_toml(const ExperimentConfig& c) {
  std::ostringstream out;
  out << "# resolved by bastion: every key with its value, defaults included\n";
  write_table(out, "", section_specs(""), c.experiment);
  write_table(out, "data", section_specs("data"), c.data);
  write_table(out, "model", section_specs("model"), c.model);
  write_table(out, "clients", section_specs("clients"), c.clients);
  const std::string& client_rule = c.clients.text("rule");
  write_table(out, "clients." + toml_key(client_rule), specs_or_none(find_client_rule(client_rule).info.params),
              c.client_rule);
  write_table(out, "server", section_specs("server"), c.server);
  const std::string& server_rule = c.server.text("rule");
  write_table(out, "server." + toml_key(server_rule), specs_or_none(find_server_rule(server_rule).info.params),
              c.server_rule);
  const std::string& server_inner = c.server.text("inner");
  if (!server_inner.empty()) {
    write_table(out, "server." + toml_key(server_inner), specs_or_none(find_server_rule(server_inner).info.params),
                c.server_inner_rule);
  }
  write_table(out, "attack", section_specs("attack"), c.attack);
  for (const auto& [name, params] : c.attacks) {
    write_table(out, "attack." + toml_key(name), specs_or_none(find_attack(name).info.params), params);
  }
  write_table(out, "eval", section_specs("eval"), c.eval);
  write_table(out, "post", section_specs("post"), c.post);
  write_table(out, "run", section_specs("run"), c.run);
  return out.str();
}

}  // namespace bastion
