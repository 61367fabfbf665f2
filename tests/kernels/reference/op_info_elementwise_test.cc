// Shape functions of the elementwise ops (op_info_elementwise.cc): binary broadcasting, unary ops,
// gelu, clip, hard_sigmoid, pow, where, equal and cast.
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

// ---- Elementwise
// ---------------------------------------------------------------------------------

TEST_F(OpInfoTest, BinaryBroadcasts) {
  OpAttrs a;
  expect_dims(run(OpCode::Add, a, {tv(F, {4, 1, 3}), tv(F, {5, 1})}), {4, 5, 3});
  expect_dims(run(OpCode::Div, a, {tv(F, {}), tv(F, {})}), {});
  expect_dims(run(OpCode::Mul, a, {tv(F, {0, 3}), tv(F, {1})}), {0, 3});
  expect_dims(run(OpCode::Sub, a, {tv(ScalarType::I32, {2}), tv(ScalarType::I32, {2})}), {2},
              ScalarType::I32);
}

TEST_F(OpInfoTest, BinaryErrors) {
  OpAttrs a;
  expect_invalid(run(OpCode::Add, a, {tv(F, {2, 3}), tv(F, {4})}), OpCode::Add, "[2, 3] and [4]");
  expect_invalid(run(OpCode::Sub, a, {tv(F, {2}), tv(ScalarType::F16, {2})}), OpCode::Sub,
                 "input 1 is f16");
  expect_invalid(run(OpCode::Mul, a, {tv(F, {2})}), OpCode::Mul, "expected 2 to 2 inputs, got 1");
  expect_invalid(run(OpCode::Div, a, {tv(F, {2}), absent()}), OpCode::Div, "invalid dtype");
  // Each input fits in int64 bytes, the broadcast output does not.
  expect_invalid(run(OpCode::Add, a, {tv(F, {1ll << 40, 1}), tv(F, {1, 1ll << 40})}), OpCode::Add,
                 "overflows");
  // Wrong output count.
  TensorView ins[2] = {tv(F, {2}), tv(F, {2})};
  TensorView outs[2];
  ErrorContext ctx;
  EXPECT_EQ(find_op_info(OpCode::Add)->shape(OpAttrs(), ins, 2, outs, 2, {}, &ctx).code(),
            Error::InvalidArgument);
  // A null ErrorContext is allowed.
  EXPECT_EQ(find_op_info(OpCode::Add)->shape(OpAttrs(), ins, 1, outs, 1, {}, nullptr).code(),
            Error::InvalidArgument);
}

TEST_F(OpInfoTest, UnaryAndGelu) {
  OpAttrs a;
  for (OpCode op : {OpCode::Relu, OpCode::Silu, OpCode::Sigmoid, OpCode::Tanh, OpCode::Gelu}) {
    expect_dims(run(op, a, {tv(F, {3, 0, 5})}), {3, 0, 5});
    expect_invalid(run(op, a, {tv(F, {2}), tv(F, {2})}), op, "inputs");
    expect_invalid(run(op, a, {tv(F, {-1})}), op, "negative dim -1");
  }
  a.gelu_approx = GeluApprox::Tanh;
  expect_dims(run(OpCode::Gelu, a, {tv(F, {7})}), {7});
  a.gelu_approx = static_cast<GeluApprox>(9);
  expect_invalid(run(OpCode::Gelu, a, {tv(F, {7})}), OpCode::Gelu, "approximation 9");
}

TEST_F(OpInfoTest, NewUnaryOps) {
  OpAttrs a;
  for (OpCode op : {OpCode::HardSwish, OpCode::Erf, OpCode::Sqrt, OpCode::Exp, OpCode::Neg}) {
    expect_dims(run(op, a, {tv(F, {3, 0, 5})}), {3, 0, 5});
    expect_dims(run(op, a, {tv(F, {})}), {});
    expect_invalid(run(op, a, {tv(F, {2}), tv(F, {2})}), op, "expected 1 to 1 inputs, got 2");
    expect_invalid(run(op, a, {tv(F, {-1})}), op, "negative dim -1");
  }
}

TEST_F(OpInfoTest, ClipAndHardSigmoid) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpAttrs a;
  a.kind = AttrKind::Clip;
  a.clip_min = 0.0f;
  a.clip_max = 6.0f;
  expect_dims(run(OpCode::Clip, a, {tv(F, {2, 3})}), {2, 3});
  a.clip_min = -inf;
  a.clip_max = inf;
  expect_dims(run(OpCode::Clip, a, {tv(F, {4})}), {4});
  a.clip_min = 3.0f;  // min > max: defined (every element becomes max)
  a.clip_max = 1.0f;
  expect_dims(run(OpCode::Clip, a, {tv(F, {4})}), {4});
  a.clip_min = nan;
  expect_invalid(run(OpCode::Clip, a, {tv(F, {4})}), OpCode::Clip, "must not be NaN");
  a.clip_min = 0.0f;
  a.clip_max = nan;
  expect_invalid(run(OpCode::Clip, a, {tv(F, {4})}), OpCode::Clip, "NaN");
  a.clip_max = 1.0f;
  expect_invalid(run(OpCode::Clip, a, {tv(F, {4}), tv(F, {4})}), OpCode::Clip, "got 2");

  OpAttrs h;
  h.kind = AttrKind::HardSigmoid;
  h.alpha = 0.2f;
  h.beta = 0.5f;
  expect_dims(run(OpCode::HardSigmoid, h, {tv(F, {1, 7})}), {1, 7});
  h.alpha = inf;
  expect_invalid(run(OpCode::HardSigmoid, h, {tv(F, {7})}), OpCode::HardSigmoid,
                 "alpha inf and beta 0.5 must be finite");
  h.alpha = 0.2f;
  h.beta = nan;
  expect_invalid(run(OpCode::HardSigmoid, h, {tv(F, {7})}), OpCode::HardSigmoid, "finite");
}

TEST_F(OpInfoTest, Pow) {
  OpAttrs a;
  expect_dims(run(OpCode::Pow, a, {tv(F, {4, 1, 3}), tv(F, {5, 1})}), {4, 5, 3});
  expect_dims(run(OpCode::Pow, a, {tv(F, {4, 3}), tv(F, {})}), {4, 3});
  expect_invalid(run(OpCode::Pow, a, {tv(F, {2, 3}), tv(F, {4})}), OpCode::Pow,
                 "[2, 3] and [4] do not broadcast");
  expect_invalid(run(OpCode::Pow, a, {tv(F, {2}), tv(ScalarType::I32, {2})}), OpCode::Pow,
                 "input 1 is i32");
  expect_invalid(run(OpCode::Pow, a, {tv(F, {2})}), OpCode::Pow, "got 1");
}

TEST_F(OpInfoTest, Where) {
  const OpCode op = OpCode::Where;
  const ScalarType B = ScalarType::Bool;
  OpAttrs a;
  expect_dims(run(op, a, {tv(B, {2, 1, 4}), tv(F, {3, 1}), tv(F, {})}), {2, 3, 4});
  expect_dims(run(op, a, {tv(B, {}), tv(ScalarType::I64, {5}), tv(ScalarType::I64, {1})}), {5},
              ScalarType::I64);
  expect_dims(run(op, a, {tv(B, {0, 1}), tv(F, {1, 3}), tv(F, {3})}), {0, 3});
  expect_invalid(run(op, a, {tv(F, {2}), tv(F, {2}), tv(F, {2})}), op,
                 "condition must be bool, got f32");
  expect_invalid(run(op, a, {tv(B, {2}), tv(F, {2}), tv(ScalarType::F16, {2})}), op,
                 "input 1 is f32 but input 2 is f16");
  expect_invalid(run(op, a, {tv(B, {2, 3}), tv(F, {3}), tv(F, {4, 1, 2})}), op,
                 "[2, 3], [3] and [4, 1, 2] do not broadcast");
  expect_invalid(run(op, a, {tv(B, {2}), tv(F, {3}), tv(F, {1})}), op, "do not broadcast");
  expect_invalid(run(op, a, {tv(B, {2}), tv(F, {2})}), op, "expected 3 to 3 inputs, got 2");
  expect_invalid(run(op, a, {tv(B, {1ll << 40, 1}), tv(F, {1}), tv(F, {1, 1ll << 40})}), op,
                 "overflows");
}

TEST_F(OpInfoTest, Equal) {
  const OpCode op = OpCode::Equal;
  const ScalarType B = ScalarType::Bool;
  OpAttrs a;
  expect_dims(run(op, a, {tv(F, {4, 1, 3}), tv(F, {5, 1})}), {4, 5, 3}, B);
  expect_dims(run(op, a, {tv(ScalarType::I64, {}), tv(ScalarType::I64, {2})}), {2}, B);
  expect_dims(run(op, a, {tv(B, {2}), tv(B, {2})}), {2}, B);
  expect_invalid(run(op, a, {tv(F, {2}), tv(ScalarType::I32, {2})}), op, "input 1 is i32");
  expect_invalid(run(op, a, {tv(F, {2}), tv(F, {3})}), op, "do not broadcast");
  expect_invalid(run(op, a, {tv(F, {2})}), op, "got 1");
}

TEST_F(OpInfoTest, Cast) {
  const OpCode op = OpCode::Cast;
  OpAttrs a;
  a.kind = AttrKind::Cast;
  const ScalarType types[] = {F,
                              ScalarType::F16,
                              ScalarType::BF16,
                              ScalarType::I8,
                              ScalarType::U8,
                              ScalarType::I16,
                              ScalarType::I32,
                              ScalarType::I64,
                              ScalarType::Bool};
  for (ScalarType from : types) {
    for (ScalarType to : types) {
      a.cast_to = to;
      expect_dims(run(op, a, {tv(from, {2, 3})}), {2, 3}, to);
    }
  }
  a.cast_to = ScalarType::F8E4M3FN;
  expect_invalid(run(op, a, {tv(F, {2})}), op, "target dtype f8_e4m3fn (11) is not one of");
  a.cast_to = ScalarType::Invalid;
  expect_invalid(run(op, a, {tv(F, {2})}), op, "target dtype invalid (0)");
  a.cast_to = static_cast<ScalarType>(99);
  expect_invalid(run(op, a, {tv(F, {2})}), op, "(99)");
  a.cast_to = F;
  expect_invalid(run(op, a, {tv(ScalarType::F64, {2})}), op, "source dtype f64");
  expect_invalid(run(op, a, {tv(ScalarType::F4E2M1, {2})}), op, "source dtype");
  // The output byte size is checked for the target dtype.
  a.cast_to = ScalarType::I64;
  expect_invalid(run(op, a, {tv(ScalarType::U8, {kI64Max / 4})}), op, "output byte size");
}

}  // namespace
}  // namespace ember
