// Per-op facts shared by every kernel library, the executor and the exporter: the attribute kind,
// arity and the run-time shape function (O(rank), no heap). The shape function is also the op's
// validator: it checks ranks, broadcastability, channel counts, ... and reports the first problem.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/kernel/op.h"

namespace ember {

// Reads the inputs' dtype/rank/dims (data may be null) and writes rank and dims of each output
// (dtype too). `symbols[i]` is the current value of graph symbol i + 1 (used by Reshape). On failure
// returns InvalidArgument with the reason in ctx.
using ShapeFn = Status (*)(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                           TensorView* outputs, size_t output_count, Span<const int64_t> symbols,
                           ErrorContext* ctx);

// Checks what only the inputs' *data* can tell (ids within the vocabulary, positions, sampling
// parameters) for an op whose shape function accepted them: O(elements of the checked inputs), no
// heap. Kernels have no failure path, so the GraphRunner (and the exporter's evaluator) call it
// before every kernel call of the op and fail with InvalidArgument (message in ctx) instead; a
// kernel called without it must still stay within its buffers (it writes zeros / NaN for bad data).
using InputCheckFn = Status (*)(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                                ErrorContext* ctx);

struct OpInfo {
  OpCode op;
  const char* name;
  AttrKind attr_kind;
  uint8_t min_inputs;
  uint8_t max_inputs;  // Concat: kMaxKernelArgs - 1
  uint8_t outputs;
  ShapeFn shape;
  InputCheckFn check_inputs;  // null: every value of the inputs is acceptable
  // Bit i set: input i is program state (docs/DESIGN.md §2) that the kernel also writes in place (the KV
  // cache of paged_attention). The validator requires State storage for these inputs; nothing
  // else may be written through an input.
  uint32_t state_inputs = 0;
};

// nullptr for Invalid or unknown op codes.
const OpInfo* find_op_info(OpCode op);

// Numpy broadcasting of a and b into out (rank, dims). False if incompatible.
bool broadcast_shapes(const TensorView& a, const TensorView& b, TensorView* out);

}  // namespace ember
