// The CUDA backend (backends/cuda/README.md): runs GRAPH delegates and whole methods (an LLM `step`)
// on an NVIDIA GPU. It owns program state (the KV cache lives in device memory), uploads constants
// once at init, plans device memory from the values' lifetimes, stages I/O through a pinned arena
// and replays CUDA graphs captured at init per token/sequence bucket.
#pragma once

#include "runtime/backend/backend.h"

namespace ember::backends::cuda {

constexpr const char* kBackendId = "cuda";

// Adds the backend under "cuda". No static initializers: call it once at start-up. Registering
// needs no GPU; is_available() says whether one is usable.
Status register_backend(BackendRegistry& registry);

}  // namespace ember::backends::cuda
