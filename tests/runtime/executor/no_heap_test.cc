// After load, no Ember code allocates heap memory (docs/DESIGN.md §3, docs/STYLE.md §4): with hooks on malloc,
// calloc, realloc, aligned_alloc, posix_memalign, memalign, valloc, pvalloc and every replaceable
// operator new / new[] (plain, nothrow, aligned, aligned nothrow), counted on all threads, the
// process-wide count is 0 during the second and later execute() calls of every example program,
// with a FixedThreadPool of 2 threads.
//
// The hooks replace the libc entry points in this binary and forward to glibc's __libc_* functions.
// Sanitizer builds interpose malloc themselves, so there the test is skipped.
#include <gtest/gtest.h>

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "exporter/passes/evaluate.h"
#include "tests/common/program_util.h"
#include "tests/common/test_util.h"
#if EMBER_TEST_XNNPACK
#include "backends/xnnpack/register.h"
#include "exporter/importers/builder/examples.h"
#endif

// Built only without sanitizers (see CMakeLists.txt): their runtimes own malloc.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#error "no_heap_test replaces malloc; build it without sanitizers"
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
inline void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
void __libc_free(void* p);

void* malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  count();
  return __libc_realloc(p, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* valloc(size_t size) {
  count();
  return __libc_valloc(size);
}
void* pvalloc(size_t size) {
  count();
  return __libc_pvalloc(size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  count();
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return 22;  // EINVAL
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}  // extern "C"

namespace {
void* new_impl(size_t size, size_t alignment, bool nothrow) {
  count();
  if (size == 0) size = 1;
  void* p = alignment > alignof(std::max_align_t) ? __libc_memalign(alignment, size) : __libc_malloc(size);
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return new_impl(n, 0, false); }
void* operator new[](size_t n) { return new_impl(n, 0, false); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return new_impl(n, 0, true); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return new_impl(n, 0, true); }
void* operator new(size_t n, std::align_val_t a) { return new_impl(n, static_cast<size_t>(a), false); }
void* operator new[](size_t n, std::align_val_t a) { return new_impl(n, static_cast<size_t>(a), false); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_impl(n, static_cast<size_t>(a), true);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_impl(n, static_cast<size_t>(a), true);
}
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(p); }

namespace ember {
namespace {

// Counts allocations made while alive (all threads).
class CountAllocations {
 public:
  CountAllocations() {
    g_allocations.store(0);
    g_counting.store(true);
  }
  ~CountAllocations() { stop(); }
  uint64_t stop() {
    g_counting.store(false);
    return g_allocations.load();
  }
};

template <typename T>
void Escape(T* p) {
  asm volatile("" : : "g"(p) : "memory");
}

TEST(NoHeapTest, HooksCountEveryAllocationFunctionOnEveryThread) {
  struct alignas(128) Big {
    char c[128];
  };
  // Each entry allocates exactly once (and frees outside the counted region's concern).
  const std::vector<std::pair<const char*, void (*)()>> calls = {
      {"malloc", [] { void* p = std::malloc(10); Escape(p); std::free(p); }},
      {"calloc", [] { void* p = std::calloc(4, 4); Escape(p); std::free(p); }},
      {"realloc", [] { void* p = std::realloc(nullptr, 100); Escape(p); std::free(p); }},
      {"aligned_alloc", [] { void* p = std::aligned_alloc(64, 128); Escape(p); std::free(p); }},
      {"posix_memalign", [] { void* q = nullptr; if (posix_memalign(&q, 64, 64) == 0) { Escape(q); std::free(q); } }},
      {"memalign", [] { void* p = memalign(64, 64); Escape(p); std::free(p); }},
      {"valloc", [] { void* p = valloc(64); Escape(p); std::free(p); }},
      {"new", [] { int* p = new int(3); Escape(p); delete p; }},
      {"new[]", [] { int* p = new int[3]; Escape(p); delete[] p; }},
      {"new nothrow", [] { int* p = new (std::nothrow) int(4); Escape(p); delete p; }},
      {"new[] nothrow", [] { int* p = new (std::nothrow) int[4]; Escape(p); delete[] p; }},
      {"new aligned", [] { Big* p = new Big; Escape(p); delete p; }},
      {"new[] aligned", [] { Big* p = new Big[2]; Escape(p); delete[] p; }},
      {"new aligned nothrow", [] { Big* p = new (std::nothrow) Big; Escape(p); delete p; }},
      {"new[] aligned nothrow", [] { Big* p = new (std::nothrow) Big[2]; Escape(p); delete[] p; }},
  };
  for (const auto& [name, call] : calls) {
    CountAllocations c;
    call();
    EXPECT_EQ(c.stop(), 1u) << name;
  }
  uint64_t from_thread = 0;
  {
    std::thread t;  // created before counting: thread start-up allocates
    CountAllocations c;
    std::atomic<bool> done{false};
    std::thread worker([&] {
      void* p = std::malloc(8);
      Escape(p);
      std::free(p);
      done.store(true);
    });
    worker.join();
    from_thread = c.stop();
  }
  EXPECT_GE(from_thread, 1u);  // the thread's own malloc (plus std::thread's state)
}

struct Case {
  std::string name;
  const char* example;
  bool null_backend;
};

TEST(NoHeapTest, ExecuteAllocatesNothingAfterTheFirstCall) {
  testing::QuietLogs quiet;
  const std::vector<Case> cases = {{"mlp", "mlp", true},
                                   {"cnn", "cnn", true},
                                   {"cnn with the null backend", "cnn_null", true},
                                   {"cnn with the null delegate on the portable fallback", "cnn_null", false},
                                   {"mlp with fp8 weights", "mlp_fp8", true},
                                   {"mlp with fp8 weights and per-token fp8 activations", "mlp_fp8_dynamic", true},
                                   {"mlp with nvfp4 weights", "mlp_nvfp4", true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const exporter::ExportResult& r = testing::example(c.example);
    testing::RuntimeOptions ro;
    ro.threads = 2;
    ro.null_backend = c.null_backend;
    testing::Runtime rt(ro);
    testing::LoadedMethod lm(r.program.bytes, rt.context);
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    bool delegated = false;
    for (size_t i = 0; i < lm.method().instruction_count(); ++i) {
      delegated = delegated || std::string(lm.method().instruction_backend(i)).find("null") != std::string::npos;
    }
    EXPECT_EQ(delegated, std::string(c.example) == "cnn_null");

    const exporter::Value& iv = r.graph.values[static_cast<size_t>(r.graph.inputs[0].value)];
    std::vector<int64_t> dims;
    size_t n = 1;
    for (const exporter::Dim& d : iv.dims) {
      dims.push_back(d.max);  // symbolic dims at their max
      n *= static_cast<size_t>(dims.back());
    }
    const exporter::HostTensor in = exporter::HostTensor::from_f32(dims, testing::pattern(n));
    const TensorView view = testing::view_of(in);
    ErrorContext ctx;
    ASSERT_TRUE(lm.method().set_input(0, view, &ctx).is_ok()) << ctx.message;
    ASSERT_TRUE(lm.method().execute(&ctx).is_ok()) << ctx.message;  // the first call may allocate

    Status statuses[6];
    uint64_t allocations = 0;
    {
      CountAllocations counter;
      for (Status& s : statuses) s = lm.method().execute(&ctx);
      allocations = counter.stop();
    }
    for (const Status& s : statuses) EXPECT_TRUE(s.is_ok()) << to_string(s.code()) << ": " << ctx.message;
    EXPECT_EQ(allocations, 0u) << "heap allocations during execute()";

    // Run-time input binding does not allocate either (symbolic sizes change between calls).
    {
      CountAllocations counter;
      Status s1 = lm.method().set_input(0, view, &ctx);
      Status s2 = lm.method().execute(&ctx);
      allocations = counter.stop();
      EXPECT_TRUE(s1.is_ok() && s2.is_ok()) << ctx.message;
    }
    EXPECT_EQ(allocations, 0u) << "heap allocations in set_input() + execute()";
    const std::vector<exporter::HostTensor> expected = exporter::evaluate(r.graph, {in});
    testing::ExpectAllClose(testing::copy_of(*lm.method().output(0)), expected[0]);
  }
}

#if EMBER_TEST_XNNPACK
// The cnn example exported for xnnpack: one delegate, its XNNPACK runtime on a 2-thread pthreadpool.
// execute() copies through the fixed slots and invokes the runtime; neither may allocate (counted on
// every thread, XNNPACK's and pthreadpool's workers included).
TEST(NoHeapTest, XnnpackDelegateExecuteAllocatesNothingAfterTheFirstCall) {
  const exporter::ExportResult r = testing::export_program(exporter::build_cnn_example(1), {"xnnpack", "portable"});
  testing::RuntimeOptions ro;
  ro.threads = 2;
  testing::Runtime rt(ro);
  ASSERT_TRUE(backends::xnnpack::register_backend(*rt.backends).is_ok());
  testing::LoadedMethod lm(r.program.bytes, rt.context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  ASSERT_STREQ(lm.method().instruction_backend(0), "xnnpack");
  const exporter::HostTensor in = exporter::HostTensor::from_f32({1, 3, 32, 32}, testing::pattern(3 * 32 * 32));
  ErrorContext ctx;
  ASSERT_TRUE(lm.method().set_input(0, testing::view_of(in), &ctx).is_ok()) << ctx.message;
  ASSERT_TRUE(lm.method().execute(&ctx).is_ok()) << ctx.message;
  Status statuses[6];
  uint64_t allocations = 0;
  {
    CountAllocations counter;
    for (Status& s : statuses) s = lm.method().execute(&ctx);
    allocations = counter.stop();
  }
  for (const Status& s : statuses) EXPECT_TRUE(s.is_ok()) << to_string(s.code()) << ": " << ctx.message;
  EXPECT_EQ(allocations, 0u) << "heap allocations during execute() of an xnnpack delegate";
  const std::vector<exporter::HostTensor> expected = exporter::evaluate(r.graph, {in});
  testing::ExpectAllClose(testing::copy_of(*lm.method().output(0)), expected[0]);
}
#endif

TEST(NoHeapTest, SymbolicBatchChangesDoNotAllocate) {
  const exporter::ExportResult& r = testing::example("mlp");
  testing::RuntimeOptions ro;
  ro.threads = 2;
  testing::Runtime rt(ro);
  testing::LoadedMethod lm(r.program.bytes, rt.context);
  ASSERT_TRUE(lm.ok());
  ErrorContext ctx;
  ASSERT_TRUE(lm.method().execute(&ctx).is_ok());
  uint64_t allocations = 0;
  bool all_ok = true;
  {
    CountAllocations counter;
    for (int64_t batch = 1; batch <= 8; ++batch) {
      const int64_t dims[2] = {batch, 64};
      all_ok = all_ok && lm.method().set_input_sizes(0, Span<const int64_t>(dims, 2), &ctx).is_ok();
      all_ok = all_ok && lm.method().execute(&ctx).is_ok();
    }
    allocations = counter.stop();
  }
  EXPECT_TRUE(all_ok) << ctx.message;
  EXPECT_EQ(allocations, 0u);
}

}  // namespace
}  // namespace ember
