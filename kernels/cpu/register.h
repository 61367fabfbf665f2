// kernels/cpu: Highway SIMD kernels, each tested against its kernels/reference twin.
#pragma once

#include <cstddef>

#include "runtime/core/status.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember::kernels {

// Registers every cpu kernel (library name "cpu") under the reference library's key conventions
// (arg_count = inputs + outputs; an absent optional input is ScalarType::Invalid, and the shorter
// list without trailing absent inputs is registered too). Fails on a duplicate key or a full
// registry.
Status register_cpu_kernels(KernelRegistry& registry);

// Bytes of KernelContext::scratch the cpu kernel for `op` needs with these shapes on one thread:
// conv2d's packed panels (conv2d_scratch), f32 linear's packed x (linear_scratch) and matmul's B
// panel (matmul_scratch); each also runs without, slower; 0 for the other ops here. The per-thread
// needs (those three, the quantized linears, sample) come from the ScratchFns registered with the
// kernels; this exists so that planners ask instead of assuming.
size_t cpu_scratch_bytes(OpCode op, const OpAttrs& attrs, const TensorView* inputs,
                         size_t input_count, const TensorView* outputs, size_t output_count);

}  // namespace ember::kernels
