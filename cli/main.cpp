// bastion: the command-line entry point. Subcommands live in cli/*.cpp (see cli/commands.h).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>

#include "cli/commands.h"
#include "fl/core/mpi_grid.h"
#include "fl/core/mpi_run.h"
#include "kernels/cpu/gemm.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  bastion::gemm_select_blas_core(argv);  // may re-execute once with OPENBLAS_CORETYPE set
  // Over a file-size limit (ulimit -f) the kernel's default for SIGXFSZ kills the process mid-write;
  // ignored, the write fails with EFBIG and is reported like a full disk, with the temporary removed.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"Bastion: a from-scratch deep-learning engine and federated-learning security lab"};
  app.require_subcommand(1);
  const std::string commit = bastion::cli::build_commit();
  app.set_version_flag("--version",
                       "bastion, built from " + (commit.empty() ? std::string("an unknown commit") : commit));
  bool verbose = false;
  app.add_flag("--verbose", verbose,
               "Errors name the source file and line where they were raised (also BASTION_DEBUG=1)");
  std::map<CLI::App*, bastion::cli::Command> commands;
  for (auto add : {bastion::cli::add_train_command, bastion::cli::add_list_command, bastion::cli::add_data_command,
                   bastion::cli::add_run_command, bastion::cli::add_plot_command, bastion::cli::add_report_command}) {
    bastion::cli::Command command = add(app);
    commands[app.get_subcommands({}).back()] = command;
  }
  // reproduce writes its command line into table.md, so it is given argv.
  bastion::cli::Command reproduce = bastion::cli::add_reproduce_command(app, argc, argv);
  commands[app.get_subcommands({}).back()] = reproduce;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage error is an error like any other: one line with the prefix, exit status 1 (README).
    std::fprintf(stderr, "bastion: error: %s (see bastion --help)\n", e.what());
    return 1;
  }
  // --verbose is BASTION_DEBUG=1 for every error line this process prints (message_for_user), including
  // a reproduce grid's per-run failures.
  if (verbose) setenv("BASTION_DEBUG", "1", 1);
  try {
    // Under mpirun with K > 1 only reproduce (fl/core/mpi_grid.h) and run (fl/core/mpi_run.h) divide
    // their work; any other command would run K times over the same files.
    BASTION_CHECK(
        bastion::launcher_size() <= 1 || app.got_subcommand("reproduce") || app.got_subcommand("run") ||
            app.got_subcommand("list"),
        "started by mpirun with ", bastion::launcher_size(),
        " processes, but only `bastion reproduce` "
        "and `bastion run` spread their work over MPI ranks (docs/scale-out.md); run this command without mpirun");
    for (auto& [sub, command] : commands)
      if (sub->parsed()) return command();
  } catch (const bastion::Error& e) {
    // Users get the message; the source locations are for bug reports (--verbose, BASTION_DEBUG=1).
    std::fprintf(stderr, "bastion: error: %s\n", bastion::message_for_user(e.what()).c_str());
    bastion::abort_all_ranks(1);  // under mpirun the other ranks would wait for this one forever
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bastion: unexpected error: %s\n", e.what());
    bastion::abort_all_ranks(1);
    return 1;
  }
  return 0;
}
