#include "fl/base/thread_pool.h"

#include "kernels/cpu/gemm.h"
#include "tensor/error.h"

namespace bastion {

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  BASTION_CHECK(threads >= 1, "thread pool needs at least one thread, got ", threads);
  if (threads_ == 1) return;
  for (int w = 0; w < threads_; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t, int)>& body) {
  if (threads_ == 1) {
    for (int64_t i = 0; i < tasks; ++i) body(i, 0);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  body_ = &body;
  tasks_ = tasks;
  next_task_ = finished_ = 0;
  errors_.assign(static_cast<size_t>(tasks), nullptr);
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [this] { return finished_ == tasks_; });
  body_ = nullptr;
  for (const std::exception_ptr& e : errors_)
    if (e) std::rethrow_exception(e);
}

void ThreadPool::worker_loop(int worker) {
  set_num_threads(1);
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && next_task_ < tasks_); });
    if (stop_) return;
    const int64_t task = next_task_++;
    if (next_task_ == tasks_) seen = generation_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*body_)(task, worker);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    errors_[task] = error;
    if (++finished_ == tasks_) done_.notify_all();
  }
}

}  // namespace bastion
