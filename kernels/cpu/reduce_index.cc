// f32 reduce_max / reduce_min, argmax / argmin and group_norm (issue 17; semantics: the reference's,
// kernels/reference/ops.h). The other ops of the family (reduce_prod, topk, cumsum, gather_elements,
// integer reductions) are served by the reference kernels.
//
// reduce_max / reduce_min work on order keys: the f32 bits with the magnitude bits flipped for
// negative values are an int32 whose order is the floats' (-0 below +0), so an integer Max / Min
// gives exactly the reference's IEEE maximum / minimum, whatever the order of the elements. A NaN
// lane takes the key that wins (INT32_MAX for max, INT32_MIN for min; no float's key is either),
// which becomes the canonical NaN at the end. Reduced axes that follow all kept ones (size-1 dims
// aside) are contiguous rows, reduced a vector at a time; a reduced block between kept axes is
// reduced a vector of the inner columns at a time; other axis sets take a scalar walk.
//
// argmax / argmin: onnxruntime's scan. Over the last axis: a NaN at index 0 is the answer;
// otherwise the row's max over its non-NaN values (NaN lanes replaced by -inf) is found with vectors,
// then the first (last, with select_last_index) element equal to it. Over another axis, a vector of
// columns runs the scan itself (compare, select value and index per lane), so every lane follows
// the reference's steps exactly.
//
// group_norm: per (n, group), mean then the centred variance with f64 vector accumulators, and the
// output (x - mean) * (rstd * scale[c]) + bias[c] in f64: within the reference's final rounding.
// Units are rows, column vectors or groups: no result depends on the thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/reduce_index.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_REDUCE_INDEX_PLAN_
#define EMBER_KERNELS_CPU_REDUCE_INDEX_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

// [outer, red, inner] with the reduced block in the middle (inner = 1: contiguous rows).
struct ExtremePlan {
  const float* in;
  float* out;
  int64_t red, inner, inner_vectors;
  bool max;
};

// [outer, size, inner] along the arg axis.
struct ArgPlan {
  const float* in;
  int64_t* out;
  int64_t size, inner, inner_vectors;
  bool max, last;
};

struct GroupNormPlan {
  const float* in;
  float* out;
  const float* scale;
  const float* bias;
  int64_t groups, per_group, spatial;
  double epsilon;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int32_t kMagnitude = 0x7FFFFFFF;

// f32 bits <-> order key (an involution).
template <class DI>
HWY_INLINE hn::VFromD<DI> OrderKey(DI di, hn::VFromD<DI> bits) {
  return hn::Xor(bits, hn::And(hn::ShiftRight<31>(bits), hn::Set(di, kMagnitude)));
}

// Keys of the floats at p (count lanes; the rest filled with the identity), NaN -> nan_key.
template <class D>
HWY_INLINE hn::VFromD<hn::RebindToSigned<D>> LoadKeys(D d, const float* p, size_t count, float fill,
                                                     int32_t nan_key) {
  const hn::RebindToSigned<D> di;
  const auto v = count == hn::Lanes(d) ? hn::LoadU(d, p) : LoadTail(d, p, count, fill);
  const auto key = OrderKey(di, hn::BitCast(di, v));
  return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), hn::Set(di, nan_key), key);
}

template <class DI>
HWY_INLINE hn::VFromD<DI> Combine(DI, hn::VFromD<DI> a, hn::VFromD<DI> b, bool max) {
  return max ? hn::Max(a, b) : hn::Min(a, b);
}

template <class DI>
HWY_INLINE hn::VFromD<hn::RebindToFloat<DI>> KeysToFloats(DI di, hn::VFromD<DI> key, int32_t nan_key) {
  const hn::RebindToFloat<DI> d;
  const auto bits = hn::IfThenElse(hn::Eq(key, hn::Set(di, nan_key)), hn::Set(di, int32_t{0x7FC00000}),
                                   OrderKey(di, key));
  return hn::BitCast(d, bits);
}

void extreme_f32_impl(const cpu_detail::ExtremePlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  const float fill = p.max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const int32_t nan_key = p.max ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
  const auto identity = hn::Set(di, p.max ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max());
  for (size_t u = begin; u < end; ++u) {
    if (p.inner == 1) {
      const size_t n = static_cast<size_t>(p.red);
      const float* x = p.in + u * n;
      auto a0 = identity, a1 = identity;
      size_t i = 0;
      for (; i + 2 * lanes <= n; i += 2 * lanes) {
        a0 = Combine(di, a0, LoadKeys(d, x + i, lanes, fill, nan_key), p.max);
        a1 = Combine(di, a1, LoadKeys(d, x + i + lanes, lanes, fill, nan_key), p.max);
      }
      for (; i < n; i += lanes) a0 = Combine(di, a0, LoadKeys(d, x + i, n - i < lanes ? n - i : lanes, fill, nan_key), p.max);
      const auto all = Combine(di, a0, a1, p.max);
      const auto key = p.max ? hn::MaxOfLanes(di, all) : hn::MinOfLanes(di, all);
      p.out[u] = hn::GetLane(KeysToFloats(di, key, nan_key));
    } else {
      const int64_t o = static_cast<int64_t>(u) / p.inner_vectors;
      const int64_t c0 = (static_cast<int64_t>(u) % p.inner_vectors) * static_cast<int64_t>(lanes);
      const size_t count = static_cast<size_t>(p.inner - c0 < static_cast<int64_t>(lanes) ? p.inner - c0 : lanes);
      const float* x = p.in + o * p.red * p.inner + c0;
      auto acc = identity;
      for (int64_t r = 0; r < p.red; ++r) acc = Combine(di, acc, LoadKeys(d, x + r * p.inner, count, fill, nan_key), p.max);
      const auto v = KeysToFloats(di, acc, nan_key);
      float* y = p.out + o * p.inner + c0;
      if (count == lanes) hn::StoreU(v, d, y); else StoreTail(d, v, y, count);
    }
  }
}

// First (or last) index in [0, n) with x[i] == m; m occurs in x.
int64_t FindEqual(const float* x, size_t n, float m, bool last) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto vm = hn::Set(d, m);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t blocks = (n + lanes - 1) / lanes;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t block = last ? blocks - 1 - b : b;
    const size_t i = block * lanes;
    const size_t count = n - i < lanes ? n - i : lanes;
    const auto v = count == lanes ? hn::LoadU(d, x + i) : LoadTail(d, x + i, count, nan);
    const auto eq = hn::Eq(v, vm);
    if (hn::AllFalse(d, eq)) continue;
    if (!last) return static_cast<int64_t>(i + static_cast<size_t>(hn::FindFirstTrue(d, eq)));
    for (size_t k = count; k-- > 0;) {
      if (x[i + k] == m) return static_cast<int64_t>(i + k);
    }
  }
  return 0;  // not reached: m is one of the values
}

void arg_f32_impl(const cpu_detail::ArgPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  const float skip = p.max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  for (size_t u = begin; u < end; ++u) {
    if (p.inner == 1) {
      const size_t n = static_cast<size_t>(p.size);
      const float* x = p.in + u * n;
      if (std::isnan(x[0])) {  // nothing compares greater than it
        p.out[u] = 0;
        continue;
      }
      auto acc = hn::Set(d, x[0]);
      for (size_t i = 0; i < n; i += lanes) {
        const size_t count = n - i < lanes ? n - i : lanes;
        auto v = count == lanes ? hn::LoadU(d, x + i) : LoadTail(d, x + i, count, skip);
        v = hn::IfThenElse(hn::IsNaN(v), hn::Set(d, skip), v);
        acc = p.max ? hn::Max(acc, v) : hn::Min(acc, v);
      }
      const float m = hn::GetLane(p.max ? hn::MaxOfLanes(d, acc) : hn::MinOfLanes(d, acc));
      p.out[u] = FindEqual(x, n, m, p.last);
    } else {
      const int64_t o = static_cast<int64_t>(u) / p.inner_vectors;
      const int64_t c0 = (static_cast<int64_t>(u) % p.inner_vectors) * static_cast<int64_t>(lanes);
      const size_t count = static_cast<size_t>(p.inner - c0 < static_cast<int64_t>(lanes) ? p.inner - c0 : lanes);
      const float* x = p.in + o * p.size * p.inner + c0;
      auto load = [&](const float* q) { return count == lanes ? hn::LoadU(d, q) : LoadTail(d, q, count); };
      auto best = load(x);
      auto index = hn::Zero(di);
      for (int64_t r = 1; r < p.size; ++r) {
        const auto v = load(x + r * p.inner);
        // Or(Gt, Eq) rather than Not(Lt): false for a NaN on either side, as the scalar scan.
        const auto better = p.max ? (p.last ? hn::Or(hn::Gt(v, best), hn::Eq(v, best)) : hn::Gt(v, best))
                                  : (p.last ? hn::Or(hn::Lt(v, best), hn::Eq(v, best)) : hn::Lt(v, best));
        best = hn::IfThenElse(better, v, best);
        index = hn::IfThenElse(hn::RebindMask(di, better), hn::Set(di, static_cast<int32_t>(r)), index);
      }
      HWY_ALIGN int32_t buf[hn::MaxLanes(di)];
      hn::Store(index, di, buf);
      int64_t* y = p.out + o * p.inner + c0;
      for (size_t k = 0; k < count; ++k) y[k] = buf[k];
    }
  }
}

void group_norm_f32_impl(const cpu_detail::GroupNormPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // Lanes(dd) floats
  const size_t lanes = hn::Lanes(dd);
  const size_t n = static_cast<size_t>(p.per_group * p.spatial);
  const size_t plane = static_cast<size_t>(p.spatial);
  for (size_t u = begin; u < end; ++u) {
    const int64_t g = static_cast<int64_t>(u) % p.groups;
    const float* x = p.in + u * n;
    float* y = p.out + u * n;
    auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
    size_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
      s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LoadU(df, x + i)));
      s1 = hn::Add(s1, hn::PromoteTo(dd, hn::LoadU(df, x + i + lanes)));
    }
    for (; i + lanes <= n; i += lanes) s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LoadU(df, x + i)));
    if (i < n) s1 = hn::Add(s1, hn::PromoteTo(dd, LoadTail(df, x + i, n - i)));
    const double mean = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1))) / static_cast<double>(n);
    const auto vmean = hn::Set(dd, mean);
    auto q0 = hn::Zero(dd);
    for (i = 0; i + lanes <= n; i += lanes) {
      const auto c = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i)), vmean);
      q0 = hn::MulAdd(c, c, q0);
    }
    double tail = 0.0;  // in scalar: padding lanes would add (0 - mean)^2
    for (; i < n; ++i) {
      const double c = static_cast<double>(x[i]) - mean;
      tail += c * c;
    }
    const double var = (hn::GetLane(hn::SumOfLanes(dd, q0)) + tail) / static_cast<double>(n);
    const double rstd = 1.0 / std::sqrt(var + p.epsilon);
    for (int64_t cl = 0; cl < p.per_group; ++cl) {
      const int64_t ch = g * p.per_group + cl;
      const auto a = hn::Set(dd, rstd * static_cast<double>(p.scale[ch]));
      const auto b = hn::Set(dd, static_cast<double>(p.bias[ch]));
      const float* xc = x + static_cast<size_t>(cl) * plane;
      float* yc = y + static_cast<size_t>(cl) * plane;
      size_t j = 0;
      for (; j + lanes <= plane; j += lanes) {
        const auto v = hn::MulAdd(hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, xc + j)), vmean), a, b);
        hn::StoreU(hn::DemoteTo(df, v), df, yc + j);
      }
      for (; j < plane; ++j) {
        yc[j] = static_cast<float>((static_cast<double>(xc[j]) - mean) * (rstd * static_cast<double>(p.scale[ch])) +
                                   static_cast<double>(p.bias[ch]));
      }
    }
  }
}

size_t reduce_index_lanes_impl() { return hn::Lanes(hn::ScalableTag<float>()); }

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(extreme_f32_impl);
EMBER_HWY_EXPORT(arg_f32_impl);
EMBER_HWY_EXPORT(group_norm_f32_impl);
EMBER_HWY_EXPORT(reduce_index_lanes_impl);

namespace cpu_detail {
namespace {

void extreme_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(extreme_f32_impl)(*static_cast<const ExtremePlan*>(plan), begin, end);
}
void arg_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(arg_f32_impl)(*static_cast<const ArgPlan*>(plan), begin, end);
}
void group_norm_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(group_norm_f32_impl)(*static_cast<const GroupNormPlan*>(plan), begin, end);
}

int64_t lanes() { return static_cast<int64_t>(EMBER_HWY_DISPATCH(reduce_index_lanes_impl)()); }

// The reference's IEEE maximum / minimum of two floats (scalar fallback).
float extreme(float a, float b, bool max) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return (std::signbit(a) != max) ? a : b;
  return (a > b) == max ? a : b;
}

void reduce_extreme(KernelContext& ctx, const OpAttrs& attrs, const TensorView& x, TensorView& out, bool max) {
  bool reduced[kMaxRank] = {false};
  for (int j = 0; j < attrs.count; ++j) reduced[attrs.axes[j] < 0 ? attrs.axes[j] + x.rank : attrs.axes[j]] = true;
  if (attrs.count == 0) {
    for (int i = 0; i < x.rank; ++i) reduced[i] = true;
  }
  // Classify the dims of size > 1 as kept-before (outer), reduced, kept-after (inner).
  int64_t outer = 1, red = 1, inner = 1;
  int phase = 0;  // 0: before the reduced block, 1: in it, 2: after it
  bool blocked = true;
  for (int i = 0; i < x.rank; ++i) {
    if (reduced[i]) red *= x.dims[i];
    else if (phase == 0) outer *= x.dims[i];
    else inner *= x.dims[i];
    if (x.dims[i] == 1) continue;
    if (reduced[i]) {
      if (phase == 2) blocked = false;
      phase = phase == 0 ? 1 : phase;
    } else if (phase == 1) {
      phase = 2;
    }
  }
  const float* px = x.data_as<const float>();
  float* po = out.data_as<float>();
  const int64_t out_count = outer * inner;
  if (out_count == 0) return;
  if (red == 0) {
    const float v = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < out_count; ++i) po[i] = v;
    return;
  }
  if (blocked) {
    const int64_t l = lanes();
    ExtremePlan p{px, po, red, inner, (inner + l - 1) / l, max};
    const size_t units = static_cast<size_t>(inner == 1 ? outer : outer * p.inner_vectors);
    run_units(ctx.pool, units, double(x.numel()), 1 << 16, &p, extreme_units);
    return;
  }
  // Reduced axes split by kept ones: a scalar walk (the result does not depend on the order).
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank], red_dims[kMaxRank], red_strides[kMaxRank];
  int kept = 0, nred = 0;
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    if (reduced[i]) {
      red_dims[nred] = x.dims[i];
      red_strides[nred++] = stride;
    } else {
      kept_dims[kept] = x.dims[i];
      kept_strides[kept++] = stride;
    }
    stride *= x.dims[i];
  }
  int64_t kidx[kMaxRank] = {0};
  int64_t koff = 0;
  for (int64_t o = 0; o < out_count; ++o) {
    int64_t ridx[kMaxRank] = {0};
    int64_t roff = 0;
    float acc = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < red; ++k) {
      acc = extreme(acc, px[koff + roff], max);
      for (int dim = 0; dim < nred; ++dim) {
        roff += red_strides[dim];
        if (++ridx[dim] < red_dims[dim]) break;
        roff -= red_strides[dim] * red_dims[dim];
        ridx[dim] = 0;
      }
    }
    po[o] = acc;
    for (int dim = 0; dim < kept; ++dim) {
      koff += kept_strides[dim];
      if (++kidx[dim] < kept_dims[dim]) break;
      koff -= kept_strides[dim] * kept_dims[dim];
      kidx[dim] = 0;
    }
  }
}

void arg(KernelContext& ctx, const OpAttrs& attrs, const TensorView& x, TensorView& out, bool max) {
  const int axis = attrs.axis < 0 ? attrs.axis + x.rank : attrs.axis;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dims[i];
  for (int i = axis + 1; i < x.rank; ++i) inner *= x.dims[i];
  const int64_t size = x.dims[axis];
  if (outer * inner == 0) return;
  const int64_t l = lanes();
  ArgPlan p{x.data_as<const float>(), out.data_as<int64_t>(), size, inner, (inner + l - 1) / l, max,
            attrs.select_last_index};
  if (inner > 1 && size > std::numeric_limits<int32_t>::max()) {
    // Column vectors keep int32 indices: an axis this long (a tensor above 8 GiB) takes the scan
    // one column at a time.
    const float* px = p.in;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        const float* row = px + o * size * inner + in;
        float best = row[0];
        int64_t index = 0;
        for (int64_t i = 1; i < size; ++i) {
          const float v = row[i * inner];
          const bool better = max ? (p.last ? v >= best : v > best) : (p.last ? v <= best : v < best);
          if (better) {
            best = v;
            index = i;
          }
        }
        p.out[o * inner + in] = index;
      }
    }
    return;
  }
  const size_t units = static_cast<size_t>(inner == 1 ? outer : outer * p.inner_vectors);
  run_units(ctx.pool, units, double(x.numel()), 1 << 16, &p, arg_units);
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

void reduce_max(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  cpu_detail::reduce_extreme(ctx, attrs, inputs[0], outputs[0], true);
}

void reduce_min(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  cpu_detail::reduce_extreme(ctx, attrs, inputs[0], outputs[0], false);
}

void argmax(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  cpu_detail::arg(ctx, attrs, inputs[0], outputs[0], true);
}

void argmin(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  cpu_detail::arg(ctx, attrs, inputs[0], outputs[0], false);
}

void group_norm(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  const TensorView& x = inputs[0];
  int64_t spatial = 1;
  for (int i = 2; i < x.rank; ++i) spatial *= x.dims[i];
  const int64_t groups = attrs.groups;
  const int64_t per_group = x.dims[1] / groups;
  if (per_group * spatial == 0) return;
  cpu_detail::GroupNormPlan p{x.data_as<const float>(), outputs[0].data_as<float>(), inputs[1].data_as<const float>(),
                              inputs[2].data_as<const float>(), groups, per_group, spatial,
                              static_cast<double>(attrs.epsilon)};
  cpu_detail::run_units(ctx.pool, static_cast<size_t>(x.dims[0] * groups), double(x.numel()), 1 << 15, &p,
                        cpu_detail::group_norm_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
