// mpi_run over MPI (fl/core/mpi_run.h): gather, broadcast and scatter of byte blobs on MPI_COMM_WORLD, each
// as two nonblocking collectives (the sizes, then the bytes) completed by a polling wait. Counts are int
// in MPI: a blob over 2 GiB is refused with a clear error (a round of 1,000 LeNet uploads is 240 MB).
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "fl/core/mpi_grid.h"
#include "fl/core/mpi_run.h"
#include "tensor/error.h"

namespace bastion {

namespace {

void mpi_check(int code, const char* what) { BASTION_CHECK(code == MPI_SUCCESS, "MPI call failed: ", what); }

// Completes `request` without spinning a core for long: tight polls (yielding the core) for the first
// few milliseconds, while a transfer is under way and needs progress calls, then one poll every 100 µs
// (a rank waiting for rank 0's aggregation and evaluation waits seconds).
void wait(MPI_Request& request, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    mpi_check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(5))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

int mpi_count(size_t bytes) {
  BASTION_CHECK(bytes <= static_cast<size_t>(INT_MAX), "an MPI message of ", bytes,
                " bytes is over MPI's 2 GiB count limit: use fewer clients per round or more ranks");
  return static_cast<int>(bytes);
}

class MpiTransport final : public RunTransport {
 public:
  MpiTransport(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<Bytes> gather(const Bytes& mine) override {
    const int64_t my_size = static_cast<int64_t>(mine.size());
    std::vector<int64_t> sizes(rank_ == 0 ? static_cast<size_t>(size_) : 0);
    MPI_Request request;
    mpi_check(MPI_Igather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &request),
              "MPI_Igather");
    wait(request, "MPI_Igather");
    std::vector<int> counts, displs;
    Bytes all;
    if (rank_ == 0) {
      size_t total = 0;
      for (int64_t s : sizes) {
        counts.push_back(mpi_count(static_cast<size_t>(s)));
        displs.push_back(mpi_count(total));
        total += static_cast<size_t>(s);
      }
      all.resize(total);
      bytes_moved_ += static_cast<int64_t>(total - mine.size());
    }
    mpi_check(MPI_Igatherv(mine.data(), mpi_count(mine.size()), MPI_CHAR, all.data(), counts.data(), displs.data(),
                           MPI_CHAR, 0, MPI_COMM_WORLD, &request),
              "MPI_Igatherv");
    wait(request, "MPI_Igatherv");
    std::vector<Bytes> parts;
    for (size_t r = 0; r < counts.size(); ++r)
      parts.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
    return parts;
  }

  void broadcast(Bytes& bytes) override {
    int64_t n = static_cast<int64_t>(bytes.size());
    MPI_Request request;
    mpi_check(MPI_Ibcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
    wait(request, "MPI_Ibcast");
    bytes.resize(static_cast<size_t>(n));
    if (n == 0) return;
    mpi_check(MPI_Ibcast(bytes.data(), mpi_count(bytes.size()), MPI_CHAR, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
    wait(request, "MPI_Ibcast");
    if (rank_ == 0) bytes_moved_ += n * (size_ - 1);
  }

  Bytes scatter(const std::vector<Bytes>& parts) override {
    std::vector<int64_t> sizes;
    std::vector<int> counts, displs;
    Bytes all;
    if (rank_ == 0) {
      BASTION_ASSERT(parts.size() == static_cast<size_t>(size_));
      for (const Bytes& part : parts) {
        sizes.push_back(static_cast<int64_t>(part.size()));
        counts.push_back(mpi_count(part.size()));
        displs.push_back(mpi_count(all.size()));
        all.insert(all.end(), part.begin(), part.end());
      }
      bytes_moved_ += static_cast<int64_t>(all.size() - parts[0].size());
    }
    int64_t my_size = 0;
    MPI_Request request;
    mpi_check(MPI_Iscatter(sizes.data(), 1, MPI_INT64_T, &my_size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &request),
              "MPI_Iscatter");
    wait(request, "MPI_Iscatter");
    Bytes mine(static_cast<size_t>(my_size));
    mpi_check(MPI_Iscatterv(all.data(), counts.data(), displs.data(), MPI_CHAR, mine.data(), mpi_count(mine.size()),
                            MPI_CHAR, 0, MPI_COMM_WORLD, &request),
              "MPI_Iscatterv");
    wait(request, "MPI_Iscatterv");
    return mine;
  }

 private:
  int rank_, size_;
};

}  // namespace

std::unique_ptr<RunTransport> make_run_transport() {
  const GridWorld world = grid_world();
  if (world.size == 1) return std::make_unique<LocalTransport>();
  return std::make_unique<MpiTransport>(world.rank, world.size);
}

void abort_all_ranks(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace bastion
