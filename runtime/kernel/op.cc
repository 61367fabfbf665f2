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
  }
  return "invalid";
}

}  // namespace ember
