// Host graphs: what a backend that runs a GRAPH payload on the RuntimeContext's kernels needs
// (backends/null runs in host memory, backends/sim in its simulated device memory). One layout
// function serves plan_memory() and init(), so what init() takes is what plan_memory() reported.
//
// Layout of the memory the backend provides (each piece 64-aligned, in this order):
//   runner:    GraphRunner::memory_bytes(graph): the bound instructions and views (host memory)
//   values:    one slot per internal value (not an input, output, constant or state), at its max
//   constants: a copy of every constant (only with copy_constants: an "upload" to device memory)
//   io:        one slot per graph input and output (only with stage_io: fixed addresses the
//              backend copies into and out of; otherwise the I/O views are bound per call)
// Program state is the backend's or the Program's (BoundState), never in this layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/interpreter/graph_runner.h"

namespace ember {

struct HostGraphLayout {
  size_t runner_bytes = 0;
  size_t value_bytes = 0;
  size_t constant_bytes = 0;
  size_t io_bytes = 0;
};

HostGraphLayout plan_host_graph(const GraphView& graph, bool copy_constants, bool stage_io);

// Where bind_host_graph() puts things. `runner` must hold layout.runner_bytes; the others their
// layout sizes (null when the size is 0). `state_data[i]` is the address of `states[i]` as the
// kernels will see it (BoundState::host_data for host state, the backend's own for state it owns).
struct HostGraphMemory {
  uint8_t* runner = nullptr;
  uint8_t* values = nullptr;
  uint8_t* constants = nullptr;  // copy_constants: filled here from the program's bytes
  uint8_t* io = nullptr;         // stage_io
  Span<const BoundState> states;
  Span<void* const> state_data;
  MemoryDomain domain = MemoryDomain::Host;  // of values, constants and io (the views say so)
};

// Binds `runner` to `graph` in `memory` with the RuntimeContext's kernels (KernelMissing names
// every instruction without one; InvalidProgram for shape mismatches; Internal for a state the
// graph names that `memory.states` lacks). The runner keeps pointers into `memory` and `graph`.
Status bind_host_graph(GraphRunner& runner, const GraphView& graph, const RuntimeContext& runtime,
                       const HostGraphMemory& memory, bool copy_constants, bool stage_io, ErrorContext* ctx);

}  // namespace ember
