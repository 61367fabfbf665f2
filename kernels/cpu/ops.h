// Op-level Highway kernels (library "cpu"). Each has the KernelFn signature (runtime/kernel/kernel.h)
// and the semantics of its kernels/reference twin; shapes were set and validated by the op's shape
// function. None of them allocates, throws or fails. Large ops split work over ctx.pool by output
// rows / channels / N, never over a reduction axis, so results are bitwise identical for any thread
// count; GEMM and convolution also give each output element the same computation whatever M or the
// batch is (batch invariance). Only matmul, linear, the quantized linears, conv2d and sample use ctx.scratch
// (registered ScratchFns).
#pragma once

#include <cstddef>

#include "runtime/kernel/kernel.h"

namespace ember::kernels::cpu {

#define EMBER_CPU_KERNEL(name)                                                            \
  void name(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs,          \
            size_t input_count, TensorView* outputs, size_t output_count)

// f32, numpy broadcasting; out may alias an input of the same shape.
EMBER_CPU_KERNEL(add);
EMBER_CPU_KERNEL(sub);
EMBER_CPU_KERNEL(mul);
EMBER_CPU_KERNEL(div);
// f32 elementwise; out may alias the input.
EMBER_CPU_KERNEL(relu);
EMBER_CPU_KERNEL(gelu);
EMBER_CPU_KERNEL(silu);
EMBER_CPU_KERNEL(sigmoid);
EMBER_CPU_KERNEL(tanh);
// f32 GEMMs (gemm.cc).
EMBER_CPU_KERNEL(matmul);
// matmul's scratch: one K x 32-float panel of B per thread (copied contiguous; without it B is read
// in place, the same bits).
size_t matmul_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      const TensorView* outputs, size_t output_count, size_t threads);
EMBER_CPU_KERNEL(linear);
// f32 linear's scratch: x packed in panels (up to 256 rows at a time; linear_packed.cc). Given less
// (a direct call without scratch), linear runs unpacked dot-product tiles (gemm.cc), also batch
// invariant but not bitwise equal to the packed path.
size_t linear_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      const TensorView* outputs, size_t output_count, size_t threads);
// linear with a quantized weight (inputs[1].quant): FP8 (any f32-scale block, W8A8 too), MXFP8,
// NVFP4 on quantized_linear.h's kernels; its scratch need comes from linear_quantized_scratch.
EMBER_CPU_KERNEL(linear_quantized);
// linear with a bf16 weight [N, K] (LLM checkpoints kept in bf16): quantized_linear.h's linear_bf16,
// the same scratch as linear_quantized (llm.cc).
EMBER_CPU_KERNEL(linear_bf16_weight);
size_t linear_quantized_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                                const TensorView* outputs, size_t output_count, size_t threads);
// f32 NCHW (conv.cc, conv_gemm.cc, conv_winograd.cc, pool.cc). conv2d runs as a packed GEMM, as
// Winograd F(4x4 / 2x2, 3x3) for 3x3 stride-1 convs on maps of 12x12 and more (not the reference's
// operation order: within the f32 tolerance, non-finite outputs exact), or depthwise over a padded
// plane or with channels in lanes, in conv2d_scratch(...) bytes of ctx.scratch; given less (a
// direct call without scratch), it computes directly from the input.
EMBER_CPU_KERNEL(conv2d);
size_t conv2d_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      const TensorView* outputs, size_t output_count, size_t threads);
// Tests and benchmarks only (process-wide, not per call): conv2d's algorithm for the shapes where
// it has a choice (conv_plan.h). -1 (the default): chosen by shape; 0: the im2col GEMM; 2 or 4:
// Winograd F(m x m, 3 x 3) wherever eligible (3x3, stride 1, no dilation or groups, padding <= 2).
// Set it before sizing the scratch.
void conv2d_set_path_for_testing(int mode);
EMBER_CPU_KERNEL(max_pool2d);
EMBER_CPU_KERNEL(avg_pool2d);
EMBER_CPU_KERNEL(global_avg_pool2d);
// f32 (norm.cc).
EMBER_CPU_KERNEL(softmax);
EMBER_CPU_KERNEL(layer_norm);
// Any dtype of 8 bits or more; bytes are moved, never interpreted (movement.cc). reshape is a byte
// copy with nothing to vectorize: the reference's kernel serves it (register_builtin).
EMBER_CPU_KERNEL(transpose);
EMBER_CPU_KERNEL(concat);
EMBER_CPU_KERNEL(slice);
// Added for the ONNX importer. f32 elementwise (elementwise.cc); out may alias the input.
EMBER_CPU_KERNEL(clip);
EMBER_CPU_KERNEL(hard_sigmoid);
EMBER_CPU_KERNEL(hard_swish);
EMBER_CPU_KERNEL(erf);
EMBER_CPU_KERNEL(sqrt);
EMBER_CPU_KERNEL(exp);
EMBER_CPU_KERNEL(neg);
// f32, numpy broadcasting (elementwise.cc): pow has vector paths for x ** 1, 2, 3 (scalar
// exponent), std::pow otherwise; where is vectorized when cond has the output's shape and x and y
// have it or are single elements.
EMBER_CPU_KERNEL(pow);
EMBER_CPU_KERNEL(where);
// f32 (norm.cc): reductions (f64 accumulation; vector path when the reduced dims are trailing) and
// inference batch_norm.
EMBER_CPU_KERNEL(reduce_mean);
EMBER_CPU_KERNEL(reduce_sum);
EMBER_CPU_KERNEL(batch_norm);
// f32 pad, all three modes (movement.cc); other dtypes use the reference.
EMBER_CPU_KERNEL(pad);
// LLM ops, the reference's semantics (llm.cc, sample.cc). Units are rows ([.., H] rows of rms_norm,
// tokens of rope / embedding, blocks of silu_mul, sequences of sample): a row's result never
// depends on the thread count or on how many rows the call has (batch invariance).
EMBER_CPU_KERNEL(rms_norm);
EMBER_CPU_KERNEL(rope);
EMBER_CPU_KERNEL(silu_mul);
EMBER_CPU_KERNEL(embedding);
// paged_attention as the reference op (kernels/cpu/paged_attention.h: batch invariant, no scratch).
EMBER_CPU_KERNEL(paged_attention_op);
// logits_gather (row copies) has no cpu kernel: the reference's serves it (register_builtin).
// sample uses ctx.scratch: sample_scratch(...) bytes (one V-float row and V indices per thread).
EMBER_CPU_KERNEL(sample);
size_t sample_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      const TensorView* outputs, size_t output_count, size_t threads);

// [issue 17: elementwise ops]
// f32 (elementwise.cc; the reference's semantics). max, min, prelu (slope broadcast to x): numpy
// broadcasting on the add/sub/mul/div plan, exact. greater, less, greater_equal, less_equal: f32 ->
// bool bytes, broadcasting, exact. leaky_relu and abs are exact; elu, selu (hwy Expm1), softplus (Exp,
// Log1p) and log (Log) are within a few ulp. out may alias an input of the output's shape and dtype.
// The rest of the issue-17 elementwise ops (integer and bool ones, reciprocal, floor, ceil, round,
// sin, cos) run on the reference's kernels.
EMBER_CPU_KERNEL(max);
EMBER_CPU_KERNEL(min);
EMBER_CPU_KERNEL(prelu);
EMBER_CPU_KERNEL(greater);
EMBER_CPU_KERNEL(less);
EMBER_CPU_KERNEL(greater_equal);
EMBER_CPU_KERNEL(less_equal);
EMBER_CPU_KERNEL(leaky_relu);
EMBER_CPU_KERNEL(elu);
EMBER_CPU_KERNEL(selu);
EMBER_CPU_KERNEL(softplus);
EMBER_CPU_KERNEL(log);
EMBER_CPU_KERNEL(abs);

// [issue 17: reductions and index ops] (reduce_index.cc) f32 only; reduce_prod, topk, cumsum,
// gather_elements and the integer reductions use the reference kernels.
EMBER_CPU_KERNEL(reduce_max);
EMBER_CPU_KERNEL(reduce_min);
EMBER_CPU_KERNEL(argmax);
EMBER_CPU_KERNEL(argmin);
EMBER_CPU_KERNEL(group_norm);

// [issue 17: resize, conv_transpose2d]
// resize.cc: f32, any rank; vector paths for nearest / linear over the last two dims of NCHW-like
// tensors (x2 nearest as a doubling copy), the reference's loop otherwise. conv_transpose2d.cc: f32
// NCHW gather form, phase-major row accumulation, conv2d's clamp; bitwise thread invariant.
EMBER_CPU_KERNEL(resize);
EMBER_CPU_KERNEL(conv_transpose2d);

// [issue 17: lstm, gru]
// f32 ONNX LSTM / GRU as one fused kernel each (rnn.cc): the input projections of all steps in one
// packed GEMM per direction, then per step the recurrent GEMM fused with the gates and the state
// update, split over directions and blocks of hidden units (bitwise thread-invariant). Scratch:
// lstm_scratch / gru_scratch bytes (projections, R transposed, states, linear_packed's panels).
EMBER_CPU_KERNEL(lstm);
EMBER_CPU_KERNEL(gru);
size_t lstm_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                    const TensorView* outputs, size_t output_count, size_t threads);
size_t gru_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                   const TensorView* outputs, size_t output_count, size_t threads);

#undef EMBER_CPU_KERNEL

}  // namespace ember::kernels::cpu
