// GraphRunner: binds one validated Graph (a Method's body, or a GRAPH delegate run on portable
// kernels) to kernels and memory at load, and runs it. Shared by the executor and by backends that
// interpret graphs (backends/null), so there is one interpreter. Not thread-safe; no heap: bind()
// takes exactly memory_bytes() from the caller's allocator and run() allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/core/event_tracer.h"
#include "runtime/core/memory_allocator.h"
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
  // Runs a DelegateCall; `values` are the runner's current views.
  using DelegateFn = Status (*)(void* user, uint32_t instruction, const fb::DelegateCall& call,
                                TensorView* values, ErrorContext* ctx);

  // Exact bytes bind() takes from its allocator for `graph` (used by MethodMeta).
  static size_t memory_bytes(const fb::Graph& graph);
  // Scratch the graph's kernels need at the upper-bound shapes with `threads` workers: the largest
  // ScratchFn result over its kernel instructions (0 without kernels or scratch functions).
  static size_t scratch_bytes(const fb::Graph& graph, const KernelRegistry* kernels, size_t threads);

  // Binds values and kernels. All missing kernels are reported at once (KernelMissing); output
  // shapes are checked against the declared dims with every symbol at its max (InvalidProgram).
  // `debug` (may be null) names nodes in messages. `graph` must outlive the runner.
  Status bind(const GraphView& graph, const KernelRegistry* kernels, const fb::DebugInfo* debug,
              BumpAllocator& allocator, ResolveFn resolve, void* user, ErrorContext* ctx);

  // Runs every instruction; Cancelled when *abort becomes true between instructions.
  Status run(KernelContext& kernel_ctx, const std::atomic<bool>* abort, DelegateFn delegate,
             void* user, ErrorContext* ctx);

  // Sets the dims of a graph input: rank must match, static dims must equal, symbolic dims must lie
  // within their symbol's bounds (InvalidArgument otherwise).
  Status set_input_dims(uint32_t input, Span<const int64_t> dims, ErrorContext* ctx);
  // Binds data and dims of a value whose storage is provided by the caller (delegate I/O).
  void bind_value(uint32_t value, const TensorView& view);

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

  GraphView graph_;
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
};

}  // namespace ember
