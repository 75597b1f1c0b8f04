// ThreadPool: runs the tasks 0..n-1 of one parallel loop on a fixed set of worker threads and waits for
// all of them. The round loop trains clients with it (one task = one client) and evaluates with it (one
// task = one fixed-size chunk of the test set). Task i may run on any worker: a task must write only its
// own output slot, and each worker owns its scratch (a Model replica): `worker` says which.
// Every worker runs Bastion's kernels single-threaded (set_num_threads(1)), so pool threads and kernel
// threads never multiply (2 clients x 2 BLAS threads ran 2-3x slower on the 2-core box).
// threads == 1 runs the tasks inline on the caller, in order.
// An exception in a task is rethrown by run() (the first one, by task order) after all tasks ended.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace bastion {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }
  void run(int64_t tasks, const std::function<void(int64_t task, int worker)>& body);

 private:
  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int)>* body_ = nullptr;
  int64_t tasks_ = 0, next_task_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;

  void worker_loop(int worker);
};

// body(task, worker) for every task on `pool`, or inline in task order on the caller (worker 0) when there
// is none (a server rule called without AggregationInput::pool).
inline void run_tasks(ThreadPool* pool, int64_t tasks, const std::function<void(int64_t task, int worker)>& body) {
  if (pool != nullptr)
    pool->run(tasks, body);
  else
    for (int64_t t = 0; t < tasks; ++t) body(t, 0);
}

}  // namespace bastion
