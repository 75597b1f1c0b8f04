// `bastion list [models|datasets|partitions|triggers|clients|defenses|attacks|config|presets]`: every registered name with a one-line description.
#include <cstdio>

#include "cli/commands.h"
#include "data/dataset.h"
#include "data/triggers.h"
#include "fl/core/config.h"
#include "fl/reproduce/preset.h"
#include "fl/registry.h"
#include "nn/models.h"
#include "tensor/error.h"

namespace bastion::cli {

namespace {

// The written forms parse_partition accepts (data/partition.h has the rules; docs/partitions.md the papers).
constexpr const char* kPartitionForms[][2] = {
    {"iid", "shuffle, then near-equal chunks"},
    {"dirichlet:BETA", "per class p ~ Dir(BETA) over clients, NIID-Bench capping, redraw until min size 10"},
    {"pathological:S", "S distinct classes per client as equal shards; equal client sizes"},
    {"emnist-groups", "FedCAP EMNIST: 80% from the client's group (digits/upper/lower), 20% from all"},
    {"natural", "one client per group id (WISDM users)"},
};

template <typename Entry>
void print_units(const char* title, const std::vector<Entry>& table) {
  std::printf("%s:\n", title);
  for (const Entry& entry : table) {
    std::printf("  %-14s %s  [%s]\n", entry.info.name.c_str(), entry.info.description.c_str(),
                entry.info.paper.c_str());
    std::printf("%s", describe_params(*entry.info.params, "      ").c_str());
  }
}

void print_server_rules() {
  std::printf("server rules (defenses; fl/README.md has the table with preconditions and costs):\n");
  for (const ServerRuleEntry& entry : server_rule_registry()) {
    const char* note = entry.wrap                ? "  (wraps server.inner)"
                       : entry.needs_server_data ? "  (needs data.server_fraction)"
                                                 : "";
    std::printf("  %-14s %s  [%s]%s\n", entry.info.name.c_str(), entry.info.description.c_str(),
                entry.info.paper.c_str(), note);
    std::printf("%s", describe_params(*entry.info.params, "      ").c_str());
  }
}

void print_attacks() {
  std::printf("attacks (kind: where it acts):\n");
  for (const AttackEntry& entry : attack_registry()) {
    std::printf("  %-14s %-9s %s  [%s]\n", entry.info.name.c_str(), attack_kind_name(entry.kind),
                entry.info.description.c_str(), entry.info.paper.c_str());
    std::printf("%s", describe_params(*entry.info.params, "      ").c_str());
  }
}

void print_config_keys(bool markdown) {
  if (markdown) {  // docs/config.md's "Sections" tables (their doc column may say more; keys, types and
                   // defaults must match: tests/test_docs_from_code.cpp)
    for (const auto& [section, specs] : config_sections())
      std::printf("### %s\n\n%s\n", section.empty() ? "Top level" : ("[" + section + "]").c_str(),
                  describe_params_markdown(specs).c_str());
    return;
  }
  std::printf("config keys (docs/config.md; unit tables [clients.<rule>], [server.<rule>], [attack.<name>] above):\n");
  for (const auto& [section, specs] : config_sections()) {
    std::printf("  [%s]\n", section.empty() ? "top level" : section.c_str());
    std::printf("%s", describe_params(specs, "      ").c_str());
  }
}

// The paper-table presets in configs/papers with their grid size and measured cost.
void print_presets() {
  const std::string folder = presets_folder();
  std::printf("presets (%s; bastion reproduce NAME [--quick]):\n", folder.c_str());
  const std::vector<std::string> paths = find_presets(folder);
  if (paths.empty()) std::printf("  (none found: run from the repository root)\n");
  for (const std::string& path : paths) {
    try {
      const Preset preset = load_preset(path);
      const size_t runs = preset_grid(preset).runs.size();
      const std::string cost = preset_cost_text(preset.cost, preset.seeds);
      std::printf("  %-22s %s\n  %-22s %zu run(s) x %lld seed(s); %s\n", preset.name.c_str(), preset.title.c_str(), "",
                  runs, static_cast<long long>(preset.seeds), cost.c_str());
    } catch (const Error& e) {
      std::printf("  %s: invalid: %s\n", path.c_str(), e.what());
    }
  }
}

// One row per unit, the first columns of fl/README.md's "Units" table: | kind | name | description | paper |.
template <typename Entry>
void print_units_markdown(const char* kind, const std::vector<Entry>& table) {
  for (const Entry& entry : table)
    std::printf("| %s | `%s` | %s | %s |\n", kind, entry.info.name.c_str(), entry.info.description.c_str(),
                entry.info.paper.c_str());
}

int print_markdown(const std::string& what) {
  const bool all = what == "all";
  BASTION_CHECK(all || what == "config" || what == "clients" || what == "defenses" || what == "attacks",
                "list --markdown prints config, clients, defenses or attacks, not ", what);
  if (all || what == "clients" || what == "defenses" || what == "attacks")
    std::printf("| kind | name | description | paper |\n|---|---|---|---|\n");
  if (all || what == "clients") print_units_markdown("client rule", client_rule_registry());
  if (all || what == "defenses") print_units_markdown("server rule", server_rule_registry());
  if (all || what == "attacks") print_units_markdown("attack", attack_registry());
  if (all) std::printf("\n");
  if (all || what == "config") print_config_keys(true);
  return 0;
}

}  // namespace

Command add_list_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "list",
      "List models, datasets, partitions, triggers, client rules, server rules, attacks, config keys and presets");
  auto what = std::make_shared<std::string>("all");
  sub->add_option("what", *what,
                  "models | datasets | partitions | triggers | clients | defenses | attacks | config | presets | all")
      ->check(CLI::IsMember({"models", "datasets", "partitions", "triggers", "clients", "defenses", "attacks", "config",
                             "presets", "all"}));
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--markdown", *markdown,
                "config, clients, defenses, attacks: Markdown tables, the form of docs/config.md and fl/README.md "
                "(tests/test_docs_from_code.cpp checks those files against the code)");
  return [what, markdown]() {
    const bool all = *what == "all";
    if (*markdown) return print_markdown(*what);
    if (all || *what == "models") {
      std::printf("models:\n");
      for (const ModelInfo& m : model_catalog()) std::printf("  %-12s %s\n", m.name.c_str(), m.description.c_str());
    }
    if (all || *what == "datasets") {
      std::printf("datasets:\n");
      for (const std::string& d : dataset_descriptions()) std::printf("  %s\n", d.c_str());
    }
    if (all || *what == "partitions") {
      std::printf("partitions:\n");
      for (const auto& [form, rule] : kPartitionForms) std::printf("  %-16s %s\n", form, rule);
    }
    if (all || *what == "triggers") {
      std::printf("triggers (geometry, value and space in data/triggers.h):\n ");
      for (const std::string& t : trigger_names()) std::printf(" %s", t.c_str());
      std::printf("\n");
    }
    if (all || *what == "clients") print_units("client rules", client_rule_registry());
    if (all || *what == "defenses") print_server_rules();
    if (all || *what == "attacks") print_attacks();
    if (all || *what == "config") print_config_keys(false);
    if (all || *what == "presets") print_presets();
    return 0;
  };
}

}  // namespace bastion::cli
