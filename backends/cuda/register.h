// The CUDA backend (backends/cuda/README.md): runs GRAPH delegates and whole methods (an LLM `step`)
// on an NVIDIA GPU. It owns program state (the KV cache lives in device memory), uploads constants
// once at init, plans device memory from the values' lifetimes, stages I/O through a pinned arena
// and replays CUDA graphs captured at init per token/sequence bucket.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/program/graph_view.h"

namespace ember::backends::cuda {

constexpr const char* kBackendId = "cuda";

// Adds the backend under "cuda". No static initializers: call it once at start-up. Registering
// needs no GPU; is_available() says whether one is usable.
Status register_backend(BackendRegistry& registry);

// Test hooks (no GPU needed). The device arena's layout of a graph's internal values: the arena bytes,
// and each value's offset in `offsets` (indexed by value; others untouched). Values alive at the same
// instruction never overlap.
uint64_t plan_device_values(const GraphView& graph, uint64_t* offsets);
// The (T, S) buckets captured for an LLM step graph (up to `capacity` written), their count; 1 for a
// graph without symbols, 0 for one launched eagerly.
uint32_t bucket_count(const GraphView& graph, int64_t* t, int64_t* s, uint32_t capacity);

}  // namespace ember::backends::cuda
