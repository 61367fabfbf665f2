// GraphRunner: binds one validated Graph (a Method's body, or a GRAPH delegate run on portable
// kernels) to kernels, delegates and memory at load, and runs it. There is one interpreter: the
// executor runs Method bodies and portable fallbacks with it, and host backends embed it
// (backends/null, backends/sim). It sits above runtime/kernel and runtime/backend and below the
// executor (runtime/interpreter/README.md): a delegate instruction goes straight to the Backend
// bound to it (set_delegates), with no detour through the executor. Where a value's bytes live is
// its user's policy (ResolveFn, called once per value at bind: the executor's arenas and program
// state, a backend's own memory).
// Not thread-safe; no heap: bind() takes exactly memory_bytes() from the caller's allocator and
// run() allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/core/event_tracer.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/backend/backend.h"
#include "runtime/core/status.h"
#include "runtime/kernel/kernel.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/kernel/op_info.h"
#include "runtime/program/graph_view.h"

namespace ember {

class GraphRunner {
 public:
  // Where a value's bytes live: sets view->data (null for values bound later with bind_value(): a
  // delegate graph's inputs and outputs). May shrink view->dims for storage sized at load (state whose
  // dims use load-time symbols); the value's capacity is then view->nbytes(). Called once per value.
  using ResolveFn = Status (*)(void* user, uint32_t value, const fb::Tensor& tensor, TensorView* view,
                               ErrorContext* ctx);
  // What runs delegate d of a Method graph (its DelegateCall.index): a backend and its handle, or
  // another GraphRunner over the delegate's graph (the portable fallback). `name` names it in errors.
  struct DelegateBinding {
    const Backend* backend = nullptr;
    DelegateHandle* handle = nullptr;
    GraphRunner* fallback = nullptr;
    const char* name = "";
  };

  // Exact bytes bind() takes from its allocator for `graph` (used by MethodMeta).
  static size_t memory_bytes(const fb::Graph& graph);
  // The key an instruction of a validated graph binds by (dtypes, dim order, weight quant layout at
  // the declared dims): what Backend::supports() is asked at load.
  static KernelKey kernel_key(const fb::Graph& graph, const fb::KernelCall& call);
  // Scratch the graph's kernels need at the upper-bound shapes with `threads` workers: the largest
  // ScratchFn result over its kernel instructions (0 without kernels or scratch functions).
  static size_t scratch_bytes(const fb::Graph& graph, const KernelRegistry* kernels, size_t threads);

  // Binds values and kernels. All missing kernels are reported at once (KernelMissing); output
  // shapes are checked against the declared dims with every symbol at its max (InvalidProgram).
  // `debug` (may be null) names nodes in messages. `graph` must outlive the runner.
  Status bind(const GraphView& graph, const KernelRegistry* kernels, const fb::DebugInfo* debug,
              BumpAllocator& allocator, ResolveFn resolve, void* user, ErrorContext* ctx);
  // Before bind(): bind values only (views, symbols, I/O), no kernels and no shape checks; run() then
  // fails with Internal. For a Method whose whole body a backend runs: the executor still owns its
  // I/O views. Takes the same memory_bytes().
  void set_values_only(bool values_only) { values_only_ = values_only; }
  // Before bind(): the values' bytes are device memory the host must not read (backends/cuda). bind()
  // and run() then read none of them: the FP8 NaN-code scan is skipped (QuantView::nan_codes stays
  // true) and so are the ops' input-value checks (OpInfo::check_inputs; the device kernels check).
  void set_device_memory(bool device_memory) { device_memory_ = device_memory; }

  // Binds delegate calls: `delegates[i]` runs DelegateCall index i. Borrowed; must outlive the
  // runner. A graph with delegate calls and none bound fails at run() (Internal).
  void set_delegates(Span<const DelegateBinding> delegates) { delegates_ = delegates; }

  // Runs every instruction; Cancelled when *abort becomes true between instructions. A delegate
  // call runs on its binding: a backend's execute() then synchronize() (the next instruction may
  // read its outputs on the host), or the fallback runner; its output dims are checked against the
  // declared ones (BackendFailed) and copied.
  Status run(KernelContext& kernel_ctx, const std::atomic<bool>* abort, ErrorContext* ctx);
  // Runs the whole graph on `backend` (one execute() and synchronize() over its inputs and
  // outputs), for a runner bound with set_values_only(true).
  Status run_on_backend(const DelegateBinding& backend, KernelContext& kernel_ctx, const std::atomic<bool>* abort,
                        ErrorContext* ctx);

  // Sets the dims of a graph input: rank must match, static dims must equal, symbolic dims must lie
  // within their symbol's bounds (InvalidArgument otherwise).
  Status set_input_dims(uint32_t input, Span<const int64_t> dims, ErrorContext* ctx);
  // Binds data and dims of a value whose storage is provided by the caller (delegate I/O).
  void bind_value(uint32_t value, const TensorView& view);
  // Delegate I/O in one call: binds the graph's inputs and outputs to these views (data, dims,
  // domain), in the graph's order; the counts must equal the graph's (checked by the validator).
  void bind_io(Span<const TensorView> inputs, Span<const TensorView> outputs);
  // After run(): the graph's outputs (their actual dims) into `outputs`, in the graph's order.
  void read_outputs(Span<TensorView> outputs) const;

  TensorView* values() { return values_; }
  const TensorView& value(uint32_t v) const { return values_[v]; }
  uint32_t value_count() const { return value_count_; }
  uint32_t instruction_count() const { return instruction_count_; }
  // "cpu", "reference", "delegate", "move", "jump" for --info.
  const char* instruction_library(uint32_t i) const;
  const GraphView& graph() const { return graph_; }
  bool is_symbolic() const { return symbol_count_ > 0; }
  // Called around each instruction when set (null = off). Borrowed.
  void set_event_tracer(EventTracer* tracer) { tracer_ = tracer; }
  EventTracer* event_tracer() const { return tracer_; }
  // run() stops with Cancelled after this many instructions (jumps can loop). 0 = no limit.
  void set_step_limit(uint64_t steps) { step_limit_ = steps; }
  // The debug name of an instruction's node, "" when there is none.
  const char* node_name(uint32_t instruction) const;

 private:
  struct Bound;
  struct MissingKernels;
  Status bind_kernel(uint32_t i, const fb::KernelCall& call, const KernelRegistry* kernels,
                     MissingKernels* missing, ErrorContext* ctx);
  Status derive_symbols(ErrorContext* ctx);
  Status run_kernel(const Bound& b, uint32_t i, KernelContext& kernel_ctx, ErrorContext* ctx);
  Status run_delegate(uint32_t i, const fb::DelegateCall& call, KernelContext& kernel_ctx,
                      const std::atomic<bool>* abort, ErrorContext* ctx);
  // One call of `binding` on views of this runner's values `ins` / `outs` (value ids).
  Status call_binding(const DelegateBinding& binding, uint32_t instruction, const char* what, const uint32_t* ins,
                      uint32_t in_count, const uint32_t* outs, uint32_t out_count, KernelContext& kernel_ctx,
                      const std::atomic<bool>* abort, ErrorContext* ctx);

  GraphView graph_;
  Span<const DelegateBinding> delegates_;
  EventTracer* tracer_ = nullptr;
  uint64_t step_limit_ = 0;
  const fb::DebugInfo* debug_ = nullptr;
  TensorView* values_ = nullptr;
  uint64_t* capacity_ = nullptr;   // planned bytes per value (at max dims)
  QuantView* quant_views_ = nullptr;  // one per quantized value, pointed to by its TensorView
  int64_t* symbols_ = nullptr;     // current value per symbol
  Bound* instructions_ = nullptr;
  int32_t* args_ = nullptr;
  uint32_t value_count_ = 0;
  uint32_t instruction_count_ = 0;
  uint32_t symbol_count_ = 0;
  bool values_only_ = false;
  bool device_memory_ = false;
};

}  // namespace ember
