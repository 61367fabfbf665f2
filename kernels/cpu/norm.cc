// f32 softmax (any axis) and layer_norm (over dims [axis, rank), gamma and beta optional).
//
// softmax over the last axis works on contiguous rows: max, exp(x - max) with the sum, then a scale.
// Over another axis, [outer, axis, inner] is processed a vector of `inner` columns at a time, so the
// loads stay contiguous. layer_norm is two-pass (mean, then the centred variance) per row.
// Units are rows (or row x column-vector pairs); a row is never split across tasks.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/norm.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_NORM_PLAN_
#define EMBER_KERNELS_CPU_NORM_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

struct SoftmaxPlan {
  const float* in;
  float* out;
  int64_t outer, axis, inner;
  int64_t inner_vectors;  // units per outer index when inner > 1
};

struct LayerNormPlan {
  const float* in;
  const float* gamma;  // [row] or null
  const float* beta;   // [row] or null
  float* out;
  int64_t row;
  float epsilon;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for x <= 0 (x - max of its row); hwy's Exp returns 0 below -104, and also for NaN, so
// NaN is passed through: a NaN in a row makes the sum, hence the whole row, NaN (as the reference).
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Exp(d, x));
}

void SoftmaxRow(const float* in, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  V vmax = hn::Set(d, neg_inf);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::LoadU(d, in + i));
  if (i < n) vmax = hn::Max(vmax, LoadTail(d, in + i, n - i, neg_inf));
  const V max = hn::MaxOfLanes(d, vmax);
  V sum = hn::Zero(d);
  for (i = 0; i + lanes <= n; i += lanes) {
    const V e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, in + i), max));
    sum = hn::Add(sum, e);
    hn::StoreU(e, d, out + i);
  }
  if (i < n) {
    const V e = ExpNonPositive(d, hn::Sub(LoadTail(d, in + i, n - i, neg_inf), max));
    sum = hn::Add(sum, e);
    StoreTail(d, e, out + i, n - i);
  }
  const V scale = hn::Div(hn::Set(d, 1.0f), hn::SumOfLanes(d, sum));
  for (i = 0; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, out + i), scale), d, out + i);
  if (i < n) StoreTail(d, hn::Mul(LoadTail(d, out + i, n - i), scale), out + i, n - i);
}

// Columns [c0, c0 + count) (count <= Lanes) of one [axis, inner] slab.
void SoftmaxColumns(const float* in, float* out, int64_t axis, int64_t inner, size_t count) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const bool full = count == hn::Lanes(d);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto load = [&](const float* p) { return full ? hn::LoadU(d, p) : LoadTail(d, p, count, neg_inf); };
  auto store = [&](V v, float* p) {
    if (full) hn::StoreU(v, d, p); else StoreTail(d, v, p, count);
  };
  V max = hn::Set(d, neg_inf);
  for (int64_t a = 0; a < axis; ++a) max = hn::Max(max, load(in + a * inner));
  V sum = hn::Zero(d);
  for (int64_t a = 0; a < axis; ++a) {
    const V e = ExpNonPositive(d, hn::Sub(load(in + a * inner), max));
    sum = hn::Add(sum, e);
    store(e, out + a * inner);
  }
  const V scale = hn::Div(hn::Set(d, 1.0f), sum);
  for (int64_t a = 0; a < axis; ++a) store(hn::Mul(load(out + a * inner), scale), out + a * inner);
}

void softmax_f32_impl(const cpu_detail::SoftmaxPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (size_t u = begin; u < end; ++u) {
    if (p.inner == 1) {
      SoftmaxRow(p.in + static_cast<int64_t>(u) * p.axis, p.out + static_cast<int64_t>(u) * p.axis,
                 static_cast<size_t>(p.axis));
    } else {
      const int64_t o = static_cast<int64_t>(u) / p.inner_vectors;
      const int64_t c0 = (static_cast<int64_t>(u) % p.inner_vectors) * lanes;
      const int64_t count = p.inner - c0 < lanes ? p.inner - c0 : lanes;
      const int64_t off = o * p.axis * p.inner + c0;
      SoftmaxColumns(p.in + off, p.out + off, p.axis, p.inner, static_cast<size_t>(count));
    }
  }
}

size_t softmax_lanes_impl() { return hn::Lanes(hn::ScalableTag<float>()); }

void layer_norm_f32_impl(const cpu_detail::LayerNormPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t n = static_cast<size_t>(p.row);
  for (size_t r = begin; r < end; ++r) {
    const float* x = p.in + r * n;
    float* y = p.out + r * n;
    V s0 = hn::Zero(d), s1 = hn::Zero(d);
    size_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
      s0 = hn::Add(s0, hn::LoadU(d, x + i));
      s1 = hn::Add(s1, hn::LoadU(d, x + i + lanes));
    }
    for (; i + lanes <= n; i += lanes) s0 = hn::Add(s0, hn::LoadU(d, x + i));
    if (i < n) s1 = hn::Add(s1, LoadTail(d, x + i, n - i));
    const float inv_n = 1.0f / static_cast<float>(n);
    const V mean = hn::Mul(hn::SumOfLanes(d, hn::Add(s0, s1)), hn::Set(d, inv_n));
    V q0 = hn::Zero(d), q1 = hn::Zero(d);
    for (i = 0; i + lanes <= n; i += lanes) {
      const V c = hn::Sub(hn::LoadU(d, x + i), mean);
      q0 = hn::MulAdd(c, c, q0);
    }
    if (i < n) {
      const V c = hn::Sub(LoadTail(d, x + i, n - i), mean);
      q1 = hn::Mul(c, c);
      // Lanes past the row hold (0 - mean)^2: drop them.
      HWY_ALIGN float buf[hn::MaxLanes(d)];
      hn::Store(q1, d, buf);
      for (size_t k = n - i; k < lanes; ++k) buf[k] = 0.0f;
      q1 = hn::Load(d, buf);
    }
    const float var = hn::GetLane(hn::SumOfLanes(d, hn::Add(q0, q1))) * inv_n;
    const V rstd = hn::Set(d, 1.0f / std::sqrt(var + p.epsilon));
    for (i = 0; i < n; i += lanes) {
      const size_t count = n - i < lanes ? n - i : lanes;
      const bool full = count == lanes;
      const V xv = full ? hn::LoadU(d, x + i) : LoadTail(d, x + i, count);
      V v = hn::Mul(hn::Sub(xv, mean), rstd);
      if (p.gamma != nullptr) {
        v = hn::Mul(v, full ? hn::LoadU(d, p.gamma + i) : LoadTail(d, p.gamma + i, count, 1.0f));
      }
      if (p.beta != nullptr) {
        v = hn::Add(v, full ? hn::LoadU(d, p.beta + i) : LoadTail(d, p.beta + i, count));
      }
      if (full) hn::StoreU(v, d, y + i); else StoreTail(d, v, y + i, count);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(softmax_f32_impl);
EMBER_HWY_EXPORT(layer_norm_f32_impl);
EMBER_HWY_EXPORT(softmax_lanes_impl);

namespace cpu_detail {
namespace {
void softmax_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(softmax_f32_impl)(*static_cast<const SoftmaxPlan*>(plan), begin, end);
}
void layer_norm_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(layer_norm_f32_impl)(*static_cast<const LayerNormPlan*>(plan), begin, end);
}
}  // namespace
}  // namespace cpu_detail

namespace cpu {

void softmax(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
             TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  cpu_detail::SoftmaxPlan p{};
  p.in = x.data_as<const float>();
  p.out = outputs[0].data_as<float>();
  if (x.rank == 0) {  // softmax of a scalar
    p.out[0] = 1.0f;
    return;
  }
  const int axis = attrs.axis < 0 ? attrs.axis + x.rank : attrs.axis;
  p.outer = p.inner = 1;
  for (int i = 0; i < axis; ++i) p.outer *= x.dims[i];
  for (int i = axis + 1; i < x.rank; ++i) p.inner *= x.dims[i];
  p.axis = x.dims[axis];
  if (x.numel() == 0) return;
  size_t units = static_cast<size_t>(p.outer);
  if (p.inner != 1) {  // units are (outer, vector of inner columns) of the dispatched target
    const size_t lanes = EMBER_HWY_DISPATCH(softmax_lanes_impl)();
    p.inner_vectors = (p.inner + static_cast<int64_t>(lanes) - 1) / static_cast<int64_t>(lanes);
    units = static_cast<size_t>(p.outer * p.inner_vectors);
  }
  cpu_detail::run_units(ctx.pool, units, double(x.numel()) * 8.0, 1 << 16, &p,
                        cpu_detail::softmax_units);
}

void layer_norm(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs,
                size_t input_count, TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  cpu_detail::LayerNormPlan p{};
  p.in = x.data_as<const float>();
  p.out = outputs[0].data_as<float>();
  p.gamma = input_count > 1 && inputs[1].is_present() ? inputs[1].data_as<const float>() : nullptr;
  p.beta = input_count > 2 && inputs[2].is_present() ? inputs[2].data_as<const float>() : nullptr;
  p.epsilon = attrs.epsilon;
  const int axis = attrs.axis < 0 ? attrs.axis + x.rank : attrs.axis;
  p.row = 1;
  for (int i = axis; i < x.rank; ++i) p.row *= x.dims[i];
  if (x.numel() == 0 || p.row == 0) return;
  const size_t rows = static_cast<size_t>(x.numel() / static_cast<uint64_t>(p.row));
  cpu_detail::run_units(ctx.pool, rows, double(x.numel()) * 4.0, 1 << 16, &p,
                        cpu_detail::layer_norm_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
