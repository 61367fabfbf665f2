#include "backends/xnnpack/thread_pool.h"

#include <pthreadpool.h>

namespace ember::backends::xnnpack {
namespace {

thread_local bool tl_in_task = false;  // this thread is running a task of some parallel_for

struct Call {
  ThreadPool::TaskFn fn;
  void* arg;
};

void run_task(void* context, size_t index) {
  const Call& call = *static_cast<const Call*>(context);
  const bool outer = tl_in_task;
  tl_in_task = true;
  call.fn(call.arg, index);
  tl_in_task = outer;
}

}  // namespace

PthreadPool::PthreadPool(size_t thread_count) {
  if (thread_count <= 1) return;
  if (thread_count > FixedThreadPool::kMaxThreads) thread_count = FixedThreadPool::kMaxThreads;
  pool_ = pthreadpool_create(thread_count);
  if (pool_ != nullptr) threads_ = pthreadpool_get_threads_count(static_cast<pthreadpool_t>(pool_));
}

PthreadPool::~PthreadPool() {
  if (pool_ != nullptr) pthreadpool_destroy(static_cast<pthreadpool_t>(pool_));
}

void PthreadPool::parallel_for(size_t count, TaskFn fn, void* arg) {
  if (pool_ == nullptr || count <= 1 || tl_in_task) {
    for (size_t i = 0; i < count; ++i) fn(arg, i);
    return;
  }
  Call call{fn, arg};
  pthreadpool_parallelize_1d(static_cast<pthreadpool_t>(pool_), run_task, &call, count, 0);
}

}  // namespace ember::backends::xnnpack
