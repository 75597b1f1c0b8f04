// mpi_grid over MPI: rank 0 schedules, every rank runs tasks (the protocol is in fl/core/mpi_grid.h).
// Messages: a worker sends kTagOutcome = [u64 index][i32 status][f64 seconds][error bytes], index kNone
// meaning "ready, nothing done yet"; rank 0 answers kTagAssign = [u64 index], kNone meaning "all done,
// stop". Rank 0 holds back the stop until every task has finished, so no rank sits in MPI_Finalize's
// busy wait while others still compute. MPI calls come from the main thread only (MPI_THREAD_FUNNELED);
// rank 0's own tasks run on a second thread that shares the queue through a mutex.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "fl/core/mpi_grid.h"
#include "tensor/error.h"

namespace bastion {

namespace {

constexpr uint64_t kNone = UINT64_MAX;
constexpr int kTagOutcome = 1, kTagAssign = 2;
// Open MPI's blocking receive spins a core while it waits; waits here poll at this period instead.
// Tasks take seconds to hours, so a few milliseconds of latency cost nothing.
constexpr auto kPollPeriod = std::chrono::milliseconds(5);

void mpi_check(int code, const char* what) { BASTION_CHECK(code == MPI_SUCCESS, "MPI call failed: ", what); }

std::vector<char> encode(uint64_t index, const GridOutcome& outcome) {
  const int32_t status = static_cast<int32_t>(outcome.status);
  std::vector<char> bytes(sizeof index + sizeof status + sizeof outcome.seconds + outcome.error.size());
  char* p = bytes.data();
  std::memcpy(p, &index, sizeof index);
  std::memcpy(p += sizeof index, &status, sizeof status);
  std::memcpy(p += sizeof status, &outcome.seconds, sizeof outcome.seconds);
  std::memcpy(p + sizeof outcome.seconds, outcome.error.data(), outcome.error.size());
  return bytes;
}

std::pair<uint64_t, GridOutcome> decode(const std::vector<char>& bytes, int rank) {
  uint64_t index = kNone;
  int32_t status = 0;
  GridOutcome outcome;
  constexpr size_t header = sizeof index + sizeof status + sizeof outcome.seconds;
  BASTION_ASSERT(bytes.size() >= header);
  const char* p = bytes.data();
  std::memcpy(&index, p, sizeof index);
  std::memcpy(&status, p += sizeof index, sizeof status);
  std::memcpy(&outcome.seconds, p += sizeof status, sizeof outcome.seconds);
  outcome.status = static_cast<GridOutcome::Status>(status);
  outcome.error.assign(bytes.data() + header, bytes.size() - header);
  outcome.rank = rank;
  return {index, outcome};
}

// Receives the next message with `tag` from `source` (MPI_ANY_SOURCE allowed) without spinning;
// `idle` runs between polls (rank 0 drains its own finished tasks there). Returns false when `idle`
// asks to stop waiting.
bool receive(int source, int tag, std::vector<char>& bytes, MPI_Status& status, const std::function<bool()>& idle) {
  for (;;) {
    int ready = 0;
    mpi_check(MPI_Iprobe(source, tag, MPI_COMM_WORLD, &ready, &status), "MPI_Iprobe");
    if (ready) break;
    if (idle && !idle()) return false;
    std::this_thread::sleep_for(kPollPeriod);
  }
  int size = 0;
  mpi_check(MPI_Get_count(&status, MPI_CHAR, &size), "MPI_Get_count");
  bytes.resize(static_cast<size_t>(size));
  mpi_check(MPI_Recv(bytes.data(), size, MPI_CHAR, status.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Recv");
  return true;
}

void send_index(uint64_t index, int rank) {
  mpi_check(MPI_Send(&index, static_cast<int>(sizeof index), MPI_CHAR, rank, kTagAssign, MPI_COMM_WORLD), "MPI_Send");
}

// An escaped exception becomes a failed outcome: the rank stays in the grid and reports it.
GridOutcome run_task(const GridTask& task, size_t index, int rank) {
  const auto start = std::chrono::steady_clock::now();
  GridOutcome outcome;
  try {
    outcome = task(index);
  } catch (const std::exception& e) {
    outcome.status = GridOutcome::Status::failed;
    outcome.error = e.what();
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  outcome.rank = rank;
  return outcome;
}

// The queue of task indices and rank 0's own finished tasks, shared by its two threads.
class SharedQueue {
 public:
  explicit SharedQueue(size_t count) : count_(count) {}
  uint64_t take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_ < count_ ? next_++ : kNone;
  }
  void finish(size_t index, GridOutcome outcome) {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.emplace_back(index, std::move(outcome));
  }
  std::vector<std::pair<size_t, GridOutcome>> drain() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(finished_, {});
  }

 private:
  std::mutex mutex_;
  size_t next_ = 0, count_;
  std::vector<std::pair<size_t, GridOutcome>> finished_;
};

void schedule(size_t count, const GridTask& task, const GridDone& done, int size) {
  SharedQueue queue(count);
  std::thread own([&] {
    for (uint64_t i = queue.take(); i != kNone; i = queue.take()) queue.finish(i, run_task(task, i, 0));
  });
  size_t finished = 0;
  int stopped = 0;
  std::vector<int> waiting;  // ranks that asked for work after the queue ran dry
  const auto drain_own = [&] {
    for (auto& [index, outcome] : queue.drain()) done(index, outcome), ++finished;
    return true;
  };
  std::vector<char> bytes;
  MPI_Status status;
  while (stopped < size - 1) {
    // Stop waiting when everything is done and some ranks wait for their stop; otherwise wait on.
    const bool got = receive(MPI_ANY_SOURCE, kTagOutcome, bytes, status,
                             [&] { return drain_own() && !(finished == count && !waiting.empty()); });
    if (got) {
      const auto [index, outcome] = decode(bytes, status.MPI_SOURCE);
      if (index != kNone) done(index, outcome), ++finished;
      const uint64_t next = queue.take();
      if (next != kNone)
        send_index(next, status.MPI_SOURCE);
      else
        waiting.push_back(status.MPI_SOURCE);
    }
    drain_own();
    if (finished < count) continue;
    for (int rank : waiting) send_index(kNone, rank), ++stopped;
    waiting.clear();
  }
  own.join();
  drain_own();
}

void work(const GridTask& task, int rank) {
  std::vector<char> bytes = encode(kNone, {});
  MPI_Status status;
  for (;;) {
    mpi_check(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, 0, kTagOutcome, MPI_COMM_WORLD),
              "MPI_Send");
    receive(0, kTagAssign, bytes, status, nullptr);
    uint64_t index = kNone;
    BASTION_ASSERT(bytes.size() == sizeof index);
    std::memcpy(&index, bytes.data(), sizeof index);
    if (index == kNone) return;
    bytes = encode(index, run_task(task, index, rank));
  }
}

GridWorld join_world() {
  if (launcher_size() <= 1) return {};
  int initialized = 0;
  mpi_check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    BASTION_CHECK(provided >= MPI_THREAD_FUNNELED, "this MPI library does not allow threads (MPI_THREAD_FUNNELED)");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  GridWorld world;
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world.size), "MPI_Comm_size");
  return world;
}

}  // namespace

bool mpi_built() { return true; }

GridWorld grid_world() {
  static const GridWorld world = join_world();
  return world;
}

GridWorld run_grid(size_t count, const GridTask& task, const GridDone& done) {
  const GridWorld world = grid_world();
  if (world.size == 1)
    run_grid_in_order(count, task, done);
  else if (world.rank == 0)
    schedule(count, task, done, world.size);
  else
    work(task, world.rank);
  return world;
}

}  // namespace bastion
