// Kernel interface: out-variant functions over planned memory, found at load by KernelKey and bound
// to function pointers. A kernel never fails: the op's shape function (op_info.h) has validated the
// shapes, and the loader the dtypes, before it is called.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/quant.h"
#include "runtime/core/span.h"
#include "runtime/core/tensor_view.h"
#include "runtime/kernel/op.h"

namespace ember {

class ThreadPool;

constexpr int kMaxKernelArgs = 16;  // inputs + outputs (Concat takes up to 15 inputs)

struct KernelKey {
  OpCode op = OpCode::Invalid;
  uint8_t variant = 0;               // 0 = default; others reserved for alternative algorithms
  uint8_t arg_count = 0;             // inputs then outputs; absent optional inputs are Invalid
  ScalarType dtypes[kMaxKernelArgs] = {};
  DimOrder dim_order = DimOrder::Contiguous;
  QuantLayout quant = QuantLayout::None;  // of the first quantized input (the weight); None otherwise

  bool operator==(const KernelKey& other) const;
};

// The key a call binds by: the views' dtypes (an absent input's is Invalid), the first input's dim
// order, and the layout of the first quantized input (TensorView::quant).
KernelKey make_kernel_key(OpCode op, const TensorView* inputs, size_t input_count, const TensorView* outputs,
                          size_t output_count);

// Writes e.g. "linear(f32, f8_e4m3fn per_channel, -, f32)" into out; returns out.
const char* format_key(const KernelKey& key, char* out, size_t out_size);

// What a kernel may use at run time besides its arguments.
struct KernelContext {
  ThreadPool* pool = nullptr;  // may be null: run single-threaded
  Span<uint8_t> scratch;       // reset after each kernel call
  // A device backend's launch state for kernels that run on it (backends/cuda: the stream, library
  // handles, the device error word); null for host kernels. With it set, scratch is device memory.
  void* device = nullptr;
  // The index of the instruction being run in its graph (set by GraphRunner before each kernel call):
  // a device backend keys per-instruction launch plans by it (backends/cuda: fused quantization).
  uint32_t instruction = 0;
};

// inputs[i].data is null for an absent optional input. Output dims are already set by the shape
// function; kernels write exactly outputs[j].nbytes() bytes.
using KernelFn = void (*)(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs,
                          size_t input_count, TensorView* outputs, size_t output_count);

// Bytes of KernelContext::scratch a kernel needs for these shapes (the upper bounds at load) when
// `threads` workers run it. Registered beside the KernelFn; MethodMeta::scratch_bytes() is the
// largest over a method's instructions. Views carry dtype and dims only (data is null).
using ScratchFn = size_t (*)(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                             const TensorView* outputs, size_t output_count, size_t threads);

}  // namespace ember
