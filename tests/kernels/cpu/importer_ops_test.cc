// kernels/cpu's kernels for the ONNX importer's ops (clip .. neg, pow, where, reduce_mean/sum,
// batch_norm, pad) against their reference twins, on every compiled Highway target, at sizes around
// every vector width, in place, and with 1 and 3 threads (bitwise equal).
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

struct UnaryCase {
  OpCode op;
  KernelFn cpu;
  KernelFn ref;
  OpAttrs attrs;
  Tolerance tol;
  float lo, hi;  // input range
};

OpAttrs clip_attrs(float lo, float hi) {
  OpAttrs a;
  a.kind = AttrKind::Clip;
  a.clip_min = lo;
  a.clip_max = hi;
  return a;
}

OpAttrs hard_sigmoid_attrs(float alpha, float beta) {
  OpAttrs a;
  a.kind = AttrKind::HardSigmoid;
  a.alpha = alpha;
  a.beta = beta;
  return a;
}

std::vector<UnaryCase> UnaryCases() {
  return {
      {OpCode::Clip, cpu::clip, ref::clip, clip_attrs(-1.5f, 2.0f), kExact, -8, 8},
      {OpCode::Clip, cpu::clip, ref::clip, clip_attrs(0.0f, 6.0f), kExact, -8, 8},
      {OpCode::Clip, cpu::clip, ref::clip, clip_attrs(-kInf, kInf), kExact, -8, 8},
      {OpCode::Clip, cpu::clip, ref::clip, clip_attrs(3.0f, 1.0f), kExact, -8, 8},
      {OpCode::HardSigmoid, cpu::hard_sigmoid, ref::hard_sigmoid, hard_sigmoid_attrs(0.2f, 0.5f),
       {1e-7f, 1e-6f}, -8, 8},
      {OpCode::HardSigmoid, cpu::hard_sigmoid, ref::hard_sigmoid,
       hard_sigmoid_attrs(1.0f / 6.0f, 0.5f), {1e-7f, 1e-6f}, -8, 8},
      {OpCode::HardSwish, cpu::hard_swish, ref::hard_swish, OpAttrs{}, {1e-7f, 1e-6f}, -8, 8},
      {OpCode::Erf, cpu::erf, ref::erf, OpAttrs{}, kTranscendental, -5, 5},
      {OpCode::Sqrt, cpu::sqrt, ref::sqrt, OpAttrs{}, kExact, -1, 100},
      {OpCode::Exp, cpu::exp, ref::exp, OpAttrs{}, kTranscendental, -80, 80},
      {OpCode::Neg, cpu::neg, ref::neg, OpAttrs{}, kExact, -8, 8},
  };
}

// Random values in [lo, hi] plus specials: NaN, +-0, +-inf and op-specific edges.
Tensor UnaryInput(std::vector<int64_t> dims, uint32_t seed, float lo, float hi) {
  Tensor t = Random(std::move(dims), seed, lo, hi);
  const float special[] = {0.0f, -0.0f, kNaN, kInf, -kInf, -3.0f, 3.0f, 88.72283935546875f,
                           88.7f, 1e-30f, -100.0f, 1.5f, 2.0f, 6.0f};
  const size_t n = t.numel();
  for (size_t i = 0; i < n && i < sizeof(special) / sizeof(special[0]); ++i) {
    t.f()[i * 7 % n] = special[i];
  }
  return t;
}

using ImporterUnaryTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(ImporterUnaryTest);

TEST_P(ImporterUnaryTest, AllSizesWithSpecials) {
  for (const UnaryCase& c : UnaryCases()) {
    for (int64_t n : EdgeSizes()) {
      Tensor x = UnaryInput({n}, 21, c.lo, c.hi);
      SCOPED_TRACE(testing::Message() << to_string(c.op) << " n=" << n);
      CheckTwin(c.op, c.cpu, c.ref, c.attrs, {x.view}, c.tol, /*bitwise_threads=*/true);
    }
    Tensor x = UnaryInput({3, 5, 7}, 22, c.lo, c.hi);
    CheckTwin(c.op, c.cpu, c.ref, c.attrs, {x.view}, c.tol, true);
  }
}

TEST_P(ImporterUnaryTest, InPlace) {
  for (const UnaryCase& c : UnaryCases()) {
    for (int64_t n : {5, 17, 70001}) {
      Tensor x = UnaryInput({n}, 23, c.lo, c.hi), expected;
      TensorView in[] = {x.view};
      Shape(c.op, c.attrs, in, 1, &expected);
      RunKernel(c.ref, c.attrs, in, 1, &expected);
      RunKernel(c.cpu, c.attrs, in, 1, &x, 3);  // out == in
      EXPECT_TRUE(AllClose(x, expected, c.tol)) << to_string(c.op) << " n=" << n;
    }
  }
}

// The special values themselves, one by one: NaN stays NaN, exp overflows to inf exactly where
// the reference does, clip/hard_* keep NaN.
TEST_P(ImporterUnaryTest, SpecialValues) {
  for (const UnaryCase& c : UnaryCases()) {
    Tensor x = UnaryInput({14}, 24, 0.5f, 0.5f);
    SCOPED_TRACE(to_string(c.op));
    CheckTwin(c.op, c.cpu, c.ref, c.attrs, {x.view}, c.tol);
  }
}

using PowTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(PowTest);

Tensor Scalar(float v) {
  Tensor t(ScalarType::F32, {});
  t.f()[0] = v;
  return t;
}

TEST_P(PowTest, ScalarExponentFastPaths) {
  for (float e : {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 2.5f}) {
    for (int64_t n : EdgeSizes()) {
      Tensor x = Random({n}, 31, -4.0f, 4.0f);
      if (e == 0.5f || e == 2.5f) {
        for (size_t i = 0; i < x.numel(); ++i) x.f()[i] = std::fabs(x.f()[i]);
      }
      Tensor y = Scalar(e);
      SCOPED_TRACE(testing::Message() << "e=" << e << " n=" << n);
      // x * x is correctly rounded; x * x * x rounds twice (1 ulp).
      const Tolerance tol = e == 3.0f ? Tolerance{1e-6f, 3e-7f} : kExact;
      CheckTwin(OpCode::Pow, cpu::pow, ref::pow, OpAttrs{}, {x.view, y.view}, tol, true);
    }
  }
  // A [1, 1] exponent is a single element too.
  Tensor x = Random({7, 9}, 32), y(ScalarType::F32, {1, 1});
  y.f()[0] = 2.0f;
  CheckTwin(OpCode::Pow, cpu::pow, ref::pow, OpAttrs{}, {x.view, y.view}, kExact);
}

TEST_P(PowTest, BroadcastAndInPlace) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 5}, {5}}, {{4, 1, 3}, {5, 1}}, {{}, {17}}, {{17}, {17}}, {{0, 3}, {3}}, {{2}, {1, 1}},
  };
  for (const auto& [sa, sb] : shapes) {
    Tensor a = Random(sa, 33, 0.1f, 3.0f), b = Random(sb, 34, -2.0f, 2.0f);
    SCOPED_TRACE(testing::Message() << DimsText(a.view) << " ** " << DimsText(b.view));
    CheckTwin(OpCode::Pow, cpu::pow, ref::pow, OpAttrs{}, {a.view, b.view}, kExact);
  }
  Tensor a = Random({1037}, 35, -3.0f, 3.0f), e = Scalar(2.0f), expected;
  TensorView in[] = {a.view, e.view};
  Shape(OpCode::Pow, OpAttrs{}, in, 2, &expected);
  RunKernel(ref::pow, OpAttrs{}, in, 2, &expected);
  RunKernel(cpu::pow, OpAttrs{}, in, 2, &a, 3);  // out == x
  EXPECT_TRUE(AllClose(a, expected, kExact));
}

using WhereTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(WhereTest);

Tensor RandomBool(std::vector<int64_t> dims, uint32_t seed) {
  Tensor t(ScalarType::Bool, std::move(dims));
  std::mt19937 rng(seed);
  auto* p = reinterpret_cast<uint8_t*>(t.view.data);
  for (size_t i = 0; i < t.numel(); ++i) p[i] = rng() % 2;
  return t;
}

TEST_P(WhereTest, VectorPathsAllSizes) {
  for (int64_t n : EdgeSizes()) {
    Tensor c = RandomBool({n}, 41), x = Random({n}, 42), y = Random({n}, 43);
    Tensor xs = Scalar(-kInf), ys = Scalar(7.0f);
    SCOPED_TRACE(testing::Message() << "n=" << n);
    CheckTwin(OpCode::Where, cpu::where, ref::where, OpAttrs{}, {c.view, x.view, y.view}, kExact, true);
    CheckTwin(OpCode::Where, cpu::where, ref::where, OpAttrs{}, {c.view, x.view, ys.view}, kExact);
    CheckTwin(OpCode::Where, cpu::where, ref::where, OpAttrs{}, {c.view, xs.view, y.view}, kExact);
    CheckTwin(OpCode::Where, cpu::where, ref::where, OpAttrs{}, {c.view, xs.view, ys.view}, kExact);
  }
}

TEST_P(WhereTest, BroadcastAndInPlace) {
  const std::vector<std::vector<std::vector<int64_t>>> shapes = {
      {{2, 1, 4}, {3, 1}, {4}},  {{1, 1, 5, 5}, {2, 3, 5, 5}, {}}, {{5}, {3, 5}, {3, 1}},
      {{}, {4, 3}, {4, 3}},      {{0, 2}, {2}, {1}},              {{3, 1}, {1, 33}, {3, 33}},
  };
  for (const auto& s : shapes) {
    Tensor c = RandomBool(s[0], 44), x = Random(s[1], 45), y = Random(s[2], 46);
    SCOPED_TRACE(testing::Message() << DimsText(c.view) << " " << DimsText(x.view) << " "
                                    << DimsText(y.view));
    CheckTwin(OpCode::Where, cpu::where, ref::where, OpAttrs{}, {c.view, x.view, y.view}, kExact);
  }
  Tensor c = RandomBool({1037}, 47), x = Random({1037}, 48), y = Random({1037}, 49), expected;
  TensorView in[] = {c.view, x.view, y.view};
  Shape(OpCode::Where, OpAttrs{}, in, 3, &expected);
  RunKernel(ref::where, OpAttrs{}, in, 3, &expected);
  RunKernel(cpu::where, OpAttrs{}, in, 3, &y, 3);  // out == y
  EXPECT_TRUE(AllClose(y, expected, kExact));
}

using ReduceTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(ReduceTest);

OpAttrs reduce_attrs(std::vector<int> axes, bool keepdims) {
  OpAttrs a;
  a.kind = AttrKind::Reduce;
  a.count = static_cast<uint8_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) a.axes[i] = axes[i];
  a.keepdims = keepdims;
  return a;
}

// Both sum in double; only the last f32 rounding of differently ordered sums can differ.
constexpr Tolerance kReduceTol{1e-6f, 1e-6f};

TEST_P(ReduceTest, LastAxisAllSizes) {
  for (OpCode op : {OpCode::ReduceSum, OpCode::ReduceMean}) {
    const KernelFn c = op == OpCode::ReduceSum ? cpu::reduce_sum : cpu::reduce_mean;
    const KernelFn r = op == OpCode::ReduceSum ? ref::reduce_sum : ref::reduce_mean;
    for (int64_t n : EdgeSizes()) {
      Tensor x = Random({3, n}, 51, -1.0f, 3.0f);
      SCOPED_TRACE(testing::Message() << to_string(op) << " n=" << n);
      CheckTwin(op, c, r, reduce_attrs({-1}, true), {x.view}, kReduceTol, true);
      CheckTwin(op, c, r, reduce_attrs({1}, false), {x.view}, kReduceTol, true);
    }
  }
}

TEST_P(ReduceTest, AxisSets) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int>>> cases = {
      {{2, 3, 17, 5}, {2, 3}},  // NCHW spatial: trailing
      {{2, 3, 17, 5}, {}},      // everything
      {{2, 3, 17, 5}, {0}},     // leading: general path
      {{2, 3, 17, 5}, {1, 3}},  // interleaved
      {{4, 1, 33}, {0, 2}},     // trailing once the size-1 dim is ignored
      {{300, 64}, {0}},         {{64, 300}, {-1}}, {{5, 0, 3}, {1}}, {{0, 4}, {1}},
      {{}, {}},                 {{7, 9}, {-2, -1}},
  };
  for (const auto& [dims, axes] : cases) {
    for (bool keep : {true, false}) {
      Tensor x = Random(dims, 52, -2.0f, 2.0f);
      SCOPED_TRACE(testing::Message() << DimsText(x.view) << " axes " << axes.size() << " keep "
                                      << keep);
      CheckTwin(OpCode::ReduceSum, cpu::reduce_sum, ref::reduce_sum, reduce_attrs(axes, keep),
                {x.view}, kReduceTol, true);
      CheckTwin(OpCode::ReduceMean, cpu::reduce_mean, ref::reduce_mean, reduce_attrs(axes, keep),
                {x.view}, kReduceTol, true);
    }
  }
}

using BatchNormTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(BatchNormTest);

TEST_P(BatchNormTest, ShapesAndInPlace) {
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 4, 5}, {1, 16, 7, 9}, {4, 6}, {2, 5, 17}, {3, 300, 2, 1}, {0, 3, 2}, {2, 1, 70001 / 7},
  };
  for (const auto& dims : shapes) {
    const int64_t c = dims[1];
    Tensor x = Random(dims, 61, -3.0f, 3.0f), scale = Random({c}, 62, 0.5f, 1.5f),
           bias = Random({c}, 63), mean = Random({c}, 64), var = Random({c}, 65, 0.1f, 2.0f);
    OpAttrs attrs;
    attrs.kind = AttrKind::Norm;
    attrs.epsilon = 1e-5f;
    SCOPED_TRACE(DimsText(x.view));
    const std::vector<TensorView> in = {x.view, scale.view, bias.view, mean.view, var.view};
    CheckTwin(OpCode::BatchNorm, cpu::batch_norm, ref::batch_norm, attrs, in, {2e-6f, 1e-5f}, true);
    Tensor expected;
    Shape(OpCode::BatchNorm, attrs, in.data(), 5, &expected);
    RunKernel(ref::batch_norm, attrs, in.data(), 5, &expected);
    RunKernel(cpu::batch_norm, attrs, in.data(), 5, &x, 3);  // out == x
    EXPECT_TRUE(AllClose(x, expected, {2e-6f, 1e-5f}));
  }
}

using PadTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(PadTest);

OpAttrs pad_attrs(std::vector<int64_t> pads, PadMode mode, float value = 0.0f) {
  OpAttrs a;
  a.kind = AttrKind::Pad;
  a.count = static_cast<uint8_t>(pads.size() / 2);
  for (size_t i = 0; i < pads.size(); ++i) a.pads[i] = pads[i];
  a.pad_mode = mode;
  a.pad_value = value;
  return a;
}

TEST_P(PadTest, ModesAndShapes) {
  struct Case {
    std::vector<int64_t> dims;
    std::vector<int64_t> pads;
  };
  const std::vector<Case> cases = {
      {{1, 3, 8, 9}, {0, 0, 1, 1, 0, 0, 1, 1}},     // NCHW spatial
      {{2, 3, 17, 33}, {0, 0, 2, 3, 0, 0, 1, 0}},   // asymmetric
      {{2, 4, 5}, {1, 0, 2, 0, 1, 2}},              // every axis
      {{4, 6}, {-1, 2, 1, -3}},                     // crop and pad on one axis
      {{5, 7}, {0, -2, 0, -3}},                     // crop only
      {{3}, {2, 2}},                                // rank 1
      {{1, 1, 1037}, {0, 0, 5, 0, 0, 7}},
      {{2, 3}, {0, 0, 0, 0}},                       // no-op
  };
  for (const Case& c : cases) {
    for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
      Tensor x = Random(c.dims, 71);
      const OpAttrs attrs = pad_attrs(c.pads, mode, 0.25f);
      TensorView out;
      ErrorContext ectx;
      if (!find_op_info(OpCode::Pad)->shape(attrs, &x.view, 1, &out, 1, {}, &ectx).is_ok()) {
        continue;  // e.g. reflect pads >= dim
      }
      SCOPED_TRACE(testing::Message() << DimsText(x.view) << " mode " << int(mode));
      CheckTwin(OpCode::Pad, cpu::pad, ref::pad, attrs, {x.view}, kExact, true);
    }
  }
  // Constant padding of an empty axis, a scalar, and hostile pads whose output is small.
  Tensor empty(ScalarType::F32, {0, 3});
  CheckTwin(OpCode::Pad, cpu::pad, ref::pad, pad_attrs({2, 0, 1, 0}, PadMode::Constant, 4.0f),
            {empty.view}, kExact);
  Tensor scalar = Scalar(3.0f);
  CheckTwin(OpCode::Pad, cpu::pad, ref::pad, pad_attrs({}, PadMode::Constant), {scalar.view},
            kExact);
  Tensor x = Random({3}, 72);
  CheckTwin(OpCode::Pad, cpu::pad, ref::pad,
            pad_attrs({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()},
                      PadMode::Constant, 9.0f),
            {x.view}, kExact);
  CheckTwin(OpCode::Pad, cpu::pad, ref::pad,
            pad_attrs({std::numeric_limits<int64_t>::max() - 5, 4 - std::numeric_limits<int64_t>::max()},
                      PadMode::Edge),
            {x.view}, kExact);
}

}  // namespace
}  // namespace ember::kernels::cpu_test
