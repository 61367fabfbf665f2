#include "runtime/core/thread_pool.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/platform/platform.h"

namespace ember {
namespace {
// True on a thread while it runs a task of some pool: a nested parallel_for then runs inline
// instead of waiting for a pool that is busy running its caller (which would deadlock).
thread_local bool t_in_task = false;

// Before blocking on a condition variable, workers (for the next call) and the caller (for the
// workers to finish) spin this long. A decode step makes ~170 parallel_for calls tens of
// microseconds apart; a worker that went to sleep between two of them costs a futex wake plus a
// scheduler hand-off per call, more than a small GEMV itself (NVFP4 decode at batch 1 ran slower
// with 2 threads than with 1). The bound keeps an idle pool from burning a core.
constexpr std::chrono::microseconds kSpin{100};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// EMBER_THREAD_POOL_STRESS is defined only by a test build (tests/runtime/core): it sleeps at each
// hand-off point so that interleavings a loaded machine produces once in thousands of runs happen
// on every call there. Release and library builds compile it away.
inline void stress_pause() {
#ifdef EMBER_THREAD_POOL_STRESS
  std::this_thread::sleep_for(std::chrono::microseconds(20));
#endif
}

// Whether pred() became true within kSpin.
template <class Pred>
bool spin_until(Pred pred) {
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 1;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() - start > kSpin) return pred();
      std::this_thread::yield();  // an oversubscribed core runs the thread we wait for
    }
  }
}
}  // namespace

// Work is handed out by an atomic counter; a generation number wakes the workers. All storage is
// made in the constructor, so parallel_for() never allocates.
struct FixedThreadPool::State {
  std::mutex call_mutex;  // one parallel_for at a time
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable done;
  std::atomic<uint64_t> generation{0};  // written under `mutex`; read without it while spinning
  std::atomic<bool> stopping{false};
  TaskFn fn = nullptr;
  void* arg = nullptr;
  size_t count = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  std::atomic<size_t> busy_workers{0};  // changed under `mutex`; read without it while spinning
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
    if (completed) finished.fetch_add(completed, std::memory_order_seq_cst);  // see worker_main
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
    state_->stopping.store(true, std::memory_order_release);
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
    auto called = [&] {
      return s->stopping.load(std::memory_order_acquire) || s->generation.load(std::memory_order_acquire) != seen;
    };
    spin_until(called);
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->wake.wait(lock, called);
      if (s->stopping.load(std::memory_order_relaxed)) return;
      seen = s->generation.load(std::memory_order_relaxed);
      stress_pause();
      // A worker that wakes after this call's tasks are all done must not join it: the caller may
      // already have returned (fn/arg dangle), and the next call resets `next`/`finished`, so a late
      // joiner would run the old fn on the new call's indices and over-count `finished` (hang).
      // The worker registers in busy_workers *before* it reads `finished`, both seq_cst, because
      // the caller reads them lock-free in the opposite order (finished, then busy_workers): either
      // this load sees the last task's increment (and the worker backs off), or the caller's load
      // of busy_workers sees this registration (and waits). Checking first and registering after
      // let the caller return in between; the worker then ran the old fn with the next call's
      // indices (heap-use-after-free under ASan, session 7).
      s->busy_workers.fetch_add(1, std::memory_order_seq_cst);
      stress_pause();
      if (s->finished.load(std::memory_order_seq_cst) >= s->count) {
        s->busy_workers.fetch_sub(1, std::memory_order_seq_cst);
        continue;
      }
      fn = s->fn;
      arg = s->arg;
      count = s->count;
    }
    s->run_tasks(fn, arg, count);
    stress_pause();
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->busy_workers.fetch_sub(1, std::memory_order_seq_cst);
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
    s->generation.fetch_add(1, std::memory_order_release);
  }
  s->wake.notify_all();
  stress_pause();
  s->run_tasks(fn, arg, count);
  // Wait until every task ran and no worker is still inside run_tasks() for this generation.
  auto all_done = [&] {
    return s->finished.load(std::memory_order_seq_cst) == count &&  // this order: see worker_main
           s->busy_workers.load(std::memory_order_seq_cst) == 0;
  };
  if (spin_until(all_done)) return;
  std::unique_lock<std::mutex> lock(s->mutex);
  s->done.wait(lock, all_done);
}

}  // namespace ember
