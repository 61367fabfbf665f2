// Shape functions of the neural-network ops (op_info_nn.cc): matmul, linear, conv2d, pooling,
// softmax, layer_norm, batch_norm and the reductions.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "runtime/kernel/op_info.h"
#include "tests/kernels/reference/op_info_test_util.h"

namespace ember {
namespace {

using testing::absent;
using testing::F;
using testing::kI64Max;
using testing::OpInfoTest;
using testing::run;
using testing::tv;

// ---- MatMul / Linear
// -----------------------------------------------------------------------------

TEST_F(OpInfoTest, MatMul) {
  OpAttrs a;
  expect_dims(run(OpCode::MatMul, a, {tv(F, {5, 7}), tv(F, {7, 3})}), {5, 3});
  expect_dims(run(OpCode::MatMul, a, {tv(F, {2, 1, 3, 4}), tv(F, {5, 4, 2})}), {2, 5, 3, 2});
  expect_invalid(run(OpCode::MatMul, a, {tv(F, {5, 7}), tv(F, {6, 3})}), OpCode::MatMul,
                 "K mismatch");
  expect_invalid(run(OpCode::MatMul, a, {tv(F, {7}), tv(F, {7, 3})}), OpCode::MatMul, "rank >= 2");
  expect_invalid(run(OpCode::MatMul, a, {tv(F, {2, 3, 4}), tv(F, {3, 4, 2})}), OpCode::MatMul,
                 "batch dims");
  expect_invalid(run(OpCode::MatMul, a, {tv(F, {3, 4}), tv(ScalarType::BF16, {4, 2})}),
                 OpCode::MatMul, "bf16");
}

TEST_F(OpInfoTest, Linear) {
  OpAttrs a;
  a.kind = AttrKind::Linear;
  expect_dims(run(OpCode::Linear, a, {tv(F, {3, 4, 7}), tv(F, {5, 7}), tv(F, {5})}), {3, 4, 5});
  expect_dims(run(OpCode::Linear, a, {tv(F, {3, 7}), tv(F, {5, 7}), absent()}), {3, 5});
  expect_dims(run(OpCode::Linear, a, {tv(F, {7}), tv(F, {5, 7})}), {5});
  // Quantized weights: the weight dtype is the kernel key's business.
  expect_dims(run(OpCode::Linear, a, {tv(F, {2, 32}), tv(ScalarType::F8E4M3FN, {8, 32})}), {2, 8});
  expect_invalid(run(OpCode::Linear, a, {tv(F, {3, 6}), tv(F, {5, 7})}), OpCode::Linear,
                 "K mismatch");
  expect_invalid(run(OpCode::Linear, a, {tv(F, {3, 7}), tv(F, {1, 5, 7})}), OpCode::Linear,
                 "[N, K]");
  expect_invalid(run(OpCode::Linear, a, {tv(F, {3, 7}), tv(F, {5, 7}), tv(F, {4})}), OpCode::Linear,
                 "bias must be [5]");
  expect_invalid(run(OpCode::Linear, a, {tv(F, {3, 7}), tv(F, {5, 7}), tv(ScalarType::F16, {5})}),
                 OpCode::Linear, "f16");
  expect_invalid(run(OpCode::Linear, a, {tv(F, {}), tv(F, {5, 7})}), OpCode::Linear, "rank");
  a.activation_quant = ActivationQuant::Invalid;
  expect_invalid(run(OpCode::Linear, a, {tv(F, {3, 7}), tv(F, {5, 7})}), OpCode::Linear,
                 "activation_quant");
}

// ---- Conv / Pool
// ---------------------------------------------------------------------------------

OpAttrs conv_attrs(int sh, int sw, std::initializer_list<int> pad, int dh = 1, int dw = 1,
                   int groups = 1) {
  OpAttrs a;
  a.kind = AttrKind::Conv2d;
  a.stride[0] = sh;
  a.stride[1] = sw;
  int i = 0;
  for (int p : pad) a.padding[i++] = p;
  a.dilation[0] = dh;
  a.dilation[1] = dw;
  a.groups = groups;
  return a;
}

TEST_F(OpInfoTest, Conv2d) {
  expect_dims(run(OpCode::Conv2d, conv_attrs(1, 1, {1, 1, 1, 1}),
                  {tv(F, {1, 3, 8, 8}), tv(F, {4, 3, 3, 3}), tv(F, {4})}),
              {1, 4, 8, 8});
  // H: (9 + 1 + 2 - 3) / 2 + 1 = 5; W: (7 + 0 + 1 - 2) / 3 + 1 = 3.
  expect_dims(run(OpCode::Conv2d, conv_attrs(2, 3, {1, 0, 2, 1}),
                  {tv(F, {2, 2, 9, 7}), tv(F, {3, 2, 3, 2}), absent()}),
              {2, 3, 5, 3});
  // Dilation: H (10 + 4 - 5) / 1 + 1 = 10, W (9 + 2 - 7) + 1 = 5.
  expect_dims(run(OpCode::Conv2d, conv_attrs(1, 1, {2, 1, 2, 1}, 2, 3),
                  {tv(F, {1, 2, 10, 9}), tv(F, {2, 2, 3, 3})}),
              {1, 2, 10, 5});
  expect_dims(run(OpCode::Conv2d, conv_attrs(1, 1, {0, 0, 0, 0}, 1, 1, 3),
                  {tv(F, {1, 3, 5, 5}), tv(F, {6, 1, 5, 5})}),
              {1, 6, 1, 1});
}

TEST_F(OpInfoTest, Conv2dErrors) {
  const OpCode op = OpCode::Conv2d;
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}, 1, 1, 2), {tv(F, {1, 3, 8, 8}), tv(F, {4, 1, 3, 3})}),
      op, "conv2d: input channels 3 not divisible by groups 2");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}, 1, 1, 2), {tv(F, {1, 4, 8, 8}), tv(F, {3, 2, 3, 3})}),
      op, "output channels 3 not divisible by groups 2");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}), {tv(F, {1, 4, 8, 8}), tv(F, {3, 2, 3, 3})}), op,
      "needs 4 input channels");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}, 1, 1, 0), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3, 3})}),
      op, "groups 0");
  expect_invalid(
      run(op, conv_attrs(0, 1, {0, 0, 0, 0}), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3, 3})}), op,
      "stride 0");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}, 1, 0), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3, 3})}), op,
      "dilation 0");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, -1, 0, 0}), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3, 3})}), op,
      "negative padding -1");
  expect_invalid(run(op, conv_attrs(1, 1, {0, 0, 0, 0}),
                     {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3, 3}), tv(F, {2})}),
                 op, "bias must be [3]");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}), {tv(F, {1, 4, 2, 8}), tv(F, {3, 4, 3, 3})}), op,
      "empty output along H");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}, 1, 4), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3, 3})}), op,
      "empty output along W");
  expect_invalid(run(op, conv_attrs(1, 1, {0, 0, 0, 0}), {tv(F, {4, 8, 8}), tv(F, {3, 4, 3, 3})}),
                 op, "[N, C, H, W]");
  expect_invalid(run(op, conv_attrs(1, 1, {0, 0, 0, 0}), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 3})}),
                 op, "weight must be");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0, 0, 0, 0}), {tv(F, {1, 4, 8, 8}), tv(F, {3, 4, 0, 3})}), op,
      "empty kernel");
  expect_invalid(run(op, conv_attrs(1, 1, {0, 0, 0, 0}),
                     {tv(F, {1, 4, 8, 8}), tv(ScalarType::F16, {3, 4, 3, 3})}),
                 op, "f16");
  // Hostile: huge dilation and kernel must not overflow.
  expect_invalid(run(op, conv_attrs(1, 1, {0, 0, 0, 0}, 0x7FFFFFFF, 1),
                     {tv(F, {1, 1, 8, 8}), tv(F, {1, 1, kI64Max / 4, 1})}),
                 op, "");
  expect_invalid(
      run(op, conv_attrs(1, 1, {0x7FFFFFFF, 0, 0x7FFFFFFF, 0}),
          {tv(ScalarType::U8, {1, 1, kI64Max - 1, 1}), tv(ScalarType::U8, {1, 1, 1, 1})}),
      op, "empty output along H");
}

OpAttrs pool_attrs(int kh, int kw, int sh, int sw, std::initializer_list<int> pad, bool ceil_mode,
                   int dh = 1, int dw = 1) {
  OpAttrs a;
  a.kind = AttrKind::Pool2d;
  a.kernel[0] = kh;
  a.kernel[1] = kw;
  a.stride[0] = sh;
  a.stride[1] = sw;
  int i = 0;
  for (int p : pad) a.padding[i++] = p;
  a.dilation[0] = dh;
  a.dilation[1] = dw;
  a.ceil_mode = ceil_mode;
  return a;
}

TEST_F(OpInfoTest, Pool2dOutputSizes) {
  for (OpCode op : {OpCode::MaxPool2d, OpCode::AvgPool2d}) {
    expect_dims(run(op, pool_attrs(2, 2, 2, 2, {0, 0, 0, 0}, false), {tv(F, {1, 2, 6, 6})}),
                {1, 2, 3, 3});
    // floor((7 - 3) / 2) + 1 = 3; ceil gives 3 as well (4 / 2 exact).
    expect_dims(run(op, pool_attrs(3, 3, 2, 2, {0, 0, 0, 0}, true), {tv(F, {1, 2, 7, 7})}),
                {1, 2, 3, 3});
    // 6, k 3, s 2, pad 1: floor(5/2)+1 = 3, ceil(5/2)+1 = 4 (last window starts at 6 - 1 = 5 < 7).
    expect_dims(run(op, pool_attrs(3, 3, 2, 2, {1, 1, 1, 1}, false), {tv(F, {1, 1, 6, 6})}),
                {1, 1, 3, 3});
    expect_dims(run(op, pool_attrs(3, 3, 2, 2, {1, 1, 1, 1}, true), {tv(F, {1, 1, 6, 6})}),
                {1, 1, 4, 4});
    // 5, k 2, s 2, pad 1, ceil: 4 by the formula, but window 4 would start at 6 >= 5 + 1: 3.
    expect_dims(run(op, pool_attrs(2, 2, 2, 2, {1, 1, 1, 1}, true), {tv(F, {1, 1, 5, 5})}),
                {1, 1, 3, 3});
    // ceil_mode lets a window overhang: 2, k 3, s 2 -> floor gives 0 (error), ceil gives 1.
    expect_dims(run(op, pool_attrs(3, 3, 2, 2, {0, 0, 0, 0}, true), {tv(F, {1, 1, 2, 2})}),
                {1, 1, 1, 1});
    expect_invalid(run(op, pool_attrs(3, 3, 2, 2, {0, 0, 0, 0}, false), {tv(F, {1, 1, 2, 2})}), op,
                   "empty output along H");
    // Dilation: effective window 2 * (3 - 1) + 1 = 5; (9 + 2 - 5) / 2 + 1 = 4.
    expect_dims(run(op, pool_attrs(3, 1, 2, 1, {1, 0, 1, 0}, false, 2, 1), {tv(F, {2, 1, 9, 8})}),
                {2, 1, 4, 8});
  }
}

TEST_F(OpInfoTest, Pool2dErrors) {
  for (OpCode op : {OpCode::MaxPool2d, OpCode::AvgPool2d}) {
    expect_invalid(run(op, pool_attrs(0, 2, 1, 1, {0, 0, 0, 0}, false), {tv(F, {1, 1, 4, 4})}), op,
                   "kernel 0");
    expect_invalid(run(op, pool_attrs(2, 2, 1, 0, {0, 0, 0, 0}, false), {tv(F, {1, 1, 4, 4})}), op,
                   "stride 0");
    expect_invalid(
        run(op, pool_attrs(2, 2, 1, 1, {0, 0, 0, 0}, false, -1, 1), {tv(F, {1, 1, 4, 4})}), op,
        "dilation -1");
    expect_invalid(run(op, pool_attrs(2, 2, 1, 1, {0, -2, 0, 0}, false), {tv(F, {1, 1, 4, 4})}), op,
                   "negative padding");
    expect_invalid(run(op, pool_attrs(3, 3, 1, 1, {2, 0, 0, 0}, false), {tv(F, {1, 1, 4, 4})}), op,
                   "exceeds half the window");
    expect_invalid(run(op, pool_attrs(2, 2, 1, 1, {0, 0, 0, 0}, false), {tv(F, {1, 4, 4})}), op,
                   "[N, C, H, W]");
    expect_invalid(
        run(op, pool_attrs(2, 2, 1, 1, {0, 0, 0, 0}, false), {tv(F, {1, 1, 4, 4}), tv(F, {1})}), op,
        "inputs");
    expect_invalid(run(op, pool_attrs(0x7FFFFFFF, 1, 0x7FFFFFFF, 1, {0, 0, 0, 0}, true, 0x7FFFFFFF),
                       {tv(ScalarType::U8, {1, 1, 5, 1})}),
                   op, "empty output along H");
  }
}

TEST_F(OpInfoTest, GlobalAvgPool) {
  OpAttrs a;
  expect_dims(run(OpCode::GlobalAvgPool2d, a, {tv(F, {2, 3, 5, 7})}), {2, 3, 1, 1});
  expect_invalid(run(OpCode::GlobalAvgPool2d, a, {tv(F, {2, 3, 0, 7})}), OpCode::GlobalAvgPool2d,
                 "empty spatial");
  expect_invalid(run(OpCode::GlobalAvgPool2d, a, {tv(F, {2, 3, 5})}), OpCode::GlobalAvgPool2d,
                 "[N, C, H, W]");
}

// ---- Softmax / LayerNorm
// -------------------------------------------------------------------------

TEST_F(OpInfoTest, Softmax) {
  OpAttrs a;
  a.kind = AttrKind::Axis;
  for (int axis : {-3, -1, 0, 2}) {
    a.axis = axis;
    expect_dims(run(OpCode::Softmax, a, {tv(F, {2, 3, 4})}), {2, 3, 4});
  }
  for (int axis : {-4, 3, std::numeric_limits<int32_t>::min()}) {
    a.axis = axis;
    expect_invalid(run(OpCode::Softmax, a, {tv(F, {2, 3, 4})}), OpCode::Softmax, "out of range");
  }
  a.axis = 0;
  expect_invalid(run(OpCode::Softmax, a, {tv(F, {})}), OpCode::Softmax, "rank 0");
}

TEST_F(OpInfoTest, LayerNorm) {
  OpAttrs a;
  a.kind = AttrKind::Norm;
  a.axis = -1;
  a.epsilon = 1e-5f;
  const OpCode op = OpCode::LayerNorm;
  expect_dims(run(op, a, {tv(F, {2, 3, 8}), tv(F, {8}), tv(F, {8})}), {2, 3, 8});
  expect_dims(run(op, a, {tv(F, {2, 3, 8}), absent(), tv(F, {8})}), {2, 3, 8});
  expect_dims(run(op, a, {tv(F, {2, 3, 8}), tv(F, {8}), absent()}), {2, 3, 8});
  expect_dims(run(op, a, {tv(F, {2, 3, 8}), absent(), absent()}), {2, 3, 8});
  expect_dims(run(op, a, {tv(F, {2, 3, 8})}), {2, 3, 8});
  a.axis = 1;
  expect_dims(run(op, a, {tv(F, {2, 3, 4}), tv(F, {3, 4}), tv(F, {3, 4})}), {2, 3, 4});
  expect_invalid(run(op, a, {tv(F, {2, 3, 4}), tv(F, {4}), tv(F, {3, 4})}), op,
                 "gamma shape [4] must equal [3, 4]");
  expect_invalid(run(op, a, {tv(F, {2, 3, 4}), tv(F, {3, 4}), tv(F, {3, 5})}), op, "beta shape");
  expect_invalid(run(op, a, {tv(F, {2, 3, 4}), tv(F, {3, 4}), tv(ScalarType::F16, {3, 4})}), op,
                 "f16");
  expect_invalid(run(op, a, {tv(F, {2, 0, 4})}), op, "empty");
  a.axis = 3;
  expect_invalid(run(op, a, {tv(F, {2, 3, 4})}), op, "axis 3 out of range");
  a.axis = -1;
  a.epsilon = -1.0f;
  expect_invalid(run(op, a, {tv(F, {2, 3, 4})}), op, "epsilon");
  a.epsilon = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(run(op, a, {tv(F, {2, 3, 4})}), op, "epsilon");
}

TEST_F(OpInfoTest, BatchNorm) {
  const OpCode op = OpCode::BatchNorm;
  OpAttrs a;
  a.kind = AttrKind::Norm;
  a.epsilon = 1e-5f;
  const TensorView p = tv(F, {3});
  expect_dims(run(op, a, {tv(F, {2, 3, 4, 5}), p, p, p, p}), {2, 3, 4, 5});
  expect_dims(run(op, a, {tv(F, {2, 3}), p, p, p, p}), {2, 3});
  a.axis = -1;  // ignored: the channel axis is 1
  expect_dims(run(op, a, {tv(F, {0, 3, 7}), p, p, p, p}), {0, 3, 7});
  expect_invalid(run(op, a, {tv(F, {3}), p, p, p, p}), op, "[N, C, ...]");
  expect_invalid(run(op, a, {tv(F, {2, 4, 5}), p, p, p, p}), op, "scale must be [4], got [3]");
  expect_invalid(run(op, a, {tv(F, {2, 3}), p, p, p, tv(F, {1, 3})}), op, "var must be [3]");
  expect_invalid(run(op, a, {tv(F, {2, 3}), p, tv(ScalarType::F16, {3}), p, p}), op,
                 "bias must be f32, got f16");
  expect_invalid(run(op, a, {tv(F, {2, 3}), p, p, absent(), p}), op, "invalid dtype");
  expect_invalid(run(op, a, {tv(F, {2, 3}), p, p, p}), op, "expected 5 to 5 inputs, got 4");
  a.epsilon = -1.0f;
  expect_invalid(run(op, a, {tv(F, {2, 3}), p, p, p, p}), op, "epsilon -1 must be finite");
  a.epsilon = std::numeric_limits<float>::infinity();
  expect_invalid(run(op, a, {tv(F, {2, 3}), p, p, p, p}), op, "epsilon");
}

// ---- Reductions
// ----------------------------------------------------------------------------------

OpAttrs reduce_attrs(std::initializer_list<int> axes, bool keepdims) {
  OpAttrs a;
  a.kind = AttrKind::Reduce;
  a.count = static_cast<uint8_t>(axes.size());
  int i = 0;
  for (int v : axes) a.axes[i++] = v;
  a.keepdims = keepdims;
  return a;
}

TEST_F(OpInfoTest, Reduce) {
  for (OpCode op : {OpCode::ReduceMean, OpCode::ReduceSum}) {
    const TensorView x = tv(F, {2, 3, 4});
    expect_dims(run(op, reduce_attrs({-1}, true), {x}), {2, 3, 1});
    expect_dims(run(op, reduce_attrs({-1}, false), {x}), {2, 3});
    expect_dims(run(op, reduce_attrs({2, 0}, false), {x}), {3});
    expect_dims(run(op, reduce_attrs({0, -2}, true), {x}), {1, 1, 4});
    expect_dims(run(op, reduce_attrs({}, true), {x}), {1, 1, 1});
    expect_dims(run(op, reduce_attrs({}, false), {x}), {});
    expect_dims(run(op, reduce_attrs({}, false), {tv(F, {})}), {});
    expect_dims(run(op, reduce_attrs({}, true), {tv(F, {})}), {});
    // An empty reduced extent is allowed (sum 0, mean NaN).
    expect_dims(run(op, reduce_attrs({1}, false), {tv(F, {3, 0})}), {3});
    expect_invalid(run(op, reduce_attrs({0}, false), {tv(F, {0, kI64Max / 2, 4})}), op,
                   "output element count overflows");
    expect_invalid(run(op, reduce_attrs({3}, true), {x}), op, "axis 3 out of range for rank 3");
    expect_invalid(run(op, reduce_attrs({-4}, true), {x}), op, "axis -4 out of range");
    expect_invalid(run(op, reduce_attrs({1, -2}, true), {x}), op, "axis 1 repeated");
    expect_invalid(run(op, reduce_attrs({0, 1, 2, 0}, true), {x}), op, "4 axes for rank 3");
    expect_invalid(run(op, reduce_attrs({0}, true), {tv(F, {})}), op, "1 axes for rank 0");
    OpAttrs hostile = reduce_attrs({0}, true);
    hostile.count = 200;
    expect_invalid(run(op, hostile, {x}), op, "200 axes");
    hostile = reduce_attrs({std::numeric_limits<int32_t>::min()}, true);
    expect_invalid(run(op, hostile, {x}), op, "out of range");
  }
}

}  // namespace
}  // namespace ember
