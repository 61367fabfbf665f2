// Options for Program::load.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/core/event_tracer.h"
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

// Every span and pointer here is borrowed for the duration of Program::load only: the Program copies
// what it keeps (the backend names and symbol values it resolved), so the arrays may be temporaries.
// The exception is `tracer`, which backends may keep from init() on: it must outlive the Program.
struct LoadOptions {
  Verification verification = Verification::Full;
  // Backends, by registry name, in priority order. Empty: each delegate runs on the backend it was
  // exported for (when registered and available). Not empty: each GRAPH delegate runs on the first
  // listed backend that is registered, available and supports every instruction of its graph
  // (retargeting); a Method without delegates runs whole on the first listed backend that supports
  // all its instructions, else on the portable kernels. "portable" is not a backend: list what may
  // take over, and say with `fallback` whether the portable kernels may run a delegate no listed
  // backend takes. Names not registered are skipped (runner --info says so). At most 16.
  Span<const char* const> backends;
  Fallback fallback = Fallback::Portable;
  // Program-level symbols fixed at load (e.g. the KV cache's num_blocks); others take their max.
  // At most 16; each must name a program symbol and lie within its bounds (InvalidArgument).
  Span<const SymbolValue> symbols;
  // Receives load-time events from backends (may be null). Borrowed: must outlive the Program.
  EventTracer* tracer = nullptr;
  // Upper bound on the bytes of program state (KV caches) Program::load allocates; a file that needs
  // more fails with OutOfMemory before anything is allocated. 0 = 2^40 (a sanity bound only): apps
  // loading untrusted files should set what they can afford.
  uint64_t max_state_bytes = 0;
  // Instructions one execute() may run before it stops with Cancelled, a guard against a program
  // whose jumps loop forever. 0 = 65536 x the method's instruction count.
  uint64_t max_steps_per_execute = 0;
};

}  // namespace ember
