// The issue-17 elementwise cpu kernels (max, min, prelu, the comparisons, leaky_relu, elu, selu,
// softplus, log, abs) against their reference twins on every Highway target: every size around the
// vector widths, broadcast patterns, in place, 1 and 3 threads bit for bit, and special values
// (NaN, ±Inf, ±0, subnormals) at every lane position.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();

// 29 values (coprime with every vector width), so each meets every lane position.
const float kSpecial[] = {kNaN,  kInf,   -kInf,  0.0f,   -0.0f, 1.0f,    -1.0f,  0.5f,  -2.5f, 2.5f,
                          20.0f, -20.0f, 88.5f,  89.0f,  -104.0f, -110.0f, 1e30f, -1e30f, kMax, -kMax,
                          1e-40f, -1e-40f, std::numeric_limits<float>::min(), 1e-7f, -1e-7f, 1e-20f,
                          -1e-20f, 3.0f, -0.75f};
constexpr size_t kSpecialCount = sizeof(kSpecial) / sizeof(kSpecial[0]);

Tensor SpecialTensor(std::vector<int64_t> dims, size_t shift) {
  Tensor t(ScalarType::F32, std::move(dims));
  for (size_t i = 0; i < t.numel(); ++i) t.f()[i] = kSpecial[(i + shift) % kSpecialCount];
  return t;
}

// NaN matches NaN, an infinity the same infinity, a zero the same signed zero when `signed_zero`,
// anything else within tol.
::testing::AssertionResult SameSpecial(const Tensor& actual, const Tensor& expected, Tolerance tol,
                                       bool signed_zero, const Tensor& input) {
  if (actual.numel() != expected.numel()) return ::testing::AssertionFailure() << "numel differs";
  for (size_t i = 0; i < actual.numel(); ++i) {
    const float a = actual.f()[i], e = expected.f()[i];
    bool ok;
    if (std::isnan(a) || std::isnan(e)) {
      ok = std::isnan(a) && std::isnan(e);
    } else if (std::isinf(a) || std::isinf(e)) {
      ok = a == e;
    } else if (a == e) {
      ok = !signed_zero || a != 0.0f || std::signbit(a) == std::signbit(e);
    } else {
      ok = std::fabs(a - e) <= tol.abs + tol.rel * std::fabs(e);
    }
    if (!ok) {
      return ::testing::AssertionFailure() << "first mismatch at " << i << ": got " << a
                                           << (std::signbit(a) ? " (sign set)" : "") << ", reference " << e
                                           << (std::signbit(e) ? " (sign set)" : "") << " for input "
                                           << input.f()[i % input.numel()];
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- Binary: max, min, prelu (f32 out) and the comparisons (bool out) -----------------------------

struct BinaryCase {
  OpCode op;
  KernelFn cpu;
  KernelFn ref;
};
const BinaryCase kBinary[] = {
    {OpCode::Max, cpu::max, ref::max},
    {OpCode::Min, cpu::min, ref::min},
    {OpCode::PRelu, cpu::prelu, ref::prelu},
    {OpCode::Greater, cpu::greater, ref::greater},
    {OpCode::Less, cpu::less, ref::less},
    {OpCode::GreaterOrEqual, cpu::greater_equal, ref::greater_equal},
    {OpCode::LessOrEqual, cpu::less_equal, ref::less_equal},
};

// Random values with about a third of b equal to a, so ties (>=, <=, max of equals) are exercised.
std::pair<Tensor, Tensor> RandomPair(std::vector<int64_t> a_dims, std::vector<int64_t> b_dims, uint32_t seed) {
  Tensor a = Random(std::move(a_dims), seed, -3.0f, 3.0f);
  Tensor b = Random(std::move(b_dims), seed + 1, -3.0f, 3.0f);
  for (size_t i = 0; a.numel() > 0 && i < b.numel(); i += 3) b.f()[i] = a.f()[i % a.numel()];
  return {std::move(a), std::move(b)};
}

using OnnxBinaryTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(OnnxBinaryTest);

TEST_P(OnnxBinaryTest, SameShapeAllSizesExact) {
  for (const BinaryCase& c : kBinary) {
    for (int64_t n : EdgeSizes()) {
      auto [a, b] = RandomPair({n}, {n}, 21);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " n=" << n);
      CheckTwin(c.op, c.cpu, c.ref, OpAttrs{}, {a.view, b.view}, kExact, /*bitwise_threads=*/true);
    }
  }
}

TEST_P(OnnxBinaryTest, BroadcastPatternsExact) {
  // prelu's slope must broadcast to x (the first shape is x's), so its rows keep a's shape.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 5}, {5}},       {{3, 5}, {3, 1}},        {{17}, {}},           {{}, {}},
      {{2, 3, 4, 5}, {3, 1, 1}}, {{4, 6, 1, 7}, {1, 6, 1, 1}}, {{1000, 33}, {33}}, {{300, 257}, {1, 257}},
      {{0, 4}, {4}},       {{8, 3, 2, 9}, {8, 1, 1, 9}}, {{2, 64, 70001 / 64}, {64, 1}},
  };
  for (const BinaryCase& c : kBinary) {
    for (const auto& [sa, sb] : shapes) {
      auto [a, b] = RandomPair(sa, sb, 23);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " " << DimsText(a.view) << " x " << DimsText(b.view));
      CheckTwin(c.op, c.cpu, c.ref, OpAttrs{}, {a.view, b.view}, kExact, /*bitwise_threads=*/true);
      if (c.op != OpCode::PRelu) {  // b first: the other operand broadcast (prelu's x must be the larger)
        CheckTwin(c.op, c.cpu, c.ref, OpAttrs{}, {b.view, a.view}, kExact, true);
      }
    }
  }
}

TEST_P(OnnxBinaryTest, InPlace) {
  for (const BinaryCase& c : {kBinary[0], kBinary[1], kBinary[2]}) {  // f32 outputs only
    for (int64_t n : {1, 15, 17, 1037, 70001}) {
      auto [a, b] = RandomPair({n}, {n}, 25);
      Tensor expected;
      TensorView in[] = {a.view, b.view};
      Shape(c.op, OpAttrs{}, in, 2, &expected);
      RunKernel(c.ref, OpAttrs{}, in, 2, &expected);
      Tensor a2 = a;
      a2.view.data = a2.storage.data();
      TensorView in2[] = {a2.view, b.view};
      RunKernel(c.cpu, OpAttrs{}, in2, 2, &a2, 3);  // out == a
      EXPECT_TRUE(BytesEqual(a2, expected)) << to_string(c.op) << " out==a n=" << n;
    }
  }
}

// Every special value against every other (a x b over a 29 x 29 grid, and shifted so every pair
// meets every lane), against the reference: NaN in either operand, ±0 ties, infinities.
TEST_P(OnnxBinaryTest, SpecialValuesEveryPair) {
  for (const BinaryCase& c : kBinary) {
    for (size_t shift : {0, 5}) {
      Tensor a(ScalarType::F32, {int64_t(kSpecialCount), int64_t(kSpecialCount)});
      Tensor b(ScalarType::F32, {int64_t(kSpecialCount), int64_t(kSpecialCount)});
      for (size_t i = 0; i < kSpecialCount; ++i) {
        for (size_t j = 0; j < kSpecialCount; ++j) {
          a.f()[i * kSpecialCount + j] = kSpecial[(i + shift) % kSpecialCount];
          b.f()[i * kSpecialCount + j] = kSpecial[(j + shift) % kSpecialCount];
        }
      }
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " shift " << shift);
      // Exact bytes, so -0 vs +0 and NaN propagation are checked bit for bit (NaNs here are all the
      // one quiet NaN, and both libraries return an operand).
      Tensor out = CheckTwin(c.op, c.cpu, c.ref, OpAttrs{}, {a.view, b.view}, kExact, true);
      Tensor expected;
      TensorView in[] = {a.view, b.view};
      Shape(c.op, OpAttrs{}, in, 2, &expected);
      RunKernel(c.ref, OpAttrs{}, in, 2, &expected);
      EXPECT_TRUE(BytesEqual(out, expected));
    }
  }
}

TEST(OnnxBinaryValuesTest, MaxMinPropagateNaNAndTieGivesTheSecondOperand) {
  Tensor a(ScalarType::F32, {5}), b(ScalarType::F32, {5});
  const float av[] = {kNaN, 1.0f, 0.0f, -0.0f, 2.0f}, bv[] = {1.0f, kNaN, -0.0f, 0.0f, -kInf};
  for (int i = 0; i < 5; ++i) a.f()[i] = av[i], b.f()[i] = bv[i];
  for (KernelFn fn : {cpu::max, ref::max}) {
    Tensor out;
    TensorView in[] = {a.view, b.view};
    Shape(OpCode::Max, OpAttrs{}, in, 2, &out);
    RunKernel(fn, OpAttrs{}, in, 2, &out);
    EXPECT_TRUE(std::isnan(out.f()[0]) && std::isnan(out.f()[1]));
    EXPECT_TRUE(out.f()[2] == 0.0f && std::signbit(out.f()[2]));   // max(+0, -0) = -0 (onnxruntime)
    EXPECT_TRUE(out.f()[3] == 0.0f && !std::signbit(out.f()[3]));  // max(-0, +0) = +0
    EXPECT_EQ(out.f()[4], 2.0f);
  }
  for (KernelFn fn : {cpu::min, ref::min}) {
    Tensor out;
    TensorView in[] = {a.view, b.view};
    Shape(OpCode::Min, OpAttrs{}, in, 2, &out);
    RunKernel(fn, OpAttrs{}, in, 2, &out);
    EXPECT_TRUE(std::isnan(out.f()[0]) && std::isnan(out.f()[1]));
    EXPECT_TRUE(out.f()[2] == 0.0f && std::signbit(out.f()[2]));
    EXPECT_EQ(out.f()[4], -kInf);
  }
}

// ---- Unary ----------------------------------------------------------------------------------------

struct UnaryCase {
  OpCode op;
  KernelFn cpu;
  KernelFn ref;
  float alpha, beta;
  Tolerance tol;
};
const UnaryCase kUnary[] = {
    {OpCode::LeakyRelu, cpu::leaky_relu, ref::leaky_relu, 0.01f, 0.0f, kExact},
    {OpCode::LeakyRelu, cpu::leaky_relu, ref::leaky_relu, -1.5f, 0.0f, kExact},
    {OpCode::Elu, cpu::elu, ref::elu, 1.0f, 0.0f, kTranscendental},
    {OpCode::Elu, cpu::elu, ref::elu, 0.3f, 0.0f, kTranscendental},
    {OpCode::Selu, cpu::selu, ref::selu, 1.67326319217681884765625f, 1.05070102214813232421875f, kTranscendental},
    {OpCode::Selu, cpu::selu, ref::selu, 2.0f, 0.5f, kTranscendental},
    {OpCode::Softplus, cpu::softplus, ref::softplus, 0.0f, 0.0f, kTranscendental},
    {OpCode::Log, cpu::log, ref::log, 0.0f, 0.0f, kTranscendental},
    {OpCode::Abs, cpu::abs, ref::abs, 0.0f, 0.0f, kExact},
};

OpAttrs AttrsOf(const UnaryCase& c) {
  OpAttrs a;
  a.kind = find_op_info(c.op)->attr_kind;
  a.alpha = c.alpha;
  a.beta = c.beta;
  return a;
}

// Spread over [-30, 30] with a few magnitudes that hit saturation and tiny arguments; log gets |x|.
Tensor UnaryInput(OpCode op, int64_t n, uint32_t seed) {
  Tensor t = Random({n}, seed, -30.0f, 30.0f);
  const float special[] = {0.5f, -0.5f, 1e-6f, -1e-6f, 100.0f, -100.0f, 1.0f, -3.0f, 1e-3f, 3e4f};
  for (size_t i = 0; i < t.numel() && i < 10; ++i) t.f()[i * 7 % t.numel()] = special[i];
  if (op == OpCode::Log) {
    for (size_t i = 0; i < t.numel(); ++i) t.f()[i] = std::fabs(t.f()[i]) + 1e-30f;
  }
  return t;
}

using OnnxUnaryTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(OnnxUnaryTest);

TEST_P(OnnxUnaryTest, AllSizesAndThreads) {
  for (const UnaryCase& c : kUnary) {
    const OpAttrs attrs = AttrsOf(c);
    for (int64_t n : EdgeSizes()) {
      Tensor x = UnaryInput(c.op, n, 31);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " alpha " << c.alpha << " n=" << n);
      CheckTwin(c.op, c.cpu, c.ref, attrs, {x.view}, c.tol, /*bitwise_threads=*/true);
    }
  }
}

TEST_P(OnnxUnaryTest, InPlace) {
  for (const UnaryCase& c : kUnary) {
    const OpAttrs attrs = AttrsOf(c);
    for (int64_t n : {5, 17, 70001}) {
      Tensor x = UnaryInput(c.op, n, 33), expected;
      TensorView in[] = {x.view};
      Shape(c.op, attrs, in, 1, &expected);
      RunKernel(c.ref, attrs, in, 1, &expected);
      RunKernel(c.cpu, attrs, in, 1, &x, 3);  // out == in
      EXPECT_TRUE(AllClose(x, expected, c.tol)) << to_string(c.op) << " n=" << n;
    }
  }
}

// Special values at every lane position. Signed zeros must match where the op selects or copies
// (leaky_relu, elu and selu pass ±0 through, abs clears the sign); softplus and log never give 0.
TEST_P(OnnxUnaryTest, SpecialValues) {
  for (const UnaryCase& c : kUnary) {
    const OpAttrs attrs = AttrsOf(c);
    for (int64_t n : {int64_t(kSpecialCount), int64_t(kSpecialCount) * 3 + 2}) {
      for (size_t shift : {size_t{0}, size_t{1}, size_t{7}}) {
        Tensor x = SpecialTensor({n}, shift), expected, one, three;
        TensorView in[] = {x.view};
        Shape(c.op, attrs, in, 1, &expected);
        Shape(c.op, attrs, in, 1, &one);
        Shape(c.op, attrs, in, 1, &three);
        RunKernel(c.ref, attrs, in, 1, &expected);
        RunKernel(c.cpu, attrs, in, 1, &one, 1);
        RunKernel(c.cpu, attrs, in, 1, &three, 3);
        SCOPED_TRACE(testing::Message() << to_string(c.op) << " alpha " << c.alpha << " n=" << n << " shift " << shift);
        // elu / selu of a tiny negative x: expm1 in f32 may round differently from the double one
        // by a subnormal, so zeros are compared by sign only for the exact ops.
        const bool signed_zero = c.tol.abs == 0.0f;
        EXPECT_TRUE(SameSpecial(one, expected, c.tol, signed_zero, x));
        EXPECT_TRUE(BytesEqual(one, three));
      }
    }
  }
}

TEST(OnnxUnaryValuesTest, LogAndSoftplusEdges) {
  Tensor x(ScalarType::F32, {8});
  const float xv[] = {0.0f, -0.0f, -1.0f, kInf, kNaN, 1e-40f, 1.0f, -kInf};
  for (int i = 0; i < 8; ++i) x.f()[i] = xv[i];
  TensorView in[] = {x.view};
  Tensor out;
  Shape(OpCode::Log, OpAttrs{}, in, 1, &out);
  RunKernel(cpu::log, OpAttrs{}, in, 1, &out);
  EXPECT_EQ(out.f()[0], -kInf);
  EXPECT_EQ(out.f()[1], -kInf);
  EXPECT_TRUE(std::isnan(out.f()[2]));
  EXPECT_EQ(out.f()[3], kInf);
  EXPECT_TRUE(std::isnan(out.f()[4]));
  EXPECT_NEAR(out.f()[5], -92.1034f, 1e-3f);  // a subnormal input
  EXPECT_EQ(out.f()[6], 0.0f);
  EXPECT_TRUE(std::isnan(out.f()[7]));
  RunKernel(cpu::softplus, OpAttrs{}, in, 1, &out);
  EXPECT_NEAR(out.f()[0], 0.69314718f, 1e-7f);
  EXPECT_NEAR(out.f()[2], 0.31326169f, 1e-7f);
  EXPECT_EQ(out.f()[3], kInf);
  EXPECT_TRUE(std::isnan(out.f()[4]));
  EXPECT_EQ(out.f()[7], 0.0f);
}

}  // namespace
}  // namespace ember::kernels::cpu_test
