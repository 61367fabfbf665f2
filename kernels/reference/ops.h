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
// linear with a bf16 weight [N, K]: quantized_linear.h's linear_bf16 (the weight decoded exactly).
EMBER_REFERENCE_KERNEL(linear_bf16_weight);
// f32 NCHW. conv2d: + bias, then clamped to [out_min, out_max] as clip does (NaN stays NaN).
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

// LLM ops (llm.cc, sample.cc; docs/DESIGN.md §4, §6). Shapes and data were checked by the op's shape
// function and input check (runtime/kernel/op_info_llm.cc); called without the check, a bad id or
// position gives a zero row / NaN row rather than an out-of-bounds access.
// rms_norm(x [.., H], weight [H]), NormAttrs over the last dim, HF LlamaRMSNorm in f32:
//   v = mean(x^2) (sum in double, rounded to f32), r = 1 / sqrt(v + eps) (f32), y = w * (x * r).
EMBER_REFERENCE_KERNEL(rms_norm);
// rope(x [T, heads, D], positions [T] i32, inv_freq [D/2]), HF apply_rotary_pos_emb (non-interleaved):
//   angle_i = f32(position) * inv_freq[i] (f32), c_i = cos(angle_i), s_i = sin(angle_i) (f32 of the
//   double functions), y[i] = x[i] c_i - x[i + D/2] s_i, y[i + D/2] = x[i + D/2] c_i + x[i] s_i.
EMBER_REFERENCE_KERNEL(rope);
// silu_mul(gate, up) = silu(gate) * up (HF act_fn(gate) * up): silu(g) = g / (1 + exp(-g)) in double
// rounded to f32 (the silu kernel), then an f32 product.
EMBER_REFERENCE_KERNEL(silu_mul);
// embedding(weight [V, H] f32 / bf16 / f16, ids [T] i32) -> f32 [T, H]: rows converted exactly.
EMBER_REFERENCE_KERNEL(embedding);
// paged_attention(q, k, v, k_cache, v_cache, slot_mapping, block_tables, context_lens, query_start)
//   -> out: kernels/reference/paged_attention.h with scale = attrs.attn_scale and cache_scale =
//   attrs.kv_scale; writes the caches (program state) in place. Arguments the op's input check
//   rejected never reach it; if they do, out is zero-filled and nothing is written.
EMBER_REFERENCE_KERNEL(paged_attention_op);
// logits_gather(hidden [T, H], indices [S] i32) -> [S, H]: row indices[s] (-1: zeros).
EMBER_REFERENCE_KERNEL(logits_gather);
// sample(logits [S, V], temperature [S], top_k [S] i32, top_p [S], repetition_penalty [S],
//        seed [S] i32, position [S] i32, history [S, Hmax] i32, history_len [S] i32)
//   -> next_ids [S] i32, logprobs [S] f32. Per row, in this order (f32 unless stated):
//   1. repetition penalty (HF RepetitionPenaltyLogitsProcessor): for each distinct id in
//      history[0, history_len) with id >= 0 (negative = padding): l = l > 0 ? l / p : l * p.
//   2. temperature 0: greedy, the first index of the maximum (NaN never wins); logprob =
//      log_softmax(penalized logits)[id] (double, NaN logits left out; an all -inf row gives the
//      first id and NaN, a +inf logit its first index and 0, an all-NaN row id 0 and NaN).
//      Otherwise z = l / temperature (a NaN z becomes -inf), then:
//   3. top_k (k <= 0 or k >= V: off): keep every z >= the k-th largest z (HF TopKLogitsWarper:
//      ties with the k-th value are all kept).
//   4. top_p (p >= 1: off): probabilities softmax(z) over the kept set (double); order the kept set
//      by (z descending, id ascending) and keep its shortest prefix whose probability sum >= top_p
//      (at least one token; HF TopPLogitsWarper up to rounding and tie order).
//   5. u = sample_uniform(seed, position) (runtime/core/philox.h, Philox4x32-10; seed read as
//      uint32); w_i = exp(z_i - max) (double) over the kept set, walked in ascending id order: the
//      first id whose running sum exceeds u * sum(w) (the last kept id if rounding leaves none).
//      logprob = log(w_id / sum(w)) (double), i.e. the processed distribution's log-probability.
//      If the largest kept z is infinite: its first index, logprob 0 (+inf) or NaN (-inf: every
//      logit NaN or -inf). Non-finite logits never fault and give the same id on every library
//      and thread count; the LLM engine refuses them before sampling.
//   Scratch: sample_scratch() bytes (the penalized / tempered row and an index array).
EMBER_REFERENCE_KERNEL(sample);
size_t sample_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      const TensorView* outputs, size_t output_count, size_t threads);

// [issue 17: elementwise ops]
// elementwise_onnx.cc (ONNX semantics; NaN / Inf rules in README.md). f32 unless stated:
// leaky_relu (alpha), elu (alpha), selu (alpha, gamma = beta): HardSigmoid-table attributes.
// prelu(x, slope): the slope broadcasts to x. softplus, log, reciprocal, floor, ceil, round (half to
// even), sin, cos. abs: f32, i32, i64 (integers wrap at the minimum); neg_int: neg for i32 / i64.
// greater, less, greater_equal, less_equal: f32 / i32 / i64 -> bool, numpy broadcasting.
// logical_and / or / xor (bool, broadcasting), logical_not (bool). max, min: f32 / i32 / i64, numpy
// broadcasting, NaN propagates, a tie returns b (onnxruntime's choice between +0 and -0).
EMBER_REFERENCE_KERNEL(leaky_relu);
EMBER_REFERENCE_KERNEL(prelu);
EMBER_REFERENCE_KERNEL(elu);
EMBER_REFERENCE_KERNEL(selu);
EMBER_REFERENCE_KERNEL(softplus);
EMBER_REFERENCE_KERNEL(log);
EMBER_REFERENCE_KERNEL(abs);
EMBER_REFERENCE_KERNEL(neg_int);
EMBER_REFERENCE_KERNEL(reciprocal);
EMBER_REFERENCE_KERNEL(floor);
EMBER_REFERENCE_KERNEL(ceil);
EMBER_REFERENCE_KERNEL(round);
EMBER_REFERENCE_KERNEL(sin);
EMBER_REFERENCE_KERNEL(cos);
EMBER_REFERENCE_KERNEL(greater);
EMBER_REFERENCE_KERNEL(less);
EMBER_REFERENCE_KERNEL(greater_equal);
EMBER_REFERENCE_KERNEL(less_equal);
EMBER_REFERENCE_KERNEL(logical_and);
EMBER_REFERENCE_KERNEL(logical_or);
EMBER_REFERENCE_KERNEL(logical_xor);
EMBER_REFERENCE_KERNEL(logical_not);
EMBER_REFERENCE_KERNEL(max);
EMBER_REFERENCE_KERNEL(min);

// [issue 17: reductions and index ops] (reduce_index.cc)
// reduce_max / reduce_min (f32, i32, i64; ReduceAttrs as reduce_sum): f32 in the IEEE 754-2019
// maximum / minimum sense: NaN (the canonical quiet NaN) if any element is NaN, +0 > -0, so the result
// does not depend on the order of the elements; an empty extent gives -inf / +inf (integers: the
// type's lowest / highest), as onnxruntime.
EMBER_REFERENCE_KERNEL(reduce_max);
EMBER_REFERENCE_KERNEL(reduce_min);
// f32: the product in double, rounded once; an empty extent gives 1.
EMBER_REFERENCE_KERNEL(reduce_prod);
// x f32 / i32 / i64 -> i64 indices along attrs.axis (keepdims, select_last_index): onnxruntime's
// scan (element 0 is the candidate; a later one replaces it when strictly greater, or greater or
// equal with select_last_index; argmin: less). So ties give the first (last) index, a NaN at index
// 0 is the answer and a NaN elsewhere is skipped.
EMBER_REFERENCE_KERNEL(argmax);
EMBER_REFERENCE_KERNEL(argmin);
// x f32 -> values f32, indices i64: the attrs.k largest (smallest) along attrs.axis, best first
// (also when attrs.sorted is false: ONNX leaves that order open); equal values by lower index; NaN
// ranks above every number (torch.topk), so it comes first when largest and last otherwise.
EMBER_REFERENCE_KERNEL(topk);
// f32 / i32 / i64 along attrs.axis; exclusive (the element itself left out), reverse (from the
// end). f32 sums in double, each output rounded once; integers wrap modulo 2^bits.
EMBER_REFERENCE_KERNEL(cumsum);
// Any dtype of 8 bits or more; indices i32 / i64 of data's rank: out[p] = data[p with axis coordinate
// indices[p]] (negative wrapped once; still outside: zero bytes, but the op's input check refuses it).
EMBER_REFERENCE_KERNEL(gather_elements);
// x [N, C, ...] f32, scale [C], bias [C]: mean and biased variance per (n, group of C / groups
// channels) in double, y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c].
EMBER_REFERENCE_KERNEL(group_norm);

// [issue 17: resize, conv_transpose2d]
// spatial.cc. resize: f32, any rank, ResizeAttrs (nearest / linear / cubic, every coordinate mode),
// indices and weights from runtime/kernel/resize_math.h, products of weights summed in double.
// conv_transpose2d: f32 NCHW, w [C, O/groups, kH, kW], bias [O]?; sums in double, then conv2d's clamp.
EMBER_REFERENCE_KERNEL(resize);
EMBER_REFERENCE_KERNEL(conv_transpose2d);

// [issue 17: lstm, gru]
// f32 ONNX LSTM / GRU, layout 0 (runtime/kernel/op_info_rnn.cc lists the inputs and outputs):
// every direction, sequence_lens, initial states, peepholes, clip, input_forget,
// linear_before_reset and all eleven activations; rnn.cc states the semantics. Both use
// rnn_scratch(...) bytes of ctx.scratch (one row's gate pre-activations in double).
EMBER_REFERENCE_KERNEL(lstm);
EMBER_REFERENCE_KERNEL(gru);
size_t rnn_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                   const TensorView* outputs, size_t output_count, size_t threads);

#undef EMBER_REFERENCE_KERNEL

}  // namespace ember::kernels::reference
