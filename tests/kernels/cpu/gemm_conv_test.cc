// kernels/cpu matmul, linear and conv2d against their reference twins on every target, plus
// bitwise thread-count and batch invariance.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/register.h"
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

// With matmul_scratch bytes (B's panels copied contiguous, as the runtime runs it) the result is
// bit for bit the in-place one, for 1 and 3 threads; N = 1, broadcast batches, partial panels
// and rows of B 1024 floats apart included.
TEST_P(MatmulTest, PackedPanelsSameBits) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{13, 100}, {100, 47}}, {{64, 33}, {33, 1024}}, {{2, 3, 5, 7}, {3, 7, 9}}, {{5, 7}, {4, 7, 33}},
      {{6, 40}, {40, 1}},     {{1, 9}, {9, 70}},       {{3, 1, 2}, {1, 2, 5}},
  };
  for (const auto& [sa, sb] : shapes) {
    Tensor a = Random(sa, 25), b = Random(sb, 26), in_place, packed1, packed3;
    SCOPED_TRACE(testing::Message() << DimsText(a.view) << " x " << DimsText(b.view));
    const TensorView in[] = {a.view, b.view};
    Shape(OpCode::MatMul, OpAttrs{}, in, 2, &in_place);
    RunKernel(cpu::matmul, OpAttrs{}, in, 2, &in_place, 1);
    for (int threads : {1, 3}) {
      Tensor& out = threads == 1 ? packed1 : packed3;
      Shape(OpCode::MatMul, OpAttrs{}, in, 2, &out);
      const size_t bytes = cpu::matmul_scratch(OpAttrs{}, in, 2, &out.view, 1, size_t(threads));
      EXPECT_EQ(bytes, size_t(threads) * ((sa.back() * 32 + 15) / 16 * 16) * 4 + 64);
      if (threads == 1) {
        EXPECT_EQ(cpu_scratch_bytes(OpCode::MatMul, OpAttrs{}, in, 2, &out.view, 1), bytes);
      }
      std::vector<uint8_t> scratch(bytes + 7);
      KernelContext ctx;
      ctx.pool = Pool(threads);
      ctx.scratch = Span<uint8_t>(scratch.data() + 7, bytes);  // misaligned: the kernel aligns
      cpu::matmul(ctx, OpAttrs{}, in, 2, &out.view, 1);
      EXPECT_TRUE(BytesEqual(out, in_place)) << threads << " threads";
    }
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
    // The packed paths' edges: K = 300 (> one 256-row reduction block, tail 44), 29 rows (tails of
    // 6 and 8), positions 7x7 = 49 and 23x13 = 299 (> one 256-position block, partial panels).
    {"K 300 7x7 map", 1, 300, 7, 7, 29, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"3x3 at 7x7, K 297", 1, 33, 7, 7, 37, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"1x1 299 positions", 2, 7, 23, 13, 13, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"1x1 stride2", 1, 9, 15, 15, 17, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    {"groups2 stride2 asym", 2, 10, 13, 11, 14, 3, 2, {2, 1}, {2, 0, 1, 1}, {1, 2}, 2},
    {"depth multiplier 2", 1, 6, 9, 9, 12, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6},
    {"depthwise 7x7 map", 2, 24, 7, 7, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 24},
    {"depthwise 5x5 narrow", 1, 5, 6, 3, 5, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, 5},
    {"depthwise dil asym 4x2", 1, 3, 17, 21, 3, 4, 2, {1, 1}, {0, 3, 2, 1}, {2, 3}, 3},
    {"depthwise 2 rows x 1 col", 1, 2, 2, 1, 2, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
    // Depthwise stride 2 (phase planes): odd and even sizes, no / asymmetric padding, 5x5, a map
    // narrower than a vector, a 2x4 kernel; with dilation 2 it runs directly.
    {"depthwise s2 even", 2, 6, 16, 16, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6},
    {"depthwise s2 no pad", 1, 3, 15, 20, 3, 3, 3, {2, 2}, {0, 0, 0, 0}, {1, 1}, 3},
    {"depthwise s2 5x5 asym", 1, 4, 19, 11, 4, 5, 5, {2, 2}, {2, 1, 2, 3}, {1, 1}, 4},
    {"depthwise s2 7x7 map", 1, 8, 7, 7, 8, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 8},
    {"depthwise s2 2x4", 1, 2, 10, 13, 2, 2, 4, {2, 2}, {0, 1, 1, 2}, {1, 1}, 2},
    {"depthwise s2 dilation 2", 1, 3, 14, 14, 3, 3, 3, {2, 2}, {2, 2, 2, 2}, {2, 2}, 3},
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

ThreadPool* ConvPool(int threads) {
  static FixedThreadPool pool2(2), pool3(3);
  return threads == 2 ? &pool2 : threads == 3 ? &pool3 : nullptr;
}

// conv2d with ctx.scratch sized by conv2d_scratch for `threads` (the runtime's way: the packed paths).
void RunConvPacked(const OpAttrs& attrs, const std::vector<TensorView>& in, int threads, Tensor* out) {
  Shape(OpCode::Conv2d, attrs, in.data(), in.size(), out);
  const size_t bytes = cpu::conv2d_scratch(attrs, in.data(), in.size(), &out->view, 1, size_t(threads));
  std::vector<uint8_t> scratch(bytes + 3);
  KernelContext ctx;
  ctx.pool = ConvPool(threads);
  // Misaligned on purpose: the kernel aligns its slots itself.
  ctx.scratch = Span<uint8_t>(scratch.data() + 3, bytes);
  cpu::conv2d(ctx, attrs, in.data(), in.size(), &out->view, 1);
}

// The packed paths against the reference, and bitwise the same with 1, 2 and 3 threads.
void CheckConvPacked(const OpAttrs& attrs, const std::vector<TensorView>& in, Tolerance tol) {
  Tensor expected, one, two, three;
  Shape(OpCode::Conv2d, attrs, in.data(), in.size(), &expected);
  RunKernel(ref::conv2d, attrs, in.data(), in.size(), &expected);
  RunConvPacked(attrs, in, 1, &one);
  RunConvPacked(attrs, in, 2, &two);
  RunConvPacked(attrs, in, 3, &three);
  EXPECT_TRUE(AllClose(one, expected, tol)) << "packed, 1 thread";
  EXPECT_TRUE(BytesEqual(two, one)) << "packed: 2 threads differ from 1";
  EXPECT_TRUE(BytesEqual(three, one)) << "packed: 3 threads differ from 1";
}

OpAttrs ConvAttrs(const ConvCase& c) {
  OpAttrs attrs;
  attrs.kind = AttrKind::Conv2d;
  attrs.kernel[0] = int32_t(c.kh);
  attrs.kernel[1] = int32_t(c.kw);
  for (int i = 0; i < 2; ++i) attrs.stride[i] = c.stride[i], attrs.dilation[i] = c.dilation[i];
  for (int i = 0; i < 4; ++i) attrs.padding[i] = c.padding[i];
  attrs.groups = c.groups;
  return attrs;
}

TEST_P(Conv2dTest, PackedConfigs) {
  for (const ConvCase& c : kConvCases) {
    const OpAttrs attrs = ConvAttrs(c);
    Tensor x = Random({c.n, c.c, c.h, c.w}, 41), w = Random({c.o, c.c / c.groups, c.kh, c.kw}, 42);
    Tensor bias = Random({c.o}, 43);
    TensorView absent;
    SCOPED_TRACE(c.name);
    const Tolerance tol = GemmTolerance(c.c / c.groups * c.kh * c.kw);
    CheckConvPacked(attrs, {x.view, w.view, bias.view}, tol);
    CheckConvPacked(attrs, {x.view, w.view, absent}, tol);
    CheckConvPacked(attrs, {x.view, w.view}, tol);
  }
}

// The packed result does not depend on how much scratch beyond one slot there is, nor on whether
// the kernel got scratch at all (direct path) beyond the tolerance; with one slot and 3 threads the
// work runs as one task, bit for bit the same.
size_t conv_round(size_t floats) { return (floats + 15) / 16 * 16; }

TEST_P(Conv2dTest, PackedScratchSizes) {
  const ConvCase c = {"3x3", 1, 20, 9, 30, 19, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const OpAttrs attrs = ConvAttrs(c);
  Tensor x = Random({c.n, c.c, c.h, c.w}, 51), w = Random({c.o, c.c, c.kh, c.kw}, 52), full, one_slot;
  const std::vector<TensorView> in = {x.view, w.view};
  RunConvPacked(attrs, in, 3, &full);
  Shape(OpCode::Conv2d, attrs, in.data(), in.size(), &one_slot);
  const size_t one = cpu::conv2d_scratch(attrs, in.data(), in.size(), &one_slot.view, 1, 1);
  const size_t three = cpu::conv2d_scratch(attrs, in.data(), in.size(), &one_slot.view, 1, 3);
  // One task's slot: K = 180 rows of 256 positions (a block of 9 x 30 = 270) + 16 floats of row
  // padding, + alignment.
  EXPECT_EQ(one, 180u * (256u + 16u) * 4u + 64u);
  EXPECT_EQ(three, 3 * (one - 64) + 64);
  EXPECT_EQ(cpu_scratch_bytes(OpCode::Conv2d, attrs, in.data(), in.size(), &one_slot.view, 1), one);
  std::vector<uint8_t> scratch(one);
  KernelContext ctx;
  ctx.pool = ConvPool(3);
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  cpu::conv2d(ctx, attrs, in.data(), in.size(), &one_slot.view, 1);
  EXPECT_TRUE(BytesEqual(one_slot, full));
  // A smaller shape fits in the larger shape's scratch.
  Tensor x_small = Random({1, 20, 5, 6}, 53), small, expected;
  const std::vector<TensorView> in_small = {x_small.view, w.view};
  Shape(OpCode::Conv2d, attrs, in_small.data(), 2, &small);
  EXPECT_LE(cpu::conv2d_scratch(attrs, in_small.data(), 2, &small.view, 1, 1), one);
  cpu::conv2d(ctx, attrs, in_small.data(), 2, &small.view, 1);
  Shape(OpCode::Conv2d, attrs, in_small.data(), 2, &expected);
  RunKernel(ref::conv2d, attrs, in_small.data(), 2, &expected);
  EXPECT_TRUE(AllClose(small, expected, GemmTolerance(180)));
  // Depthwise at stride 3, or 2 with dilation, runs directly: no scratch. At stride 2: one slot per
  // thread of the 4 phase planes (6 x 6 each: OH = OW = 5, + kh / 2) + (kw - 1) + 64 floats of
  // slack, and the outputs (OH 5 x Wq 6 + 64), in floats rounded up to 16.
  for (int stride : {2, 3}) {
    for (int dilation : {1, 2}) {
      const ConvCase dw = {"dw", 1, 4, 9, 9, 4, 3, 3, {stride, stride}, {1, 1, 1, 1}, {dilation, dilation}, 4};
      Tensor xd = Random({1, 4, 9, 9}, 54), wd = Random({4, 1, 3, 3}, 55), outd;
      const TensorView ind[] = {xd.view, wd.view};
      Shape(OpCode::Conv2d, ConvAttrs(dw), ind, 2, &outd);
      const size_t expected = stride == 2 && dilation == 1 ? 4 * (conv_round(4 * 36 + 2 + 64) + conv_round(30 + 64)) * 4 : 0;
      EXPECT_EQ(cpu::conv2d_scratch(ConvAttrs(dw), ind, 2, &outd.view, 1, 4), expected + (expected ? 64 : 0))
          << "stride " << stride << ", dilation " << dilation;
    }
  }
}

// The case is meaningful: the reference has finite outputs beside infinite and NaN ones.
void ExpectMixedSpecials(const OpAttrs& attrs, const std::vector<TensorView>& in) {
  Tensor expected;
  Shape(OpCode::Conv2d, attrs, in.data(), in.size(), &expected);
  RunKernel(ref::conv2d, attrs, in.data(), in.size(), &expected);
  int inf_count = 0, nan_count = 0, finite_count = 0;
  for (size_t i = 0; i < expected.numel(); ++i) {
    const float v = expected.f()[i];
    inf_count += std::isinf(v), nan_count += std::isnan(v), finite_count += std::isfinite(v);
  }
  EXPECT_GT(inf_count, 0);
  EXPECT_GT(nan_count, 0);
  EXPECT_GT(finite_count, 0);
}

// Non-finite weights and inputs: a padded tap contributes 0 * w to the packed GEMM / depthwise
// sums, NaN for w = inf, where the reference skips the tap; the result must still be the
// reference's (inf where only valid taps meet the inf, NaN where a NaN input is read).
TEST_P(Conv2dTest, PackedNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  const ConvCase cases[] = {
      {"gemm 3x3", 1, 5, 8, 11, 7, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"depthwise 3x3", 1, 5, 8, 11, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5},
      {"gemm 7x7 map asym", 1, 4, 7, 7, 9, 3, 3, {1, 1}, {0, 2, 2, 0}, {1, 1}, 1},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const OpAttrs attrs = ConvAttrs(c);
    Tensor x = Random({c.n, c.c, c.h, c.w}, 61), w = Random({c.o, c.c / c.groups, c.kh, c.kw}, 62);
    Tensor bias = Random({c.o}, 63);
    w.f()[0] = inf;                 // oc 0, ic 0, top-left tap: padded on the first row / column
    w.f()[w.numel() - 1] = -inf;    // last oc, bottom-right tap
    x.f()[(c.c - 1) * c.h * c.w + 2 * c.w + 3] = std::nanf("");  // last channel, (2, 3)
    const std::vector<TensorView> in = {x.view, w.view, bias.view};
    ExpectMixedSpecials(attrs, in);
    CheckConvPacked(attrs, in, GemmTolerance(c.c / c.groups * c.kh * c.kw));
  }
}

// The fused output clamp is exactly a clip after the conv: on every path (direct without scratch;
// packed GEMM, depthwise stride 1 and 2 with it; 1, 2 and 3 threads) the clamped result is, bit for
// bit, that path's unclamped result through the reference clip: NaN stays NaN, ±inf is clamped, the
// clamp comes after the bias (with and without one) and only after the last reduction block (K = 300
// has two). Cases with inf weights and a NaN input also exercise the packed paths' NaN
// recomputation (conv_point).
TEST_P(Conv2dTest, OutputClampIsConvThenClip) {
  const float inf = std::numeric_limits<float>::infinity();
  const ConvCase cases[] = {
      {"gemm 3x3 pad", 1, 5, 8, 11, 7, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"gemm K 300", 1, 300, 7, 7, 29, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"depthwise 3x3", 1, 5, 8, 11, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5},
      {"depthwise s2", 2, 6, 16, 16, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6},
      {"depthwise s2 dil 2 (direct)", 1, 3, 14, 14, 3, 3, 3, {2, 2}, {2, 2, 2, 2}, {2, 2}, 3},
  };
  const float bounds[][2] = {{0.0f, inf}, {0.0f, 6.0f}, {-0.25f, 0.25f}, {-inf, 0.0f}, {0.125f, 0.125f}};
  for (const ConvCase& c : cases) {
    for (int variant = 0; variant < 3; ++variant) {  // finite; non-finite; finite without a bias
      const bool non_finite = variant == 1, with_bias = variant != 2;
      SCOPED_TRACE(std::string(c.name) + (non_finite ? ", non-finite" : "") + (with_bias ? "" : ", no bias"));
      const OpAttrs plain = ConvAttrs(c);
      Tensor x = Random({c.n, c.c, c.h, c.w}, 71), w = Random({c.o, c.c / c.groups, c.kh, c.kw}, 72);
      Tensor bias = Random({c.o}, 73);
      if (non_finite) {
        w.f()[0] = inf;
        w.f()[w.numel() - 1] = -inf;
        x.f()[(c.c - 1) * c.h * c.w + 2 * c.w + 4] = std::nanf("");  // (2, 4): read at stride 2, dilation 2
      }
      const std::vector<TensorView> in =
          with_bias ? std::vector<TensorView>{x.view, w.view, bias.view} : std::vector<TensorView>{x.view, w.view};
      Tensor packed, direct;
      RunConvPacked(plain, in, 1, &packed);
      Shape(OpCode::Conv2d, plain, in.data(), in.size(), &direct);
      RunKernel(cpu::conv2d, plain, in.data(), in.size(), &direct);  // no scratch: the direct path
      for (const auto& b : bounds) {
        SCOPED_TRACE("clamp [" + std::to_string(b[0]) + ", " + std::to_string(b[1]) + "]");
        OpAttrs clamped = plain, clip;
        clamped.out_min = b[0];
        clamped.out_max = b[1];
        clip.kind = AttrKind::Clip;
        clip.clip_min = b[0];
        clip.clip_max = b[1];
        Tensor packed_clip, direct_clip;
        Shape(OpCode::Clip, clip, &packed.view, 1, &packed_clip);
        RunKernel(ref::clip, clip, &packed.view, 1, &packed_clip);
        Shape(OpCode::Clip, clip, &direct.view, 1, &direct_clip);
        RunKernel(ref::clip, clip, &direct.view, 1, &direct_clip);
        for (int threads : {1, 2, 3}) {
          Tensor got;
          RunConvPacked(clamped, in, threads, &got);
          EXPECT_TRUE(BytesEqual(got, packed_clip)) << "packed, " << threads << " threads";
        }
        for (int threads : {1, 3}) {
          Tensor got;
          Shape(OpCode::Conv2d, clamped, in.data(), in.size(), &got);
          RunKernel(cpu::conv2d, clamped, in.data(), in.size(), &got, threads);
          EXPECT_TRUE(BytesEqual(got, direct_clip)) << "direct, " << threads << " threads";
        }
        // And against the reference conv with the same clamp.
        Tensor expected;
        Shape(OpCode::Conv2d, clamped, in.data(), in.size(), &expected);
        RunKernel(ref::conv2d, clamped, in.data(), in.size(), &expected);
        EXPECT_TRUE(AllClose(packed_clip, expected, GemmTolerance(c.c / c.groups * c.kh * c.kw)));
        // The case is meaningful: some outputs clamped, (but for min == max) some not, NaN kept.
        int at_bound = 0, inside = 0, nan_count = 0;
        for (size_t i = 0; i < expected.numel(); ++i) {
          const float v = expected.f()[i];
          nan_count += std::isnan(v);
          at_bound += v == b[0] || v == b[1];
          inside += v > b[0] && v < b[1];
        }
        EXPECT_GT(at_bound, 0);
        if (b[0] < b[1]) {
          EXPECT_GT(inside, 0);
        }
        if (non_finite) {
          EXPECT_GT(nan_count, 0);
        } else {
          EXPECT_EQ(nan_count, 0);
        }
      }
    }
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

// The packed paths (GEMM and depthwise): image i of a batch equals the same image convolved alone,
// bit for bit, whatever the thread count.
TEST_P(Conv2dTest, PackedBatchInvariant) {
  const ConvCase cases[] = {
      {"gemm", 3, 8, 14, 21, 12, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"depthwise", 3, 8, 14, 21, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const OpAttrs attrs = ConvAttrs(c);
    Tensor x = Random({3, c.c, c.h, c.w}, 44), w = Random({c.o, c.c / c.groups, 3, 3}, 45), full;
    RunConvPacked(attrs, {x.view, w.view}, 3, &full);
    const size_t image = size_t(c.c * c.h * c.w), out_image = size_t(c.o * c.h * c.w);
    Tensor x1(ScalarType::F32, {1, c.c, c.h, c.w}), one;
    std::memcpy(x1.f(), x.f() + 2 * image, image * sizeof(float));
    RunConvPacked(attrs, {x1.view, w.view}, 1, &one);
    EXPECT_EQ(0, std::memcmp(one.f(), full.f() + 2 * out_image, out_image * sizeof(float)));
  }
}


// With the output channels in chunks (few column blocks for the threads), B is packed once into
// shared scratch: 3 threads on 33 -> 37 at 7x7 (one block of 49 positions, 2 chunks) add
// K 297 x (round32(49) + 16) = 23760 floats to the per-thread slots; the bits are the 1-thread ones.
TEST_P(Conv2dTest, GemmSharedB) {
  const ConvCase c = {"33 -> 37 at 7x7", 1, 33, 7, 7, 37, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const OpAttrs attrs = ConvAttrs(c);
  Tensor x = Random({1, 33, 7, 7}, 111), w = Random({37, 33, 3, 3}, 112), bias = Random({37}, 113), one, three;
  const std::vector<TensorView> in = {x.view, w.view, bias.view};
  Shape(OpCode::Conv2d, attrs, in.data(), 3, &three);
  const size_t s1 = cpu::conv2d_scratch(attrs, in.data(), 3, &three.view, 1, 1);
  const size_t s3 = cpu::conv2d_scratch(attrs, in.data(), 3, &three.view, 1, 3);
  EXPECT_EQ(s3, 3 * (s1 - 64) + 23760u * 4 + 64);
  RunConvPacked(attrs, in, 1, &one);
  RunConvPacked(attrs, in, 3, &three);
  EXPECT_TRUE(BytesEqual(three, one));
}

// ---------------------------------------------------------------- Winograd F(m x m, 3 x 3)

// Forces conv2d's algorithm (cpu::conv2d_set_path_for_testing) for a scope.
struct ForcePath {
  explicit ForcePath(int mode) { cpu::conv2d_set_path_for_testing(mode); }
  ~ForcePath() { cpu::conv2d_set_path_for_testing(-1); }
  ForcePath(const ForcePath&) = delete;
  ForcePath& operator=(const ForcePath&) = delete;
};

double RelL2(const Tensor& a, const Tensor& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.f()[i]) - double(ref.f()[i]);
    num += d * d;
    den += double(ref.f()[i]) * double(ref.f()[i]);
  }
  return std::sqrt(num / den);
}

// The tile edges: maps not a multiple of m, one tile per row (a block of 32 tiles crosses 32 tile
// rows), tile rows longer than a block, K over one reduction block (C = 300), output channels over
// one 64-row chunk and not a multiple of 8, asymmetric and zero padding, batch 2.
const ConvCase kWinoCases[] = {
    {"16 -> 24 at 8x8", 1, 16, 8, 8, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"batch 2, 13x11", 2, 9, 13, 11, 13, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"no padding 10x17", 1, 5, 10, 17, 7, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"asymmetric padding", 1, 6, 9, 12, 10, 3, 3, {1, 1}, {2, 0, 1, 2}, {1, 1}, 1},
    {"3 wide, 40 high", 1, 4, 40, 3, 9, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"70 wide", 1, 3, 6, 70, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"C 300", 1, 300, 6, 6, 10, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"70 output channels", 1, 8, 12, 12, 70, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
};

// Every case, m = 2 and 4, with and without bias: within the GEMM tolerance of the reference,
// bitwise the same on 1, 2 and 3 threads, and not the GEMM's bits (the Winograd path did run).
TEST_P(Conv2dTest, WinogradConfigs) {
  for (const ConvCase& c : kWinoCases) {
    const OpAttrs attrs = ConvAttrs(c);
    Tensor x = Random({c.n, c.c, c.h, c.w}, 71), w = Random({c.o, c.c, 3, 3}, 72), bias = Random({c.o}, 73);
    const Tolerance tol = GemmTolerance(c.c * 9);
    Tensor gemm;
    {
      ForcePath none(0);
      RunConvPacked(attrs, {x.view, w.view, bias.view}, 1, &gemm);
    }
    for (int m : {2, 4}) {
      SCOPED_TRACE(testing::Message() << c.name << ", m = " << m);
      ForcePath force(m);
      CheckConvPacked(attrs, {x.view, w.view, bias.view}, tol);
      CheckConvPacked(attrs, {x.view, w.view}, tol);
      Tensor wino;
      RunConvPacked(attrs, {x.view, w.view, bias.view}, 1, &wino);
      EXPECT_FALSE(BytesEqual(wino, gemm)) << "the Winograd path did not run";
    }
  }
}

// The rounding error against the reference's FMA chain, on a ResNet-like layer (64 -> 64 at 20x20,
// inputs and weights uniform in [-1, 1]): what conv_winograd.cc documents, with 2x margin.
TEST_P(Conv2dTest, WinogradError) {
  const ConvCase c = {"64 at 20x20", 1, 64, 20, 20, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const OpAttrs attrs = ConvAttrs(c);
  Tensor x = Random({1, 64, 20, 20}, 74), w = Random({64, 64, 3, 3}, 75), expected;
  const std::vector<TensorView> in = {x.view, w.view};
  Shape(OpCode::Conv2d, attrs, in.data(), 2, &expected);
  RunKernel(ref::conv2d, attrs, in.data(), 2, &expected);
  for (int m : {2, 4}) {
    ForcePath force(m);
    Tensor out;
    RunConvPacked(attrs, in, 2, &out);
    const double err = RelL2(out, expected);
    EXPECT_LT(err, m == 2 ? 1e-6 : 5e-6) << "m = " << m;
    EXPECT_GT(err, 0.0) << "m = " << m;
  }
}

// Non-finite values: an inf input or weight spreads NaN over Winograd's tile (inf - inf); every
// non-finite output is recomputed, so the result is the reference's (inf, NaN and finite outputs).
TEST_P(Conv2dTest, WinogradNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  const ConvCase c = {"3x3", 1, 5, 10, 11, 7, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const OpAttrs attrs = ConvAttrs(c);
  Tensor x = Random({1, 5, 10, 11}, 76), w = Random({7, 5, 3, 3}, 77), bias = Random({7}, 78);
  w.f()[0] = inf;                         // oc 0, ic 0, top-left tap
  x.f()[1 * 110 + 6 * 11 + 8] = -inf;     // channel 1, (6, 8)
  x.f()[4 * 110 + 2 * 11 + 3] = std::nanf("");  // channel 4, (2, 3)
  const std::vector<TensorView> in = {x.view, w.view, bias.view};
  ExpectMixedSpecials(attrs, in);
  for (int m : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "m = " << m);
    ForcePath force(m);
    CheckConvPacked(attrs, in, GemmTolerance(45));
  }
}

// Image i of a batch equals the image convolved alone, bit for bit, whatever the thread count.
TEST_P(Conv2dTest, WinogradBatchInvariant) {
  const ConvCase c = {"wino", 3, 8, 14, 21, 12, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const OpAttrs attrs = ConvAttrs(c);
  Tensor x = Random({3, 8, 14, 21}, 79), w = Random({12, 8, 3, 3}, 80);
  for (int m : {2, 4}) {
    ForcePath force(m);
    Tensor full, one;
    RunConvPacked(attrs, {x.view, w.view}, 3, &full);
    const size_t image = 8 * 14 * 21, out_image = 12 * 14 * 21;
    Tensor x1(ScalarType::F32, {1, 8, 14, 21});
    std::memcpy(x1.f(), x.f() + 2 * image, image * sizeof(float));
    RunConvPacked(attrs, {x1.view, w.view}, 1, &one);
    EXPECT_EQ(0, std::memcmp(one.f(), full.f() + 2 * out_image, out_image * sizeof(float))) << "m = " << m;
  }
}

// Scratch, worked out by hand: the transformed weights U, shared by the tasks (alpha^2 planes of
// O x C + 16 floats), + one slot per thread (the transformed input V, the GEMM results M, the block's
// padded input rows, the staged outputs). With less than that (the GEMM's bytes only) the GEMM runs,
// bit for bit. The automatic choice follows the map size and the channel counts.
TEST_P(Conv2dTest, WinogradScratch) {
  {
    // 16 -> 64 at 18x18, m = 2: 81 tiles, 3 blocks, U shared: 16 planes of 64 x 16 + 16 = 16640
    // floats. A slot:
    // V 16 x (16 x 32 + 16) = 8448; M 64 rows x 16 x 32 + 16 = 32784; padded rows: 5 tile rows x 2
    // + 2 = 12 of round16(9 x 2 + 72) = 96; staged 2 x round16((9 + 16) x 2) = 128: 42512 floats.
    const ConvCase c = {"16 -> 64 at 18x18", 1, 16, 18, 18, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
    Tensor x(ScalarType::F32, {1, 16, 18, 18}), w(ScalarType::F32, {64, 16, 3, 3}), out;
    const TensorView in[] = {x.view, w.view};
    Shape(OpCode::Conv2d, ConvAttrs(c), in, 2, &out);
    ForcePath force(2);
    EXPECT_EQ(cpu::conv2d_scratch(ConvAttrs(c), in, 2, &out.view, 1, 3), 16640u * 4 + 3 * 42512u * 4 + 64);
  }
  const ConvCase c = {"16 -> 24 at 8x8", 1, 16, 8, 8, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const OpAttrs attrs = ConvAttrs(c);
  Tensor x = Random({1, 16, 8, 8}, 81), w = Random({24, 16, 3, 3}, 82), out, gemm;
  const std::vector<TensorView> in = {x.view, w.view};
  Shape(OpCode::Conv2d, attrs, in.data(), 2, &out);
  // m = 4: U 36 x (24 x 16 + 16) = 14400 floats. A slot: V 36 x (16 x 32 + 16) = 19008; M 24 rows x
  // 36 x 32 + 16 = 27664; padded rows 2 x 4 + 2 = 10 of round16(2 x 4 + 72) = 80; staged 4 x
  // round16((2 + 16) x 4) = 320: 47792 floats.
  {
    ForcePath force(4);
    EXPECT_EQ(cpu::conv2d_scratch(attrs, in.data(), 2, &out.view, 1, 3), 14400u * 4 + 3 * 47792u * 4 + 64);
  }
  size_t gemm_bytes;
  {
    ForcePath none(0);
    gemm_bytes = cpu::conv2d_scratch(attrs, in.data(), 2, &out.view, 1, 1);
    RunConvPacked(attrs, in, 1, &gemm);
  }
  {
    ForcePath force(4);
    std::vector<uint8_t> scratch(gemm_bytes);
    KernelContext ctx;
    ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
    cpu::conv2d(ctx, attrs, in.data(), 2, &out.view, 1);
    EXPECT_TRUE(BytesEqual(out, gemm)) << "less scratch than Winograd's: the GEMM";
  }
  // Automatic: m = 4 from 28x28 outputs, 2 from 12x12; none below, or with fewer than 16 channels in
  // or out.
  struct Auto {
    int64_t c, hw, o;
    int mode;
  } autos[] = {{16, 28, 16, 4}, {16, 27, 16, 2}, {16, 12, 16, 2}, {16, 11, 16, 0}, {512, 7, 512, 0},
               {8, 32, 16, 0}, {16, 32, 8, 0}};
  for (const Auto& a : autos) {
    const ConvCase ac = {"auto", 1, a.c, a.hw, a.hw, a.o, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
    Tensor xa(ScalarType::F32, {1, a.c, a.hw, a.hw}), wa(ScalarType::F32, {a.o, a.c, 3, 3}), oa;
    const TensorView ina[] = {xa.view, wa.view};
    Shape(OpCode::Conv2d, ConvAttrs(ac), ina, 2, &oa);
    const size_t automatic = cpu::conv2d_scratch(ConvAttrs(ac), ina, 2, &oa.view, 1, 2);
    ForcePath force(a.mode);
    EXPECT_EQ(automatic, cpu::conv2d_scratch(ConvAttrs(ac), ina, 2, &oa.view, 1, 2))
        << "C " << a.c << ", " << a.hw << "x" << a.hw << ", O " << a.o << ": mode " << a.mode;
  }
}

// ---------------------------------------------------------------- depthwise, channels in lanes

// Small maps: the channels-in-lanes depthwise (conv_plan.h conv_dw_lanes) gives the planar path's
// bits (mode 0 turns it off), on 1, 2 and 3 threads, with bias or not and the output clamp: stride 1
// and 2, 5x5, dilation 2, asymmetric padding, channel counts that leave a partial group (20, 33),
// batch 2, a map wider than a transpose block (20 columns).
TEST_P(Conv2dTest, DepthwiseLanesSameBits) {
  const ConvCase cases[] = {
      {"7x7, 33 ch", 1, 33, 7, 7, 33, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 33},
      {"14x14 s2 -> 7x7, 20 ch, batch 2", 2, 20, 14, 14, 20, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 20},
      {"5x5 at 9x20", 1, 16, 9, 20, 16, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, 16},
      {"dilation 2, asymmetric padding", 1, 8, 11, 13, 8, 3, 3, {1, 1}, {2, 0, 1, 2}, {2, 2}, 8},
      {"15x15 s2 no padding", 1, 24, 15, 15, 24, 3, 3, {2, 2}, {0, 0, 0, 0}, {1, 1}, 24},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = Random({c.n, c.c, c.h, c.w}, 101), w = Random({c.o, 1, c.kh, c.kw}, 102), bias = Random({c.o}, 103);
    for (bool clamp : {false, true}) {
      OpAttrs attrs = ConvAttrs(c);
      if (clamp) attrs.out_min = -0.25f, attrs.out_max = 0.5f;
      for (const std::vector<TensorView>& in :
           {std::vector<TensorView>{x.view, w.view, bias.view}, std::vector<TensorView>{x.view, w.view}}) {
        Tensor planar;
        {
          ForcePath none(0);
          RunConvPacked(attrs, in, 1, &planar);
        }
        for (int threads : {1, 2, 3}) {
          Tensor out;
          RunConvPacked(attrs, in, threads, &out);
          EXPECT_TRUE(BytesEqual(out, planar)) << threads << " threads, clamp " << clamp << ", inputs " << in.size();
        }
        Tensor expected;
        Shape(OpCode::Conv2d, attrs, in.data(), in.size(), &expected);
        RunKernel(ref::conv2d, attrs, in.data(), in.size(), &expected);
        EXPECT_TRUE(AllClose(planar, expected, GemmTolerance(c.kh * c.kw)));
      }
    }
  }
}

}  // namespace
}  // namespace ember::kernels::cpu_test
