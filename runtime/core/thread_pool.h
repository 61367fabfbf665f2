// ThreadPool: Ember's small parallel-for interface. Kernels split work over it; the caller's thread
// takes part. parallel_for() never allocates. One parallel_for runs at a time per pool (concurrent
// callers are serialized), so two Methods on two threads can share one pool.
#pragma once

#include <cstddef>

namespace ember {

class ThreadPool {
 public:
  using TaskFn = void (*)(void* arg, size_t index);
  virtual ~ThreadPool() = default;
  // Calls fn(arg, i) for every i in [0, count), on any threads; returns when all are done.
  virtual void parallel_for(size_t count, TaskFn fn, void* arg) = 0;
  // Threads that run tasks, the caller included (>= 1).
  virtual size_t thread_count() const = 0;
  // A pool built on a native thread-pool library returns its handle (backends/xnnpack's
  // PthreadPool: its pthreadpool_t), so a backend that takes one (XNNPACK) runs on the same threads
  // instead of starting its own; null: none.
  virtual void* native_handle() const { return nullptr; }
};

// Runs fn(arg, i) for i in [0, count) on `pool`, or inline when pool is null.
inline void parallel_for(ThreadPool* pool, size_t count, ThreadPool::TaskFn fn, void* arg) {
  if (pool == nullptr || count <= 1 || pool->thread_count() <= 1) {
    for (size_t i = 0; i < count; ++i) fn(arg, i);
  } else {
    pool->parallel_for(count, fn, arg);
  }
}

// A parallel_for called from inside a task runs inline on the calling thread.
//
// Ember's own fixed pool: `thread_count - 1` worker threads started in create(), joined in the
// destructor. Between calls a worker spins for up to 100 us, then waits on a condition variable
// (an idle pool sleeps); the caller spins as long for the workers before it blocks.
class FixedThreadPool final : public ThreadPool {
 public:
  static constexpr size_t kMaxThreads = 64;
  // thread_count in [1, kMaxThreads]; allocates the threads (load time, not run time).
  explicit FixedThreadPool(size_t thread_count);
  ~FixedThreadPool() override;
  FixedThreadPool(const FixedThreadPool&) = delete;
  FixedThreadPool& operator=(const FixedThreadPool&) = delete;

  void parallel_for(size_t count, TaskFn fn, void* arg) override;
  size_t thread_count() const override { return thread_count_; }

 private:
  struct State;
  static void worker_main(State* state);
  size_t thread_count_;
  State* state_;
};

}  // namespace ember
