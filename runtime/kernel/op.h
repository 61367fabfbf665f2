// Operators: OpCode (numbers equal schema/program.fbs's OpCode, stable forever) and OpAttrs, the
// plain-data form of an instruction's attributes, decoded from the program once at load so kernels
// never touch the FlatBuffer.
#pragma once

#include <cstdint>
#include <limits>

#include "runtime/core/tensor_view.h"

namespace ember {

enum class OpCode : uint16_t {
  Invalid = 0,
  Add = 1,
  Sub = 2,
  Mul = 3,
  Div = 4,
  Relu = 5,
  Gelu = 6,
  Silu = 7,
  Sigmoid = 8,
  Tanh = 9,
  MatMul = 10,  // batched, numpy broadcasting over leading dims: [.., M, K] x [.., K, N]
  Linear = 11,  // y = x w^T + b; x [.., K], w [N, K], b [N] optional
  Conv2d = 12,  // NCHW x [N, C, H, W], w [O, C/groups, kH, kW], b [O] optional; then out_min/out_max
  MaxPool2d = 13,
  AvgPool2d = 14,
  GlobalAvgPool2d = 15,  // [N, C, H, W] -> [N, C, 1, 1]
  Softmax = 16,
  LayerNorm = 17,  // x, gamma?, beta? over dims [axis, rank)
  Reshape = 18,
  Transpose = 19,
  Concat = 20,
  Slice = 21,
  // Added for the ONNX importer.
  Clip = 22,         // f32: min(max(x, clip_min), clip_max)
  HardSigmoid = 23,  // f32: max(0, min(1, alpha x + beta))
  HardSwish = 24,    // f32: x * relu6(x + 3) / 6
  Erf = 25,          // f32
  Sqrt = 26,         // f32
  Exp = 27,          // f32
  Pow = 28,          // f32, numpy broadcasting (x ** y)
  ReduceMean = 29,   // f32 over axes[0..count) (count 0 = all), keepdims
  ReduceSum = 30,    // f32, as ReduceMean
  Pad = 31,          // any dtype: pads[0..2*rank) = begins then ends (may be negative = crop); value; mode
  Gather = 32,       // data (any dtype), indices i32/i64 along axis (negative wrap; out of range gives zeros)
  Where = 33,        // cond bool, x, y (same dtype), numpy broadcasting
  Equal = 34,        // a, b (same dtype) -> bool, numpy broadcasting
  Cast = 35,         // any numeric dtype -> cast_to (f32/f16/bf16/i8/u8/i16/i32/i64/bool); float->int truncates
  Expand = 36,       // any dtype, numpy broadcast to shape[0..count) (with shape_sym like Reshape)
  BatchNorm = 37,    // f32 inference: x [N, C, ...], scale, bias, mean, var [C]; epsilon
  Neg = 38,          // f32
  // LLM ops (DESIGN §4, §6). Inputs are f32 / i32 unless stated; kernels/reference/ops.h is exact.
  RmsNorm = 39,    // x [.., H], weight [H]; NormAttrs (axis = last, epsilon): w * (x * rsqrt(mean(x^2) + eps))
  Rope = 40,       // x [T, heads, D] (D even), positions [T] i32, inv_freq [D/2]: HF rotate_half form
  SiluMul = 41,    // gate [.., F], up [.., F] (same dims): silu(gate) * up
  Embedding = 42,  // weight [V, H] f32/bf16/f16, ids [T] i32 -> f32 [T, H]; an id outside [0, V) fails
  Sample = 43,     // logits [S, V] + per-row sampling parameters -> next_ids [S] i32, logprobs [S] f32
  // q [T, Hq, D], k, v [T, Hkv, D], k_cache, v_cache (program state, written in place), slot_mapping,
  // block_tables, context_lens, query_start -> out [T, Hq, D] (kernels/reference/paged_attention.h)
  PagedAttention = 44,
  LogitsGather = 45,  // hidden [T, H], indices [S] i32 -> [S, H]: row indices[s], zeros for -1
};
constexpr int kOpCodeCount = 46;

// Which attribute table an op takes (the schema's Attributes union member; None = no table).
enum class AttrKind : uint8_t {
  None = 0,
  Gelu = 1,
  Axis = 2,
  Linear = 3,
  Conv2d = 4,
  Pool2d = 5,
  Norm = 6,
  Reshape = 7,
  Permute = 8,
  Slice = 9,
  Clip = 10,
  HardSigmoid = 11,
  Reduce = 12,
  Pad = 13,
  Cast = 14,
  Attention = 15,
};

enum class PadMode : uint8_t { Invalid = 0, Constant = 1, Reflect = 2, Edge = 3 };

enum class GeluApprox : uint8_t { Invalid = 0, None = 1, Tanh = 2 };
enum class ActivationQuant : uint8_t { Invalid = 0, None = 1, Fp8PerToken = 2 };

// Every attribute of every op, flat. Only the fields of the op's AttrKind are meaningful.
struct OpAttrs {
  AttrKind kind = AttrKind::None;
  // Axis / Norm
  int32_t axis = 0;
  float epsilon = 0.0f;
  // Gelu / Linear
  GeluApprox gelu_approx = GeluApprox::None;
  ActivationQuant activation_quant = ActivationQuant::None;
  // Conv2d / Pool2d: [h, w]; padding [top, left, bottom, right]
  int32_t kernel[2] = {1, 1};
  int32_t stride[2] = {1, 1};
  int32_t padding[4] = {0, 0, 0, 0};
  int32_t dilation[2] = {1, 1};
  int32_t groups = 1;
  // Conv2d: output clamp after the bias, min(max(y, out_min), out_max) with NaN kept, exactly a clip
  // after the conv (the exporter fuses relu / clip into it); ±inf = none (conv2d_has_clamp).
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();
  bool ceil_mode = false;
  bool count_include_pad = false;
  // Reshape: a dim with sym != 0 takes symbol value; -1 (once) is inferred.
  // Permute: perm[0..count). Slice: axes/starts/ends/steps[0..count).
  uint8_t count = 0;
  int64_t shape[kMaxRank] = {0};
  uint16_t shape_sym[kMaxRank] = {0};
  int32_t perm[kMaxRank] = {0};
  int32_t axes[kMaxRank] = {0};
  int64_t starts[kMaxRank] = {0};
  int64_t ends[kMaxRank] = {0};
  int64_t steps[kMaxRank] = {0};
  uint16_t ends_sym[kMaxRank] = {0};  // Slice: != 0 = ends[j] is symbols[ends_sym[j] - 1] at run time
  // Clip: [clip_min, clip_max]. HardSigmoid: alpha, beta.
  float clip_min = 0.0f;
  float clip_max = 0.0f;
  float alpha = 0.0f;
  float beta = 0.0f;
  // Reduce: axes[0..count) (count 0 = every dim).
  bool keepdims = true;
  // Pad: count = rank; pads[0..count) begins, pads[count..2*count) ends (ONNX order).
  int64_t pads[2 * kMaxRank] = {0};
  float pad_value = 0.0f;
  PadMode pad_mode = PadMode::Constant;
  // Cast
  ScalarType cast_to = ScalarType::Invalid;
  // Attention: softmax scale; the FP8 KV cache's per-tensor scale.
  float attn_scale = 0.0f;
  float kv_scale = 1.0f;
};

// Whether a conv2d's out_min / out_max clamp anything (false for ±inf; NaN bounds are refused at load).
inline bool conv2d_has_clamp(const OpAttrs& attrs) {
  return attrs.out_min > -std::numeric_limits<float>::infinity() ||
         attrs.out_max < std::numeric_limits<float>::infinity();
}

// "add", "conv2d", ...; "invalid" for unknown values. Never null.
const char* to_string(OpCode op);

}  // namespace ember
