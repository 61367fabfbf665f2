// Operators: OpCode (numbers equal schema/program.fbs's OpCode, stable forever) and OpAttrs, the
// plain-data form of an instruction's attributes, decoded from the program once at load so kernels
// never touch the FlatBuffer.
#pragma once

#include <cstdint>

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
  Conv2d = 12,  // NCHW x [N, C, H, W], w [O, C/groups, kH, kW], b [O] optional
  MaxPool2d = 13,
  AvgPool2d = 14,
  GlobalAvgPool2d = 15,  // [N, C, H, W] -> [N, C, 1, 1]
  Softmax = 16,
  LayerNorm = 17,  // x, gamma?, beta? over dims [axis, rank)
  Reshape = 18,
  Transpose = 19,
  Concat = 20,
  Slice = 21,
};
constexpr int kOpCodeCount = 22;

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
};

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
};

// "add", "conv2d", ...; "invalid" for unknown values. Never null.
const char* to_string(OpCode op);

}  // namespace ember
