// The sim backend: a simulated device, the proof that the backend contract hosts device memory
// without a GPU (runtime/backend/README.md). Its memory is a separate region the host never reads:
// mapped PROT_NONE except while the backend itself runs, so a stray host access faults. It owns
// program state (the KV cache lives in its memory), uploads constants at init, stages I/O through
// its own copies, and runs every graph on the RuntimeContext's portable kernels, so its results
// are bitwise those of portable. Linux / POSIX only (mmap, mprotect).
#pragma once

#include "runtime/backend/backend.h"

namespace ember::backends::sim {

constexpr const char* kBackendId = "sim";

// Adds the backend under "sim". No static initializers: call it once at start-up.
Status register_backend(BackendRegistry& registry);

// Test hook: the address of a state buffer in the simulated device memory. Host code must never
// read through it (it faults outside the backend's own calls); tests use it to prove exactly that.
const void* device_address(const StateBuffer* state);

}  // namespace ember::backends::sim
