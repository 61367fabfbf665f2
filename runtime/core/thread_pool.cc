#include "runtime/core/thread_pool.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/platform/platform.h"

namespace ember {
namespace {
// True on a thread while it runs a task of some pool: a nested parallel_for then runs inline
// instead of waiting for a pool that is busy running its caller (which would deadlock).
thread_local bool t_in_task = false;
}  // namespace

// Work is handed out by an atomic counter; a generation number wakes the workers. All storage is
// made in the constructor, so parallel_for() never allocates.
struct FixedThreadPool::State {
  std::mutex call_mutex;  // one parallel_for at a time
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable done;
  uint64_t generation = 0;
  bool stopping = false;
  TaskFn fn = nullptr;
  void* arg = nullptr;
  size_t count = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  size_t busy_workers = 0;
  size_t worker_count = 0;
  std::thread workers[kMaxThreads];

  // fn/arg/count are passed in, read under `mutex` together with the generation.
  void run_tasks(TaskFn fn, void* arg, size_t count) {
    size_t completed = 0;
    for (;;) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) break;
      t_in_task = true;
      fn(arg, i);
      t_in_task = false;
      ++completed;
    }
    if (completed) finished.fetch_add(completed, std::memory_order_acq_rel);
  }
};

FixedThreadPool::FixedThreadPool(size_t thread_count)
    : thread_count_(thread_count < 1 ? 1 : (thread_count > kMaxThreads ? kMaxThreads : thread_count)),
      state_(new State()) {
  state_->worker_count = thread_count_ - 1;
  for (size_t i = 0; i < state_->worker_count; ++i) {
    state_->workers[i] = std::thread(worker_main, state_);
  }
}

FixedThreadPool::~FixedThreadPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  for (size_t i = 0; i < state_->worker_count; ++i) state_->workers[i].join();
  delete state_;
}

void FixedThreadPool::worker_main(State* s) {
  uint64_t seen = 0;
  for (;;) {
    TaskFn fn;
    void* arg;
    size_t count;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->wake.wait(lock, [&] { return s->stopping || s->generation != seen; });
      if (s->stopping) return;
      seen = s->generation;
      // A worker that wakes after this call's tasks are all done must not join it: the caller may
      // already have returned (fn/arg dangle), and the next call resets `next`/`finished`, so a late
      // joiner would run the old fn on the new call's indices and over-count `finished` (hang).
      if (s->finished.load(std::memory_order_acquire) >= s->count) continue;
      fn = s->fn;
      arg = s->arg;
      count = s->count;
      ++s->busy_workers;  // the caller waits for this to drop back before returning
    }
    s->run_tasks(fn, arg, count);
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      --s->busy_workers;
    }
    s->done.notify_all();
  }
}

void FixedThreadPool::parallel_for(size_t count, TaskFn fn, void* arg) {
  if (count == 0) return;
  if (t_in_task) {
    for (size_t i = 0; i < count; ++i) fn(arg, i);
    return;
  }
  State* s = state_;
  std::lock_guard<std::mutex> call_lock(s->call_mutex);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->fn = fn;
    s->arg = arg;
    s->count = count;
    s->next.store(0, std::memory_order_relaxed);
    s->finished.store(0, std::memory_order_relaxed);
    ++s->generation;
  }
  s->wake.notify_all();
  s->run_tasks(fn, arg, count);
  // Wait until every task ran and no worker is still inside run_tasks() for this generation.
  std::unique_lock<std::mutex> lock(s->mutex);
  s->done.wait(lock, [&] {
    return s->finished.load(std::memory_order_acquire) == count && s->busy_workers == 0;
  });
}

}  // namespace ember
