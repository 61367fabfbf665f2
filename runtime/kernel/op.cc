#include "runtime/kernel/op.h"

namespace ember {

const char* to_string(OpCode op) {
  switch (op) {
    case OpCode::Invalid:
      return "invalid";
    case OpCode::Add:
      return "add";
    case OpCode::Sub:
      return "sub";
    case OpCode::Mul:
      return "mul";
    case OpCode::Div:
      return "div";
    case OpCode::Relu:
      return "relu";
    case OpCode::Gelu:
      return "gelu";
    case OpCode::Silu:
      return "silu";
    case OpCode::Sigmoid:
      return "sigmoid";
    case OpCode::Tanh:
      return "tanh";
    case OpCode::MatMul:
      return "matmul";
    case OpCode::Linear:
      return "linear";
    case OpCode::Conv2d:
      return "conv2d";
    case OpCode::MaxPool2d:
      return "max_pool2d";
    case OpCode::AvgPool2d:
      return "avg_pool2d";
    case OpCode::GlobalAvgPool2d:
      return "global_avg_pool2d";
    case OpCode::Softmax:
      return "softmax";
    case OpCode::LayerNorm:
      return "layer_norm";
    case OpCode::Reshape:
      return "reshape";
    case OpCode::Transpose:
      return "transpose";
    case OpCode::Concat:
      return "concat";
    case OpCode::Slice:
      return "slice";
    case OpCode::Clip:
      return "clip";
    case OpCode::HardSigmoid:
      return "hard_sigmoid";
    case OpCode::HardSwish:
      return "hard_swish";
    case OpCode::Erf:
      return "erf";
    case OpCode::Sqrt:
      return "sqrt";
    case OpCode::Exp:
      return "exp";
    case OpCode::Pow:
      return "pow";
    case OpCode::ReduceMean:
      return "reduce_mean";
    case OpCode::ReduceSum:
      return "reduce_sum";
    case OpCode::Pad:
      return "pad";
    case OpCode::Gather:
      return "gather";
    case OpCode::Where:
      return "where";
    case OpCode::Equal:
      return "equal";
    case OpCode::Cast:
      return "cast";
    case OpCode::Expand:
      return "expand";
    case OpCode::BatchNorm:
      return "batch_norm";
    case OpCode::Neg:
      return "neg";
  }
  return "invalid";
}

}  // namespace ember
