// Shape functions and input checks of issue 17's reductions and index ops: reduce_max / reduce_min /
// reduce_prod, argmax / argmin, topk (two outputs), cumsum, gather_elements, group_norm, and the
// index checks of gather and gather_elements.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/kernels/reference/op_info_test_util.h"

namespace ember {
namespace {

using testing::dims_of;
using testing::F;
using testing::OpInfoTest;
using testing::run;
using testing::tv;
constexpr ScalarType I32 = ScalarType::I32, I64 = ScalarType::I64;

OpAttrs reduce(std::initializer_list<int> axes, bool keepdims) {
  OpAttrs a;
  a.kind = AttrKind::Reduce;
  a.keepdims = keepdims;
  a.count = static_cast<uint8_t>(axes.size());
  int i = 0;
  for (int ax : axes) a.axes[i++] = ax;
  return a;
}

TEST_F(OpInfoTest, ReduceMaxMinProd) {
  expect_dims(run(OpCode::ReduceMax, reduce({-1}, true), {tv(F, {2, 3, 5})}), {2, 3, 1});
  expect_dims(run(OpCode::ReduceMin, reduce({0, 2}, false), {tv(I64, {2, 3, 5})}), {3}, I64);
  expect_dims(run(OpCode::ReduceMax, reduce({}, false), {tv(I32, {2, 3})}), {}, I32);
  expect_dims(run(OpCode::ReduceProd, reduce({1}, false), {tv(F, {4, 0})}), {4});  // empty extent: 1
  expect_invalid(run(OpCode::ReduceMax, reduce({1}, false), {tv(ScalarType::F16, {2, 3})}), OpCode::ReduceMax,
                 "input must be f32, i32 or i64, got f16");
  expect_invalid(run(OpCode::ReduceProd, reduce({1}, false), {tv(I64, {2, 3})}), OpCode::ReduceProd,
                 "input must be f32, got i64");
  expect_invalid(run(OpCode::ReduceMin, reduce({2}, false), {tv(F, {2, 3})}), OpCode::ReduceMin,
                 "axis 2 out of range for rank 2");
  expect_invalid(run(OpCode::ReduceMax, reduce({1, -1}, false), {tv(F, {2, 3})}), OpCode::ReduceMax, "repeated");
}

TEST_F(OpInfoTest, ArgMaxArgMin) {
  OpAttrs a;
  a.kind = AttrKind::Arg;
  a.axis = 1;
  a.keepdims = true;
  expect_dims(run(OpCode::ArgMax, a, {tv(F, {2, 7, 3})}), {2, 1, 3}, I64);
  a.keepdims = false;
  a.axis = -1;
  expect_dims(run(OpCode::ArgMin, a, {tv(I32, {2, 7, 3})}), {2, 7}, I64);
  a.axis = 1;
  expect_invalid(run(OpCode::ArgMax, a, {tv(F, {2, 0})}), OpCode::ArgMax, "axis 1 of [2, 0] is empty");
  expect_invalid(run(OpCode::ArgMin, a, {tv(ScalarType::Bool, {2, 3})}), OpCode::ArgMin, "got bool");
  a.axis = 3;
  expect_invalid(run(OpCode::ArgMax, a, {tv(F, {2, 3})}), OpCode::ArgMax, "axis 3 out of range for rank 2");
}

TEST_F(OpInfoTest, TopKHasTwoOutputs) {
  OpAttrs a;
  a.kind = AttrKind::TopK;
  a.axis = -1;
  a.k = 3;
  const TensorView x = tv(F, {2, 5});
  TensorView outs[2];
  ErrorContext ctx;
  const OpInfo* info = find_op_info(OpCode::TopK);
  ASSERT_TRUE(info->shape(a, &x, 1, outs, 2, Span<const int64_t>(), &ctx).is_ok()) << ctx.message;
  EXPECT_EQ(dims_of(outs[0]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outs[0].dtype, F);
  EXPECT_EQ(dims_of(outs[1]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outs[1].dtype, I64);
  // One output slot is an error, not a write past it.
  expect_invalid(run(OpCode::TopK, a, {x}), OpCode::TopK, "expected 2 outputs, got 1");
  a.k = 6;
  ErrorContext ctx2;
  EXPECT_EQ(info->shape(a, &x, 1, outs, 2, Span<const int64_t>(), &ctx2).code(), Error::InvalidArgument);
  EXPECT_NE(std::string(ctx2.message).find("k = 6 is outside [0, 5]"), std::string::npos) << ctx2.message;
  a.k = -1;
  ErrorContext ctx3;
  EXPECT_EQ(info->shape(a, &x, 1, outs, 2, Span<const int64_t>(), &ctx3).code(), Error::InvalidArgument);
  const TensorView xi = tv(I64, {2, 5});
  a.k = 1;
  ErrorContext ctx4;
  EXPECT_EQ(info->shape(a, &xi, 1, outs, 2, Span<const int64_t>(), &ctx4).code(), Error::InvalidArgument);
  EXPECT_NE(std::string(ctx4.message).find("input must be f32, got i64"), std::string::npos) << ctx4.message;
}

TEST_F(OpInfoTest, CumSum) {
  OpAttrs a;
  a.kind = AttrKind::CumSum;
  a.axis = -2;
  expect_dims(run(OpCode::CumSum, a, {tv(I32, {4, 5})}), {4, 5}, I32);
  expect_invalid(run(OpCode::CumSum, a, {tv(F, {4})}), OpCode::CumSum, "axis -2 out of range for rank 1");
  a.axis = 0;
  expect_invalid(run(OpCode::CumSum, a, {tv(ScalarType::U8, {4})}), OpCode::CumSum, "got u8");
}

TEST_F(OpInfoTest, GatherElements) {
  OpAttrs a;
  a.kind = AttrKind::Axis;
  a.axis = 1;
  expect_dims(run(OpCode::GatherElements, a, {tv(ScalarType::F16, {3, 5}), tv(I64, {2, 7})}), {2, 7},
              ScalarType::F16);
  expect_invalid(run(OpCode::GatherElements, a, {tv(F, {3, 5}), tv(I64, {4, 2})}), OpCode::GatherElements,
                 "dims no larger off axis 1");
  expect_invalid(run(OpCode::GatherElements, a, {tv(F, {3, 5}), tv(I64, {3})}), OpCode::GatherElements,
                 "data [3, 5]'s rank");
  expect_invalid(run(OpCode::GatherElements, a, {tv(F, {3, 5}), tv(F, {3, 5})}), OpCode::GatherElements,
                 "indices must be i32 or i64, got f32");
  expect_invalid(run(OpCode::GatherElements, a, {tv(F, {3, 0}), tv(I32, {3, 1})}), OpCode::GatherElements,
                 "axis 1 of data [3, 0] is empty");
  expect_dims(run(OpCode::GatherElements, a, {tv(F, {3, 0}), tv(I32, {3, 0})}), {3, 0});
}

TEST_F(OpInfoTest, GroupNorm) {
  OpAttrs a;
  a.kind = AttrKind::GroupNorm;
  a.groups = 3;
  a.epsilon = 1e-5f;
  expect_dims(run(OpCode::GroupNorm, a, {tv(F, {2, 6, 4, 4}), tv(F, {6}), tv(F, {6})}), {2, 6, 4, 4});
  expect_invalid(run(OpCode::GroupNorm, a, {tv(F, {2, 4, 4}), tv(F, {4}), tv(F, {4})}), OpCode::GroupNorm,
                 "3 groups do not divide 4 channels");
  expect_invalid(run(OpCode::GroupNorm, a, {tv(F, {2, 6}), tv(F, {3}), tv(F, {6})}), OpCode::GroupNorm,
                 "scale must be f32 [6], got f32 [3]");
  expect_invalid(run(OpCode::GroupNorm, a, {tv(F, {6}), tv(F, {6}), tv(F, {6})}), OpCode::GroupNorm,
                 "x must be f32 [N, C, ...]");
  a.groups = 0;
  expect_invalid(run(OpCode::GroupNorm, a, {tv(F, {2, 6}), tv(F, {6}), tv(F, {6})}), OpCode::GroupNorm,
                 "0 groups");
  a.groups = 2;
  a.epsilon = -1.0f;
  expect_invalid(run(OpCode::GroupNorm, a, {tv(F, {2, 6}), tv(F, {6}), tv(F, {6})}), OpCode::GroupNorm,
                 "epsilon -1 must be finite and >= 0");
}

// The input checks see the data: every index within [-dim, dim).
TEST_F(OpInfoTest, GatherIndexChecks) {
  float data[12] = {};
  TensorView d = tv(F, {3, 4});
  d.data = data;
  int64_t idx[4] = {0, -3, 2, 3};
  TensorView i = tv(I64, {2, 2});
  i.data = idx;
  OpAttrs a;
  a.kind = AttrKind::Axis;
  a.axis = 0;
  const TensorView ins[2] = {d, i};
  ErrorContext ctx;
  EXPECT_EQ(find_op_info(OpCode::Gather)->check_inputs(a, ins, 2, &ctx).code(), Error::InvalidArgument);
  EXPECT_NE(std::string(ctx.message).find("gather: index 3 at indices[1, 1] is outside [-3, 3) (axis 0 of data [3, 4])"),
            std::string::npos)
      << ctx.message;
  idx[3] = -1;
  ErrorContext ok;
  EXPECT_TRUE(find_op_info(OpCode::Gather)->check_inputs(a, ins, 2, &ok).is_ok()) << ok.message;
  EXPECT_TRUE(find_op_info(OpCode::GatherElements)->check_inputs(a, ins, 2, &ok).is_ok()) << ok.message;
  a.axis = -1;  // dim 4
  int32_t idx32[2] = {4, 0};
  TensorView i32 = tv(I32, {1, 2});
  i32.data = idx32;
  const TensorView ins32[2] = {d, i32};
  ErrorContext bad;
  EXPECT_EQ(find_op_info(OpCode::GatherElements)->check_inputs(a, ins32, 2, &bad).code(), Error::InvalidArgument);
  EXPECT_NE(std::string(bad.message).find("gather_elements: index 4 at indices[0, 0] is outside [-4, 4) (axis 1"),
            std::string::npos)
      << bad.message;
  // Shapes only (no data, as at load): nothing to check.
  const TensorView shapes[2] = {tv(F, {3, 4}), tv(I64, {2})};
  ErrorContext none;
  EXPECT_TRUE(find_op_info(OpCode::Gather)->check_inputs(a, shapes, 2, &none).is_ok());
}

}  // namespace
}  // namespace ember
