// The `bastion` subcommands. Each registers its options on a CLI11 subcommand and returns the
// function that runs it; main() turns bastion::Error into a one-line message and exit code 1.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <functional>
#include <string>

namespace bastion::cli {

using Command = std::function<int()>;

Command add_train_command(CLI::App& app);
Command add_list_command(CLI::App& app);
Command add_data_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_reproduce_command(CLI::App& app, int argc, char** argv);
Command add_plot_command(CLI::App& app);
Command add_report_command(CLI::App& app);

// The folder of the paper presets: ./configs/papers in a checkout, else <prefix>/share/bastion/configs/papers
// of an installed binary (cli/presets_folder.cpp).
std::string presets_folder();

// The short commit this binary was built from, with " (with uncommitted changes)" when the build's
// tracked files differed from it; "" when built outside a git checkout. Generated at build time
// (scripts/build_commit.cmake): a checkout's HEAD can move on after the build.
const char* build_commit();

// `--data-dir DIR` of run and reproduce: the same as BASTION_DATA=DIR for this process (a config's own
// data.data_dir still wins). Through the environment, not a --set, so the folder never enters the run's
// config: results and --resume stay independent of where a machine keeps its datasets.
inline void add_data_dir_option(CLI::App* sub, std::string& dir) {
  sub->add_option("--data-dir", dir, "Dataset folder (as BASTION_DATA=DIR; else ./data, /usr/share/datasets)");
}
inline void use_data_dir(const std::string& dir) {
  if (!dir.empty()) setenv("BASTION_DATA", dir.c_str(), 1);
}

}  // namespace bastion::cli
