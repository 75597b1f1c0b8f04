// mpi_grid without MPI (BASTION_MPI=OFF or not found): every grid runs in this process, in order. Started
// by mpirun with K > 1, it refuses: K copies would each run the whole grid into the same folders.
#include "fl/core/mpi_grid.h"
#include "tensor/error.h"

namespace bastion {

bool mpi_built() { return false; }

GridWorld grid_world() {
  BASTION_CHECK(launcher_size() <= 1, "this bastion was built without MPI, but a launcher started ", launcher_size(),
                " processes (each would run the whole grid or experiment into the same folders). Install Open MPI "
                "(Debian: apt-get install libopenmpi-dev openmpi-bin, or scripts/setup.sh) and rebuild with "
                "-DBASTION_MPI=ON; see docs/scale-out.md");
  return {};
}

GridWorld run_grid(size_t count, const GridTask& task, const GridDone& done) {
  const GridWorld world = grid_world();
  run_grid_in_order(count, task, done);
  return world;
}

}  // namespace bastion
