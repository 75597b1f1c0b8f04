// `bastion list [models|datasets]`: every registered name with a one-line description.
#include <cstdio>

#include "cli/commands.h"
#include "data/dataset.h"
#include "nn/models.h"

namespace bastion::cli {

Command add_list_command(CLI::App& app) {
  auto* sub = app.add_subcommand("list", "List models and datasets");
  auto what = std::make_shared<std::string>("all");
  sub->add_option("what", *what, "models | datasets | all")->check(CLI::IsMember({"models", "datasets", "all"}));
  return [what]() {
    if (*what == "models" || *what == "all") {
      std::printf("models:\n");
      for (const ModelInfo& m : model_catalog()) std::printf("  %-12s %s\n", m.name.c_str(), m.description.c_str());
    }
    if (*what == "datasets" || *what == "all") {
      std::printf("datasets:\n");
      for (const std::string& d : dataset_descriptions()) std::printf("  %s\n", d.c_str());
    }
    return 0;
  };
}

}  // namespace bastion::cli
