#include <cstring>
#include <new>

#include "backends/null/register.h"
#include "runtime/kernel/graph_runner.h"
#include "runtime/platform/platform.h"

namespace ember {

// Everything one delegate owns: the interpreter and the memory of its internal values, in one
// allocation made at init.
class DelegateHandle {
 public:
  GraphRunner runner;
  uint8_t* memory = nullptr;  // runner structures, then internal values
  size_t memory_bytes = 0;
  size_t values_offset = 0;
  size_t values_used = 0;
};

namespace backends::null_backend {
namespace {

size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

struct InitState {
  DelegateHandle* handle;
  const GraphView* graph;
};

// Constants are zero-copy views of the program; internal values get their own 64-aligned slice;
// inputs and outputs are bound per call.
Status resolve(void* user, uint32_t value, const fb::Tensor& tensor, TensorView* view, ErrorContext* ctx) {
  InitState& s = *static_cast<InitState*>(user);
  void** data = &view->data;
  switch (tensor.storage_type()) {
    case fb::Storage::ConstantStorage:
      *data = const_cast<uint8_t*>(s.graph->constant_data(value));
      return Status::ok();
    case fb::Storage::NONE:
      *data = nullptr;
      return Status::ok();
    default: {
      DelegateHandle& h = *s.handle;
      *data = h.memory + h.values_offset + h.values_used;
      h.values_used += align64(static_cast<size_t>(tensor.nbytes()));
      return Status::ok();
    }
  }
}

class NullBackend final : public Backend {
 public:
  bool is_available(const RuntimeContext& runtime) const override { return runtime.kernels != nullptr; }

  Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                               Span<const CompileSpec> specs) const override {
    for (const CompileSpec& spec : specs) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "null backend: unknown compile spec '%s'", spec.key);
    }
    const fb::Graph& g = graph.graph();
    size_t value_bytes = 0;
    for (uint32_t v = 0; v < graph.value_count(); ++v) {
      if (g.values()->Get(v)->storage_type() == fb::Storage::PlannedStorage) {
        value_bytes += align64(static_cast<size_t>(g.values()->Get(v)->nbytes()));
      }
    }
    const size_t runner_bytes = align64(GraphRunner::memory_bytes(g));
    void* storage = platform_aligned_alloc(alignof(DelegateHandle), sizeof(DelegateHandle));
    uint8_t* memory = static_cast<uint8_t*>(platform_aligned_alloc(64, runner_bytes + value_bytes));
    if (storage == nullptr || memory == nullptr) {
      platform_aligned_free(storage);
      platform_aligned_free(memory);
      return EMBER_FAIL(ctx.error, Error::OutOfMemory, "null backend: %zu bytes for delegate %u",
                        runner_bytes + value_bytes, ctx.delegate_index);
    }
    DelegateHandle* handle = new (storage) DelegateHandle();
    handle->memory = memory;
    handle->memory_bytes = runner_bytes + value_bytes;
    handle->values_offset = runner_bytes;
    BumpAllocator allocator(Span<uint8_t>(memory, runner_bytes));
    InitState state{handle, &graph};
    const Status status =
        handle->runner.bind(graph, ctx.runtime->kernels, nullptr, allocator, resolve, &state, ctx.error);
    if (!status.is_ok()) {
      destroy(handle);  // a failed init cleans up after itself
      return status;
    }
    return handle;
  }

  Status execute(BackendExecuteContext& ctx, DelegateHandle* handle, Span<const TensorView> inputs,
                 Span<TensorView> outputs) const override {
    GraphRunner& r = handle->runner;
    const fb::Graph& g = r.graph().graph();
    for (size_t k = 0; k < inputs.size(); ++k) r.bind_value(g.inputs()->Get(static_cast<uint32_t>(k))->value(), inputs[k]);
    for (size_t k = 0; k < outputs.size(); ++k) {
      r.bind_value(g.outputs()->Get(static_cast<uint32_t>(k))->value(), outputs[k]);
    }
    KernelContext kernel_ctx;
    kernel_ctx.pool = ctx.pool;
    kernel_ctx.scratch = ctx.scratch;
    EMBER_RETURN_IF_ERROR(r.run(kernel_ctx, ctx.abort, nullptr, nullptr, ctx.error));
    for (size_t k = 0; k < outputs.size(); ++k) outputs[k] = r.value(g.outputs()->Get(static_cast<uint32_t>(k))->value());
    return Status::ok();
  }

  MemoryRequirements memory_requirements(const DelegateHandle* handle) const override {
    MemoryRequirements req;
    req.host_bytes = sizeof(DelegateHandle) + handle->memory_bytes;
    return req;
  }

  void destroy(DelegateHandle* handle) const noexcept override {
    if (handle == nullptr) return;
    platform_aligned_free(handle->memory);
    handle->~DelegateHandle();
    platform_aligned_free(handle);
  }
};

}  // namespace

Span<const OpCode> supported_ops() {
  static constexpr OpCode kOps[] = {OpCode::Conv2d, OpCode::Relu, OpCode::MaxPool2d, OpCode::AvgPool2d,
                                    OpCode::Add};
  return Span<const OpCode>(kOps, sizeof(kOps) / sizeof(kOps[0]));
}

Status register_backend(BackendRegistry& registry) {
  static const NullBackend backend;  // constant-initialized: no dynamic static initializer runs
  return registry.add(kBackendId, backend);
}

}  // namespace backends::null_backend
}  // namespace ember
