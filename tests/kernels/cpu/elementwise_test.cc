// kernels/cpu elementwise, softmax and layer_norm against their reference twins, on every target.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

struct BinaryCase {
  OpCode op;
  KernelFn cpu;
  KernelFn ref;
};
const BinaryCase kBinary[] = {
    {OpCode::Add, cpu::add, ref::add},
    {OpCode::Sub, cpu::sub, ref::sub},
    {OpCode::Mul, cpu::mul, ref::mul},
    {OpCode::Div, cpu::div, ref::div},
};

// b values away from 0 so Div stays finite.
Tensor RandomDivisor(std::vector<int64_t> dims, uint32_t seed) {
  Tensor t = Random(std::move(dims), seed, 0.5f, 2.0f);
  for (size_t i = 0; i < t.numel(); i += 3) t.f()[i] = -t.f()[i];
  return t;
}

using BinaryTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(BinaryTest);

// f32 add/sub/mul/div are correctly rounded in both libraries: results are exact.
TEST_P(BinaryTest, SameShapeAllSizesExact) {
  for (const BinaryCase& c : kBinary) {
    for (int64_t n : EdgeSizes()) {
      Tensor a = Random({n}, 1), b = RandomDivisor({n}, 2);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " n=" << n);
      CheckTwin(c.op, c.cpu, c.ref, OpAttrs{}, {a.view, b.view}, kExact);
    }
  }
}

TEST_P(BinaryTest, BroadcastPatternsExact) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 5}, {5}},          {{3, 5}, {3, 1}},          {{1}, {7, 9}},
      {{}, {17}},             {{17}, {}},                {{}, {}},
      {{2, 1, 4}, {3, 1}},    {{4, 1, 6, 1}, {1, 5, 1, 7}}, {{1000, 33}, {33}},
      {{33}, {1000, 33}},     {{1000, 33}, {1000, 1}},   {{2, 3, 1, 17}, {2, 1, 5, 1}},
      {{0, 4}, {4}},          {{5, 0}, {1, 1}},          {{300, 257}, {1, 257}},
      {{1, 1, 1}, {1}},       {{2, 1}, {1, 2}},          {{8, 1, 1, 9}, {8, 3, 2, 9}},
  };
  for (const BinaryCase& c : kBinary) {
    for (const auto& [sa, sb] : shapes) {
      Tensor a = Random(sa, 3), b = RandomDivisor(sb, 4);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " " << DimsText(a.view) << " x "
                                      << DimsText(b.view));
      CheckTwin(c.op, c.cpu, c.ref, OpAttrs{}, {a.view, b.view}, kExact);
    }
  }
}

TEST_P(BinaryTest, InPlace) {
  for (const BinaryCase& c : kBinary) {
    for (int64_t n : {1, 15, 17, 1037, 70001}) {
      Tensor a = Random({n}, 5), b = RandomDivisor({n}, 6), expected;
      Shape(c.op, OpAttrs{}, std::vector<TensorView>{a.view, b.view}.data(), 2, &expected);
      TensorView in[] = {a.view, b.view};
      RunKernel(c.ref, OpAttrs{}, in, 2, &expected);
      // out == a
      Tensor a2 = a;
      a2.view.data = a2.storage.data();
      TensorView in2[] = {a2.view, b.view};
      RunKernel(c.cpu, OpAttrs{}, in2, 2, &a2, 3);
      EXPECT_TRUE(AllClose(a2, expected, kExact)) << to_string(c.op) << " out==a n=" << n;
      // out == b
      Tensor b2 = b;
      b2.view.data = b2.storage.data();
      TensorView in3[] = {a.view, b2.view};
      RunKernel(c.cpu, OpAttrs{}, in3, 2, &b2, 1);
      EXPECT_TRUE(AllClose(b2, expected, kExact)) << to_string(c.op) << " out==b n=" << n;
    }
  }
}

struct UnaryCase {
  OpCode op;
  KernelFn cpu;
  KernelFn ref;
  GeluApprox approx;
  Tolerance tol;
};
const UnaryCase kUnary[] = {
    {OpCode::Relu, cpu::relu, ref::relu, GeluApprox::None, kExact},
    {OpCode::Gelu, cpu::gelu, ref::gelu, GeluApprox::None, kTranscendental},
    {OpCode::Gelu, cpu::gelu, ref::gelu, GeluApprox::Tanh, kTranscendental},
    {OpCode::Silu, cpu::silu, ref::silu, GeluApprox::None, kTranscendental},
    {OpCode::Sigmoid, cpu::sigmoid, ref::sigmoid, GeluApprox::None, kTranscendental},
    {OpCode::Tanh, cpu::tanh, ref::tanh, GeluApprox::None, kTranscendental},
};

// Includes large magnitudes (saturation, exp overflow) and tiny ones.
Tensor UnaryInput(int64_t n, uint32_t seed) {
  Tensor t = Random({n}, seed, -8.0f, 8.0f);
  const float special[] = {0.0f, -0.0f, 100.0f, -100.0f, 1e-6f, -1e-6f, 20.0f, -20.0f, 3.9f, -4.1f};
  for (size_t i = 0; i < t.numel() && i < 10; ++i) t.f()[i * 7 % t.numel()] = special[i];
  return t;
}

using UnaryTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(UnaryTest);

TEST_P(UnaryTest, AllSizes) {
  for (const UnaryCase& c : kUnary) {
    OpAttrs attrs;
    attrs.kind = c.op == OpCode::Gelu ? AttrKind::Gelu : AttrKind::None;
    attrs.gelu_approx = c.approx;
    for (int64_t n : EdgeSizes()) {
      Tensor x = UnaryInput(n, 7);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " approx=" << int(c.approx) << " n=" << n);
      CheckTwin(c.op, c.cpu, c.ref, attrs, {x.view}, c.tol);
    }
    Tensor x = UnaryInput(3 * 5 * 7, 8);  // rank 3
    x.view.rank = 3;
    x.view.dims[0] = 3, x.view.dims[1] = 5, x.view.dims[2] = 7;
    CheckTwin(c.op, c.cpu, c.ref, attrs, {x.view}, c.tol);
  }
}

TEST_P(UnaryTest, InPlace) {
  for (const UnaryCase& c : kUnary) {
    OpAttrs attrs;
    attrs.kind = c.op == OpCode::Gelu ? AttrKind::Gelu : AttrKind::None;
    attrs.gelu_approx = c.approx;
    for (int64_t n : {5, 17, 70001}) {
      Tensor x = UnaryInput(n, 9), expected;
      TensorView in[] = {x.view};
      Shape(c.op, attrs, in, 1, &expected);
      RunKernel(c.ref, attrs, in, 1, &expected);
      RunKernel(c.cpu, attrs, in, 1, &x, 3);  // out == in
      EXPECT_TRUE(AllClose(x, expected, c.tol)) << to_string(c.op) << " n=" << n;
    }
  }
}

using SoftmaxTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(SoftmaxTest);

TEST_P(SoftmaxTest, Axes) {
  const std::vector<std::pair<std::vector<int64_t>, int>> cases = {
      {{5, 1037}, -1}, {{3, 17}, 0},  {{2, 7, 33}, 1}, {{4, 1}, 1},   {{4, 1}, 0},
      {{2, 3, 4, 5}, 2}, {{1}, 0},   {{9, 16}, 1},    {{9, 15}, -1}, {{2, 5, 17}, -2},
      {{600, 64}, -1},  {{64, 600}, 0}, {{0, 5}, 1},  {{3, 40, 3}, 2},
  };
  for (const auto& [dims, axis] : cases) {
    for (float scale : {1.0f, 20.0f}) {
      Tensor x = Random(dims, 11, -scale, scale);
      OpAttrs attrs;
      attrs.kind = AttrKind::Axis;
      attrs.axis = axis;
      SCOPED_TRACE(testing::Message() << DimsText(x.view) << " axis " << axis << " scale " << scale);
      CheckTwin(OpCode::Softmax, cpu::softmax, ref::softmax, attrs, {x.view}, kTranscendental);
    }
  }
}

TEST_P(SoftmaxTest, NaNMakesItsRowNaN) {
  for (int axis : {0, 1}) {
    Tensor x = Random({5, 37}, 12);
    x.f()[40] = std::numeric_limits<float>::quiet_NaN();
    OpAttrs attrs;
    attrs.kind = AttrKind::Axis;
    attrs.axis = axis;
    CheckTwin(OpCode::Softmax, cpu::softmax, ref::softmax, attrs, {x.view}, kTranscendental);
  }
}

TEST_P(SoftmaxTest, InPlace) {
  Tensor x = Random({7, 33}, 12, -5.0f, 5.0f), expected;
  OpAttrs attrs;
  attrs.kind = AttrKind::Axis;
  attrs.axis = 1;
  TensorView in[] = {x.view};
  Shape(OpCode::Softmax, attrs, in, 1, &expected);
  RunKernel(ref::softmax, attrs, in, 1, &expected);
  RunKernel(cpu::softmax, attrs, in, 1, &x);
  EXPECT_TRUE(AllClose(x, expected, kTranscendental));
}

using LayerNormTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(LayerNormTest);

TEST_P(LayerNormTest, AxesAndOptionalInputs) {
  const std::vector<std::pair<std::vector<int64_t>, int>> cases = {
      {{4, 1037}, -1}, {{3, 5, 17}, 1}, {{2, 16}, 1}, {{7, 15}, -1}, {{1, 1}, 1},
      {{300, 64}, 1},  {{2, 3, 4}, 0},  {{5, 33}, -1},
  };
  for (const auto& [dims, axis] : cases) {
    Tensor x = Random(dims, 13, -3.0f, 5.0f);
    OpAttrs attrs;
    attrs.kind = AttrKind::Norm;
    attrs.axis = axis;
    attrs.epsilon = 1e-5f;
    const int a = axis < 0 ? axis + int(dims.size()) : axis;
    std::vector<int64_t> norm_dims(dims.begin() + a, dims.end());
    Tensor gamma = Random(norm_dims, 14, 0.5f, 1.5f), beta = Random(norm_dims, 15);
    TensorView absent;
    SCOPED_TRACE(testing::Message() << DimsText(x.view) << " axis " << axis);
    const Tolerance tol{1e-5f, 1e-4f};
    CheckTwin(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, attrs,
              {x.view, gamma.view, beta.view}, tol);
    CheckTwin(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, attrs, {x.view, gamma.view},
              tol);
    CheckTwin(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, attrs, {x.view}, tol);
    CheckTwin(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, attrs,
              {x.view, absent, beta.view}, tol);
    CheckTwin(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, attrs,
              {x.view, gamma.view, absent}, tol);
    CheckTwin(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, attrs,
              {x.view, absent, absent}, tol);
  }
}

}  // namespace
}  // namespace ember::kernels::cpu_test
