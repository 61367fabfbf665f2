// PthreadPool: Ember's ThreadPool on Debian's pthreadpool, the library XNNPACK parallelizes with, so
// the cpu kernels (Highway) and every XNNPACK delegate share one set of threads
// (`make_builtin_thread_pool()` returns it when this backend is built; the backend takes the app's
// pool through ThreadPool::native_handle()). Threads are started at construction, never per call.
#pragma once

#include <cstddef>

#include "runtime/core/thread_pool.h"

namespace ember::backends::xnnpack {

class PthreadPool final : public ThreadPool {
 public:
  // thread_count in [1, FixedThreadPool::kMaxThreads], the caller included. A pool whose threads
  // could not be created runs every task inline (ok() false, thread_count() 1).
  explicit PthreadPool(size_t thread_count);
  ~PthreadPool() override;
  PthreadPool(const PthreadPool&) = delete;
  PthreadPool& operator=(const PthreadPool&) = delete;

  bool ok() const { return pool_ != nullptr || threads_ == 1; }
  // ThreadPool's rules: no allocation; concurrent callers are serialized (pthreadpool's own lock);
  // a parallel_for from inside a task runs inline on the calling thread.
  void parallel_for(size_t count, TaskFn fn, void* arg) override;
  size_t thread_count() const override { return threads_; }
  void* native_handle() const override { return pool_; }

 private:
  void* pool_ = nullptr;  // pthreadpool_t; null for one thread
  size_t threads_ = 1;
};

}  // namespace ember::backends::xnnpack
