// PthreadPool (backends/xnnpack/thread_pool.h): ThreadPool's rules on pthreadpool (every index once,
// nested calls inline, concurrent callers serialized), and XNNPACK delegates running on the app's
// pool instead of threads of their own (counted in /proc/self/task), with the reference's results.
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backends/builtin.h"
#include "backends/xnnpack/register.h"
#include "backends/xnnpack/thread_pool.h"
#include "exporter/importers/builder/examples.h"
#include "kernels/reference/register.h"
#include "tests/common/program_util.h"

namespace ember {
namespace {

using backends::xnnpack::PthreadPool;

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(size_t n) : hits(n) {}
};

void count_task(void* arg, size_t i) { static_cast<Counts*>(arg)->hits[i].fetch_add(1); }

TEST(PthreadPoolTest, EveryIndexRunsExactlyOnce) {
  for (size_t threads : {1u, 2u, 3u}) {
    PthreadPool pool(threads);
    ASSERT_TRUE(pool.ok());
    EXPECT_EQ(pool.thread_count(), threads);
    EXPECT_EQ(pool.native_handle() != nullptr, threads > 1);
    for (size_t count : {0u, 1u, 2u, 7u, 1000u}) {
      Counts c(count);
      pool.parallel_for(count, count_task, &c);
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(c.hits[i].load(), 1) << threads << " threads, index " << i;
    }
  }
}

struct Nested {
  PthreadPool* pool;
  std::vector<std::thread::id> outer, inner;  // [8], [8 * 4]
};

void inner_task(void* arg, size_t i) {
  auto* n = static_cast<std::pair<Nested*, size_t>*>(arg);
  n->first->inner[n->second * 4 + i] = std::this_thread::get_id();
}

void outer_task(void* arg, size_t i) {
  Nested* n = static_cast<Nested*>(arg);
  n->outer[i] = std::this_thread::get_id();
  std::pair<Nested*, size_t> inner{n, i};
  n->pool->parallel_for(4, inner_task, &inner);  // inline: same thread as its outer task
}

TEST(PthreadPoolTest, ANestedParallelForRunsInlineOnTheCallingThread) {
  PthreadPool pool(3);
  Nested n{&pool, std::vector<std::thread::id>(8), std::vector<std::thread::id>(32)};
  pool.parallel_for(8, outer_task, &n);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ(n.inner[i * 4 + j], n.outer[i]) << i << " " << j;
  }
}

TEST(PthreadPoolTest, ConcurrentCallersAreSerialized) {
  PthreadPool pool(2);
  Counts a(5000), b(5000);
  std::thread t1([&] { for (int r = 0; r < 20; ++r) pool.parallel_for(250, count_task, &a); });
  std::thread t2([&] { for (int r = 0; r < 20; ++r) pool.parallel_for(250, count_task, &b); });
  t1.join();
  t2.join();
  for (size_t i = 0; i < 250; ++i) {
    EXPECT_EQ(a.hits[i].load(), 20);
    EXPECT_EQ(b.hits[i].load(), 20);
  }
}

TEST(PthreadPoolTest, TheBuiltinPoolIsAPthreadPool) {
  std::unique_ptr<ThreadPool> pool = make_builtin_thread_pool(2);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->thread_count(), 2u);
  EXPECT_NE(pool->native_handle(), nullptr);
}

size_t thread_count_now() {
  size_t n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

// The cnn example exported for xnnpack, loaded and run with an app pool of 3 threads: a PthreadPool
// is shared (no thread started by the load), any other pool gets a pthreadpool of 3 of XNNPACK's own
// (2 more threads). Both give the reference's outputs.
void RunCnnWithPool(std::unique_ptr<ThreadPool> pool, size_t expected_new_threads) {
  testing::RuntimeOptions options;
  options.kernels = false;
  options.null_backend = false;
  testing::Runtime rt(options);
  ASSERT_TRUE(kernels::register_reference_kernels(*rt.kernels).is_ok());
  ASSERT_TRUE(backends::xnnpack::register_backend(*rt.backends).is_ok());
  const std::vector<exporter::HostTensor> in = {
      testing::f32_tensor({1, 3, 32, 32}, testing::pattern(3 * 32 * 32, 5))};
  std::vector<exporter::HostTensor> expected;
  {
    testing::LoadedMethod reference(testing::example("cnn").program.bytes, rt.context);
    ASSERT_TRUE(reference.ok()) << reference.ctx().message;
    expected = testing::run_method(reference.method(), in);
  }
  rt.context.pool = pool.get();
  const exporter::ExportResult xnn = testing::export_program(exporter::build_cnn_example(1), {"xnnpack", "portable"});
  const size_t before = thread_count_now();
  {
    testing::LoadedMethod lm(xnn.program.bytes, rt.context);
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    EXPECT_EQ(thread_count_now() - before, expected_new_threads);
    const std::vector<exporter::HostTensor> actual = testing::run_method(lm.method(), in);
    ASSERT_EQ(actual.size(), 1u);
    testing::ExpectAllClose(actual[0], expected[0], testing::Tolerance{1e-5f, 1e-5f});
  }
  EXPECT_EQ(thread_count_now(), before) << "the delegate's own threads are gone with it";
}

TEST(PthreadPoolTest, XnnpackDelegatesShareTheAppsPthreadPool) {
  RunCnnWithPool(std::make_unique<PthreadPool>(3), 0);
  RunCnnWithPool(std::make_unique<FixedThreadPool>(3), 2);
}

}  // namespace
}  // namespace ember
