// Every op's table entry and shape function: good shapes, each error path (InvalidArgument with a
// message naming the op), reshape symbols, slice clamping, and hostile dims and attributes.
// This file: the table, broadcast_shapes and hostile input for every op; the shape functions by
// family are in op_info_{elementwise,nn,movement}_test.cc.
#include "runtime/kernel/op_info.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernel/kernel.h"
#include "tests/kernels/reference/op_info_test_util.h"

namespace ember {
namespace {

using testing::dims_of;
using testing::F;
using testing::kI64Max;
using testing::kI64Min;
using testing::OpInfoTest;
using testing::run;
using testing::tv;

// ---- Table
// ---------------------------------------------------------------------------------------

TEST_F(OpInfoTest, TableCoversEveryOp) {
  const char* names[] = {"add",     "sub",        "mul",        "div",        "relu",
                         "gelu",    "silu",       "sigmoid",    "tanh",       "matmul",
                         "linear",  "conv2d",     "max_pool2d", "avg_pool2d", "global_avg_pool2d",
                         "softmax", "layer_norm", "reshape",    "transpose",  "concat",
                         "slice",   "clip",       "hard_sigmoid", "hard_swish", "erf",
                         "sqrt",    "exp",        "pow",        "reduce_mean", "reduce_sum",
                         "pad",     "gather",     "where",      "equal",      "cast",
                         "expand",  "batch_norm", "neg",        "rms_norm",   "rope",
                         "silu_mul", "embedding", "sample", "paged_attention", "logits_gather",
                         // Issue 17.
                         "leaky_relu", "prelu", "elu", "selu", "softplus", "log", "abs", "reciprocal", "floor",
                         "ceil", "round", "sin", "cos", "greater", "less", "greater_equal", "less_equal", "and",
                         "or", "xor", "not", "max", "min", "reduce_max", "reduce_min", "reduce_prod", "argmax",
                         "argmin", "topk", "cumsum", "gather_elements", "group_norm", "resize",
                         "conv_transpose2d", "lstm", "gru"};
  static_assert(sizeof(names) / sizeof(names[0]) == kOpCodeCount - 1, "one name per op");
  for (int i = 1; i < kOpCodeCount; ++i) {
    const OpCode op = static_cast<OpCode>(i);
    const OpInfo* info = find_op_info(op);
    ASSERT_NE(info, nullptr) << i;
    EXPECT_EQ(info->op, op);
    EXPECT_STREQ(info->name, names[i - 1]);
    EXPECT_STREQ(to_string(op), names[i - 1]);
    const int outputs = op == OpCode::Lstm ? 3 : (op == OpCode::Sample || op == OpCode::TopK || op == OpCode::Gru) ? 2 : 1;
    EXPECT_EQ(info->outputs, outputs) << info->name;
    EXPECT_LE(info->min_inputs, info->max_inputs);
    EXPECT_NE(info->shape, nullptr);
    // Only paged_attention writes inputs in place: its two KV caches.
    EXPECT_EQ(info->state_inputs, op == OpCode::PagedAttention ? 0x18u : 0u) << info->name;
  }
  EXPECT_EQ(find_op_info(OpCode::Invalid), nullptr);
  EXPECT_EQ(find_op_info(static_cast<OpCode>(kOpCodeCount)), nullptr);
  EXPECT_EQ(find_op_info(static_cast<OpCode>(0xFFFF)), nullptr);
  EXPECT_STREQ(to_string(static_cast<OpCode>(999)), "invalid");
}

TEST_F(OpInfoTest, TableArityAndAttributes) {
  struct Expect {
    OpCode op;
    AttrKind kind;
    int min, max;
  } expects[] = {
      {OpCode::Add, AttrKind::None, 2, 2},         {OpCode::Gelu, AttrKind::Gelu, 1, 1},
      {OpCode::MatMul, AttrKind::None, 2, 2},      {OpCode::Linear, AttrKind::Linear, 2, 3},
      {OpCode::Conv2d, AttrKind::Conv2d, 2, 3},    {OpCode::MaxPool2d, AttrKind::Pool2d, 1, 1},
      {OpCode::AvgPool2d, AttrKind::Pool2d, 1, 1}, {OpCode::GlobalAvgPool2d, AttrKind::None, 1, 1},
      {OpCode::Softmax, AttrKind::Axis, 1, 1},     {OpCode::LayerNorm, AttrKind::Norm, 1, 3},
      {OpCode::Reshape, AttrKind::Reshape, 1, 1},  {OpCode::Transpose, AttrKind::Permute, 1, 1},
      {OpCode::Concat, AttrKind::Axis, 1, 15},     {OpCode::Slice, AttrKind::Slice, 1, 1},
      {OpCode::Clip, AttrKind::Clip, 1, 1},        {OpCode::HardSigmoid, AttrKind::HardSigmoid, 1, 1},
      {OpCode::HardSwish, AttrKind::None, 1, 1},   {OpCode::Erf, AttrKind::None, 1, 1},
      {OpCode::Sqrt, AttrKind::None, 1, 1},        {OpCode::Exp, AttrKind::None, 1, 1},
      {OpCode::Pow, AttrKind::None, 2, 2},         {OpCode::ReduceMean, AttrKind::Reduce, 1, 1},
      {OpCode::ReduceSum, AttrKind::Reduce, 1, 1}, {OpCode::Pad, AttrKind::Pad, 1, 1},
      {OpCode::Gather, AttrKind::Axis, 2, 2},      {OpCode::Where, AttrKind::None, 3, 3},
      {OpCode::Equal, AttrKind::None, 2, 2},       {OpCode::Cast, AttrKind::Cast, 1, 1},
      {OpCode::Expand, AttrKind::Reshape, 1, 1},   {OpCode::BatchNorm, AttrKind::Norm, 5, 5},
      {OpCode::Neg, AttrKind::None, 1, 1},         {OpCode::RmsNorm, AttrKind::Norm, 2, 2},
      {OpCode::Rope, AttrKind::None, 3, 3},        {OpCode::SiluMul, AttrKind::None, 2, 2},
      {OpCode::Embedding, AttrKind::None, 2, 2},   {OpCode::Sample, AttrKind::None, 9, 9},
      {OpCode::PagedAttention, AttrKind::Attention, 9, 9}, {OpCode::LogitsGather, AttrKind::None, 2, 2},
  };
  for (const Expect& e : expects) {
    const OpInfo* info = find_op_info(e.op);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->attr_kind, e.kind) << info->name;
    EXPECT_EQ(info->min_inputs, e.min) << info->name;
    EXPECT_EQ(info->max_inputs, e.max) << info->name;
  }
  EXPECT_EQ(find_op_info(OpCode::Concat)->max_inputs + 1, kMaxKernelArgs);
}

TEST_F(OpInfoTest, BroadcastShapes) {
  TensorView out;
  ASSERT_TRUE(broadcast_shapes(tv(F, {4, 1, 3}), tv(F, {5, 1}), &out));
  EXPECT_EQ(dims_of(out), (std::vector<int64_t>{4, 5, 3}));
  ASSERT_TRUE(broadcast_shapes(tv(F, {}), tv(F, {2, 0}), &out));
  EXPECT_EQ(dims_of(out), (std::vector<int64_t>{2, 0}));
  EXPECT_FALSE(broadcast_shapes(tv(F, {2, 3}), tv(F, {4}), &out));
  TensorView bad = tv(F, {1});
  bad.rank = 9;
  EXPECT_FALSE(broadcast_shapes(bad, tv(F, {1}), &out));
}

// ---- Hostile input
// -------------------------------------------------------------------------------

TEST_F(OpInfoTest, RejectsBadTensors) {
  OpAttrs a;
  TensorView rank9 = tv(F, {1});
  rank9.rank = 9;
  expect_invalid(run(OpCode::Relu, a, {rank9}), OpCode::Relu, "rank 9 > 8");
  rank9.rank = 255;
  expect_invalid(run(OpCode::Relu, a, {rank9}), OpCode::Relu, "rank 255 > 8");
  expect_invalid(run(OpCode::Relu, a, {tv(F, {3, kI64Min})}), OpCode::Relu, "negative dim");
  expect_invalid(run(OpCode::Relu, a, {tv(F, {kI64Max, 2})}), OpCode::Relu, "overflows");
  expect_invalid(run(OpCode::Relu, a, {tv(F, {kI64Max / 2})}), OpCode::Relu, "byte size");
  expect_dims(run(OpCode::Relu, a, {tv(ScalarType::U8, {kI64Max})}), {kI64Max}, ScalarType::U8);
  expect_invalid(run(OpCode::Relu, a, {tv(static_cast<ScalarType>(200), {1})}), OpCode::Relu,
                 "invalid dtype 200");
  // Zero dims make the product 0, but later dims are still checked.
  expect_invalid(run(OpCode::Relu, a, {tv(F, {0, -5})}), OpCode::Relu, "negative dim -5");
}

// Random ranks, dims, attributes and arities for every op: the shape function must return Ok or
// InvalidArgument, never crash, and an Ok result must describe a tensor whose size fits in int64.
TEST_F(OpInfoTest, FuzzNeverCrashes) {
  std::mt19937_64 rng(12345);
  const int64_t dim_pool[] = {0,       1,           1,         2,         3,         4,
                              5,       7,           8,         16,        -1,        kI64Min,
                              kI64Max, kI64Max / 2, 1ll << 31, 1ll << 32, 1ll << 40, 3037000499ll};
  const int32_t int_pool[] = {0,  1,  1, 2,          3,
                              -1, -2, 7, 0x7FFFFFFF, std::numeric_limits<int32_t>::min()};
  const int64_t long_pool[] = {0, 1, -1, 2, -2, 5, -5, 100, -100, kI64Max, kI64Min, 1ll << 40};
  const ScalarType types[] = {F,
                              F,
                              F,
                              ScalarType::F16,
                              ScalarType::I8,
                              ScalarType::Invalid,
                              ScalarType::F4E2M1,
                              static_cast<ScalarType>(77)};
  auto pick = [&](const auto& pool) { return pool[rng() % (sizeof(pool) / sizeof(pool[0]))]; };
  int ok_count = 0;
  for (int iter = 0; iter < 200000; ++iter) {
    const OpCode op = static_cast<OpCode>(1 + rng() % (kOpCodeCount - 1));
    const size_t input_count =
        rng() % 6 == 0 ? rng() % 17 : find_op_info(op)->min_inputs + rng() % 2;
    std::vector<TensorView> inputs(input_count);
    const ScalarType common = rng() % 8 == 0 ? pick(types) : F;
    const int common_rank = static_cast<int>(rng() % 6);
    for (TensorView& t : inputs) {
      t.dtype = rng() % 10 == 0 ? pick(types) : common;
      t.rank = static_cast<uint8_t>(rng() % 12 == 0 ? rng() % 10 : common_rank);
      for (int i = 0; i < kMaxRank; ++i)
        t.dims[i] = rng() % 3 == 0 ? pick(dim_pool) : 1 + rng() % 4;
    }
    OpAttrs a;
    a.kind = find_op_info(op)->attr_kind;
    a.axis = rng() % 2 ? pick(int_pool) : static_cast<int32_t>(rng() % 9) - 4;
    a.epsilon = rng() % 4 == 0 ? -1.0f : 1e-5f;
    a.gelu_approx = static_cast<GeluApprox>(rng() % 4);
    a.activation_quant = static_cast<ActivationQuant>(rng() % 4);
    for (int i = 0; i < 2; ++i) {
      a.kernel[i] = rng() % 2 ? pick(int_pool) : 1 + static_cast<int32_t>(rng() % 3);
      a.stride[i] = rng() % 2 ? pick(int_pool) : 1 + static_cast<int32_t>(rng() % 3);
      a.dilation[i] = rng() % 2 ? pick(int_pool) : 1 + static_cast<int32_t>(rng() % 3);
    }
    for (int i = 0; i < 4; ++i)
      a.padding[i] = rng() % 2 ? pick(int_pool) : static_cast<int32_t>(rng() % 2);
    a.groups = rng() % 2 ? pick(int_pool) : 1;
    a.ceil_mode = rng() % 2;
    a.count = static_cast<uint8_t>(rng() % 16 == 0 ? rng() % 256 : rng() % 9);
    for (int i = 0; i < kMaxRank; ++i) {
      a.shape[i] = rng() % 2 ? pick(long_pool) : static_cast<int64_t>(rng() % 5) - 1;
      a.shape_sym[i] = static_cast<uint16_t>(rng() % 4 == 0 ? rng() % 5 : 0);
      a.perm[i] = rng() % 4 == 0 ? pick(int_pool) : static_cast<int32_t>(rng() % 8);
      a.axes[i] = rng() % 4 == 0 ? pick(int_pool) : static_cast<int32_t>(rng() % 9) - 4;
      a.starts[i] = pick(long_pool);
      a.ends[i] = pick(long_pool);
      a.steps[i] = pick(long_pool);
    }
    const float float_pool[] = {0.0f, 1.0f, -1.0f, 0.2f, 6.0f, std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()};
    a.clip_min = pick(float_pool);
    a.clip_max = pick(float_pool);
    a.alpha = pick(float_pool);
    a.beta = pick(float_pool);
    a.keepdims = rng() % 2;
    for (int i = 0; i < 2 * kMaxRank; ++i)
      a.pads[i] = rng() % 3 == 0 ? pick(long_pool) : static_cast<int64_t>(rng() % 5) - 2;
    a.pad_value = pick(float_pool);
    a.pad_mode = static_cast<PadMode>(rng() % 5);
    a.cast_to = rng() % 4 == 0 ? pick(types) : static_cast<ScalarType>(rng() % kScalarTypeCount);
    if (op == OpCode::Where && !inputs.empty() && rng() % 2) inputs[0].dtype = ScalarType::Bool;
    if (op == OpCode::Gather && inputs.size() > 1 && rng() % 2) {
      inputs[1].dtype = rng() % 2 ? ScalarType::I32 : ScalarType::I64;
    }
    std::vector<int64_t> symbols;
    for (size_t i = 0; i < rng() % 4; ++i) symbols.push_back(pick(dim_pool));

    TensorView out;
    ErrorContext ctx;
    const Status s =
        find_op_info(op)->shape(a, inputs.data(), inputs.size(), &out, 1,
                                Span<const int64_t>(symbols.data(), symbols.size()), &ctx);
    if (s.is_ok()) {
      ++ok_count;
      ASSERT_LE(out.rank, kMaxRank) << to_string(op);
      uint64_t numel = 1;
      for (int i = 0; i < out.rank; ++i) {
        ASSERT_GE(out.dims[i], 0) << to_string(op);
        ASSERT_TRUE(out.dims[i] == 0 || numel <= static_cast<uint64_t>(kI64Max) / out.dims[i])
            << to_string(op);
        numel *= static_cast<uint64_t>(out.dims[i]);
      }
    } else {
      ASSERT_EQ(s.code(), Error::InvalidArgument) << to_string(op) << ": " << ctx.message;
      ASSERT_NE(ctx.message[0], '\0') << to_string(op);
    }
  }
  EXPECT_GT(ok_count, 1000);  // the generator reaches the success paths too
}

}  // namespace
}  // namespace ember
