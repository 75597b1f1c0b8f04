// mpi_grid: the parts both builds share (launcher detection, the in-order loop). The scheduler itself is
// fl/core/mpi/grid_mpi.cpp; the build without MPI links fl/core/mpi/grid_no_mpi.cpp.
#include "fl/core/mpi_grid.h"

#include <cstdlib>
#include <string>

namespace bastion {

namespace {

// The first of the variables that is set to a non-negative integer; -1 when none is.
int env_integer(const char* const* names) {
  for (; *names != nullptr; ++names) {
    const char* text = std::getenv(*names);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end == '\0' && value >= 0 && value < (1L << 30)) return static_cast<int>(value);
  }
  return -1;
}

}  // namespace

int launcher_size() {
  static const char* const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", nullptr};
  const int size = env_integer(names);
  return size > 0 ? size : 1;
}

int launcher_rank() {
  static const char* const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", nullptr};
  const int rank = env_integer(names);
  return rank > 0 ? rank : 0;
}

int launcher_local_rank() {
  static const char* const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", nullptr};
  const int rank = env_integer(names);
  return rank > 0 ? rank : 0;
}

void run_grid_in_order(size_t count, const GridTask& task, const GridDone& done) {
  for (size_t i = 0; i < count; ++i) done(i, task(i));
}

}  // namespace bastion
