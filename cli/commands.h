// The `bastion` subcommands. Each registers its options on a CLI11 subcommand and returns the
// function that runs it; main() turns bastion::Error into a one-line message and exit code 1.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace bastion::cli {

using Command = std::function<int()>;

Command add_train_command(CLI::App& app);
Command add_list_command(CLI::App& app);
Command add_data_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_reproduce_command(CLI::App& app, int argc, char** argv);

}  // namespace bastion::cli
