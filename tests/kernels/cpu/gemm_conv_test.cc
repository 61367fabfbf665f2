// kernels/cpu matmul, linear and conv2d against their reference twins on every target, plus
// bitwise thread-count and batch invariance.
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

// Reductions over K in f32 (FMA) vs double: tolerance grows with K; inputs are in [-1, 1].
Tolerance GemmTolerance(int64_t k) { return Tolerance{2e-6f * float(k > 16 ? k : 16), 1e-4f}; }

using MatmulTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(MatmulTest);

TEST_P(MatmulTest, Shapes) {
  const std::vector<std::vector<int64_t>> mkn = {
      {1, 1, 1},   {1, 7, 33},  {5, 17, 31},  {6, 16, 32},  {7, 64, 65},  {13, 100, 47},
      {2, 3, 15},  {12, 9, 17}, {64, 256, 96}, {1, 1000, 5}, {3, 0, 5},   {0, 4, 5},
      {4, 5, 0},   {50, 33, 300}, {11, 1, 64},
  };
  for (const auto& s : mkn) {
    Tensor a = Random({s[0], s[1]}, 21), b = Random({s[1], s[2]}, 22);
    SCOPED_TRACE(testing::Message() << "M,K,N = " << s[0] << "," << s[1] << "," << s[2]);
    CheckTwin(OpCode::MatMul, cpu::matmul, ref::matmul, OpAttrs{}, {a.view, b.view},
              GemmTolerance(s[1]), /*bitwise_threads=*/true);
  }
}

TEST_P(MatmulTest, BroadcastBatch) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3, 5, 7}, {3, 7, 9}},  {{5, 7}, {4, 7, 33}},    {{2, 1, 6, 17}, {1, 3, 17, 20}},
      {{4, 9, 8}, {8, 5}},        {{1, 1, 3, 4}, {2, 4, 4}}, {{3, 40, 70}, {3, 70, 40}},
  };
  for (const auto& [sa, sb] : shapes) {
    Tensor a = Random(sa, 23), b = Random(sb, 24);
    SCOPED_TRACE(testing::Message() << DimsText(a.view) << " x " << DimsText(b.view));
    CheckTwin(OpCode::MatMul, cpu::matmul, ref::matmul, OpAttrs{}, {a.view, b.view},
              GemmTolerance(sa.back()), true);
  }
}

// Row i of a batch equals the same row computed alone (M = 1), bit for bit.
TEST_P(MatmulTest, BatchInvariant) {
  Tensor a = Random({37, 129}, 25), b = Random({129, 70}, 26), full;
  TensorView in[] = {a.view, b.view};
  Shape(OpCode::MatMul, OpAttrs{}, in, 2, &full);
  RunKernel(cpu::matmul, OpAttrs{}, in, 2, &full, 3);
  for (int64_t row : {0, 5, 17, 36}) {
    Tensor a1(ScalarType::F32, {1, 129});
    std::memcpy(a1.f(), a.f() + row * 129, 129 * sizeof(float));
    Tensor one;
    TensorView in1[] = {a1.view, b.view};
    Shape(OpCode::MatMul, OpAttrs{}, in1, 2, &one);
    RunKernel(cpu::matmul, OpAttrs{}, in1, 2, &one, 1);
    EXPECT_EQ(0, std::memcmp(one.f(), full.f() + row * 70, 70 * sizeof(float))) << "row " << row;
  }
}

using LinearTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(LinearTest);

TEST_P(LinearTest, ShapesWithAndWithoutBias) {
  const std::vector<std::vector<int64_t>> mkn = {
      {1, 1, 1},    {1, 15, 3},   {2, 16, 4},   {3, 17, 5},    {4, 100, 33}, {5, 1037, 64},
      {9, 31, 7},   {64, 64, 65}, {1, 4096, 9}, {130, 33, 130}, {0, 8, 4},    {3, 0, 4},
  };
  for (const auto& s : mkn) {
    Tensor x = Random({s[0], s[1]}, 31), w = Random({s[2], s[1]}, 32), bias = Random({s[2]}, 33);
    TensorView absent;
    SCOPED_TRACE(testing::Message() << "M,K,N = " << s[0] << "," << s[1] << "," << s[2]);
    OpAttrs attrs;
    attrs.kind = AttrKind::Linear;
    const Tolerance tol = GemmTolerance(s[1]);
    CheckTwin(OpCode::Linear, cpu::linear, ref::linear, attrs, {x.view, w.view, bias.view}, tol, true);
    CheckTwin(OpCode::Linear, cpu::linear, ref::linear, attrs, {x.view, w.view, absent}, tol, true);
    CheckTwin(OpCode::Linear, cpu::linear, ref::linear, attrs, {x.view, w.view}, tol, true);
  }
  // Leading batch dims of x.
  Tensor x = Random({2, 3, 40}, 34), w = Random({24, 40}, 35), bias = Random({24}, 36);
  OpAttrs attrs;
  attrs.kind = AttrKind::Linear;
  CheckTwin(OpCode::Linear, cpu::linear, ref::linear, attrs, {x.view, w.view, bias.view},
            GemmTolerance(40), true);
}

TEST_P(LinearTest, BatchInvariant) {
  const int64_t k = 333, n = 45;
  Tensor x = Random({21, k}, 37), w = Random({n, k}, 38), bias = Random({n}, 39), full;
  OpAttrs attrs;
  attrs.kind = AttrKind::Linear;
  TensorView in[] = {x.view, w.view, bias.view};
  Shape(OpCode::Linear, attrs, in, 3, &full);
  RunKernel(cpu::linear, attrs, in, 3, &full, 3);
  for (int64_t row : {0, 3, 4, 20}) {
    Tensor x1(ScalarType::F32, {1, k}), one;
    std::memcpy(x1.f(), x.f() + row * k, size_t(k) * sizeof(float));
    TensorView in1[] = {x1.view, w.view, bias.view};
    Shape(OpCode::Linear, attrs, in1, 3, &one);
    RunKernel(cpu::linear, attrs, in1, 3, &one, 1);
    EXPECT_EQ(0, std::memcmp(one.f(), full.f() + row * n, size_t(n) * sizeof(float))) << "row " << row;
  }
}

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, o, kh, kw;
  int32_t stride[2], padding[4], dilation[2], groups;
};

const ConvCase kConvCases[] = {
    {"3x3 pad1", 1, 3, 9, 40, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"1x1", 2, 16, 7, 7, 12, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"1x1 wide", 1, 5, 3, 37, 9, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"stride2", 1, 4, 17, 35, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
    {"stride2 no pad", 2, 3, 16, 16, 5, 3, 3, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    {"dilation2", 1, 3, 20, 41, 5, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1},
    {"asym pad", 1, 2, 11, 23, 7, 3, 3, {1, 1}, {0, 1, 2, 0}, {1, 1}, 1},
    {"groups2", 1, 8, 10, 33, 6, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
    {"depthwise", 1, 8, 12, 50, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},
    {"depthwise x2 stride2", 2, 4, 13, 29, 8, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4},
    {"5x3 narrow", 1, 3, 8, 5, 4, 5, 3, {1, 1}, {2, 1, 2, 1}, {1, 1}, 1},
    {"7x7 stride2", 1, 3, 30, 30, 10, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},
    {"stride 1x2 dil 2x1", 1, 3, 9, 40, 5, 3, 3, {1, 2}, {1, 0, 1, 2}, {2, 1}, 1},
    {"oc 4k+1", 1, 6, 6, 20, 9, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"big", 1, 32, 28, 28, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
};

using Conv2dTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(Conv2dTest);

TEST_P(Conv2dTest, Configs) {
  for (const ConvCase& c : kConvCases) {
    OpAttrs attrs;
    attrs.kind = AttrKind::Conv2d;
    attrs.kernel[0] = int32_t(c.kh);
    attrs.kernel[1] = int32_t(c.kw);
    for (int i = 0; i < 2; ++i) attrs.stride[i] = c.stride[i], attrs.dilation[i] = c.dilation[i];
    for (int i = 0; i < 4; ++i) attrs.padding[i] = c.padding[i];
    attrs.groups = c.groups;
    Tensor x = Random({c.n, c.c, c.h, c.w}, 41), w = Random({c.o, c.c / c.groups, c.kh, c.kw}, 42);
    Tensor bias = Random({c.o}, 43);
    TensorView absent;
    SCOPED_TRACE(c.name);
    const Tolerance tol = GemmTolerance(c.c / c.groups * c.kh * c.kw);
    CheckTwin(OpCode::Conv2d, cpu::conv2d, ref::conv2d, attrs, {x.view, w.view, bias.view}, tol, true);
    CheckTwin(OpCode::Conv2d, cpu::conv2d, ref::conv2d, attrs, {x.view, w.view, absent}, tol, true);
    CheckTwin(OpCode::Conv2d, cpu::conv2d, ref::conv2d, attrs, {x.view, w.view}, tol, true);
  }
}

// Image i of a batch equals the same image convolved alone, bit for bit.
TEST_P(Conv2dTest, BatchInvariant) {
  OpAttrs attrs;
  attrs.kind = AttrKind::Conv2d;
  attrs.kernel[0] = attrs.kernel[1] = 3;
  for (int i = 0; i < 4; ++i) attrs.padding[i] = 1;
  Tensor x = Random({3, 8, 14, 21}, 44), w = Random({12, 8, 3, 3}, 45), full;
  TensorView in[] = {x.view, w.view};
  Shape(OpCode::Conv2d, attrs, in, 2, &full);
  RunKernel(cpu::conv2d, attrs, in, 2, &full, 3);
  const size_t image = 8 * 14 * 21, out_image = 12 * 14 * 21;
  Tensor x1(ScalarType::F32, {1, 8, 14, 21}), one;
  std::memcpy(x1.f(), x.f() + 2 * image, image * sizeof(float));
  TensorView in1[] = {x1.view, w.view};
  Shape(OpCode::Conv2d, attrs, in1, 2, &one);
  RunKernel(cpu::conv2d, attrs, in1, 2, &one, 1);
  EXPECT_EQ(0, std::memcmp(one.f(), full.f() + 2 * out_image, out_image * sizeof(float)));
}

}  // namespace
}  // namespace ember::kernels::cpu_test
