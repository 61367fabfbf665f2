#include <cstring>
#include <new>

#include "backends/null/register.h"
#include "runtime/interpreter/host_graph.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/platform/platform.h"

namespace ember {

// Everything one delegate owns: the interpreter and the memory of its internal values, in one
// allocation made at init.
class DelegateHandle {
 public:
  GraphRunner runner;
  uint8_t* memory = nullptr;  // runner structures, then internal values
  size_t memory_bytes = 0;
  size_t runner_bytes = 0;
};

namespace backends::null_backend {
namespace {

class NullBackend final : public Backend {
 public:
  bool is_available(const RuntimeContext& runtime) const override { return runtime.kernels != nullptr; }

  // The advertised ops, in any signature the portable kernels run (it runs on them), unquantized.
  bool supports(const RuntimeContext& runtime, const KernelKey& key) const override {
    bool listed = false;
    for (OpCode op : supported_ops()) listed = listed || op == key.op;
    return listed && key.quant == QuantLayout::None && runtime.kernels != nullptr && runtime.kernels->find(key) != nullptr;
  }

  Result<MemoryRequirements> plan_memory(BackendLoadContext& ctx, const GraphView& graph,
                                         Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check_specs(ctx, specs));
    const HostGraphLayout layout = plan_host_graph(graph, false, false);
    return requirements(layout.runner_bytes, layout.value_bytes);
  }

  Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                               Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check_specs(ctx, specs));
    const HostGraphLayout layout = plan_host_graph(graph, false, false);
    const size_t bytes = layout.runner_bytes + layout.value_bytes;
    void* storage = platform_aligned_alloc(alignof(DelegateHandle), sizeof(DelegateHandle));
    uint8_t* memory = static_cast<uint8_t*>(platform_aligned_alloc(64, bytes));
    if (storage == nullptr || memory == nullptr) {
      platform_aligned_free(storage);
      platform_aligned_free(memory);
      return EMBER_FAIL(ctx.error, Error::OutOfMemory, "null backend: %zu bytes for delegate %u", bytes,
                        ctx.delegate_index);
    }
    DelegateHandle* handle = new (storage) DelegateHandle();
    handle->memory = memory;
    handle->memory_bytes = bytes;
    handle->runner_bytes = layout.runner_bytes;
    // The null backend does not own state: every state it names is host memory of the Program.
    void* state_data[64];
    if (ctx.states.size() > 64) {
      destroy(handle);
      return EMBER_FAIL(ctx.error, Error::NotSupported, "null backend: %zu states in one graph (at most 64)",
                        ctx.states.size());
    }
    for (size_t i = 0; i < ctx.states.size(); ++i) state_data[i] = ctx.states[i].host_data;
    HostGraphMemory m;
    m.runner = memory;
    m.values = memory + layout.runner_bytes;
    m.states = ctx.states;
    m.state_data = Span<void* const>(state_data, ctx.states.size());
    const Status status = bind_host_graph(handle->runner, graph, *ctx.runtime, m, false, false, ctx.error);
    if (!status.is_ok()) {
      destroy(handle);  // a failed init cleans up after itself
      return status;
    }
    return handle;
  }

  Status execute(BackendExecuteContext& ctx, DelegateHandle* handle, Span<const TensorView> inputs,
                 Span<TensorView> outputs) const override {
    GraphRunner& r = handle->runner;
    r.bind_io(inputs, Span<const TensorView>(outputs.data(), outputs.size()));
    KernelContext kernel_ctx;
    kernel_ctx.pool = ctx.pool;
    kernel_ctx.scratch = ctx.scratch;
    EMBER_RETURN_IF_ERROR(r.run(kernel_ctx, ctx.abort, ctx.error));
    r.read_outputs(outputs);
    return Status::ok();
  }

  MemoryRequirements memory_requirements(const DelegateHandle* handle) const override {
    return requirements(handle->runner_bytes, handle->memory_bytes - handle->runner_bytes);
  }

  void destroy(DelegateHandle* handle) const noexcept override {
    if (handle == nullptr) return;
    platform_aligned_free(handle->memory);
    handle->~DelegateHandle();
    platform_aligned_free(handle);
  }

 private:
  // Host memory by purpose: the handle, the runner's structures, the internal values. plan_memory()
  // and memory_requirements() both report it, from the same layout.
  static MemoryRequirements requirements(size_t runner_bytes, size_t value_bytes) {
    MemoryRequirements req;
    req.add_part("handle", MemoryDomain::Host, sizeof(DelegateHandle));
    req.add_part("runner", MemoryDomain::Host, runner_bytes);
    req.add_part("values", MemoryDomain::Host, value_bytes);
    return req;
  }

  static Status check_specs(BackendLoadContext& ctx, Span<const CompileSpec> specs) {
    for (const CompileSpec& spec : specs) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "null backend: unknown compile spec '%s'", spec.key);
    }
    return Status::ok();
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
