// mpi_run without MPI (BASTION_MPI=OFF or not found): every experiment runs in this process. Started by
// mpirun with K > 1 it refuses (grid_world() throws), instead of K copies running the same experiment
// into the same folder.
#include "fl/core/mpi_grid.h"
#include "fl/core/mpi_run.h"

namespace bastion {

std::unique_ptr<RunTransport> make_run_transport() {
  grid_world();  // throws for K > 1
  return std::make_unique<LocalTransport>();
}

void abort_all_ranks(int) {}

}  // namespace bastion
