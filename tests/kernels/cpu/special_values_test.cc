// kernels/cpu against kernels/reference on NaN, ±Inf, ±0, huge and tiny inputs, on every compiled
// Highway target: the special values sit at every lane position (vector body and masked tail) for
// sizes around every vector width. NaN must match NaN, an infinity the same infinity; ops whose
// result sign is exact (relu, clip, neg, sqrt, the sums, max pool, ...) must also give the
// reference's signed zero. The reference's semantics are checked against PyTorch / onnxruntime by
// tests/kernels/reference (SpecialValues suite); kernels/reference/README.md has the table.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quantized_linear.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/paged_attention.h"
#include "kernels/reference/quantize.h"
#include "kernels/reference/quantized_linear.h"
#include "runtime/core/float_codecs.h"
#include "tests/kernels/cpu/test_util.h"
#include "tests/kernels/reference/paged_attention_test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();

// The special values of make_special_golden.py (27: coprime with every vector width).
const float kSpecial[] = {kNaN,  kInf,  -kInf,  0.0f,   -0.0f,  1.0f,   -1.0f, 0.5f,   -2.5f,
                          3.0f,  -3.0f, 6.0f,   7.5f,   20.0f,  -20.0f, 88.5f, 89.0f,  -104.0f,
                          -110.0f, 1e30f, -1e30f, kMax, -kMax, 1e-40f, -1e-40f,
                          std::numeric_limits<float>::min(), 1e-7f};
constexpr size_t kSpecialCount = sizeof(kSpecial) / sizeof(kSpecial[0]);

// n elements cycling through kSpecial from `shift`, so each value meets each lane position.
Tensor SpecialTensor(std::vector<int64_t> dims, size_t shift) {
  Tensor t(ScalarType::F32, std::move(dims));
  for (size_t i = 0; i < t.numel(); ++i) t.f()[i] = kSpecial[(i + shift) % kSpecialCount];
  return t;
}

bool SameSpecial(float a, float e, Tolerance tol, bool signed_zero) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (std::isinf(a) || std::isinf(e)) return a == e;
  if (a == e) return !signed_zero || a != 0.0f || std::signbit(a) == std::signbit(e);
  return std::fabs(a - e) <= tol.abs + tol.rel * std::fabs(e);
}

::testing::AssertionResult AllSame(const Tensor& actual, const Tensor& expected, Tolerance tol,
                                   bool signed_zero, const Tensor* input = nullptr) {
  if (actual.numel() != expected.numel()) {
    return ::testing::AssertionFailure() << "numel " << actual.numel() << " vs " << expected.numel();
  }
  for (size_t i = 0; i < actual.numel(); ++i) {
    const float a = actual.f()[i], e = expected.f()[i];
    if (!SameSpecial(a, e, tol, signed_zero)) {
      auto failure = ::testing::AssertionFailure();
      failure << "first mismatch at " << i << ": got " << a << (std::signbit(a) ? " (sign set)" : "")
              << ", reference " << e << (std::signbit(e) ? " (sign set)" : "");
      if (input != nullptr && input->numel() == actual.numel()) failure << " for input " << input->f()[i];
      return failure;
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs cpu (1 and 3 threads) and reference and compares with AllSame.
void CheckSpecial(OpCode op, KernelFn cpu, KernelFn reference, const OpAttrs& attrs,
                  const std::vector<TensorView>& in, Tolerance tol, bool signed_zero,
                  const Tensor* input = nullptr) {
  Tensor expected, one, three;
  Shape(op, attrs, in.data(), in.size(), &expected);
  Shape(op, attrs, in.data(), in.size(), &one);
  Shape(op, attrs, in.data(), in.size(), &three);
  RunKernel(reference, attrs, in.data(), in.size(), &expected);
  RunKernel(cpu, attrs, in.data(), in.size(), &one, 1);
  RunKernel(cpu, attrs, in.data(), in.size(), &three, 3);
  EXPECT_TRUE(AllSame(one, expected, tol, signed_zero, input)) << to_string(op) << " (1 thread)";
  EXPECT_TRUE(AllSame(three, expected, tol, signed_zero, input)) << to_string(op) << " (3 threads)";
}

using SpecialValuesTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(SpecialValuesTest);

struct UnaryCase {
  const char* name;
  OpCode op;
  KernelFn cpu;
  KernelFn ref;
  Tolerance tol;
  bool signed_zero;
  OpAttrs attrs;
};

std::vector<UnaryCase> UnaryCases() {
  OpAttrs none, gelu_erf, gelu_tanh, relu6, clip_max, hard_sigmoid;
  gelu_erf.kind = gelu_tanh.kind = AttrKind::Gelu;
  gelu_erf.gelu_approx = GeluApprox::None;
  gelu_tanh.gelu_approx = GeluApprox::Tanh;
  relu6.kind = clip_max.kind = AttrKind::Clip;
  relu6.clip_min = 0.0f;
  relu6.clip_max = 6.0f;
  clip_max.clip_min = -1.0f;
  clip_max.clip_max = kMax;
  hard_sigmoid.kind = AttrKind::HardSigmoid;
  hard_sigmoid.alpha = 1.0f / 6.0f;
  hard_sigmoid.beta = 0.5f;
  return {
      {"relu", OpCode::Relu, cpu::relu, ref::relu, kExact, true, none},
      {"gelu_erf", OpCode::Gelu, cpu::gelu, ref::gelu, kTranscendental, false, gelu_erf},
      {"gelu_tanh", OpCode::Gelu, cpu::gelu, ref::gelu, kTranscendental, false, gelu_tanh},
      {"silu", OpCode::Silu, cpu::silu, ref::silu, kTranscendental, false, none},
      {"sigmoid", OpCode::Sigmoid, cpu::sigmoid, ref::sigmoid, kTranscendental, false, none},
      {"tanh", OpCode::Tanh, cpu::tanh, ref::tanh, kTranscendental, false, none},
      {"erf", OpCode::Erf, cpu::erf, ref::erf, kTranscendental, false, none},
      {"sqrt", OpCode::Sqrt, cpu::sqrt, ref::sqrt, kExact, true, none},
      {"exp", OpCode::Exp, cpu::exp, ref::exp, kTranscendental, false, none},
      {"neg", OpCode::Neg, cpu::neg, ref::neg, kExact, true, none},
      {"clip_relu6", OpCode::Clip, cpu::clip, ref::clip, kExact, true, relu6},
      {"clip_flt_max", OpCode::Clip, cpu::clip, ref::clip, kExact, true, clip_max},
      {"hard_sigmoid", OpCode::HardSigmoid, cpu::hard_sigmoid, ref::hard_sigmoid, kTranscendental, false,
       hard_sigmoid},
      {"hard_swish", OpCode::HardSwish, cpu::hard_swish, ref::hard_swish, kTranscendental, false, none},
  };
}

// relu(NaN) was 0 on x86 (maxps returns its second operand for NaN) and relu(-0) was +0.
TEST_P(SpecialValuesTest, UnaryOpsMatchTheReference) {
  for (const UnaryCase& c : UnaryCases()) {
    for (int64_t n : EdgeSizes()) {
      for (size_t shift : {size_t{0}, size_t{5}}) {
        const Tensor x = SpecialTensor({n}, shift);
        SCOPED_TRACE(testing::Message() << c.name << " n=" << n << " shift=" << shift);
        CheckSpecial(c.op, c.cpu, c.ref, c.attrs, {x.view}, c.tol, c.signed_zero, &x);
      }
    }
  }
}

TEST_P(SpecialValuesTest, ReluKeepsNaNAndNegativeZero) {
  const Tensor x = SpecialTensor({17}, 0);  // NaN in lane 0 of the body, -0 in lane 4
  Tensor out;
  Shape(OpCode::Relu, OpAttrs{}, &x.view, 1, &out);
  RunKernel(cpu::relu, OpAttrs{}, &x.view, 1, &out);
  EXPECT_TRUE(std::isnan(out.f()[0]));
  EXPECT_EQ(out.f()[1], kInf);
  EXPECT_EQ(out.f()[2], 0.0f);
  EXPECT_FALSE(std::signbit(out.f()[2]));  // relu(-inf) = +0
  EXPECT_EQ(out.f()[4], 0.0f);
  EXPECT_TRUE(std::signbit(out.f()[4]));   // relu(-0) = -0 (torch, onnxruntime)
  const Tensor tail = SpecialTensor({3}, 0);  // NaN in the masked tail
  Shape(OpCode::Relu, OpAttrs{}, &tail.view, 1, &out);
  RunKernel(cpu::relu, OpAttrs{}, &tail.view, 1, &out);
  EXPECT_TRUE(std::isnan(out.f()[0]));
}

TEST_P(SpecialValuesTest, PowWithScalarExponentsMatchesTheReference) {
  for (float e : {0.0f, 1.0f, 2.0f, 3.0f, 0.5f, -1.0f, kNaN, kInf}) {
    for (int64_t n : {1, 7, 17, 33, 100}) {
      const Tensor x = SpecialTensor({n}, 3);
      Tensor y(ScalarType::F32, {});
      y.f()[0] = e;
      SCOPED_TRACE(testing::Message() << "exponent " << e << " n=" << n);
      // The cube is x * x * x in f32 (two roundings): within 2 ulp of the reference's pow.
      CheckSpecial(OpCode::Pow, cpu::pow, ref::pow, OpAttrs{}, {x.view, y.view}, {0.0f, 2.5e-7f}, true, &x);
    }
  }
}

// Every pair of special values, same shape and broadcast (scalar operands in both positions).
TEST_P(SpecialValuesTest, BinaryOpsMatchTheReferenceExactly) {
  const KernelFn cpus[] = {cpu::add, cpu::sub, cpu::mul, cpu::div};
  const KernelFn refs[] = {ref::add, ref::sub, ref::mul, ref::div};
  const OpCode ops[] = {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div};
  for (int k = 0; k < 4; ++k) {
    for (int64_t n : {int64_t(kSpecialCount), int64_t(kSpecialCount * kSpecialCount)}) {
      Tensor a(ScalarType::F32, {n}), b(ScalarType::F32, {n});
      for (int64_t i = 0; i < n; ++i) {
        a.f()[i] = kSpecial[size_t(i) % kSpecialCount];
        b.f()[i] = kSpecial[size_t(i) / kSpecialCount % kSpecialCount];
      }
      SCOPED_TRACE(testing::Message() << to_string(ops[k]) << " n=" << n);
      CheckSpecial(ops[k], cpus[k], refs[k], OpAttrs{}, {a.view, b.view}, kExact, true);
    }
    for (float s : {kNaN, kInf, -0.0f, 0.0f}) {
      Tensor scalar(ScalarType::F32, {1});
      scalar.f()[0] = s;
      const Tensor x = SpecialTensor({37}, 1);
      SCOPED_TRACE(testing::Message() << to_string(ops[k]) << " scalar " << s);
      CheckSpecial(ops[k], cpus[k], refs[k], OpAttrs{}, {x.view, scalar.view}, kExact, true);
      CheckSpecial(ops[k], cpus[k], refs[k], OpAttrs{}, {scalar.view, x.view}, kExact, true);
    }
  }
}

// One special value at position p of each row (p over every lane position of the body and tail).
Tensor RowsWithOne(int64_t rows, int64_t n, float special, float fill_scale) {
  Tensor t = Random({rows, n}, 7, -fill_scale, fill_scale);
  for (int64_t r = 0; r < rows; ++r) t.f()[r * n + (r % n)] = special;
  return t;
}

TEST_P(SpecialValuesTest, SoftmaxRowsWithNaNInfAndFullyMasked) {
  for (int64_t n : {1, 3, 4, 7, 8, 9, 16, 17, 33, 100}) {
    const int64_t rows = n < 17 ? n : 17;
    for (float s : {kNaN, kInf, -kInf}) {
      const Tensor x = RowsWithOne(rows, n, s, 4.0f);
      for (int32_t axis : {1, 0}) {
        OpAttrs attrs;
        attrs.kind = AttrKind::Axis;
        attrs.axis = axis;
        SCOPED_TRACE(testing::Message() << "n=" << n << " special " << s << " axis " << axis);
        CheckSpecial(OpCode::Softmax, cpu::softmax, ref::softmax, attrs, {x.view}, kTranscendental, false);
      }
    }
    // A fully masked row (all -inf, as an attention mask makes it): NaN, as torch and onnxruntime.
    Tensor masked = Random({2, n}, 9);
    for (int64_t i = 0; i < n; ++i) masked.f()[i] = -kInf;
    OpAttrs attrs;
    attrs.kind = AttrKind::Axis;
    attrs.axis = -1;
    SCOPED_TRACE(testing::Message() << "masked n=" << n);
    CheckSpecial(OpCode::Softmax, cpu::softmax, ref::softmax, attrs, {masked.view}, kTranscendental, false);
    Tensor out;
    Shape(OpCode::Softmax, attrs, &masked.view, 1, &out);
    RunKernel(cpu::softmax, attrs, &masked.view, 1, &out);
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(out.f()[i])) << i;
    for (int64_t i = n; i < 2 * n; ++i) EXPECT_FALSE(std::isnan(out.f()[i])) << i;
  }
}

TEST_P(SpecialValuesTest, NormsAndReductionsPropagateNaNAndInf) {
  for (int64_t n : {1, 3, 4, 7, 8, 9, 16, 17, 33, 100}) {
    const int64_t rows = n < 17 ? n : 17;
    for (float s : {kNaN, kInf, -kInf, -0.0f}) {
      const Tensor x = RowsWithOne(rows, n, s, 2.0f);
      const Tensor w = Random({n}, 11, 0.5f, 1.5f), b = Random({n}, 12);
      SCOPED_TRACE(testing::Message() << "n=" << n << " special " << s);
      OpAttrs ln;
      ln.kind = AttrKind::Norm;
      ln.axis = -1;
      ln.epsilon = 1e-5f;
      CheckSpecial(OpCode::LayerNorm, cpu::layer_norm, ref::layer_norm, ln, {x.view, w.view, b.view},
                   {1e-4f, 1e-4f}, false);
      CheckSpecial(OpCode::RmsNorm, cpu::rms_norm, ref::rms_norm, ln, {x.view, w.view}, {1e-5f, 1e-5f}, false);
      for (bool mean : {false, true}) {
        OpAttrs red;
        red.kind = AttrKind::Reduce;
        red.count = 1;
        red.axes[0] = 1;
        red.keepdims = true;
        CheckSpecial(mean ? OpCode::ReduceMean : OpCode::ReduceSum, mean ? cpu::reduce_mean : cpu::reduce_sum,
                     mean ? ref::reduce_mean : ref::reduce_sum, red, {x.view}, {1e-6f, 1e-5f}, true);
        red.axes[0] = 0;  // the strided (general axis) path
        CheckSpecial(mean ? OpCode::ReduceMean : OpCode::ReduceSum, mean ? cpu::reduce_mean : cpu::reduce_sum,
                     mean ? ref::reduce_mean : ref::reduce_sum, red, {x.view}, {1e-6f, 1e-5f}, true);
      }
    }
    // A row of -0 sums to -0 (onnxruntime; the IEEE sum), on both reduction paths.
    Tensor zeros(ScalarType::F32, {3, n});
    for (size_t i = 0; i < zeros.numel(); ++i) zeros.f()[i] = -0.0f;
    OpAttrs red;
    red.kind = AttrKind::Reduce;
    red.count = 1;
    red.keepdims = true;
    for (int64_t axis : {1, 0}) {
      red.axes[0] = axis;
      Tensor out;
      Shape(OpCode::ReduceSum, red, &zeros.view, 1, &out);
      RunKernel(cpu::reduce_sum, red, &zeros.view, 1, &out);
      for (size_t i = 0; i < out.numel(); ++i) {
        EXPECT_TRUE(out.f()[i] == 0.0f && std::signbit(out.f()[i])) << "axis " << axis << " element " << i;
      }
    }
  }
}

TEST_P(SpecialValuesTest, BatchNormAndSiluMul) {
  for (int64_t plane : {1, 5, 16, 17, 40}) {
    const Tensor x = SpecialTensor({2, 3, plane}, 2);
    Tensor scale(ScalarType::F32, {3}), bias(ScalarType::F32, {3}), mean(ScalarType::F32, {3}),
        var(ScalarType::F32, {3});
    const float sv[] = {1.0f, 0.0f, -2.0f}, bv[] = {0.5f, 1.0f, 0.0f}, mv[] = {0.0f, 1.0f, -1.0f},
                vv[] = {1.0f, 4.0f, 0.0f};
    for (int c = 0; c < 3; ++c) scale.f()[c] = sv[c], bias.f()[c] = bv[c], mean.f()[c] = mv[c], var.f()[c] = vv[c];
    OpAttrs attrs;
    attrs.kind = AttrKind::Norm;
    attrs.epsilon = 1e-5f;
    SCOPED_TRACE(testing::Message() << "plane " << plane);
    CheckSpecial(OpCode::BatchNorm, cpu::batch_norm, ref::batch_norm, attrs,
                 {x.view, scale.view, bias.view, mean.view, var.view}, {1e-5f, 1e-5f}, false);
  }
  for (int64_t n : EdgeSizes()) {
    if (n > 2000) continue;
    // u's shift keeps ±inf away from g = -104 and -110, whose silu is subnormal in the reference
    // and flushed to -0 by the cpu exp (README: cpu limits), so inf * it would be NaN against ±inf.
    const Tensor g = SpecialTensor({n}, 0), u = SpecialTensor({n}, 13);
    SCOPED_TRACE(testing::Message() << "silu_mul n=" << n);
    CheckSpecial(OpCode::SiluMul, cpu::silu_mul, ref::silu_mul, OpAttrs{}, {g.view, u.view}, kTranscendental,
                 false);
  }
}

TEST_P(SpecialValuesTest, PoolingWithNaNAndInfAtEveryPosition) {
  for (int64_t w : {5, 9, 17, 40}) {
    for (float s : {kNaN, kInf, -kInf}) {
      // One special value per plane, at a different position in each (interior and border columns).
      const int64_t planes = 12, h = 4;
      Tensor x = Random({1, planes, h, w}, 13);
      for (int64_t p = 0; p < planes; ++p) x.f()[p * h * w + (p * 7) % (h * w)] = s;
      for (int64_t stride : {1, 2}) {
        for (bool is_max : {true, false}) {
          OpAttrs attrs;
          attrs.kind = AttrKind::Pool2d;
          attrs.kernel[0] = attrs.kernel[1] = 3;
          attrs.stride[0] = attrs.stride[1] = stride;
          attrs.padding[0] = attrs.padding[1] = attrs.padding[2] = attrs.padding[3] = 1;
          attrs.dilation[0] = attrs.dilation[1] = 1;
          SCOPED_TRACE(testing::Message() << (is_max ? "max" : "avg") << " w=" << w << " special " << s
                                          << " stride " << stride);
          CheckSpecial(is_max ? OpCode::MaxPool2d : OpCode::AvgPool2d, is_max ? cpu::max_pool2d : cpu::avg_pool2d,
                       is_max ? ref::max_pool2d : ref::avg_pool2d, attrs, {x.view}, {1e-6f, 1e-5f}, is_max);
        }
      }
      CheckSpecial(OpCode::GlobalAvgPool2d, cpu::global_avg_pool2d, ref::global_avg_pool2d, OpAttrs{}, {x.view},
                   {1e-6f, 1e-5f}, false);
    }
  }
}

// Max pool over windows of +0 and -0 (and negatives): the reference keeps the first of equal zeros
// (x > best), so the sign of a zero output depends on the order; x86 max would return the last.
TEST_P(SpecialValuesTest, MaxPoolSignedZeros) {
  const float values[] = {0.0f, -0.0f, -1.0f, -0.0f, 0.0f, -2.0f, -0.0f};
  for (int64_t w : {5, 9, 17, 40}) {
    Tensor x(ScalarType::F32, {1, 3, 6, w});
    for (size_t i = 0; i < x.numel(); ++i) x.f()[i] = values[(i * 5 + i / 7) % 7];
    for (int64_t stride : {1, 2}) {
      OpAttrs attrs;
      attrs.kind = AttrKind::Pool2d;
      attrs.kernel[0] = attrs.kernel[1] = 3;
      attrs.stride[0] = attrs.stride[1] = stride;
      attrs.padding[0] = attrs.padding[1] = attrs.padding[2] = attrs.padding[3] = 1;
      attrs.dilation[0] = attrs.dilation[1] = 1;
      SCOPED_TRACE(testing::Message() << "w=" << w << " stride " << stride);
      CheckSpecial(OpCode::MaxPool2d, cpu::max_pool2d, ref::max_pool2d, attrs, {x.view}, kExact, true);
    }
  }
}

// NaN and Inf (and Inf * 0) through the accumulation of matmul, linear and conv: one special value
// in an operand, at positions that land in the micro-kernels' bodies and edges.
TEST_P(SpecialValuesTest, GemmAndConvPropagateNaNAndInf) {
  for (int64_t m : {1, 5, 13}) {
    for (int64_t k : {1, 7, 33}) {
      for (int64_t n : {1, 9, 35}) {
        for (float s : {kNaN, kInf}) {
          for (int which : {0, 1}) {
            Tensor a = Random({m, k}, 17), b = Random({k, n}, 18), w = Random({n, k}, 19), bias = Random({n}, 20);
            if (which == 0) {
              a.f()[(m * k) / 2] = s;
            } else {
              b.f()[(k * n) / 3] = s;
              w.f()[(n * k) / 3] = s;
            }
            if (k > 1) a.f()[0] = 0.0f;  // Inf * 0 when the special value meets it
            SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << " n " << n << " special " << s
                                            << (which == 0 ? " in x" : " in w"));
            CheckSpecial(OpCode::MatMul, cpu::matmul, ref::matmul, OpAttrs{}, {a.view, b.view}, {1e-4f, 1e-4f},
                         false);
            OpAttrs lin;
            lin.kind = AttrKind::Linear;
            CheckSpecial(OpCode::Linear, cpu::linear, ref::linear, lin, {a.view, w.view, bias.view},
                         {1e-4f, 1e-4f}, false);
          }
        }
      }
    }
  }
  for (float s : {kNaN, kInf}) {
    for (int64_t wd : {6, 19}) {
      Tensor x = Random({1, 3, 7, wd}, 21), w = Random({8, 3, 3, 3}, 22), bias = Random({8}, 23);
      x.f()[3 * wd + 2] = s;          // channel 0, row 3
      w.f()[5 * 27 + 13] = s;         // output channel 5, centre tap of channel 1
      OpAttrs attrs;
      attrs.kind = AttrKind::Conv2d;
      attrs.stride[0] = attrs.stride[1] = 1;
      attrs.padding[0] = attrs.padding[1] = attrs.padding[2] = attrs.padding[3] = 1;
      attrs.dilation[0] = attrs.dilation[1] = 1;
      attrs.groups = 1;
      SCOPED_TRACE(testing::Message() << "conv w=" << wd << " special " << s);
      CheckSpecial(OpCode::Conv2d, cpu::conv2d, ref::conv2d, attrs, {x.view, w.view, bias.view}, {1e-4f, 1e-4f},
                   false);
    }
  }
}

// A NaN or +Inf key / value / query element at one position: the reference gives NaN for every
// query that attends to it (a NaN score wins the max; an infinite score makes exp(inf - inf) = NaN;
// an infinite value gives ±inf or NaN); the cpu kernel must too (it dropped NaN scores).
TEST_P(SpecialValuesTest, PagedAttentionPropagatesNaNAndInf) {
  using paged_test::CaseSpec;
  for (float s : {kNaN, kInf}) {
    for (int which : {0, 1, 2}) {  // k, v, q
      for (int64_t pos : {0, 5, 17}) {
        CaseSpec c;
        c.q_heads = 4;
        c.kv_heads = 2;
        c.head_dim = 32;
        c.block_size = 16;
        c.seqs = {{0, 20}};  // one prefill: every key and value comes from this step's k / v
        paged_test::Step st = paged_test::MakeStep(c);
        std::vector<float>& target = which == 0 ? st.k : (which == 1 ? st.v : st.q);
        const int64_t heads = which == 2 ? c.q_heads : c.kv_heads;
        target[size_t((pos * heads + 1) * c.head_dim + 3)] = s;  // head 1, element 3
        const float scale = 1.0f / std::sqrt(32.0f);
        auto run = [&](bool use_cpu) {
          std::vector<uint8_t> kc = st.k_cache, vc = st.v_cache;
          std::vector<float> out(size_t(st.T * c.q_heads * c.head_dim), 12345.0f);
          ErrorContext error;
          KernelContext context;
          const Status status =
              use_cpu ? cpu::paged_attention(context, st.q.data(), st.k.data(), st.v.data(), st.T, st.S, c.q_heads,
                                             c.kv_heads, c.head_dim, c.dtype, kc.data(), vc.data(), st.block_count,
                                             c.block_size, c.cache_scale, st.slots.data(), st.tables.data(),
                                             st.max_blocks, st.lens.data(), st.starts.data(), scale, out.data(), &error)
                      : ref::paged_attention(st.q.data(), st.k.data(), st.v.data(), st.T, st.S, c.q_heads,
                                             c.kv_heads, c.head_dim, c.dtype, kc.data(), vc.data(), st.block_count,
                                             c.block_size, c.cache_scale, st.slots.data(), st.tables.data(),
                                             st.max_blocks, st.lens.data(), st.starts.data(), scale, out.data(),
                                             &error);
          EXPECT_TRUE(status.is_ok()) << error.message;
          return out;
        };
        const std::vector<float> want = run(false), got = run(true);
        SCOPED_TRACE(testing::Message() << "special " << s << " in " << "kvq"[which] << " at " << pos);
        size_t non_finite = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_TRUE(SameSpecial(got[i], want[i], {1e-4f, 1e-3f}, false))
              << "element " << i << ": got " << got[i] << ", reference " << want[i];
          non_finite += std::isfinite(want[i]) ? 0 : 1;
        }
        EXPECT_GT(non_finite, 0u);  // the case does reach the special value (an inf value: ±inf)
      }
    }
  }
}

// The quantized linears with a NaN / ±Inf activation (weights quantized from finite values): the
// GEMV (m <= 4) and GEMM paths, weight-only FP8 / MXFP8 / NVFP4 / bf16 and W8A8 (an infinite
// element makes the row's activation scale infinite, so the whole row of y is NaN).
TEST_P(SpecialValuesTest, QuantizedLinearsPropagateNaNAndInf) {
  constexpr int64_t n = 35, k = 64;
  const Tensor wf = Random({n, k}, 31);
  std::vector<uint8_t> fp8(n * k), mx(n * k), mx_scales(n * k / 32), nv(n * k / 2), nv_scales(n * k / 16);
  std::vector<float> fp8_scales(n);
  std::vector<uint16_t> bf(n * k);
  float global = 0.0f;
  ASSERT_TRUE(ref::quantize_fp8_e4m3(wf.f(), n, k, 1, k, fp8.data(), fp8_scales.data()).is_ok());
  ASSERT_TRUE(ref::quantize_mxfp8(wf.f(), n, k, mx.data(), mx_scales.data()).is_ok());
  ASSERT_TRUE(ref::quantize_nvfp4(wf.f(), n, k, nv.data(), nv_scales.data(), &global).is_ok());
  for (int64_t i = 0; i < n * k; ++i) bf[size_t(i)] = f32_to_bf16(wf.f()[i]);
  const Tensor bias = Random({n}, 32);
  for (int64_t m : {1, 3, 6}) {
    for (float s : {kNaN, kInf, -kInf}) {
      Tensor x = Random({m, k}, 33, -2.0f, 2.0f);
      x.f()[(m - 1) * k + 37] = s;  // the last row
      std::vector<uint8_t> scratch(cpu::quantized_linear_scratch_bytes(m, k, 1, true));
      KernelContext ctx;
      ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
      for (int layout = 0; layout < 5; ++layout) {
        std::vector<float> want(size_t(m * n)), got(size_t(m * n));
        Status a, b;
        switch (layout) {
          case 0:
            a = ref::linear_fp8_e4m3(x.f(), m, fp8.data(), n, k, 1, k, fp8_scales.data(), bias.f(), want.data());
            b = cpu::linear_fp8_e4m3(ctx, x.f(), m, fp8.data(), n, k, 1, k, fp8_scales.data(), bias.f(), got.data());
            break;
          case 1:
            a = ref::linear_mxfp8(x.f(), m, mx.data(), n, k, mx_scales.data(), bias.f(), want.data());
            b = cpu::linear_mxfp8(ctx, x.f(), m, mx.data(), n, k, mx_scales.data(), bias.f(), got.data());
            break;
          case 2:
            a = ref::linear_nvfp4(x.f(), m, nv.data(), n, k, nv_scales.data(), global, bias.f(), want.data());
            b = cpu::linear_nvfp4(ctx, x.f(), m, nv.data(), n, k, nv_scales.data(), global, bias.f(), got.data());
            break;
          case 3:
            a = ref::linear_bf16(x.f(), m, bf.data(), n, k, bias.f(), want.data());
            b = cpu::linear_bf16(ctx, x.f(), m, bf.data(), n, k, bias.f(), got.data());
            break;
          default:
            a = ref::linear_fp8_e4m3_w8a8(x.f(), m, fp8.data(), n, k, 1, k, fp8_scales.data(), bias.f(),
                                          want.data());
            b = cpu::linear_fp8_e4m3_w8a8(ctx, x.f(), m, fp8.data(), n, k, 1, k, fp8_scales.data(), bias.f(),
                                          got.data());
            break;
        }
        ASSERT_TRUE(a.is_ok() && b.is_ok());
        SCOPED_TRACE(testing::Message() << "layout " << layout << " m " << m << " special " << s);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_TRUE(SameSpecial(got[i], want[i], {1e-4f, 1e-4f}, false))
              << "element " << i << ": got " << got[i] << ", reference " << want[i];
        }
        for (int64_t j = 0; j < n; ++j) {  // the special value reaches every output of its row
          const float v = want[size_t((m - 1) * n + j)];
          EXPECT_TRUE(layout == 4 || std::isnan(s) ? std::isnan(v) : !std::isfinite(v)) << j << ": " << v;
        }
        for (int64_t i = 0; i < (m - 1) * n; ++i) EXPECT_TRUE(std::isfinite(want[size_t(i)])) << i;
      }
    }
  }
}

// sample on rows with NaN / ±Inf logits: the cpu kernel gives the reference's ids and logprobs for
// greedy, tempered, top-k and top-p rows (deterministic: same for 1 and 3 threads), and the
// documented values (kernels/reference/ops.h) for the degenerate rows.
TEST_P(SpecialValuesTest, SampleWithNonFiniteLogitsIsDeterministic) {
  constexpr int64_t kV = 37, kRows = 6;
  const float rows[kRows][4] = {
      {kNaN, kNaN, kNaN, kNaN},     // every logit NaN
      {kNaN, 1.0f, kInf, 2.0f},     // a +inf
      {-kInf, -kInf, -kInf, -kInf}, // fully masked
      {kNaN, -kInf, 3.0f, 2.5f},    // NaN and -inf among finite logits
      {kInf, kNaN, kInf, 0.0f},     // two +inf
      {0.5f, kNaN, 1.5f, -1.0f},    // one NaN
  };
  const float temperatures[] = {0.0f, 0.7f};
  const int32_t top_ks[] = {0, 3};
  const float top_ps[] = {1.0f, 0.9f};
  for (float temperature : temperatures) {
    for (int32_t top_k : top_ks) {
      for (float top_p : top_ps) {
        Tensor logits(ScalarType::F32, {kRows, kV}), temp(ScalarType::F32, {kRows}), k(ScalarType::I32, {kRows}),
            tp(ScalarType::F32, {kRows}), penalty(ScalarType::F32, {kRows}), seed(ScalarType::I32, {kRows}),
            position(ScalarType::I32, {kRows}), history(ScalarType::I32, {kRows, 2}), hlen(ScalarType::I32, {kRows});
        for (int64_t r = 0; r < kRows; ++r) {
          const bool fill_like = r == 0 || r == 2;  // the degenerate rows stay degenerate
          for (int64_t i = 0; i < kV; ++i) {
            logits.f()[r * kV + i] = fill_like ? rows[r][0] : float((i * 7 + r) % 11) * 0.25f - 1.0f;
          }
          for (int64_t i = 0; i < 4; ++i) logits.f()[r * kV + i * 9 + 1] = rows[r][i];  // ids 1, 10, 19, 28
          temp.f()[r] = temperature;
          k.view.data_as<int32_t>()[r] = top_k;
          tp.f()[r] = top_p;
          penalty.f()[r] = 1.3f;
          seed.view.data_as<int32_t>()[r] = int32_t(r * 977 + 5);
          position.view.data_as<int32_t>()[r] = int32_t(r + 3);
          history.view.data_as<int32_t>()[r * 2] = 10;  // a penalized +inf / NaN stays what it is
          history.view.data_as<int32_t>()[r * 2 + 1] = 2;
          hlen.view.data_as<int32_t>()[r] = 2;
        }
        const std::vector<TensorView> in = {logits.view, temp.view, k.view, tp.view, penalty.view,
                                            seed.view, position.view, history.view, hlen.view};
        auto run = [&](KernelFn fn, ScratchFn scratch_fn, int threads, Tensor* ids, Tensor* logprobs) {
          *ids = Tensor(ScalarType::I32, {kRows});
          *logprobs = Tensor(ScalarType::F32, {kRows});
          TensorView out[] = {ids->view, logprobs->view};
          const size_t bytes = scratch_fn(OpAttrs{}, in.data(), in.size(), out, 2, size_t(threads));
          std::vector<uint8_t> scratch(bytes);
          KernelContext ctx;
          ctx.pool = Pool(threads);
          ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
          fn(ctx, OpAttrs{}, in.data(), in.size(), out, 2);
        };
        Tensor ref_ids, ref_lp, ids1, lp1, ids3, lp3;
        run(ref::sample, ref::sample_scratch, 1, &ref_ids, &ref_lp);
        run(cpu::sample, cpu::sample_scratch, 1, &ids1, &lp1);
        run(cpu::sample, cpu::sample_scratch, 3, &ids3, &lp3);
        SCOPED_TRACE(testing::Message() << "temperature " << temperature << " top_k " << top_k << " top_p " << top_p);
        for (int64_t r = 0; r < kRows; ++r) {
          const int32_t want = ref_ids.view.data_as<int32_t>()[r];
          EXPECT_EQ(ids1.view.data_as<int32_t>()[r], want) << "row " << r;
          EXPECT_EQ(ids3.view.data_as<int32_t>()[r], want) << "row " << r;
          EXPECT_TRUE(SameSpecial(lp1.f()[r], ref_lp.f()[r], {1e-6f, 1e-5f}, false))
              << "row " << r << ": " << lp1.f()[r] << " vs " << ref_lp.f()[r];
          EXPECT_TRUE(SameSpecial(lp3.f()[r], ref_lp.f()[r], {1e-6f, 1e-5f}, false)) << "row " << r;
        }
        const int32_t* id = ref_ids.view.data_as<int32_t>();
        EXPECT_EQ(id[0], 0);  // every logit NaN: id 0, logprob NaN
        EXPECT_TRUE(std::isnan(ref_lp.f()[0]));
        EXPECT_EQ(id[1], 19);  // the +inf
        EXPECT_EQ(ref_lp.f()[1], 0.0f);
        EXPECT_EQ(id[2], 0);  // every logit -inf: the first, logprob NaN
        EXPECT_TRUE(std::isnan(ref_lp.f()[2]));
        EXPECT_EQ(id[4], 1);  // the first of two +inf
        EXPECT_EQ(ref_lp.f()[4], 0.0f);
        for (int64_t r : {3, 5}) {
          EXPECT_NE(id[r], 1) << "row " << r << ": a NaN logit was sampled";
          EXPECT_TRUE(std::isfinite(ref_lp.f()[r])) << "row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ember::kernels::cpu_test
