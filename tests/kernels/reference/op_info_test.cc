// Every op's table entry and shape function: good shapes, each error path (InvalidArgument with a
// message naming the op), reshape symbols, slice clamping, and hostile dims and attributes.
#include "runtime/kernel/op_info.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernel/kernel.h"
#include "runtime/platform/platform.h"

namespace ember {
namespace {

constexpr ScalarType F = ScalarType::F32;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Expected failures log at Error level; keep the test output readable.
bool g_quiet = false;
void test_log(LogLevel, const char* file, int line, const char* message) {
  if (!g_quiet) std::fprintf(stderr, "[ember %s:%d] %s\n", file, line, message);
}

TensorView tv(ScalarType dtype, std::initializer_list<int64_t> dims) {
  TensorView v;
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) v.dims[i++] = d;
  return v;
}

TensorView absent() { return TensorView(); }

std::vector<int64_t> dims_of(const TensorView& v) {
  return std::vector<int64_t>(v.dims, v.dims + v.rank);
}

struct Outcome {
  Status status;
  TensorView out;
  ErrorContext ctx;
  bool ok() const { return status.is_ok(); }
};

Outcome run(OpCode op, const OpAttrs& attrs, std::vector<TensorView> inputs,
            std::vector<int64_t> symbols = {}) {
  Outcome r;
  const OpInfo* info = find_op_info(op);
  if (info == nullptr) {
    r.status = Status(Error::Internal);
    return r;
  }
  r.status = info->shape(attrs, inputs.data(), inputs.size(), &r.out, 1,
                         Span<const int64_t>(symbols.data(), symbols.size()), &r.ctx);
  return r;
}

class OpInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PlatformHooks hooks;
    hooks.log = test_log;
    set_platform_hooks(hooks);
    g_quiet = true;
  }
  void TearDown() override { g_quiet = false; }

  // The call failed with InvalidArgument and a message that starts with the op name and
  // contains `fragment`.
  static void expect_invalid(const Outcome& r, OpCode op, const char* fragment = "") {
    EXPECT_EQ(r.status.code(), Error::InvalidArgument) << r.ctx.message;
    EXPECT_EQ(r.ctx.code, Error::InvalidArgument);
    const std::string message = r.ctx.message;
    EXPECT_EQ(message.rfind(std::string(to_string(op)) + ":", 0), 0u) << message;
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "message '" << message << "' lacks '" << fragment << "'";
  }
  static void expect_dims(const Outcome& r, std::vector<int64_t> dims, ScalarType dtype = F) {
    ASSERT_TRUE(r.ok()) << r.ctx.message;
    EXPECT_EQ(dims_of(r.out), dims);
    EXPECT_EQ(r.out.dtype, dtype);
  }
};

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
                         "expand",  "batch_norm", "neg"};
  static_assert(sizeof(names) / sizeof(names[0]) == kOpCodeCount - 1, "one name per op");
  for (int i = 1; i < kOpCodeCount; ++i) {
    const OpCode op = static_cast<OpCode>(i);
    const OpInfo* info = find_op_info(op);
    ASSERT_NE(info, nullptr) << i;
    EXPECT_EQ(info->op, op);
    EXPECT_STREQ(info->name, names[i - 1]);
    EXPECT_STREQ(to_string(op), names[i - 1]);
    EXPECT_EQ(info->outputs, 1);
    EXPECT_LE(info->min_inputs, info->max_inputs);
    EXPECT_NE(info->shape, nullptr);
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
      {OpCode::Neg, AttrKind::None, 1, 1},
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

// ---- Reshape
// -------------------------------------------------------------------------------------

OpAttrs reshape_attrs(std::initializer_list<int64_t> shape, std::initializer_list<int> syms = {}) {
  OpAttrs a;
  a.kind = AttrKind::Reshape;
  a.count = static_cast<uint8_t>(shape.size());
  int i = 0;
  for (int64_t d : shape) a.shape[i++] = d;
  i = 0;
  for (int s : syms) a.shape_sym[i++] = static_cast<uint16_t>(s);
  return a;
}

TEST_F(OpInfoTest, Reshape) {
  const OpCode op = OpCode::Reshape;
  expect_dims(run(op, reshape_attrs({4, -1}), {tv(F, {2, 3, 4})}), {4, 6});
  expect_dims(run(op, reshape_attrs({}), {tv(F, {1, 1})}), {});
  expect_dims(run(op, reshape_attrs({-1}), {tv(ScalarType::I64, {})}), {1}, ScalarType::I64);
  // 0 is a literal zero, not "copy the input dim".
  expect_dims(run(op, reshape_attrs({0, 5}), {tv(F, {2, 0, 3})}), {0, 5});
  expect_invalid(run(op, reshape_attrs({0, 3}), {tv(F, {2, 3})}), op, "has 6 elements");
  // Symbols: dim 0 takes symbol 2 (its literal is ignored), dim 1 is inferred.
  expect_dims(run(op, reshape_attrs({1, -1}, {2, 0}), {tv(F, {3, 2, 4})}, {5, 6}), {6, 4});
  expect_dims(run(op, reshape_attrs({99, 4}, {1, 0}), {tv(F, {3, 2, 4})}, {6}), {6, 4});
  expect_invalid(run(op, reshape_attrs({1, 4}, {1, 0}), {tv(F, {3, 2, 4})}, {5}), op,
                 "24 elements");
  expect_invalid(run(op, reshape_attrs({1, 4}, {3, 0}), {tv(F, {3, 2, 4})}, {6, 6}), op,
                 "symbol 3 but only 2");
  expect_invalid(run(op, reshape_attrs({1, -1}, {1, 0}), {tv(F, {3, 2, 4})}, {-6}), op,
                 "negative value -6");
}

TEST_F(OpInfoTest, ReshapeErrors) {
  const OpCode op = OpCode::Reshape;
  expect_invalid(run(op, reshape_attrs({-1, -1}), {tv(F, {2, 3})}), op, "-1 at both");
  expect_invalid(run(op, reshape_attrs({-2, 3}), {tv(F, {2, 3})}), op, "invalid target dim -2");
  expect_invalid(run(op, reshape_attrs({5, -1}), {tv(F, {2, 3})}), op, "cannot infer");
  expect_invalid(run(op, reshape_attrs({0, -1}), {tv(F, {0, 3})}), op, "cannot infer");
  expect_invalid(run(op, reshape_attrs({7}), {tv(F, {2, 3})}), op, "target [7]");
  expect_invalid(run(op, reshape_attrs({kI64Max, kI64Max}), {tv(F, {2, 3})}), op, "overflows");
  OpAttrs a = reshape_attrs({1});
  a.count = 9;
  expect_invalid(run(op, a, {tv(F, {1})}), op, "rank 9");
}

// ---- Transpose / Concat
// --------------------------------------------------------------------------

OpAttrs perm_attrs(std::initializer_list<int> perm) {
  OpAttrs a;
  a.kind = AttrKind::Permute;
  a.count = static_cast<uint8_t>(perm.size());
  int i = 0;
  for (int p : perm) a.perm[i++] = p;
  return a;
}

TEST_F(OpInfoTest, Transpose) {
  const OpCode op = OpCode::Transpose;
  expect_dims(run(op, perm_attrs({2, 0, 1}), {tv(F, {2, 3, 4})}), {4, 2, 3});
  expect_dims(run(op, perm_attrs({}), {tv(F, {})}), {});
  expect_dims(run(op, perm_attrs({1, 0}), {tv(ScalarType::UE4M3, {5, 7})}), {7, 5},
              ScalarType::UE4M3);
  expect_invalid(run(op, perm_attrs({0, 0, 1}), {tv(F, {2, 3, 4})}), op, "permutation");
  expect_invalid(run(op, perm_attrs({0, 3, 1}), {tv(F, {2, 3, 4})}), op, "permutation");
  expect_invalid(run(op, perm_attrs({0, -1, 1}), {tv(F, {2, 3, 4})}), op, "permutation");
  expect_invalid(run(op, perm_attrs({1, 0}), {tv(F, {2, 3, 4})}), op, "2 entries for rank 3");
}

TEST_F(OpInfoTest, Concat) {
  const OpCode op = OpCode::Concat;
  OpAttrs a;
  a.kind = AttrKind::Axis;
  expect_dims(run(op, a, {tv(F, {2, 3}), tv(F, {1, 3}), tv(F, {0, 3})}), {3, 3});
  a.axis = -1;
  expect_dims(run(op, a, {tv(F, {2, 3}), tv(F, {2, 5})}), {2, 8});
  expect_dims(run(op, a, {tv(F, {2, 3})}), {2, 3});
  std::vector<TensorView> fifteen(15, tv(ScalarType::I8, {1, 2}));
  expect_dims(run(op, a, fifteen), {1, 30}, ScalarType::I8);
  std::vector<TensorView> sixteen(16, tv(ScalarType::I8, {1, 2}));
  expect_invalid(run(op, a, sixteen), op, "got 16");
  expect_invalid(run(op, a, {}), op, "got 0");
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(F, {3, 3})}), op, "input 1 shape [3, 3]");
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(F, {2, 3, 1})}), op, "input 1 shape");
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(ScalarType::I32, {2, 3})}), op, "i32");
  a.axis = 2;
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(F, {2, 3})}), op, "axis 2 out of range");
  a.axis = 0;
  expect_invalid(run(op, a, {tv(F, {}), tv(F, {})}), op, "out of range for rank 0");
  expect_invalid(run(op, a, {tv(F, {kI64Max / 5, 1}), tv(F, {kI64Max / 5, 1})}), op, "overflows");
}

// ---- Slice
// ---------------------------------------------------------------------------------------

OpAttrs slice_attrs(std::initializer_list<int> axes, std::initializer_list<int64_t> starts,
                    std::initializer_list<int64_t> ends, std::initializer_list<int64_t> steps) {
  OpAttrs a;
  a.kind = AttrKind::Slice;
  a.count = static_cast<uint8_t>(axes.size());
  int i = 0;
  for (int v : axes) a.axes[i++] = v;
  i = 0;
  for (int64_t v : starts) a.starts[i++] = v;
  i = 0;
  for (int64_t v : ends) a.ends[i++] = v;
  i = 0;
  for (int64_t v : steps) a.steps[i++] = v;
  return a;
}

TEST_F(OpInfoTest, SliceClamping) {
  const OpCode op = OpCode::Slice;
  const TensorView x = tv(F, {10});
  expect_dims(run(op, slice_attrs({0}, {1}, {8}, {2}), {x}), {4});         // 1 3 5 7
  expect_dims(run(op, slice_attrs({0}, {-3}, {kI64Max}, {1}), {x}), {3});  // 7 8 9
  expect_dims(run(op, slice_attrs({0}, {-100}, {100}, {1}), {x}), {10});
  expect_dims(run(op, slice_attrs({0}, {kI64Min}, {kI64Max}, {3}), {x}), {4});
  expect_dims(run(op, slice_attrs({0}, {5}, {2}, {1}), {x}), {0});
  expect_dims(run(op, slice_attrs({0}, {10}, {20}, {1}), {x}), {0});
  // Negative steps: start clamps to dim - 1, end to -1 ("before the first element").
  expect_dims(run(op, slice_attrs({0}, {-1}, {kI64Min}, {-1}), {x}), {10});
  expect_dims(run(op, slice_attrs({0}, {100}, {-100}, {-3}), {x}), {4});  // 9 6 3 0
  expect_dims(run(op, slice_attrs({0}, {4}, {0}, {-2}), {x}), {2});       // 4 2
  expect_dims(run(op, slice_attrs({0}, {2}, {5}, {-1}), {x}), {0});
  expect_dims(run(op, slice_attrs({0}, {kI64Max}, {kI64Min}, {kI64Min}), {x}), {1});
  expect_dims(run(op, slice_attrs({0}, {0}, {kI64Max}, {kI64Max}), {x}), {1});
  expect_dims(run(op, slice_attrs({0}, {0}, {5}, {1}), {tv(F, {0})}), {0});
  expect_dims(run(op, slice_attrs({0}, {-1}, {kI64Min}, {-1}), {tv(F, {0})}), {0});
  // Several axes, negative axis numbers, untouched axes keep their size.
  expect_dims(run(op, slice_attrs({-1, 0}, {-3, -100}, {1000, kI64Max}, {1, 2}),
                  {tv(ScalarType::I64, {3, 4, 5})}),
              {2, 4, 3}, ScalarType::I64);
  expect_dims(run(op, slice_attrs({}, {}, {}, {}), {tv(F, {2, 3})}), {2, 3});
}

TEST_F(OpInfoTest, SliceErrors) {
  const OpCode op = OpCode::Slice;
  const TensorView x = tv(F, {4, 6});
  expect_invalid(run(op, slice_attrs({0}, {0}, {4}, {0}), {x}), op, "step 0");
  expect_invalid(run(op, slice_attrs({1, -1}, {0, 0}, {4, 4}, {1, 1}), {x}), op, "axis 1 repeated");
  expect_invalid(run(op, slice_attrs({2}, {0}, {4}, {1}), {x}), op, "axis 2 out of range");
  expect_invalid(run(op, slice_attrs({-3}, {0}, {4}, {1}), {x}), op, "axis -3 out of range");
  expect_invalid(run(op, slice_attrs({0, 1, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}), {x}), op,
                 "3 axes for rank 2");
}

// ---- Ops added for the ONNX importer
// -------------------------------------------------------------

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

OpAttrs pad_attrs(std::initializer_list<int64_t> pads, PadMode mode = PadMode::Constant,
                  float value = 0.0f) {
  OpAttrs a;
  a.kind = AttrKind::Pad;
  a.count = static_cast<uint8_t>(pads.size() / 2);
  int i = 0;
  for (int64_t p : pads) a.pads[i++] = p;
  a.pad_mode = mode;
  a.pad_value = value;
  return a;
}

TEST_F(OpInfoTest, Pad) {
  const OpCode op = OpCode::Pad;
  expect_dims(run(op, pad_attrs({0, 0, 1, 2, 0, 0, 3, 4}), {tv(F, {1, 3, 5, 5})}),
              {1, 3, 9, 11});
  // Negative pads crop, down to an empty axis.
  expect_dims(run(op, pad_attrs({-1, 2, -2, -3}), {tv(ScalarType::I8, {5, 6})}), {2, 5},
              ScalarType::I8);
  expect_dims(run(op, pad_attrs({-2, -3}), {tv(F, {5})}), {0});
  expect_dims(run(op, pad_attrs({}), {tv(F, {})}), {});
  // Constant padding of an empty axis is fine; Edge and Reflect need data to copy.
  expect_dims(run(op, pad_attrs({1, 2}), {tv(F, {0})}), {3});
  expect_dims(run(op, pad_attrs({0, 0}, PadMode::Edge), {tv(F, {0})}), {0});
  expect_invalid(run(op, pad_attrs({1, 0}, PadMode::Edge), {tv(F, {0})}), op,
                 "edge padding of empty axis 0");
  expect_dims(run(op, pad_attrs({3, 1}, PadMode::Edge), {tv(F, {1})}), {5});
  // Reflect: pads up to dim - 1 (the border is not repeated).
  expect_dims(run(op, pad_attrs({2, 2}, PadMode::Reflect), {tv(F, {3})}), {7});
  expect_dims(run(op, pad_attrs({-1, 2}, PadMode::Reflect), {tv(F, {3})}), {4});
  expect_invalid(run(op, pad_attrs({3, 0}, PadMode::Reflect), {tv(F, {3})}), op,
                 "reflect pads 3, 0 on axis 0 must be < its size 3");
  expect_invalid(run(op, pad_attrs({0, 1}, PadMode::Reflect), {tv(F, {1})}), op, "reflect");
  expect_invalid(run(op, pad_attrs({0, 1}, PadMode::Reflect), {tv(F, {0})}), op, "reflect");
  expect_invalid(run(op, pad_attrs({-3, -3}), {tv(F, {5})}), op,
                 "axis 0 of size 5 with pads -3, -3");
  expect_invalid(run(op, pad_attrs({1, 1}), {tv(F, {2, 2})}), op,
                 "pads cover rank 1 but the input has rank 2");
  expect_invalid(run(op, pad_attrs({1, 1}, static_cast<PadMode>(7)), {tv(F, {2})}), op,
                 "invalid mode 7");
  expect_invalid(run(op, pad_attrs({1, 1}, PadMode::Invalid), {tv(F, {2})}), op, "mode 0");
  // Hostile pads: no overflow in dim + begin + end, and the padded size must fit.
  expect_invalid(run(op, pad_attrs({kI64Max, 1}), {tv(F, {1})}), op, "overflowing");
  expect_invalid(run(op, pad_attrs({kI64Min, kI64Min}), {tv(F, {1})}), op, "negative");
  expect_invalid(run(op, pad_attrs({kI64Max, kI64Min}), {tv(F, {1})}), op, "negative");
  expect_dims(run(op, pad_attrs({kI64Max - 5, -kI64Max + 3}), {tv(ScalarType::U8, {4})}), {2},
              ScalarType::U8);
  expect_invalid(run(op, pad_attrs({kI64Max / 2, 0}), {tv(F, {1})}), op, "byte size overflows");
  expect_invalid(run(op, pad_attrs({kI64Max / 2, 0, 0, 4}), {tv(F, {1, 1})}), op, "overflows");
  OpAttrs hostile = pad_attrs({1, 1});
  hostile.count = 255;
  expect_invalid(run(op, hostile, {tv(F, {2})}), op, "rank 255");
}

TEST_F(OpInfoTest, Gather) {
  const OpCode op = OpCode::Gather;
  const ScalarType I32 = ScalarType::I32, I64 = ScalarType::I64;
  OpAttrs a;
  a.kind = AttrKind::Axis;
  expect_dims(run(op, a, {tv(F, {5, 4}), tv(I64, {2, 3})}), {2, 3, 4});
  a.axis = 1;
  expect_dims(run(op, a, {tv(ScalarType::F16, {2, 5, 3}), tv(I32, {7})}), {2, 7, 3},
              ScalarType::F16);
  a.axis = -1;
  expect_dims(run(op, a, {tv(F, {2, 5}), tv(I32, {})}), {2});  // scalar index drops the axis
  expect_dims(run(op, a, {tv(I64, {2, 0}), tv(I32, {3})}), {2, 3}, I64);  // indices into nothing
  a.axis = 0;
  expect_dims(run(op, a, {tv(F, {4}), tv(I64, {0, 2})}), {0, 2});
  // Output rank data.rank - 1 + indices.rank must fit.
  expect_dims(run(op, a, {tv(F, {4}), tv(I32, {1, 1, 1, 1, 1, 1, 1, 1})}),
              {1, 1, 1, 1, 1, 1, 1, 1});
  expect_invalid(run(op, a, {tv(F, {4, 2}), tv(I32, {1, 1, 1, 1, 1, 1, 1, 1})}), op,
                 "output rank 9");
  expect_invalid(run(op, a, {tv(F, {4}), tv(F, {2})}), op, "indices must be i32 or i64, got f32");
  expect_invalid(run(op, a, {tv(F, {4}), tv(ScalarType::I16, {2})}), op, "got i16");
  expect_invalid(run(op, a, {tv(F, {}), tv(I32, {2})}), op, "axis 0 out of range for rank 0");
  a.axis = 2;
  expect_invalid(run(op, a, {tv(F, {4, 2}), tv(I32, {2})}), op, "axis 2 out of range for rank 2");
  a.axis = -3;
  expect_invalid(run(op, a, {tv(F, {4, 2}), tv(I32, {2})}), op, "axis -3");
  a.axis = 0;
  expect_invalid(run(op, a, {tv(F, {4})}), op, "expected 2 to 2 inputs, got 1");
  expect_invalid(run(op, a, {tv(F, {2, kI64Max / 8}), tv(I32, {16})}), op, "overflows");
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

TEST_F(OpInfoTest, Expand) {
  const OpCode op = OpCode::Expand;
  expect_dims(run(op, reshape_attrs({2, 3, 4}), {tv(F, {3, 1})}), {2, 3, 4});
  expect_dims(run(op, reshape_attrs({1, 1}), {tv(F, {3, 4})}), {3, 4});  // 1 in the target keeps
  expect_dims(run(op, reshape_attrs({4}), {tv(F, {2, 1})}), {2, 4});     // target rank < input
  expect_dims(run(op, reshape_attrs({}), {tv(F, {2})}), {2});
  expect_dims(run(op, reshape_attrs({0, 3}), {tv(ScalarType::Bool, {1, 3})}), {0, 3},
              ScalarType::Bool);
  expect_dims(run(op, reshape_attrs({1, 5}, {0, 2}), {tv(F, {1})}, {9, 6}), {1, 6});
  expect_invalid(run(op, reshape_attrs({-1, 3}), {tv(F, {3})}), op, "invalid target dim -1 at 0");
  expect_invalid(run(op, reshape_attrs({2, 3}), {tv(F, {4})}), op,
                 "input [4] does not broadcast to [2, 3]");
  expect_invalid(run(op, reshape_attrs({5}, {2}), {tv(F, {1})}, {7}), op,
                 "symbol 2 but only 1");
  expect_invalid(run(op, reshape_attrs({5}, {1}), {tv(F, {1})}, {-3}), op,
                 "negative value -3");
  expect_invalid(run(op, reshape_attrs({kI64Max, 2}), {tv(F, {1})}), op, "overflows");
  OpAttrs a = reshape_attrs({1});
  a.count = 9;
  expect_invalid(run(op, a, {tv(F, {1})}), op, "target rank 9");
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
