// mpi_grid: a grid of independent tasks (the runs of `bastion reproduce`) spread over the processes that
// `mpirun -np K` started (DESIGN.md "Scale beyond one machine", the grid mode).
//
// Protocol (fl/core/mpi/grid_mpi.cpp): rank 0 schedules. Every other rank sends "ready", then gets one task
// index at a time and answers with its outcome (status, seconds, error text), which is also its request
// for the next index; so a rank that finishes early takes more tasks and long and short tasks balance.
// Rank 0 runs tasks too, on a second thread, from the same queue (its main thread only answers messages,
// polling every few milliseconds, so it costs no core). Only indices and outcomes travel; every task
// writes its own files, so with several machines the output folder must be on a shared file system.
// When all tasks are done every rank is released, and rank 0 has seen every outcome.
//
// K = 1 (no launcher, `mpirun -np 1`, or a build without MPI) runs the tasks in order in this process, on
// this thread: done(i) right after task(i), exactly the single-process loop.
//
// The build picks one implementation: fl/core/mpi/grid_mpi.cpp (BASTION_MPI found) or
// fl/core/mpi/grid_no_mpi.cpp, which refuses K > 1 with how to get an MPI build (instead of K processes
// each running the whole grid into the same folders). Callers have no #ifdef.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace bastion {

struct GridOutcome {
  enum class Status { ran, skipped, failed };
  Status status = Status::ran;
  double seconds = 0.0;  // the task's wall time
  std::string error;     // failed: the message
  int rank = 0;          // the process that ran it
};

// Runs task i; reports failures in the outcome (an exception that escapes is turned into a failed outcome
// when K > 1, so one bad task cannot stall the grid).
using GridTask = std::function<GridOutcome(size_t index)>;
// Called on rank 0 only, on the calling thread, once per task, in the order tasks finish.
using GridDone = std::function<void(size_t index, const GridOutcome& outcome)>;

struct GridWorld {
  int rank = 0, size = 1;
};

// The launcher's process count and this process's rank, from the environment (Open MPI's
// OMPI_COMM_WORLD_SIZE/RANK, PMI's PMI_SIZE/RANK); 1 and 0 when not started by a launcher.
int launcher_size();
int launcher_rank();
// This process's rank among the launcher's processes on this node (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK,
// MPICH's MPI_LOCALRANKID); 0 when not started by a launcher. A device run uses GPU local rank mod devices.
int launcher_local_rank();

// Whether this build has MPI (BASTION_MPI).
bool mpi_built();

// Joins MPI once when a launcher started this process (MPI_Finalize runs at exit) and returns this
// process's place; {0, 1} without a launcher. Without MPI and launcher_size() > 1: throws bastion::Error
// saying how to build with MPI.
GridWorld grid_world();

// Runs tasks 0 .. count-1 over grid_world()'s ranks (see the protocol above). Every rank calls it with the
// same count; returns this process's place when all tasks are done.
GridWorld run_grid(size_t count, const GridTask& task, const GridDone& done);

// The K = 1 loop (both implementations): done(i, task(i)) for i in order.
void run_grid_in_order(size_t count, const GridTask& task, const GridDone& done);

}  // namespace bastion
