// `bastion list [models|datasets|partitions|triggers]`: every registered name with a one-line description.
#include <cstdio>

#include "cli/commands.h"
#include "data/dataset.h"
#include "data/triggers.h"
#include "nn/models.h"

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

}  // namespace

Command add_list_command(CLI::App& app) {
  auto* sub = app.add_subcommand("list", "List models, datasets, partitions and triggers");
  auto what = std::make_shared<std::string>("all");
  sub->add_option("what", *what, "models | datasets | partitions | triggers | all")
      ->check(CLI::IsMember({"models", "datasets", "partitions", "triggers", "all"}));
  return [what]() {
    const bool all = *what == "all";
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
    return 0;
  };
}

}  // namespace bastion::cli
