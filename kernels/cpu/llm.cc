// LLM ops: rms_norm, rope, silu_mul and embedding (f32; embedding also reads bf16 / f16 weights).
//
// rms_norm: the sum of squares of a row in f64 vector accumulators (as reduce_sum), the variance
// and 1 / sqrt(variance + eps) as the reference computes them, then w * (x * r) with two f32
// vector multiplies: the reference's result up to the order of the f64 sum.
// rope: per token, cos / sin of each f32 angle come from the scalar double functions (as the
// reference), a block of 64 at a time on the stack; the heads of the token then take them as
// vectors, x * c + (-x2) * s with separate f32 multiplies and adds (no FMA: this file is built with
// -ffp-contract=off, kernels/cpu/CMakeLists.txt), so it is the
// reference's arithmetic exactly. silu_mul: silu as the silu kernel (exp-based sigmoid), times up.
// embedding: f32 rows are copied, bf16 widened with a shift, f16 through the exact scalar codec.
// Units are rows / tokens / blocks of 8192 elements; no unit's arithmetic depends on another, so
// results are bitwise identical for any thread count and any number of rows in the call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/llm.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/contrib/math/math-inl.h"
#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_LLM_PLAN_
#define EMBER_KERNELS_CPU_LLM_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized_linear.h"
#include "runtime/core/float_codecs.h"
namespace ember::kernels::cpu_detail {

struct RmsNormPlan {
  const float* in;
  const float* weight;
  float* out;
  int64_t row;
  float epsilon;
};

struct RopePlan {
  const float* in;
  const int32_t* positions;
  const float* inv_freq;
  float* out;
  int64_t heads, dim;
};

struct SiluMulPlan {
  const float* gate;
  const float* up;
  float* out;
  int64_t count;
};

constexpr int64_t kSiluMulBlock = 8192;
constexpr int64_t kRopeChunk = 64;  // frequencies per stack block of cos / sin

}  // namespace ember::kernels::cpu_detail
#endif  // EMBER_KERNELS_CPU_LLM_PLAN_

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void rms_norm_f32_impl(const cpu_detail::RmsNormPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dfh;  // Lanes(dd) floats, promoted to doubles
  const hn::ScalableTag<float> d;
  const size_t dlanes = hn::Lanes(dd), lanes = hn::Lanes(d);
  const size_t n = static_cast<size_t>(p.row);
  for (size_t r = begin; r < end; ++r) {
    const float* x = p.in + r * n;
    float* y = p.out + r * n;
    auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
    size_t i = 0;
    for (; i + 2 * dlanes <= n; i += 2 * dlanes) {
      const auto a = hn::PromoteTo(dd, hn::LoadU(dfh, x + i));
      const auto b = hn::PromoteTo(dd, hn::LoadU(dfh, x + i + dlanes));
      s0 = hn::MulAdd(a, a, s0);
      s1 = hn::MulAdd(b, b, s1);
    }
    for (; i + dlanes <= n; i += dlanes) {
      const auto a = hn::PromoteTo(dd, hn::LoadU(dfh, x + i));
      s0 = hn::MulAdd(a, a, s0);
    }
    if (i < n) {
      const auto a = hn::PromoteTo(dd, LoadTail(dfh, x + i, n - i));
      s1 = hn::MulAdd(a, a, s1);
    }
    const double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
    const float variance = static_cast<float>(sum / static_cast<double>(n));
    const float rstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance + p.epsilon)));
    const auto vr = hn::Set(d, rstd);
    for (i = 0; i + lanes <= n; i += lanes) {
      hn::StoreU(hn::Mul(hn::LoadU(d, p.weight + i), hn::Mul(hn::LoadU(d, x + i), vr)), d, y + i);
    }
    if (i < n) {
      const auto v = hn::Mul(LoadTail(d, p.weight + i, n - i), hn::Mul(LoadTail(d, x + i, n - i), vr));
      StoreTail(d, v, y + i, n - i);
    }
  }
}

// Tokens [begin, end).
void rope_f32_impl(const cpu_detail::RopePlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const int64_t half = p.dim / 2;
  // Lanes past a chunk's end are computed but never stored; the padding keeps those loads in bounds.
  HWY_ALIGN float cs[cpu_detail::kRopeChunk + hn::MaxLanes(d)] = {};
  HWY_ALIGN float sn[cpu_detail::kRopeChunk + hn::MaxLanes(d)] = {};
  for (size_t t = begin; t < end; ++t) {
    const float pos = p.positions[t] < 0 ? NAN : static_cast<float>(p.positions[t]);
    for (int64_t f0 = 0; f0 < half; f0 += cpu_detail::kRopeChunk) {
      const size_t chunk = static_cast<size_t>(half - f0 < cpu_detail::kRopeChunk ? half - f0
                                                                                  : cpu_detail::kRopeChunk);
      for (size_t i = 0; i < chunk; ++i) {
        const float angle = pos * p.inv_freq[f0 + static_cast<int64_t>(i)];
        cs[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
        sn[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
      for (int64_t h = 0; h < p.heads; ++h) {
        const size_t base = static_cast<size_t>((static_cast<int64_t>(t) * p.heads + h) * p.dim + f0);
        const float* x1 = p.in + base;
        const float* x2 = x1 + half;
        float* y1 = p.out + base;
        float* y2 = y1 + half;
        for (size_t i = 0; i < chunk; i += lanes) {
          const size_t count = chunk - i < lanes ? chunk - i : lanes;
          const bool full = count == lanes;
          const auto a = full ? hn::LoadU(d, x1 + i) : LoadTail(d, x1 + i, count);
          const auto b = full ? hn::LoadU(d, x2 + i) : LoadTail(d, x2 + i, count);
          const auto c = hn::Load(d, cs + i);
          const auto s = hn::Load(d, sn + i);
          const auto o1 = hn::Add(hn::Mul(a, c), hn::Mul(hn::Neg(b), s));
          const auto o2 = hn::Add(hn::Mul(b, c), hn::Mul(a, s));
          if (full) {
            hn::StoreU(o1, d, y1 + i);
            hn::StoreU(o2, d, y2 + i);
          } else {
            StoreTail(d, o1, y1 + i, count);
            StoreTail(d, o2, y2 + i, count);
          }
        }
      }
    }
  }
}

// 1 / (1 + exp(-x)) without overflow, as the silu kernel (elementwise.cc's Sigmoid: NaN passes
// through; ExpArg keeps Exp defined).
template <class D, class V>
HWY_INLINE V SigmoidLlm(D d, V x) {
  const auto nan = hn::IsNaN(x);
  const V e = hn::Exp(d, ExpArg(d, hn::Neg(hn::Abs(x))));
  const V one = hn::Set(d, 1.0f);
  const V r = hn::Div(one, hn::Add(one, e));
  return hn::IfThenElse(nan, x, hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, r), r));
}

// Blocks [begin, end) of kSiluMulBlock elements.
void silu_mul_f32_impl(const cpu_detail::SiluMulPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  for (size_t b = begin; b < end; ++b) {
    const size_t first = b * static_cast<size_t>(cpu_detail::kSiluMulBlock);
    const size_t last = first + static_cast<size_t>(cpu_detail::kSiluMulBlock) < static_cast<size_t>(p.count)
                            ? first + static_cast<size_t>(cpu_detail::kSiluMulBlock)
                            : static_cast<size_t>(p.count);
    size_t i = first;
    for (; i + lanes <= last; i += lanes) {
      const auto g = hn::LoadU(d, p.gate + i);
      hn::StoreU(hn::Mul(hn::Mul(g, SigmoidLlm(d, g)), hn::LoadU(d, p.up + i)), d, p.out + i);
    }
    if (i < last) {
      const auto g = LoadTail(d, p.gate + i, last - i);
      StoreTail(d, hn::Mul(hn::Mul(g, SigmoidLlm(d, g)), LoadTail(d, p.up + i, last - i)), p.out + i, last - i);
    }
  }
}

// n bf16 values (u16 bits) widened to f32 by a 16-bit shift.
void bf16_row_to_f32_impl(const uint16_t* in, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Rebind<uint16_t, decltype(d)> d16;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto w = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, in + i)));
    hn::StoreU(hn::BitCast(d, w), d, out + i);
  }
  if (i < n) {
    const auto w = hn::ShiftLeft<16>(hn::PromoteTo(du, LoadTail(d16, in + i, n - i)));
    StoreTail(d, hn::BitCast(d, w), out + i, n - i);
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(rms_norm_f32_impl);
EMBER_HWY_EXPORT(rope_f32_impl);
EMBER_HWY_EXPORT(silu_mul_f32_impl);
EMBER_HWY_EXPORT(bf16_row_to_f32_impl);

namespace cpu_detail {
namespace {

void rms_norm_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(rms_norm_f32_impl)(*static_cast<const RmsNormPlan*>(plan), begin, end);
}
void rope_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(rope_f32_impl)(*static_cast<const RopePlan*>(plan), begin, end);
}
void silu_mul_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(silu_mul_f32_impl)(*static_cast<const SiluMulPlan*>(plan), begin, end);
}

struct EmbeddingPlan {
  const TensorView* weight;
  const int32_t* ids;
  float* out;
};

// Tokens [begin, end); an id outside [0, V) (rejected by embedding_check) gives a zero row.
void embedding_units(const void* plan, size_t begin, size_t end) {
  const EmbeddingPlan& p = *static_cast<const EmbeddingPlan*>(plan);
  const int64_t vocab = p.weight->dims[0], h = p.weight->dims[1];
  const size_t n = static_cast<size_t>(h);
  for (size_t t = begin; t < end; ++t) {
    const int64_t id = p.ids[t];
    float* out = p.out + t * n;
    if (id < 0 || id >= vocab) {
      std::memset(out, 0, n * sizeof(float));
    } else if (p.weight->dtype == ScalarType::F32) {
      std::memcpy(out, p.weight->data_as<const float>() + id * h, n * sizeof(float));
    } else if (p.weight->dtype == ScalarType::BF16) {
      EMBER_HWY_DISPATCH(bf16_row_to_f32_impl)(p.weight->data_as<const uint16_t>() + id * h, out, n);
    } else {
      const uint16_t* row = p.weight->data_as<const uint16_t>() + id * h;
      for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(row[i]);
    }
  }
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

void rms_norm(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
              size_t) {
  const TensorView& x = inputs[0];
  cpu_detail::RmsNormPlan p{};
  p.in = x.data_as<const float>();
  p.weight = inputs[1].data_as<const float>();
  p.out = outputs[0].data_as<float>();
  p.row = x.dims[x.rank - 1];
  p.epsilon = attrs.epsilon;
  if (x.numel() == 0 || p.row == 0) return;
  const size_t rows = static_cast<size_t>(x.numel() / static_cast<uint64_t>(p.row));
  cpu_detail::run_units(ctx.pool, rows, double(x.numel()) * 4.0, 1 << 16, &p, cpu_detail::rms_norm_units);
}

void rope(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  cpu_detail::RopePlan p{};
  p.in = x.data_as<const float>();
  p.positions = inputs[1].data_as<const int32_t>();
  p.inv_freq = inputs[2].data_as<const float>();
  p.out = outputs[0].data_as<float>();
  p.heads = x.dims[1];
  p.dim = x.dims[2];
  if (x.numel() == 0) return;
  cpu_detail::run_units(ctx.pool, static_cast<size_t>(x.dims[0]), double(x.numel()) * 4.0, 1 << 15, &p,
                        cpu_detail::rope_units);
}

void silu_mul(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
              size_t) {
  cpu_detail::SiluMulPlan p{};
  p.gate = inputs[0].data_as<const float>();
  p.up = inputs[1].data_as<const float>();
  p.out = outputs[0].data_as<float>();
  p.count = static_cast<int64_t>(inputs[0].numel());
  if (p.count == 0) return;
  const size_t blocks = static_cast<size_t>((p.count + cpu_detail::kSiluMulBlock - 1) / cpu_detail::kSiluMulBlock);
  cpu_detail::run_units(ctx.pool, blocks, double(p.count) * 16.0, 1 << 16, &p, cpu_detail::silu_mul_units);
}

void linear_bf16_weight(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const int64_t m = x.dims[0] == 0 ? 0 : int64_t(x.numel() / uint64_t(x.dims[x.rank - 1]));
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  // Shapes were checked by linear_shape; a failure here (none is possible) leaves zeros.
  if (!linear_bf16(ctx, x.data_as<const float>(), m, w.data_as<const uint16_t>(), w.dims[0], w.dims[1], bias,
                   outputs[0].data_as<float>())
           .is_ok()) {
    std::memset(outputs[0].data, 0, size_t(outputs[0].nbytes()));
  }
}

void embedding(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
               size_t) {
  cpu_detail::EmbeddingPlan p{&inputs[0], inputs[1].data_as<const int32_t>(), outputs[0].data_as<float>()};
  const int64_t tokens = inputs[1].dims[0];
  if (tokens == 0 || inputs[0].dims[1] == 0) return;
  cpu_detail::run_units(ctx.pool, static_cast<size_t>(tokens), double(outputs[0].numel()), 1 << 16, &p,
                        cpu_detail::embedding_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
