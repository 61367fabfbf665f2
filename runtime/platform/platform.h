// Platform abstraction layer: logging, abort, clock and aligned allocation. Every function has a
// default for the host OS; an embedded port replaces them at start-up with set_platform_hooks()
// (before any other Ember call). Thread-safe once the hooks are set.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

enum class LogLevel : uint8_t { Debug = 0, Info = 1, Warning = 2, Error = 3 };

struct PlatformHooks {
  void (*log)(LogLevel level, const char* file, int line, const char* message) = nullptr;
  void (*abort)() = nullptr;  // must not return ([[noreturn]] cannot apply to a pointer: clang rejects it)
  uint64_t (*now_ns)() = nullptr;  // monotonic
  void* (*aligned_alloc)(size_t alignment, size_t size) = nullptr;  // nullptr on failure
  void (*aligned_free)(void* ptr) = nullptr;
};

// Replaces the hooks; null members keep the OS default.
void set_platform_hooks(const PlatformHooks& hooks);

void platform_log(LogLevel level, const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 4, 5)));
[[noreturn]] void platform_abort();
uint64_t platform_now_ns();
// Load-time allocations only (Program/Method structures, file buffers, state). Alignment is a power
// of two; returns nullptr on failure.
void* platform_aligned_alloc(size_t alignment, size_t size);
void platform_aligned_free(void* ptr);

// Messages below this level are dropped (default Warning; EMBER_LOG_LEVEL env var is not read:
// the app decides).
void set_log_level(LogLevel level);

}  // namespace ember

#ifndef EMBER_ENABLE_LOGGING
#define EMBER_ENABLE_LOGGING 1
#endif
#if EMBER_ENABLE_LOGGING
#define EMBER_LOG(level, ...) \
  ::ember::platform_log(::ember::LogLevel::level, __FILE__, __LINE__, __VA_ARGS__)
#else
#define EMBER_LOG(level, ...) ((void)0)
#endif
