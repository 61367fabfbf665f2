#include "runtime/platform/platform.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace ember {
namespace {

void default_log(LogLevel level, const char* file, int line, const char* message) {
  static const char* const kNames[] = {"D", "I", "W", "E"};
  std::fprintf(stderr, "[ember %s %s:%d] %s\n", kNames[static_cast<int>(level) & 3], file, line,
               message);
}
[[noreturn]] void default_abort() { std::abort(); }
uint64_t default_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
void* default_aligned_alloc(size_t alignment, size_t size) {
  void* ptr = nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if (posix_memalign(&ptr, alignment, size == 0 ? 1 : size) != 0) return nullptr;
  return ptr;
}
void default_aligned_free(void* ptr) { std::free(ptr); }

PlatformHooks g_hooks = {default_log, default_abort, default_now_ns, default_aligned_alloc,
                         default_aligned_free};
std::atomic<int> g_log_level{static_cast<int>(LogLevel::Warning)};

}  // namespace

void set_platform_hooks(const PlatformHooks& hooks) {
  if (hooks.log) g_hooks.log = hooks.log;
  if (hooks.abort) g_hooks.abort = hooks.abort;
  if (hooks.now_ns) g_hooks.now_ns = hooks.now_ns;
  if (hooks.aligned_alloc) g_hooks.aligned_alloc = hooks.aligned_alloc;
  if (hooks.aligned_free) g_hooks.aligned_free = hooks.aligned_free;
}

void set_log_level(LogLevel level) { g_log_level.store(static_cast<int>(level)); }

void platform_log(LogLevel level, const char* file, int line, const char* format, ...) {
  if (static_cast<int>(level) < g_log_level.load(std::memory_order_relaxed)) return;
  char message[512];  // Fixed size: logging never allocates.
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  g_hooks.log(level, file, line, message);
}

void platform_abort() {
  g_hooks.abort();
  std::abort();  // a hook that returns anyway
}
uint64_t platform_now_ns() { return g_hooks.now_ns(); }
void* platform_aligned_alloc(size_t alignment, size_t size) {
  return g_hooks.aligned_alloc(alignment, size);
}
void platform_aligned_free(void* ptr) {
  if (ptr != nullptr) g_hooks.aligned_free(ptr);
}

}  // namespace ember
