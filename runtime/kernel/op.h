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
  // LLM ops (docs/DESIGN.md §4, §6). Inputs are f32 / i32 unless stated; kernels/reference/ops.h is exact.
  RmsNorm = 39,    // x [.., H], weight [H]; NormAttrs (axis = last, epsilon): w * (x * rsqrt(mean(x^2) + eps))
  Rope = 40,       // x [T, heads, D] (D even), positions [T] i32, inv_freq [D/2]: HF rotate_half form
  SiluMul = 41,    // gate [.., F], up [.., F] (same dims): silu(gate) * up
  Embedding = 42,  // weight [V, H] f32/bf16/f16, ids [T] i32 -> f32 [T, H]; an id outside [0, V) fails
  Sample = 43,     // logits [S, V] + per-row sampling parameters -> next_ids [S] i32, logprobs [S] f32
  // q [T, Hq, D], k, v [T, Hkv, D], k_cache, v_cache (program state, written in place), slot_mapping,
  // block_tables, context_lens, query_start -> out [T, Hq, D] (kernels/reference/paged_attention.h)
  PagedAttention = 44,
  LogitsGather = 45,  // hidden [T, H], indices [S] i32 -> [S, H]: row indices[s], zeros for -1
  // Issue 17 (real-world ONNX models). Elementwise, f32 unless stated (ONNX semantics).
  LeakyRelu = 46,  // alpha: x < 0 ? alpha x : x
  PRelu = 47,      // x, slope (numpy broadcasting): x < 0 ? slope x : x
  Elu = 48,        // alpha: x < 0 ? alpha (exp(x) - 1) : x
  Selu = 49,       // alpha, beta = gamma: gamma (x <= 0 ? alpha (exp(x) - 1) : x)
  Softplus = 50,   // log(1 + exp(x))
  Log = 51,
  Abs = 52,
  Reciprocal = 53,
  Floor = 54,
  Ceil = 55,
  Round = 56,  // half to even
  Sin = 57,
  Cos = 58,
  Greater = 59,         // a, b (same dtype) -> bool, numpy broadcasting; likewise the next three
  Less = 60,
  GreaterOrEqual = 61,
  LessOrEqual = 62,
  And = 63,  // bool, bool -> bool, numpy broadcasting; likewise Or, Xor
  Or = 64,
  Xor = 65,
  Not = 66,  // bool -> bool
  Max = 67,  // a, b (same dtype), numpy broadcasting; NaN propagates
  Min = 68,
  // Reductions and index ops.
  ReduceMax = 69,   // as ReduceMean (ReduceAttrs); f32
  ReduceMin = 70,
  ReduceProd = 71,
  ArgMax = 72,      // ArgAttrs -> i64
  ArgMin = 73,
  TopK = 74,        // TopKAttrs -> values, indices (i64)
  CumSum = 75,      // CumSumAttrs
  GatherElements = 76,  // data, indices i32/i64 (same rank) along axis (AxisAttrs)
  GroupNorm = 77,   // x [N, C, ...], scale [C], bias [C]; GroupNormAttrs (InstanceNorm: groups = C)
  // Spatial and recurrent.
  Resize = 78,           // ResizeAttrs
  ConvTranspose2d = 79,  // x [N, C, H, W], w [C, O/groups, kH, kW], b [O] optional; Conv2dAttrs + output_padding
  Lstm = 80,             // ONNX LSTM (layout 0): X, W, R, B?, seq_lens?, h0?, c0?, P? -> Y, Y_h, Y_c
  Gru = 81,              // ONNX GRU (layout 0): X, W, R, B?, seq_lens?, h0? -> Y, Y_h
};
constexpr int kOpCodeCount = 82;

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
  Arg = 16,
  TopK = 17,
  CumSum = 18,
  GroupNorm = 19,
  Resize = 20,
  Rnn = 21,
};

enum class PadMode : uint8_t { Invalid = 0, Constant = 1, Reflect = 2, Edge = 3 };

enum class GeluApprox : uint8_t { Invalid = 0, None = 1, Tanh = 2 };
enum class ActivationQuant : uint8_t { Invalid = 0, None = 1, Fp8PerToken = 2 };
enum class ResizeMode : uint8_t { Invalid = 0, Nearest = 1, Linear = 2, Cubic = 3 };
enum class ResizeCoord : uint8_t {
  Invalid = 0,
  HalfPixel = 1,
  AlignCorners = 2,
  Asymmetric = 3,
  PytorchHalfPixel = 4,
  HalfPixelSymmetric = 5,
};
enum class ResizeNearest : uint8_t { Invalid = 0, RoundPreferFloor = 1, RoundPreferCeil = 2, Floor = 3, Ceil = 4 };
enum class RnnDirection : uint8_t { Invalid = 0, Forward = 1, Reverse = 2, Bidirectional = 3 };
enum class RnnActivation : uint8_t {
  Invalid = 0,
  Sigmoid = 1,
  Tanh = 2,
  Relu = 3,
  HardSigmoid = 4,
  LeakyRelu = 5,
  ThresholdedRelu = 6,
  ScaledTanh = 7,
  Affine = 8,
  Elu = 9,
  Softsign = 10,
  Softplus = 11,
};
constexpr int kMaxRnnActivations = 6;  // 3 per direction (LSTM), 2 directions

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
  // Attention: a query at position p sees keys at positions > p - attn_window (0 = all); scores are
  // soft-capped as attn_softcap * tanh(s / attn_softcap) when attn_softcap > 0.
  int32_t attn_window = 0;
  float attn_softcap = 0.0f;
  // ConvTranspose2d: [h, w]
  int32_t output_padding[2] = {0, 0};
  // Arg (axis, keepdims)
  bool select_last_index = false;
  // TopK (axis)
  int64_t k = 0;
  bool largest = true;
  bool sorted = true;
  // CumSum (axis)
  bool exclusive = false;
  bool reverse = false;
  // GroupNorm: groups, epsilon (above).
  // Resize: per dim d < count: shape[d] >= 0 = output size, -1 = floor(dim * resize_scales[d]).
  ResizeMode resize_mode = ResizeMode::Nearest;
  ResizeCoord resize_coord = ResizeCoord::HalfPixel;
  ResizeNearest resize_nearest = ResizeNearest::RoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float resize_scales[kMaxRank] = {0};
  // Rnn: activations per direction in ONNX order (LSTM f, g, h; GRU f, g), rnn_act_count in all;
  // rnn_clip <= 0 = none.
  RnnDirection rnn_direction = RnnDirection::Forward;
  int32_t hidden_size = 0;
  uint8_t rnn_act_count = 0;
  RnnActivation rnn_act[kMaxRnnActivations] = {};
  float rnn_alpha[kMaxRnnActivations] = {0};
  float rnn_beta[kMaxRnnActivations] = {0};
  float rnn_clip = 0.0f;
  bool linear_before_reset = false;
  bool input_forget = false;
};

// Whether a conv2d's out_min / out_max clamp anything (false for ±inf; NaN bounds are refused at load).
inline bool conv2d_has_clamp(const OpAttrs& attrs) {
  return attrs.out_min > -std::numeric_limits<float>::infinity() ||
         attrs.out_max < std::numeric_limits<float>::infinity();
}

// "add", "conv2d", ...; "invalid" for unknown values. Never null.
const char* to_string(OpCode op);

}  // namespace ember
