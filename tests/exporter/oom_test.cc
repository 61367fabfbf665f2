// Out of memory at the exporter's entry point: while armed, every operator new of at least
// g_fail_at bytes throws std::bad_alloc (this binary replaces the global operator new/delete with
// malloc/free versions). run_cli must turn it into one line naming what it was doing, exit code 1,
// instead of printing "std::bad_alloc" alone.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "exporter/cli/cli.h"

namespace {
std::atomic<size_t> g_fail_at{0};  // 0 = disarmed

void* allocate(size_t n, bool nothrow) {
  const size_t limit = g_fail_at.load(std::memory_order_relaxed);
  void* p = limit != 0 && n >= limit ? nullptr : std::malloc(n == 0 ? 1 : n);
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return allocate(n, false); }
void* operator new[](size_t n) { return allocate(n, false); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocate(n, true); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocate(n, true); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace ember::exporter {
namespace {

struct CliRun {
  int code = 0;
  std::string err;
};

// run_cli with allocations of `fail_at` bytes or more failing.
CliRun RunFailingAbove(size_t fail_at, std::vector<std::string> args) {
  args.insert(args.begin(), "exporter");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CliRun r;
  g_fail_at = fail_at;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  g_fail_at = 0;
  r.err = err.str();
  return r;
}

std::vector<std::string> Args(const std::string& out) {
  // The default manifest (<build>/capabilities.json, about 120 KB) or none: both read with
  // allocations below the limits used here.
  return {std::string(EMBER_LLM_CHECKPOINTS) + "/qwen2_f32", "-o", out, "--backends", "portable", "--max-seqs", "2",
          "--max-tokens", "8", "--max-context", "32"};
}

TEST(OutOfMemoryTest, IsOneLineNamingTheStage) {
  const std::string out = (std::filesystem::path(::testing::TempDir()) / "oom.pte").string();
  std::filesystem::remove(out);
  // 256 KiB: the 590 KB f32 embedding table of the checkpoint is the first to fail.
  CliRun r = RunFailingAbove(256 << 10, Args(out));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "exporter: out of memory while importing the checkpoint '" + std::string(EMBER_LLM_CHECKPOINTS) +
                       "/qwen2_f32': std::bad_alloc\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  // 1 MiB: the import fits; the program buffer (about 1.8 MB) does not.
  r = RunFailingAbove(1 << 20, Args(out));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "exporter: out of memory while exporting (serializing): std::bad_alloc\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  // Disarmed, the same export works.
  r = RunFailingAbove(0, Args(out));
  EXPECT_EQ(r.code, 0) << r.err;
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace ember::exporter
