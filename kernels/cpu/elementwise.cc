// f32 elementwise kernels: broadcasting add/sub/mul/div, relu/gelu/silu/sigmoid/tanh, the
// importer's clip/hard_sigmoid/hard_swish/erf/sqrt/exp/neg, pow (vector fast paths for a scalar
// exponent of 1, 2 or 3, std::pow per element otherwise) and where (f32). Issue 17: broadcasting
// max/min/prelu and the comparisons greater/less/greater_equal/less_equal (f32 -> bool bytes), and
// leaky_relu/elu/selu/softplus/log/abs.
//
// Broadcasting: the operands' strides are aligned to the output, size-1 output dims dropped and
// adjacent dims merged where both operands stay contiguous (or stay broadcast), so a same-shape op
// is one run, a row broadcast is [rows, cols] with b's stride 0 on rows, and so on. The innermost
// merged dim is the "run", done with vectors (vector-vector, vector-scalar or scalar-vector); the
// outer dims are walked with an index counter. Threads take contiguous ranges of (outer, block)
// units, so every element is computed the same way whatever the thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_ELEMENTWISE_PLAN_
#define EMBER_KERNELS_CPU_ELEMENTWISE_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

// The comparisons (Greater .. LessEq) write bool bytes (0 / 1); every other op writes f32.
enum class BinaryOp : int { Add, Sub, Mul, Div, Max, Min, PRelu, Greater, Less, GreaterEq, LessEq };
enum class UnaryOp : int {
  Relu, GeluErf, GeluTanh, Silu, Sigmoid, Tanh,
  Clip, HardSigmoid, HardSwish, Erf, Sqrt, Exp, Neg, Square, Cube, Copy,
  LeakyRelu, Elu, Selu, Softplus, Log, Abs,
};

constexpr bool is_compare(BinaryOp op) { return op >= BinaryOp::Greater; }

constexpr size_t kBlock = 8192;  // elements per work unit along the run

struct BinaryPlan {
  BinaryOp op;
  const float* a;
  const float* b;
  void* out;                            // f32, or bool bytes for a comparison
  int outer_rank;                       // dims outside the run, innermost last
  int64_t outer_dims[kMaxRank];
  int64_t a_strides[kMaxRank];          // element strides of the outer dims
  int64_t b_strides[kMaxRank];
  int64_t run;                          // length of the innermost run
  int64_t a_step, b_step;               // 0 or 1 along the run
  size_t blocks_per_run;
};

struct UnaryPlan {
  UnaryOp op;
  const float* in;
  float* out;
  size_t count;
  // Clip: min, max. HardSigmoid: alpha, beta. LeakyRelu, Elu: alpha. Selu: alpha * gamma, gamma.
  float p0 = 0.0f, p1 = 0.0f;
};

// where(cond, x, y) with all three of the output's shape, or y (or x) a single element.
struct WherePlan {
  const uint8_t* cond;
  const float* x;
  const float* y;
  float* out;
  size_t count;
  bool x_scalar, y_scalar;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::BinaryOp;
using cpu_detail::UnaryOp;

template <BinaryOp kOp, class D, class V>
HWY_INLINE V Apply2(D d, V a, V b) {
  if constexpr (kOp == BinaryOp::Add) return hn::Add(a, b);
  if constexpr (kOp == BinaryOp::Sub) return hn::Sub(a, b);
  if constexpr (kOp == BinaryOp::Mul) return hn::Mul(a, b);
  if constexpr (kOp == BinaryOp::Div) return hn::Div(a, b);
  // a > b ? a : b (a tie gives b, as the reference and onnxruntime), then a NaN a wins; a NaN b
  // already did (the comparison is false). hn::Max leaves NaN undefined.
  if constexpr (kOp == BinaryOp::Max) return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::Gt(a, b), a, b));
  if constexpr (kOp == BinaryOp::Min) return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::Lt(a, b), a, b));
  // x < 0 ? slope x : x (NaN and -0 pass).
  if constexpr (kOp == BinaryOp::PRelu) return hn::IfThenElse(hn::Lt(a, hn::Zero(d)), hn::Mul(a, b), a);
}

template <BinaryOp kOp, class V>
HWY_INLINE auto Compare2(V a, V b) {
  if constexpr (kOp == BinaryOp::Greater) return hn::Gt(a, b);
  if constexpr (kOp == BinaryOp::Less) return hn::Lt(a, b);
  if constexpr (kOp == BinaryOp::GreaterEq) return hn::Ge(a, b);
  if constexpr (kOp == BinaryOp::LessEq) return hn::Le(a, b);
}

// Stores op(a, b) for lanes [0, count) at element `index` of out: the full vector when kFull.
template <BinaryOp kOp, bool kFull, class D, class V>
HWY_INLINE void Store2(D d, V a, V b, void* out, size_t index, size_t count) {
  if constexpr (cpu_detail::is_compare(kOp)) {
    // The mask as 0 / 1 in 32-bit lanes, narrowed to bytes.
    const hn::Rebind<int32_t, D> di;
    const hn::Rebind<uint8_t, D> d8;
    const auto bytes = hn::DemoteTo(d8, hn::IfThenElseZero(hn::RebindMask(di, Compare2<kOp>(a, b)), hn::Set(di, 1)));
    uint8_t* o = static_cast<uint8_t*>(out) + index;
    if constexpr (kFull) {
      hn::StoreU(bytes, d8, o);
    } else {
      StoreTail(d8, bytes, o, count);
    }
  } else {
    float* o = static_cast<float*>(out) + index;
    if constexpr (kFull) {
      hn::StoreU(Apply2<kOp>(d, a, b), d, o);
    } else {
      StoreTail(d, Apply2<kOp>(d, a, b), o, count);
    }
  }
}

// out[index + i] = a[i*sa] op b[i*sb] for i < n, sa and sb in {0, 1}.
template <BinaryOp kOp>
HWY_INLINE void BinaryRun(const float* HWY_RESTRICT a, int64_t sa, const float* HWY_RESTRICT b,
                          int64_t sb, void* out, size_t index, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i + lanes <= n; i += lanes) {
      Store2<kOp, true>(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i), out, index + i, lanes);
    }
    if (i < n) {
      Store2<kOp, false>(d, LoadTail(d, a + i, n - i), LoadTail(d, b + i, n - i, 1.0f), out, index + i, n - i);
    }
  } else if (sa == 1) {
    const auto vb = hn::Set(d, b[0]);
    for (; i + lanes <= n; i += lanes) Store2<kOp, true>(d, hn::LoadU(d, a + i), vb, out, index + i, lanes);
    if (i < n) Store2<kOp, false>(d, LoadTail(d, a + i, n - i), vb, out, index + i, n - i);
  } else if (sb == 1) {
    const auto va = hn::Set(d, a[0]);
    for (; i + lanes <= n; i += lanes) Store2<kOp, true>(d, va, hn::LoadU(d, b + i), out, index + i, lanes);
    if (i < n) Store2<kOp, false>(d, va, LoadTail(d, b + i, n - i, 1.0f), out, index + i, n - i);
  } else {
    const auto va = hn::Set(d, a[0]), vb = hn::Set(d, b[0]);
    for (; i + lanes <= n; i += lanes) Store2<kOp, true>(d, va, vb, out, index + i, lanes);
    if (i < n) Store2<kOp, false>(d, va, vb, out, index + i, n - i);
  }
}

template <BinaryOp kOp>
void BinaryUnits(const cpu_detail::BinaryPlan& p, size_t begin, size_t end) {
  const size_t bpr = p.blocks_per_run;
  size_t outer = begin / bpr;
  // Decompose the first outer index; then step the counter.
  int64_t idx[kMaxRank] = {0};
  int64_t a_off = 0, b_off = 0;
  {
    size_t rem = outer;
    for (int i = p.outer_rank - 1; i >= 0; --i) {
      idx[i] = static_cast<int64_t>(rem % static_cast<size_t>(p.outer_dims[i]));
      rem /= static_cast<size_t>(p.outer_dims[i]);
      a_off += idx[i] * p.a_strides[i];
      b_off += idx[i] * p.b_strides[i];
    }
  }
  size_t unit = begin;
  while (unit < end) {
    const size_t blk = unit % bpr;
    const size_t last_blk = (end - outer * bpr) < bpr ? (end - outer * bpr) : bpr;
    const size_t lo = blk * cpu_detail::kBlock;
    size_t hi = last_blk * cpu_detail::kBlock;
    if (hi > static_cast<size_t>(p.run)) hi = static_cast<size_t>(p.run);
    const int64_t out_off = static_cast<int64_t>(outer) * p.run;
    BinaryRun<kOp>(p.a + a_off + static_cast<int64_t>(lo) * p.a_step, p.a_step,
                   p.b + b_off + static_cast<int64_t>(lo) * p.b_step, p.b_step, p.out,
                   static_cast<size_t>(out_off) + lo, hi - lo);
    unit = outer * bpr + last_blk;
    ++outer;
    for (int i = p.outer_rank - 1; i >= 0; --i) {
      a_off += p.a_strides[i];
      b_off += p.b_strides[i];
      if (++idx[i] < p.outer_dims[i]) break;
      a_off -= idx[i] * p.a_strides[i];
      b_off -= idx[i] * p.b_strides[i];
      idx[i] = 0;
    }
  }
}

void binary_f32_impl(const cpu_detail::BinaryPlan& p, size_t begin, size_t end) {
  switch (p.op) {
    case BinaryOp::Add: return BinaryUnits<BinaryOp::Add>(p, begin, end);
    case BinaryOp::Sub: return BinaryUnits<BinaryOp::Sub>(p, begin, end);
    case BinaryOp::Mul: return BinaryUnits<BinaryOp::Mul>(p, begin, end);
    case BinaryOp::Div: return BinaryUnits<BinaryOp::Div>(p, begin, end);
    case BinaryOp::Max: return BinaryUnits<BinaryOp::Max>(p, begin, end);
    case BinaryOp::Min: return BinaryUnits<BinaryOp::Min>(p, begin, end);
    case BinaryOp::PRelu: return BinaryUnits<BinaryOp::PRelu>(p, begin, end);
    case BinaryOp::Greater: return BinaryUnits<BinaryOp::Greater>(p, begin, end);
    case BinaryOp::Less: return BinaryUnits<BinaryOp::Less>(p, begin, end);
    case BinaryOp::GreaterEq: return BinaryUnits<BinaryOp::GreaterEq>(p, begin, end);
    case BinaryOp::LessEq: return BinaryUnits<BinaryOp::LessEq>(p, begin, end);
  }
}

// erf(x) as x * P(x^2) / Q(x^2) on [-4, 4] (outside, erf is +-1 in f32); Eigen's rational
// approximation, a few ulp.
template <class D, class V>
HWY_INLINE V Erf(D d, V x) {
  x = hn::Min(hn::Max(x, hn::Set(d, -4.0f)), hn::Set(d, 4.0f));
  const V x2 = hn::Mul(x, x);
  V p = hn::Set(d, -2.72614225801306e-10f);
  p = hn::MulAdd(p, x2, hn::Set(d, 2.77068142495902e-08f));
  p = hn::MulAdd(p, x2, hn::Set(d, -2.10102402082508e-06f));
  p = hn::MulAdd(p, x2, hn::Set(d, -5.69250639462346e-05f));
  p = hn::MulAdd(p, x2, hn::Set(d, -7.34990630326855e-04f));
  p = hn::MulAdd(p, x2, hn::Set(d, -2.95459980854025e-03f));
  p = hn::MulAdd(p, x2, hn::Set(d, -1.60960333262415e-02f));
  p = hn::Mul(p, x);
  V q = hn::Set(d, -1.45660718464996e-05f);
  q = hn::MulAdd(q, x2, hn::Set(d, -2.13374055278905e-04f));
  q = hn::MulAdd(q, x2, hn::Set(d, -1.68282697438203e-03f));
  q = hn::MulAdd(q, x2, hn::Set(d, -7.37332916720468e-03f));
  q = hn::MulAdd(q, x2, hn::Set(d, -1.42647390514189e-02f));
  return hn::Div(p, q);
}

// 1 / (1 + exp(-x)) without overflow: with e = exp(-|x|), 1/(1+e) for x >= 0, e/(1+e) otherwise.
// NaN passes through (hwy's Exp gives 0 for it: sigmoid(NaN) was 1); ExpArg keeps Exp defined.
template <class D, class V>
HWY_INLINE V Sigmoid(D d, V x) {
  const auto nan = hn::IsNaN(x);
  const V e = hn::Exp(d, ExpArg(d, hn::Neg(hn::Abs(x))));
  const V one = hn::Set(d, 1.0f);
  const V r = hn::Div(one, hn::Add(one, e));
  return hn::IfThenElse(nan, x, hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, r), r));
}

template <UnaryOp kOp, class D, class V>
HWY_INLINE V Apply1(D d, V x, V p0, V p1) {
  if constexpr (kOp == UnaryOp::Clip) return ClampKeepNaN(x, p0, p1);
  if constexpr (kOp == UnaryOp::HardSigmoid) {
    return ClampKeepNaN(hn::MulAdd(p0, x, p1), hn::Zero(d), hn::Set(d, 1.0f));
  }
  if constexpr (kOp == UnaryOp::HardSwish) {
    // x * (relu6(x + 3) / 6), ONNX's x * hard_sigmoid(x): x * 6 would overflow for x near FLT_MAX.
    const V r = ClampKeepNaN(hn::Add(x, hn::Set(d, 3.0f)), hn::Zero(d), hn::Set(d, 6.0f));
    return hn::Mul(x, hn::Div(r, hn::Set(d, 6.0f)));
  }
  if constexpr (kOp == UnaryOp::Erf) return hn::IfThenElse(hn::IsNaN(x), x, Erf(d, x));
  if constexpr (kOp == UnaryOp::Sqrt) return hn::Sqrt(x);
  if constexpr (kOp == UnaryOp::Exp) {
    // hwy's Exp is valid up to +104 and returns 0 for NaN: pass NaN through, and from the first
    // f32 above ln(FLT_MAX) on the result is inf (as exp in double rounded to f32). ExpArg keeps
    // Exp defined on SCALAR (NaN / -inf).
    const V e = hn::Exp(d, ExpArg(d, hn::Min(x, hn::Set(d, 100.0f))));
    const V big = hn::IfThenElse(hn::Ge(x, hn::Set(d, 88.72283935546875f)), hn::Set(d, HUGE_VALF), e);
    return hn::IfThenElse(hn::IsNaN(x), x, big);
  }
  if constexpr (kOp == UnaryOp::Neg) return hn::Neg(x);
  if constexpr (kOp == UnaryOp::Square) return hn::Mul(x, x);
  if constexpr (kOp == UnaryOp::Cube) return hn::Mul(hn::Mul(x, x), x);
  if constexpr (kOp == UnaryOp::Copy) return x;
  // x < 0 ? 0 : x, as the reference: NaN and -0 pass through (torch, onnxruntime).
  if constexpr (kOp == UnaryOp::Relu) return ReluKeepNaN(d, x);
  if constexpr (kOp == UnaryOp::GeluErf) {
    const V half_x = hn::Mul(x, hn::Set(d, 0.5f));
    return hn::MulAdd(half_x, Erf(d, hn::Mul(x, hn::Set(d, 0.70710678118654752f))), half_x);
  }
  if constexpr (kOp == UnaryOp::GeluTanh) {
    const V half_x = hn::Mul(x, hn::Set(d, 0.5f));
    const V x3 = hn::Mul(hn::Mul(x, x), x);
    const V inner =
        hn::Mul(hn::Set(d, 0.79788456080286536f), hn::MulAdd(x3, hn::Set(d, 0.044715f), x));
    // A NaN inner means a NaN x, so half_x makes the result NaN whatever Tanh gives.
    return hn::MulAdd(half_x, hn::Tanh(d, TanhArg(d, inner)), half_x);
  }
  if constexpr (kOp == UnaryOp::Silu) return hn::Mul(x, Sigmoid(d, x));
  if constexpr (kOp == UnaryOp::Sigmoid) return Sigmoid(d, x);
  if constexpr (kOp == UnaryOp::Tanh) return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, TanhArg(d, x)));
  // x < 0 ? alpha x : x; NaN and -0 pass.
  if constexpr (kOp == UnaryOp::LeakyRelu) return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(x, p0), x);
  // x < 0 ? alpha expm1(x) : x. Expm1 gets min(x, 0) through ExpArg (defined for NaN / -inf; it
  // gives -1 below -104); NaN lanes take the x branch.
  if constexpr (kOp == UnaryOp::Elu) {
    const V e = hn::Expm1(d, ExpArg(d, hn::Min(x, hn::Zero(d))));
    return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(p0, e), x);
  }
  // gamma alpha expm1(x) for x < 0 (p0 = alpha * gamma), gamma x + 0 otherwise (+ 0 makes
  // selu(-0) = +0, as the reference; NaN takes this branch).
  if constexpr (kOp == UnaryOp::Selu) {
    const V e = hn::Expm1(d, ExpArg(d, hn::Min(x, hn::Zero(d))));
    return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(p0, e), hn::Add(hn::Mul(p1, x), hn::Zero(d)));
  }
  // max(x, 0) + log1p(exp(-|x|)): the reference's two branches in one (exp(-|x|) in [0, 1], where
  // Log1p is valid); NaN reaches the result through the first term.
  if constexpr (kOp == UnaryOp::Softplus) {
    const V e = hn::Exp(d, ExpArg(d, hn::Neg(hn::Abs(x))));
    return hn::Add(ReluKeepNaN(d, x), hn::Log1p(d, e));
  }
  // hwy's Log is valid on (0, FLT_MAX] (subnormals included): other lanes compute log(1) and take
  // log(±0) = -inf, log(+inf) = +inf, NaN for x < 0, x itself for NaN.
  if constexpr (kOp == UnaryOp::Log) {
    const V zero = hn::Zero(d), inf = hn::Set(d, HUGE_VALF);
    const auto ok = hn::And(hn::Gt(x, zero), hn::Lt(x, inf));
    const V r = hn::Log(d, hn::IfThenElse(ok, x, hn::Set(d, 1.0f)));
    const V special = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf),
                                     hn::IfThenElse(hn::Lt(x, zero), hn::Set(d, std::numeric_limits<float>::quiet_NaN()), x));
    return hn::IfThenElse(ok, r, special);
  }
  if constexpr (kOp == UnaryOp::Abs) return hn::Abs(x);
}

template <UnaryOp kOp>
HWY_INLINE void UnaryRun(const float* in, float* out, size_t n, float p0, float p1) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto v0 = hn::Set(d, p0), v1 = hn::Set(d, p1);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(Apply1<kOp>(d, hn::LoadU(d, in + i), v0, v1), d, out + i);
  }
  if (i < n) StoreTail(d, Apply1<kOp>(d, LoadTail(d, in + i, n - i), v0, v1), out + i, n - i);
}

template <UnaryOp kOp>
HWY_INLINE void UnaryRun(const float* in, float* out, size_t n) {
  UnaryRun<kOp>(in, out, n, 0.0f, 0.0f);
}

void unary_f32_impl(const cpu_detail::UnaryPlan& p, size_t begin, size_t end) {
  const float* in = p.in + begin;
  float* out = p.out + begin;
  const size_t n = end - begin;
  switch (p.op) {
    case UnaryOp::Clip: return UnaryRun<UnaryOp::Clip>(in, out, n, p.p0, p.p1);
    case UnaryOp::HardSigmoid: return UnaryRun<UnaryOp::HardSigmoid>(in, out, n, p.p0, p.p1);
    case UnaryOp::HardSwish: return UnaryRun<UnaryOp::HardSwish>(in, out, n);
    case UnaryOp::Erf: return UnaryRun<UnaryOp::Erf>(in, out, n);
    case UnaryOp::Sqrt: return UnaryRun<UnaryOp::Sqrt>(in, out, n);
    case UnaryOp::Exp: return UnaryRun<UnaryOp::Exp>(in, out, n);
    case UnaryOp::Neg: return UnaryRun<UnaryOp::Neg>(in, out, n);
    case UnaryOp::Square: return UnaryRun<UnaryOp::Square>(in, out, n);
    case UnaryOp::Cube: return UnaryRun<UnaryOp::Cube>(in, out, n);
    case UnaryOp::Copy: return UnaryRun<UnaryOp::Copy>(in, out, n);
    case UnaryOp::Relu: return UnaryRun<UnaryOp::Relu>(in, out, n);
    case UnaryOp::GeluErf: return UnaryRun<UnaryOp::GeluErf>(in, out, n);
    case UnaryOp::GeluTanh: return UnaryRun<UnaryOp::GeluTanh>(in, out, n);
    case UnaryOp::Silu: return UnaryRun<UnaryOp::Silu>(in, out, n);
    case UnaryOp::Sigmoid: return UnaryRun<UnaryOp::Sigmoid>(in, out, n);
    case UnaryOp::Tanh: return UnaryRun<UnaryOp::Tanh>(in, out, n);
    case UnaryOp::LeakyRelu: return UnaryRun<UnaryOp::LeakyRelu>(in, out, n, p.p0, p.p1);
    case UnaryOp::Elu: return UnaryRun<UnaryOp::Elu>(in, out, n, p.p0, p.p1);
    case UnaryOp::Selu: return UnaryRun<UnaryOp::Selu>(in, out, n, p.p0, p.p1);
    case UnaryOp::Softplus: return UnaryRun<UnaryOp::Softplus>(in, out, n);
    case UnaryOp::Log: return UnaryRun<UnaryOp::Log>(in, out, n);
    case UnaryOp::Abs: return UnaryRun<UnaryOp::Abs>(in, out, n);
  }
}

// Elements [begin, end) of where(); bool bytes are widened to 32-bit lanes for the mask.
void where_f32_impl(const cpu_detail::WherePlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<uint32_t, decltype(d)> du;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const size_t lanes = hn::Lanes(d);
  const auto xs = hn::Set(d, p.x[0]), ys = hn::Set(d, p.y[0]);
  auto select = [&](size_t i, auto c8, size_t n) {
    const auto mask = hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, c8), hn::Zero(du)));
    const auto vx = p.x_scalar ? xs : (n == lanes ? hn::LoadU(d, p.x + i) : LoadTail(d, p.x + i, n));
    const auto vy = p.y_scalar ? ys : (n == lanes ? hn::LoadU(d, p.y + i) : LoadTail(d, p.y + i, n));
    return hn::IfThenElse(mask, vx, vy);
  };
  size_t i = begin;
  for (; i + lanes <= end; i += lanes) hn::StoreU(select(i, hn::LoadU(d8, p.cond + i), lanes), d, p.out + i);
  if (i < end) {
    const size_t n = end - i;
    StoreTail(d, select(i, LoadTail(d8, p.cond + i, n), n), p.out + i, n);
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(binary_f32_impl);
EMBER_HWY_EXPORT(unary_f32_impl);
EMBER_HWY_EXPORT(where_f32_impl);

namespace cpu_detail {
namespace {

constexpr double kMinParallelElements = 1 << 15;

void binary_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(binary_f32_impl)(*static_cast<const BinaryPlan*>(plan), begin, end);
}
void unary_units(const void* plan, size_t begin, size_t end) {
  const UnaryPlan& p = *static_cast<const UnaryPlan*>(plan);
  EMBER_HWY_DISPATCH(unary_f32_impl)(p, begin * kBlock,
                                      end * kBlock < p.count ? end * kBlock : p.count);
}

void run_binary(KernelContext& ctx, BinaryOp op, const TensorView& a, const TensorView& b,
                TensorView& out) {
  const int rank = out.rank;
  // Aligned element strides (0 where broadcast), innermost last.
  int64_t dims[kMaxRank], sa[kMaxRank], sb[kMaxRank];
  int64_t stride_a = 1, stride_b = 1;
  for (int i = rank - 1; i >= 0; --i) {
    const int ia = i - (rank - a.rank), ib = i - (rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    dims[i] = out.dims[i];
    sa[i] = (da == 1) ? 0 : stride_a;
    sb[i] = (db == 1) ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  // Collapse from the innermost dim outwards: drop size-1 dims, merge where strides chain.
  int64_t cd[kMaxRank], ca[kMaxRank], cb[kMaxRank];
  int n = 0;  // collapsed dims, stored innermost first
  for (int i = rank - 1; i >= 0; --i) {
    if (dims[i] == 1) continue;
    if (dims[i] == 0) return;  // empty output
    if (n > 0 && sa[i] == ca[n - 1] * cd[n - 1] && sb[i] == cb[n - 1] * cd[n - 1]) {
      cd[n - 1] *= dims[i];
      continue;
    }
    cd[n] = dims[i];
    ca[n] = sa[i];
    cb[n] = sb[i];
    ++n;
  }
  BinaryPlan plan{};
  plan.op = op;
  plan.a = a.data_as<const float>();
  plan.b = b.data_as<const float>();
  plan.out = out.data;
  if (n == 0) {  // every dim is 1 (or rank 0): one element
    plan.outer_rank = 0;
    plan.run = 1;
    plan.a_step = plan.b_step = 0;
  } else {
    plan.run = cd[0];
    plan.a_step = ca[0];
    plan.b_step = cb[0];
    plan.outer_rank = n - 1;
    for (int k = 1; k < n; ++k) {  // outer dims, innermost last
      plan.outer_dims[n - 1 - k] = cd[k];
      plan.a_strides[n - 1 - k] = ca[k];
      plan.b_strides[n - 1 - k] = cb[k];
    }
  }
  // A run that is a stride-1 ... stride-0 mix needs steps in {0, 1}; merged runs always are.
  plan.blocks_per_run = (static_cast<size_t>(plan.run) + kBlock - 1) / kBlock;
  size_t outer = 1;
  for (int k = 0; k < plan.outer_rank; ++k) outer *= static_cast<size_t>(plan.outer_dims[k]);
  run_units(ctx.pool, outer * plan.blocks_per_run, double(out.numel()), kMinParallelElements, &plan,
            binary_units, 64);
}

void run_unary(KernelContext& ctx, UnaryOp op, const TensorView& in, TensorView& out,
               float p0 = 0.0f, float p1 = 0.0f) {
  UnaryPlan plan{op, in.data_as<const float>(), out.data_as<float>(), static_cast<size_t>(in.numel()),
                 p0, p1};
  run_units(ctx.pool, (plan.count + kBlock - 1) / kBlock, double(plan.count), kMinParallelElements,
            &plan, unary_units, 64);
}

void where_units(const void* plan, size_t begin, size_t end) {
  const WherePlan& p = *static_cast<const WherePlan*>(plan);
  EMBER_HWY_DISPATCH(where_f32_impl)(p, begin * kBlock, end * kBlock < p.count ? end * kBlock : p.count);
}

bool same_dims(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return true;
}

// Element strides of `t` broadcast to `out` (0 along broadcast dims).
void broadcast_strides(const TensorView& t, const TensorView& out, int64_t* strides) {
  int64_t stride = 1;
  for (int i = out.rank - 1; i >= 0; --i) {
    const int src = i - (out.rank - t.rank);
    strides[i] = (src < 0 || t.dims[src] == 1) ? 0 : stride;
    if (src >= 0) stride *= t.dims[src];
  }
}

// Scalar walk over the output with up to three broadcast operands: fn(i, offsets).
template <int kOperands, typename Fn>
void walk_broadcast(const TensorView* operands, const TensorView& out, Fn fn) {
  int64_t strides[kOperands][kMaxRank];
  for (int k = 0; k < kOperands; ++k) broadcast_strides(operands[k], out, strides[k]);
  int64_t index[kMaxRank] = {0};
  int64_t offset[kOperands] = {0};
  const int64_t n = static_cast<int64_t>(out.numel());
  for (int64_t i = 0; i < n; ++i) {
    fn(i, offset);
    for (int dim = out.rank - 1; dim >= 0; --dim) {
      for (int k = 0; k < kOperands; ++k) offset[k] += strides[k][dim];
      if (++index[dim] < out.dims[dim]) break;
      for (int k = 0; k < kOperands; ++k) offset[k] -= strides[k][dim] * out.dims[dim];
      index[dim] = 0;
    }
  }
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {
using cpu_detail::BinaryOp;
using cpu_detail::UnaryOp;

#define EMBER_CPU_BINARY(name, op)                                                         \
  void name(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t,         \
            TensorView* outputs, size_t) {                                                 \
    cpu_detail::run_binary(ctx, op, inputs[0], inputs[1], outputs[0]);                     \
  }
EMBER_CPU_BINARY(add, BinaryOp::Add)
EMBER_CPU_BINARY(sub, BinaryOp::Sub)
EMBER_CPU_BINARY(mul, BinaryOp::Mul)
EMBER_CPU_BINARY(div, BinaryOp::Div)
EMBER_CPU_BINARY(max, BinaryOp::Max)
EMBER_CPU_BINARY(min, BinaryOp::Min)
EMBER_CPU_BINARY(prelu, BinaryOp::PRelu)
EMBER_CPU_BINARY(greater, BinaryOp::Greater)
EMBER_CPU_BINARY(less, BinaryOp::Less)
EMBER_CPU_BINARY(greater_equal, BinaryOp::GreaterEq)
EMBER_CPU_BINARY(less_equal, BinaryOp::LessEq)
#undef EMBER_CPU_BINARY

#define EMBER_CPU_UNARY(name, op)                                                          \
  void name(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t,         \
            TensorView* outputs, size_t) {                                                 \
    cpu_detail::run_unary(ctx, op, inputs[0], outputs[0]);                                 \
  }
EMBER_CPU_UNARY(relu, UnaryOp::Relu)
EMBER_CPU_UNARY(silu, UnaryOp::Silu)
EMBER_CPU_UNARY(sigmoid, UnaryOp::Sigmoid)
EMBER_CPU_UNARY(tanh, UnaryOp::Tanh)

EMBER_CPU_UNARY(hard_swish, UnaryOp::HardSwish)
EMBER_CPU_UNARY(erf, UnaryOp::Erf)
EMBER_CPU_UNARY(sqrt, UnaryOp::Sqrt)
EMBER_CPU_UNARY(exp, UnaryOp::Exp)
EMBER_CPU_UNARY(neg, UnaryOp::Neg)
EMBER_CPU_UNARY(softplus, UnaryOp::Softplus)
EMBER_CPU_UNARY(log, UnaryOp::Log)
EMBER_CPU_UNARY(abs, UnaryOp::Abs)
#undef EMBER_CPU_UNARY

void clip(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
          TensorView* outputs, size_t) {
  cpu_detail::run_unary(ctx, UnaryOp::Clip, inputs[0], outputs[0], attrs.clip_min, attrs.clip_max);
}

void hard_sigmoid(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                  TensorView* outputs, size_t) {
  cpu_detail::run_unary(ctx, UnaryOp::HardSigmoid, inputs[0], outputs[0], attrs.alpha, attrs.beta);
}

void leaky_relu(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  cpu_detail::run_unary(ctx, UnaryOp::LeakyRelu, inputs[0], outputs[0], attrs.alpha);
}

void elu(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  cpu_detail::run_unary(ctx, UnaryOp::Elu, inputs[0], outputs[0], attrs.alpha);
}

// alpha and gamma (attrs.beta) are finite (the shape function checked); alpha * gamma in f32 differs
// from the reference's double product by at most half an ulp.
void selu(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
          size_t) {
  cpu_detail::run_unary(ctx, UnaryOp::Selu, inputs[0], outputs[0], attrs.alpha * attrs.beta, attrs.beta);
}

// x ** y. A single-element exponent of 1, 2 or 3 with x of the output's shape is a vector kernel
// (x * x is the correctly rounded square, as the reference's double pow rounded to f32); anything
// else is std::pow in double per element, walking the broadcast.
void pow(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t,
         TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& y = inputs[1];
  TensorView& out = outputs[0];
  if (y.numel() == 1 && cpu_detail::same_dims(x, out)) {
    const float e = y.data_as<const float>()[0];
    if (e == 1.0f || e == 2.0f || e == 3.0f) {
      cpu_detail::run_unary(ctx, e == 1.0f ? UnaryOp::Copy : (e == 2.0f ? UnaryOp::Square : UnaryOp::Cube),
                            x, out);
      return;
    }
  }
  const float* px = x.data_as<const float>();
  const float* py = y.data_as<const float>();
  float* po = out.data_as<float>();
  cpu_detail::walk_broadcast<2>(inputs, out, [&](int64_t i, const int64_t* off) {
    po[i] = static_cast<float>(std::pow(static_cast<double>(px[off[0]]), static_cast<double>(py[off[1]])));
  });
}

// f32 where: vectors when x and y each have the output's shape or are a single element and cond
// has the output's shape; otherwise a scalar broadcast walk.
void where(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t,
           TensorView* outputs, size_t) {
  const TensorView& cond = inputs[0];
  const TensorView& x = inputs[1];
  const TensorView& y = inputs[2];
  TensorView& out = outputs[0];
  const bool x_scalar = x.numel() == 1, y_scalar = y.numel() == 1;
  if (cpu_detail::same_dims(cond, out) && (x_scalar || cpu_detail::same_dims(x, out)) &&
      (y_scalar || cpu_detail::same_dims(y, out))) {
    cpu_detail::WherePlan plan{cond.data_as<const uint8_t>(), x.data_as<const float>(),
                               y.data_as<const float>(), out.data_as<float>(),
                               static_cast<size_t>(out.numel()), x_scalar, y_scalar};
    if (plan.count == 0) return;
    cpu_detail::run_units(ctx.pool, (plan.count + cpu_detail::kBlock - 1) / cpu_detail::kBlock,
                          double(plan.count), cpu_detail::kMinParallelElements, &plan,
                          cpu_detail::where_units, 64);
    return;
  }
  const uint8_t* pc = cond.data_as<const uint8_t>();
  const float* px = x.data_as<const float>();
  const float* py = y.data_as<const float>();
  float* po = out.data_as<float>();
  cpu_detail::walk_broadcast<3>(inputs, out, [&](int64_t i, const int64_t* off) {
    po[i] = pc[off[0]] != 0 ? px[off[1]] : py[off[2]];
  });
}

void gelu(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
          TensorView* outputs, size_t) {
  cpu_detail::run_unary(ctx, attrs.gelu_approx == GeluApprox::Tanh ? UnaryOp::GeluTanh
                                                                     : UnaryOp::GeluErf,
                        inputs[0], outputs[0]);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
