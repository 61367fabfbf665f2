// Options for Program::load.
#pragma once

#include <cstdint>

#include "runtime/core/span.h"

namespace ember {

enum class Verification : uint8_t {
  Full = 0,        // header + FlatBuffer CRC32C, FlatBuffers verifier, semantic validator, segment xxh64
  Structural = 1,  // as Full but segment hashes are skipped (fast mmap loads); structure is still checked
  Trusted = 2,     // no checks at all: only for files the app produced and protects itself
};

// What to do with a delegate whose backend is not registered, not allowed or not available.
enum class Fallback : uint8_t {
  Portable = 0,  // run its GRAPH on the portable kernels (logged once per delegate)
  Fail = 1,      // fail the load with BackendUnavailable
};

struct SymbolValue {
  const char* name = "";
  int64_t value = 0;
};

struct LoadOptions {
  Verification verification = Verification::Full;
  // Backends delegates may use, in priority order; empty = every registered backend.
  Span<const char* const> backends;
  Fallback fallback = Fallback::Portable;
  // Program-level symbols fixed at load (e.g. the KV cache's num_blocks); others take their max.
  Span<const SymbolValue> symbols;
  // Upper bound on the bytes of program state (KV caches) Program::load allocates; a file that needs
  // more fails with OutOfMemory before anything is allocated. 0 = 2^40 (a sanity bound only): apps
  // loading untrusted files should set what they can afford.
  uint64_t max_state_bytes = 0;
  // Instructions one execute() may run before it stops with Cancelled, a guard against a program
  // whose jumps loop forever. 0 = 65536 x the method's instruction count.
  uint64_t max_steps_per_execute = 0;
};

}  // namespace ember
