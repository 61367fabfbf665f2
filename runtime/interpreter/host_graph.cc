#include "runtime/interpreter/host_graph.h"

#include <cstring>

namespace ember {
namespace {

size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

enum class Slot : uint8_t { None, Value, Constant, Io, State };

Slot slot_of(const GraphView& graph, uint32_t v, bool copy_constants, bool stage_io) {
  const fb::Tensor& t = graph.value(v);
  if (graph.is_io(v)) return stage_io ? Slot::Io : Slot::None;  // whole-method bodies carry planned I/O
  switch (t.storage_type()) {
    case fb::Storage::ConstantStorage: return copy_constants ? Slot::Constant : Slot::None;
    case fb::Storage::StateStorage: return Slot::State;
    case fb::Storage::NONE: return Slot::None;
    default: return Slot::Value;
  }
}

struct BindState {
  const GraphView* graph;
  const HostGraphMemory* memory;
  bool copy_constants, stage_io;
  size_t values_used = 0, constants_used = 0, io_used = 0;
};

Status resolve(void* user, uint32_t v, const fb::Tensor& tensor, TensorView* view, ErrorContext* ctx) {
  BindState& s = *static_cast<BindState*>(user);
  const HostGraphMemory& m = *s.memory;
  const size_t bytes = align64(static_cast<size_t>(tensor.nbytes()));
  switch (slot_of(*s.graph, v, s.copy_constants, s.stage_io)) {
    case Slot::None:
      view->data = tensor.storage_type() == fb::Storage::ConstantStorage
                       ? const_cast<uint8_t*>(s.graph->constant_data(v))
                       : nullptr;  // I/O bound per call
      return Status::ok();
    case Slot::Value:
      view->data = m.values + s.values_used;
      view->domain = m.domain;
      s.values_used += bytes;
      return Status::ok();
    case Slot::Constant:
      view->data = m.constants + s.constants_used;
      view->domain = m.domain;
      std::memcpy(view->data, s.graph->constant_data(v), static_cast<size_t>(tensor.nbytes()));
      s.constants_used += bytes;
      return Status::ok();
    case Slot::Io:
      view->data = m.io + s.io_used;
      view->domain = m.domain;
      s.io_used += bytes;
      return Status::ok();
    case Slot::State: {
      const char* name = tensor.storage_as_StateStorage()->name()->c_str();
      for (size_t i = 0; i < m.states.size(); ++i) {
        if (std::strcmp(m.states[i].spec.name, name) != 0) continue;
        view->data = m.state_data[i];
        view->domain = m.states[i].buffer != nullptr ? m.domain : MemoryDomain::Host;
        for (int d = 0; d < view->rank && d < m.states[i].spec.rank; ++d) view->dims[d] = m.states[i].spec.dims[d];
        return Status::ok();
      }
      return EMBER_FAIL(ctx, Error::Internal, "value %u names state '%s', which init() was not given", v, name);
    }
  }
  return Status::ok();
}

}  // namespace

HostGraphLayout plan_host_graph(const GraphView& graph, bool copy_constants, bool stage_io) {
  HostGraphLayout layout;
  layout.runner_bytes = align64(GraphRunner::memory_bytes(graph.graph()));
  for (uint32_t v = 0; v < graph.value_count(); ++v) {
    const size_t bytes = align64(static_cast<size_t>(graph.value(v).nbytes()));
    switch (slot_of(graph, v, copy_constants, stage_io)) {
      case Slot::Value: layout.value_bytes += bytes; break;
      case Slot::Constant: layout.constant_bytes += bytes; break;
      case Slot::Io: layout.io_bytes += bytes; break;
      default: break;
    }
  }
  return layout;
}

Status bind_host_graph(GraphRunner& runner, const GraphView& graph, const RuntimeContext& runtime,
                       const HostGraphMemory& memory, bool copy_constants, bool stage_io, ErrorContext* ctx) {
  const HostGraphLayout layout = plan_host_graph(graph, copy_constants, stage_io);
  BumpAllocator allocator(Span<uint8_t>(memory.runner, layout.runner_bytes));
  BindState state{&graph, &memory, copy_constants, stage_io};
  return runner.bind(graph, runtime.kernels, nullptr, allocator, resolve, &state, ctx);
}

}  // namespace ember
