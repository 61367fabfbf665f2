// Op-level reference kernels. Each has the KernelFn signature (runtime/kernel/kernel.h), takes
// shapes already set by the op's shape function and computes in the plainest possible way
// (f32 math accumulated in double). These define the semantics every other kernel is tested against.
#pragma once

#include <cstddef>

#include "runtime/kernel/kernel.h"

namespace ember::kernels::reference {

#define EMBER_REFERENCE_KERNEL(name)                                                      \
  void name(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs,          \
            size_t input_count, TensorView* outputs, size_t output_count)

// f32, numpy broadcasting.
EMBER_REFERENCE_KERNEL(add);
EMBER_REFERENCE_KERNEL(sub);
EMBER_REFERENCE_KERNEL(mul);
EMBER_REFERENCE_KERNEL(div);
// f32 elementwise. gelu: erf form (GeluApprox::None) or tanh form (GeluApprox::Tanh).
EMBER_REFERENCE_KERNEL(relu);
EMBER_REFERENCE_KERNEL(gelu);
EMBER_REFERENCE_KERNEL(silu);
EMBER_REFERENCE_KERNEL(sigmoid);
EMBER_REFERENCE_KERNEL(tanh);
// f32. matmul: [.., M, K] x [.., K, N], batch dims broadcast. linear: x [.., K], w [N, K], b [N]?
EMBER_REFERENCE_KERNEL(matmul);
EMBER_REFERENCE_KERNEL(linear);
// linear with a quantized weight (inputs[1].quant; runtime/core/quant.h): every layout, weight-only,
// and W8A8 (activation_quant = Fp8PerToken) for FP8 per-tensor / per-channel weights.
EMBER_REFERENCE_KERNEL(linear_quantized);
// f32 NCHW.
EMBER_REFERENCE_KERNEL(conv2d);
EMBER_REFERENCE_KERNEL(max_pool2d);
EMBER_REFERENCE_KERNEL(avg_pool2d);
EMBER_REFERENCE_KERNEL(global_avg_pool2d);
// f32.
EMBER_REFERENCE_KERNEL(softmax);
EMBER_REFERENCE_KERNEL(layer_norm);
// Any dtype of 8 bits or more (bytes are moved, never interpreted).
EMBER_REFERENCE_KERNEL(reshape);
EMBER_REFERENCE_KERNEL(transpose);
EMBER_REFERENCE_KERNEL(concat);
EMBER_REFERENCE_KERNEL(slice);

// Added for the ONNX importer. f32: clip, hard_sigmoid, hard_swish, erf, sqrt, exp, neg, pow
// (numpy broadcasting), reduce_mean, reduce_sum (sum in double; an empty extent gives 0 / NaN),
// batch_norm (x, scale, bias, mean, var).
EMBER_REFERENCE_KERNEL(clip);
EMBER_REFERENCE_KERNEL(hard_sigmoid);
EMBER_REFERENCE_KERNEL(hard_swish);
EMBER_REFERENCE_KERNEL(erf);
EMBER_REFERENCE_KERNEL(sqrt);
EMBER_REFERENCE_KERNEL(exp);
EMBER_REFERENCE_KERNEL(neg);
EMBER_REFERENCE_KERNEL(pow);
EMBER_REFERENCE_KERNEL(reduce_mean);
EMBER_REFERENCE_KERNEL(reduce_sum);
EMBER_REFERENCE_KERNEL(batch_norm);
// where(cond bool, x, y), expand, gather (indices i32/i64; an out-of-range index writes zeros):
// any dtype of 8 bits or more. pad: the Cast types (its f32 value is converted by Cast's rules).
// equal: by value, bool output. cast: between f32, f16, bf16, i8, u8, i16, i32, i64 and bool
// (float -> int truncates toward zero, NaN -> 0, saturates; int -> int wraps; -> bool is != 0;
// -> f16/bf16 rounds to nearest even).
EMBER_REFERENCE_KERNEL(where);
EMBER_REFERENCE_KERNEL(expand);
EMBER_REFERENCE_KERNEL(gather);
EMBER_REFERENCE_KERNEL(pad);
EMBER_REFERENCE_KERNEL(equal);
EMBER_REFERENCE_KERNEL(cast);

#undef EMBER_REFERENCE_KERNEL

}  // namespace ember::kernels::reference
