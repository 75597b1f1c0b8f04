// mpi_run: the transport of one experiment whose clients are spread over the processes that
// `mpirun -np K bastion run` started (DESIGN.md "Scale beyond one machine", the run mode; the grid mode
// is fl/core/mpi_grid.h). The round loop (fl/core/seed_run.cpp) speaks only through this interface:
// three collective steps between rank 0 (the server) and the ranks that own clients, on byte blobs that
// fl/core/spread_round.h packs. Every rank calls the same steps in the same order.
//
// Implementations: LocalTransport (K = 1, in this process: the round loop then takes none of these steps;
// both builds), and the MPI one (fl/core/mpi/run_mpi.cpp) picked by make_run_transport() in a build with
// MPI under a launcher with K > 1. The build without MPI (fl/core/mpi/run_no_mpi.cpp) refuses K > 1 with
// how to get an MPI build. Waits poll (MPI_Test, then a 1 ms sleep) instead of blocking: Open MPI's
// blocking calls spin a core at 100 %, which the threads training clients on the same machine need.
// Calls come from the main thread only (MPI_THREAD_FUNNELED); the thread pool never calls them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace bastion {

using Bytes = std::vector<char>;

class RunTransport {
 public:
  virtual ~RunTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank 0 gets every rank's `mine` in rank order (its own first); the other ranks get an empty list.
  virtual std::vector<Bytes> gather(const Bytes& mine) = 0;
  // Rank 0's `bytes` replace every other rank's.
  virtual void broadcast(Bytes& bytes) = 0;
  // parts[r] (given on rank 0; ignored elsewhere) reaches rank r; returns this rank's part.
  virtual Bytes scatter(const std::vector<Bytes>& parts) = 0;
  // Payload bytes that crossed between processes so far (counted on rank 0, which takes part in every
  // step: what it received plus what it sent; size fields excluded). 0 for K = 1.
  int64_t bytes_moved() const { return bytes_moved_; }

 protected:
  int64_t bytes_moved_ = 0;
};

// K = 1: gather returns {mine}, broadcast keeps the bytes, scatter returns parts[0].
class LocalTransport final : public RunTransport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<Bytes> gather(const Bytes& mine) override { return {mine}; }
  void broadcast(Bytes&) override {}
  Bytes scatter(const std::vector<Bytes>& parts) override { return parts.empty() ? Bytes{} : parts[0]; }
};

// The transport of this process: LocalTransport without a launcher (or -np 1), the MPI transport under
// mpirun with K > 1 (joining MPI once, as grid_world() does). Without MPI and K > 1: throws bastion::Error
// saying how to build with MPI.
std::unique_ptr<RunTransport> make_run_transport();

// After an error on any rank under K > 1 the others would wait forever in the next step: this ends every
// rank of the job with `code` (MPI_Abort). Does nothing for K = 1 or without MPI.
void abort_all_ranks(int code);

}  // namespace bastion
