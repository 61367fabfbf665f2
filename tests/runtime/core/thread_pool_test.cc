#include "runtime/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace ember {
namespace {

struct Counters {
  explicit Counters(size_t n) : hits(new std::atomic<int>[n]), count(n) {
    for (size_t i = 0; i < n; ++i) hits[i].store(0);
  }
  std::unique_ptr<std::atomic<int>[]> hits;
  size_t count;
  std::atomic<size_t> out_of_range{0};
  static void Task(void* arg, size_t i) {
    Counters* c = static_cast<Counters*>(arg);
    if (i >= c->count) {
      c->out_of_range.fetch_add(1);
      return;
    }
    c->hits[i].fetch_add(1, std::memory_order_relaxed);
  }
  // Index of the first entry not hit exactly once, or -1.
  long FirstBad() const {
    if (out_of_range.load() != 0) return static_cast<long>(count);
    for (size_t i = 0; i < count; ++i) {
      if (hits[i].load() != 1) return static_cast<long>(i);
    }
    return -1;
  }
};

TEST(FixedThreadPoolTest, ThreadCountIsClamped) {
  EXPECT_EQ(FixedThreadPool(0).thread_count(), 1u);
  EXPECT_EQ(FixedThreadPool(1).thread_count(), 1u);
  EXPECT_EQ(FixedThreadPool(3).thread_count(), 3u);
  EXPECT_EQ(FixedThreadPool(1000).thread_count(), FixedThreadPool::kMaxThreads);
}

TEST(FixedThreadPoolTest, EveryIndexRunsExactlyOnce) {
  for (size_t threads = 1; threads <= 8; ++threads) {
    FixedThreadPool pool(threads);
    EXPECT_EQ(pool.thread_count(), threads);
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, threads, threads + 1, size_t{7}, size_t{100},
                         size_t{10000}}) {
      Counters c(count);
      pool.parallel_for(count, Counters::Task, &c);
      EXPECT_EQ(c.FirstBad(), -1) << "threads " << threads << " count " << count;
    }
  }
}

TEST(FixedThreadPoolTest, ManyConsecutiveCallsEachRunTheirOwnTasks) {
  // Each call has its own function argument: a worker that wakes late must not run an old call's
  // function, nor steal an index of the next call.
  for (size_t threads : {2, 3, 8}) {
    FixedThreadPool pool(threads);
    for (int call = 0; call < 3000; ++call) {
      const size_t count = 1 + static_cast<size_t>(call % 5);
      auto c = std::make_unique<Counters>(count);
      pool.parallel_for(count, Counters::Task, c.get());
      ASSERT_EQ(c->FirstBad(), -1) << "threads " << threads << " call " << call;
    }
  }
}

TEST(FixedThreadPoolTest, FreeFunctionRunsInlineWithoutPool) {
  Counters c(50);
  parallel_for(nullptr, 50, Counters::Task, &c);
  EXPECT_EQ(c.FirstBad(), -1);
  FixedThreadPool pool(1);
  Counters d(50);
  parallel_for(&pool, 50, Counters::Task, &d);
  EXPECT_EQ(d.FirstBad(), -1);
  FixedThreadPool pool4(4);
  Counters e(50);
  parallel_for(&pool4, 50, Counters::Task, &e);
  EXPECT_EQ(e.FirstBad(), -1);
}

TEST(FixedThreadPoolTest, UsesMoreThanOneThread) {
  FixedThreadPool pool(2);
  struct Arg {
    std::atomic<int> seen_other{0};
    std::thread::id caller;
  } arg;
  arg.caller = std::this_thread::get_id();
  // Tasks sleep a little so the worker has time to take some; retry a few times.
  for (int attempt = 0; attempt < 20 && arg.seen_other.load() == 0; ++attempt) {
    pool.parallel_for(16, [](void* p, size_t) {
      Arg* a = static_cast<Arg*>(p);
      if (std::this_thread::get_id() != a->caller) a->seen_other.store(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }, &arg);
  }
  EXPECT_EQ(arg.seen_other.load(), 1);
}

// Concurrent callers of one pool: each call's tasks see only that call running. state packs
// (call id << 32 | running task count).
struct Shared {
  std::atomic<uint64_t> state{0};
  std::atomic<int> overlaps{0};
};
struct CallArg {
  Shared* shared;
  uint32_t id;  // > 0
  Counters* counters;
};

void SerializedTask(void* p, size_t i) {
  CallArg* a = static_cast<CallArg*>(p);
  uint64_t s = a->shared->state.load();
  for (;;) {
    const uint32_t owner = static_cast<uint32_t>(s >> 32);
    const uint32_t running = static_cast<uint32_t>(s);
    if (running != 0 && owner != a->id) {
      a->shared->overlaps.fetch_add(1);
      break;
    }
    const uint64_t next = (uint64_t{a->id} << 32) | (running + 1);
    if (a->shared->state.compare_exchange_weak(s, next)) break;
  }
  Counters::Task(a->counters, i);
  std::this_thread::yield();
  s = a->shared->state.load();
  for (;;) {
    const uint32_t owner = static_cast<uint32_t>(s >> 32);
    const uint32_t running = static_cast<uint32_t>(s);
    if (owner != a->id || running == 0) break;  // overlap already counted
    const uint64_t next = (uint64_t{owner} << 32) | (running - 1);
    if (a->shared->state.compare_exchange_weak(s, next)) break;
  }
}

TEST(FixedThreadPoolTest, ConcurrentCallersAreSerialized) {
  for (size_t threads : {1, 2, 4}) {
    FixedThreadPool pool(threads);
    Shared shared;
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (uint32_t t = 0; t < 4; ++t) {
      callers.emplace_back([&, t] {
        for (uint32_t call = 0; call < 300; ++call) {
          const size_t count = 1 + (call % 13);
          Counters c(count);
          CallArg arg{&shared, t * 100000 + call + 1, &c};
          pool.parallel_for(count, SerializedTask, &arg);
          if (c.FirstBad() != -1) failures.fetch_add(1);
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(failures.load(), 0) << "threads " << threads;
    EXPECT_EQ(shared.overlaps.load(), 0) << "threads " << threads;
  }
}

TEST(FixedThreadPoolTest, NestedParallelForRunsInlineInsteadOfDeadlocking) {
  FixedThreadPool pool(3);
  struct Ctx {
    FixedThreadPool* pool;
    std::atomic<int> inner{0};
  } ctx{&pool};
  pool.parallel_for(4, [](void* arg, size_t) {
    Ctx& c = *static_cast<Ctx*>(arg);
    c.pool->parallel_for(5, [](void* a, size_t) { static_cast<Ctx*>(a)->inner.fetch_add(1); }, &c);
  }, &ctx);
  EXPECT_EQ(ctx.inner.load(), 20);
}

TEST(FixedThreadPoolTest, DestroyWhileIdle) {
  for (int i = 0; i < 50; ++i) {
    FixedThreadPool pool(4);
    if (i % 2) {
      Counters c(8);
      pool.parallel_for(8, Counters::Task, &c);
      EXPECT_EQ(c.FirstBad(), -1);
    }
  }
}

}  // namespace
}  // namespace ember
