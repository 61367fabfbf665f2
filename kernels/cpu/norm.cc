// f32 softmax (any axis) and layer_norm (over dims [axis, rank), gamma and beta optional), the
// reductions reduce_sum / reduce_mean and inference batch_norm.
//
// Reductions whose reduced axes all follow the kept ones (size-1 dims aside: the last axis, the
// spatial dims of NCHW, everything) are contiguous rows, summed with f64 vector accumulators so
// they agree with the reference's double sum to within the final f32 rounding; other axis sets take
// a scalar double walk. batch_norm folds each channel into y = x a + b (a, b computed in double).
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

struct ReducePlan {
  const float* in;
  float* out;
  int64_t row;  // reduced elements per output element
  bool mean;
};

// Units are the planes (batch index, channel c0 + c) for c < chunk.
struct BatchNormPlan {
  const float* in;
  float* out;
  const float* a;  // [chunk]: scale / sqrt(var + eps) of channels c0 ..
  const float* b;  // [chunk]: bias - mean * a
  int64_t chunk, channels, c0, plane;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for x <= 0 (x - max of its row); hwy's Exp returns 0 below -104, and also for NaN, so
// NaN is passed through: a NaN in a row makes the sum, hence the whole row, NaN (as the reference).
// Exp itself only sees finite values >= -110 (NaN lanes zeroed, -inf clamped; the result is the
// same 0 below -104): its float-to-int step on NaN or -inf is undefined behaviour on EMU128.
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x) {
  const auto nan = hn::IsNaN(x);
  const V safe = hn::Max(hn::IfThenZeroElse(nan, x), hn::Set(d, -110.0f));
  return hn::IfThenElse(nan, x, hn::Exp(d, safe));
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

// Rows [begin, end): out[r] = sum (or mean) of in[r * row, (r + 1) * row), accumulated in f64.
void reduce_rows_f32_impl(const cpu_detail::ReducePlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // Lanes(dd) floats, promoted to doubles
  const size_t lanes = hn::Lanes(dd);
  const size_t n = static_cast<size_t>(p.row);
  for (size_t r = begin; r < end; ++r) {
    const float* x = p.in + r * n;
    // From -0, as the reference (and the tail filled with -0): a row of -0 sums to -0.
    auto s0 = hn::Set(dd, -0.0), s1 = hn::Set(dd, -0.0);
    size_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
      s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LoadU(df, x + i)));
      s1 = hn::Add(s1, hn::PromoteTo(dd, hn::LoadU(df, x + i + lanes)));
    }
    for (; i + lanes <= n; i += lanes) s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LoadU(df, x + i)));
    if (i < n) s1 = hn::Add(s1, hn::PromoteTo(dd, LoadTail(df, x + i, n - i, -0.0f)));
    double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
    if (p.mean) sum /= static_cast<double>(n);
    p.out[r] = static_cast<float>(sum);
  }
}

// Planes [begin, end) of the plan: y = x * a[c] + b[c].
void batch_norm_f32_impl(const cpu_detail::BatchNormPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t n = static_cast<size_t>(p.plane);
  for (size_t u = begin; u < end; ++u) {
    const int64_t bi = static_cast<int64_t>(u) / p.chunk, c = static_cast<int64_t>(u) % p.chunk;
    const auto a = hn::Set(d, p.a[c]), b = hn::Set(d, p.b[c]);
    const size_t offset = static_cast<size_t>((bi * p.channels + p.c0 + c) * p.plane);
    const float* x = p.in + offset;
    float* y = p.out + offset;
    size_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::MulAdd(hn::LoadU(d, x + i), a, b), d, y + i);
    if (i < n) StoreTail(d, hn::MulAdd(LoadTail(d, x + i, n - i), a, b), y + i, n - i);
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(softmax_f32_impl);
EMBER_HWY_EXPORT(layer_norm_f32_impl);
EMBER_HWY_EXPORT(softmax_lanes_impl);
EMBER_HWY_EXPORT(reduce_rows_f32_impl);
EMBER_HWY_EXPORT(batch_norm_f32_impl);

namespace cpu_detail {
namespace {
void softmax_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(softmax_f32_impl)(*static_cast<const SoftmaxPlan*>(plan), begin, end);
}
void layer_norm_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(layer_norm_f32_impl)(*static_cast<const LayerNormPlan*>(plan), begin, end);
}
void reduce_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(reduce_rows_f32_impl)(*static_cast<const ReducePlan*>(plan), begin, end);
}
void batch_norm_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(batch_norm_f32_impl)(*static_cast<const BatchNormPlan*>(plan), begin, end);
}

void reduce(KernelContext& ctx, const OpAttrs& attrs, const TensorView& x, TensorView& out,
            bool mean) {
  bool reduced[kMaxRank] = {false};
  for (int j = 0; j < attrs.count; ++j) {
    reduced[attrs.axes[j] < 0 ? attrs.axes[j] + x.rank : attrs.axes[j]] = true;
  }
  if (attrs.count == 0) {
    for (int i = 0; i < x.rank; ++i) reduced[i] = true;
  }
  int64_t outer = 1, row = 1;
  bool trailing = true;  // every reduced dim (of size > 1) follows every kept dim (of size > 1)
  bool seen_reduced = false;
  for (int i = 0; i < x.rank; ++i) {
    if (reduced[i]) {
      row *= x.dims[i];
      if (x.dims[i] != 1) seen_reduced = true;
    } else {
      outer *= x.dims[i];
      if (x.dims[i] != 1 && seen_reduced) trailing = false;
    }
  }
  const float* px = x.data_as<const float>();
  float* po = out.data_as<float>();
  if (outer == 0) return;
  if (row == 0) {  // empty extent: sum 0, mean 0 / 0
    const float v = mean ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    for (int64_t i = 0; i < outer; ++i) po[i] = v;
    return;
  }
  if (trailing) {
    ReducePlan p{px, po, row, mean};
    run_units(ctx.pool, static_cast<size_t>(outer), double(x.numel()), 1 << 16, &p, reduce_units);
    return;
  }
  // General axis set: for each output element, walk its reduced sub-box (kept and reduced dims
  // with their input strides), summing in double like the reference.
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank], red_dims[kMaxRank], red_strides[kMaxRank];
  int kept = 0, red = 0;
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    if (reduced[i]) {
      red_dims[red] = x.dims[i];
      red_strides[red++] = stride;
    } else {
      kept_dims[kept] = x.dims[i];
      kept_strides[kept++] = stride;
    }
    stride *= x.dims[i];
  }
  // Both lists are innermost first.
  int64_t kidx[kMaxRank] = {0};
  int64_t koff = 0;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t ridx[kMaxRank] = {0};
    int64_t roff = 0;
    double sum = -0.0;  // as the reference (row > 0 here)
    for (int64_t k = 0; k < row; ++k) {
      sum += px[koff + roff];
      for (int dim = 0; dim < red; ++dim) {
        roff += red_strides[dim];
        if (++ridx[dim] < red_dims[dim]) break;
        roff -= red_strides[dim] * red_dims[dim];
        ridx[dim] = 0;
      }
    }
    po[o] = static_cast<float>(mean ? sum / static_cast<double>(row) : sum);
    for (int dim = 0; dim < kept; ++dim) {
      koff += kept_strides[dim];
      if (++kidx[dim] < kept_dims[dim]) break;
      koff -= kept_strides[dim] * kept_dims[dim];
      kidx[dim] = 0;
    }
  }
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

void reduce_sum(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  cpu_detail::reduce(ctx, attrs, inputs[0], outputs[0], false);
}

void reduce_mean(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                 TensorView* outputs, size_t) {
  cpu_detail::reduce(ctx, attrs, inputs[0], outputs[0], true);
}

// Per-channel a and b live on the stack in chunks of kChunk channels, so no scratch is needed.
void batch_norm(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const float* scale = inputs[1].data_as<const float>();
  const float* bias = inputs[2].data_as<const float>();
  const float* mean = inputs[3].data_as<const float>();
  const float* var = inputs[4].data_as<const float>();
  const int64_t n = x.dims[0], channels = x.dims[1];
  int64_t plane = 1;
  for (int i = 2; i < x.rank; ++i) plane *= x.dims[i];
  if (x.numel() == 0) return;
  constexpr int64_t kChunk = 256;
  float a[kChunk], b[kChunk];
  for (int64_t c0 = 0; c0 < channels; c0 += kChunk) {
    const int64_t cn = channels - c0 < kChunk ? channels - c0 : kChunk;
    for (int64_t c = 0; c < cn; ++c) {
      const double inv_std =
          1.0 / std::sqrt(static_cast<double>(var[c0 + c]) + static_cast<double>(attrs.epsilon));
      const double ad = static_cast<double>(scale[c0 + c]) * inv_std;
      a[c] = static_cast<float>(ad);
      b[c] = static_cast<float>(static_cast<double>(bias[c0 + c]) -
                                static_cast<double>(mean[c0 + c]) * ad);
    }
    cpu_detail::BatchNormPlan p{x.data_as<const float>(), outputs[0].data_as<float>(), a, b, cn,
                                channels, c0, plane};
    cpu_detail::run_units(ctx.pool, static_cast<size_t>(n * cn), double(n * cn * plane), 1 << 16,
                          &p, cpu_detail::batch_norm_units);
  }
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
