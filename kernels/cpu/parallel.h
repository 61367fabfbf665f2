// Splitting a kernel's independent work units over ctx.pool (internal to kernels/cpu).
// Units are contiguous ranges handed to `fn`; how they are grouped into tasks depends on the thread
// count, so a unit's result must never depend on which task computes it (no reduction across units).
#pragma once

#include <cstddef>

#include "runtime/core/thread_pool.h"

namespace ember::kernels::cpu_detail {

using UnitFn = void (*)(const void* plan, size_t begin, size_t end);

struct UnitTasks {
  const void* plan;
  size_t units;
  size_t task_count;
  UnitFn fn;
};

inline void run_unit_task(void* arg, size_t t) {
  const UnitTasks& tasks = *static_cast<const UnitTasks*>(arg);
  const size_t begin = tasks.units * t / tasks.task_count;
  const size_t end = tasks.units * (t + 1) / tasks.task_count;
  if (begin < end) tasks.fn(tasks.plan, begin, end);
}

// Calls fn(plan, begin, end) over [0, units), split into at most `max_tasks` contiguous ranges when
// `work` (any measure of the op's size, e.g. flops or elements) reaches `min_parallel_work`.
inline void run_units(ThreadPool* pool, size_t units, double work, double min_parallel_work,
                      const void* plan, UnitFn fn, size_t max_tasks = 256) {
  if (units == 0) return;
  size_t task_count = 1;
  if (pool != nullptr && pool->thread_count() > 1 && work >= min_parallel_work) {
    task_count = units < max_tasks ? units : max_tasks;
  }
  UnitTasks tasks{plan, units, task_count, fn};
  parallel_for(pool, task_count, run_unit_task, &tasks);
}

}  // namespace ember::kernels::cpu_detail
