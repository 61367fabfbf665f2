// f32 NCHW pooling: max_pool2d, avg_pool2d (ceil_mode, count_include_pad, dilation, asymmetric
// padding) and global_avg_pool2d.
//
// Like conv.cc, a work unit is one output row of one channel: the interior columns (every tap inside
// the input) are vectors of output columns, contiguous loads for stride 1 and gathers otherwise; the
// columns touching the padding or the ceil_mode overhang are done one by one.
// avg divisor: the taps inside the input, or with count_include_pad the taps inside the padded input
// [-pad_begin, size + pad_end) (PyTorch's rule; windows that overhang it under ceil_mode count less).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/pool.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_POOL_PLAN_
#define EMBER_KERNELS_CPU_POOL_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

struct PoolPlan {
  bool is_max;
  bool count_include_pad;
  const float* in;
  float* out;
  int64_t nc, h, w, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  int64_t ow_lo, ow_hi;  // interior output columns
};

// The separable 3x3 / 2 max pool (below): output rows per unit, and the widest output row its stack
// buffers (9 KiB) take.
constexpr int64_t kMaxPoolRows = 8;
constexpr int64_t kMaxPoolMaxWidth = 128;

struct GlobalPoolPlan {
  const float* in;
  float* out;
  int64_t hw;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::PoolPlan;

// Taps of one window along one axis: inside the input, and inside the padded input.
HWY_INLINE void CountTaps(int64_t start, int64_t k, int64_t dil, int64_t size, int64_t pad_begin,
                          int64_t pad_end, int64_t* inside, int64_t* inside_padded) {
  *inside = *inside_padded = 0;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t i = start + t * dil;
    if (i >= 0 && i < size) ++*inside;
    if (i >= -pad_begin && i < size + pad_end) ++*inside_padded;
  }
}

HWY_INLINE float PoolPoint(const PoolPlan& p, const float* plane, int64_t oh, int64_t ow) {
  const int64_t ih0 = oh * p.sh - p.pt, iw0 = ow * p.sw - p.pl;
  float acc = p.is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
  for (int64_t kh = 0; kh < p.kh; ++kh) {
    const int64_t ih = ih0 + kh * p.dh;
    if (ih < 0 || ih >= p.h) continue;
    for (int64_t kw = 0; kw < p.kw; ++kw) {
      const int64_t iw = iw0 + kw * p.dw;
      if (iw < 0 || iw >= p.w) continue;
      const float v = plane[ih * p.w + iw];
      if (p.is_max) {
        if (v > acc || std::isnan(v)) acc = v;  // NaN wins, and stays
      } else {
        acc += v;
      }
    }
  }
  if (p.is_max) return acc;
  int64_t rows, rows_padded, cols, cols_padded;
  CountTaps(ih0, p.kh, p.dh, p.h, p.pt, p.pb, &rows, &rows_padded);
  CountTaps(iw0, p.kw, p.dw, p.w, p.pl, p.pr, &cols, &cols_padded);
  const int64_t count = p.count_include_pad ? rows_padded * cols_padded : rows * cols;
  return count > 0 ? acc / static_cast<float>(count) : 0.0f;
}

// The taps of output columns [ow0, ow0 + lanes) of row oh, reduced in tap order. kExactNaN: max
// lets a NaN win at each step (acc + x where either is NaN, as the reference); otherwise a plain max
// with a record of whether any tap was NaN (the caller redoes those chunks exactly).
template <bool kMax, bool kStrided, bool kExactNaN, class D>
HWY_INLINE hn::Vec<D> PoolTaps(D d, const PoolPlan& p, const float* plane, int64_t oh, int64_t ow0,
                               hn::Mask<D>* any_nan) {
  const float* in_end = p.in + p.nc * p.h * p.w;
  const hn::RebindToSigned<D> di;
  using V = hn::Vec<decltype(d)>;
  const auto gather_idx = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(p.sw)));
  V acc = kMax ? hn::Set(d, -std::numeric_limits<float>::infinity()) : hn::Zero(d);
  auto nan = hn::FirstN(d, 0);
  const int64_t ih0 = oh * p.sh - p.pt, iw0 = ow0 * p.sw - p.pl;
  for (int64_t kh = 0; kh < p.kh; ++kh) {
    const int64_t ih = ih0 + kh * p.dh;
    if (ih < 0 || ih >= p.h) continue;
    const float* row = plane + ih * p.w + iw0;
    for (int64_t kw = 0; kw < p.kw; ++kw) {
      V x;
      if constexpr (kStrided) {
        const float* src = row + kw * p.dw;
        // Stride 2: the even lanes of two loads, which read one float past the last tap (inside the
        // input unless this is its last row); a gather otherwise.
        if (HWY_TARGET != HWY_SCALAR && p.sw == 2 && src + 2 * hn::Lanes(d) <= in_end) {
          x = EvenLanes(d, src);
        } else {
          x = hn::GatherIndex(d, src, gather_idx);
        }
      } else {
        x = hn::LoadU(d, row + kw * p.dw);
      }
      if constexpr (!kMax) {
        acc = hn::Add(acc, x);
      } else if constexpr (kExactNaN) {  // NaN wins (PyTorch); x86 max would drop it
        acc = hn::IfThenElse(hn::Or(hn::IsNaN(acc), hn::IsNaN(x)), hn::Add(acc, x),
                             hn::IfThenElse(hn::Gt(x, acc), x, acc));
      } else {
        // x > acc ? x : acc, the reference's rule (maxps would return -0 for max(+0, -0)).
        acc = hn::IfThenElse(hn::Gt(x, acc), x, acc);
        nan = hn::Or(nan, hn::IsNaN(x));
      }
    }
  }
  if (any_nan != nullptr) *any_nan = nan;
  return acc;
}

template <bool kMax, bool kStrided, class D>
HWY_INLINE void PoolChunk(D d, const PoolPlan& p, const float* plane, int64_t oh, int64_t ow0,
                          float divisor, float* dst) {
  using V = hn::Vec<decltype(d)>;
  V acc;
  if constexpr (kMax) {
    // The plain max chain (no NaN test per step, which made it latency-bound); a chunk that met a
    // NaN is redone with the exact NaN order, so the bits are the same either way.
    hn::Mask<D> any_nan;
    acc = PoolTaps<true, kStrided, false>(d, p, plane, oh, ow0, &any_nan);
    if (!hn::AllFalse(d, any_nan)) acc = PoolTaps<true, kStrided, true>(d, p, plane, oh, ow0, nullptr);
  } else {
    acc = hn::Div(PoolTaps<false, kStrided, true>(d, p, plane, oh, ow0, nullptr), hn::Set(d, divisor));
  }
  hn::StoreU(acc, d, dst + ow0);
}

// Interior columns [lo, hi) in vectors of d's lanes (at least one whole vector: the last partial
// one is shifted back to end at hi, recomputing a few columns identically).
template <bool kMax, bool kStrided, class D>
HWY_INLINE void PoolInterior(D d, const PoolPlan& p, const float* plane, int64_t oh, int64_t lo, int64_t hi,
                             float divisor, float* dst) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t x = lo;
  for (; x + lanes <= hi; x += lanes) PoolChunk<kMax, kStrided>(d, p, plane, oh, x, divisor, dst);
  if (x < hi) PoolChunk<kMax, kStrided>(d, p, plane, oh, hi - lanes, divisor, dst);
}

template <bool kMax, bool kStrided>
void PoolUnits(const PoolPlan& p, size_t begin, size_t end) {
  // Rows narrower than a full vector (ResNet's 16- and 56-wide maps on AVX-512's 16 lanes) take
  // 8- or 4-lane vectors rather than the per-point path; every lane computes the same sequence, so
  // the results do not depend on the width.
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t lanes8 = static_cast<int64_t>(hn::Lanes(d8)), lanes4 = static_cast<int64_t>(hn::Lanes(d4));
  for (size_t u = begin; u < end; ++u) {
    const int64_t oh = static_cast<int64_t>(u) % p.oh;
    const int64_t plane_index = static_cast<int64_t>(u) / p.oh;
    const float* plane = p.in + plane_index * p.h * p.w;
    float* dst = p.out + (plane_index * p.oh + oh) * p.ow;
    int64_t lo = p.ow_lo, hi = p.ow_hi;
    if (hi - lo < lanes4) lo = hi = p.ow_hi;
    float divisor = 1.0f;
    if (!kMax) {  // interior columns: every kw tap is inside the input
      int64_t rows, rows_padded;
      CountTaps(oh * p.sh - p.pt, p.kh, p.dh, p.h, p.pt, p.pb, &rows, &rows_padded);
      divisor = static_cast<float>((p.count_include_pad ? rows_padded : rows) * p.kw);
      if (divisor == 0.0f) lo = hi = p.ow_hi;  // no valid row: let PoolPoint write 0
    }
    if (hi - lo >= lanes) {
      PoolInterior<kMax, kStrided>(d, p, plane, oh, lo, hi, divisor, dst);
    } else if (hi - lo >= lanes8) {
      PoolInterior<kMax, kStrided>(d8, p, plane, oh, lo, hi, divisor, dst);
    } else if (hi > lo) {
      PoolInterior<kMax, kStrided>(d4, p, plane, oh, lo, hi, divisor, dst);
    }
    for (int64_t x = 0; x < p.ow; ++x) {
      if (x == lo) x = hi;
      if (x >= p.ow) break;
      dst[x] = PoolPoint(p, plane, oh, x);
    }
  }
}

// ------------------------------------------------------------ max 3x3 / 2, separable (ResNet's)
// Max over a window in the reference's order (kh, then kw; x > acc, NaN first) is, without NaN, the
// window's earliest maximal element (equal values, +0 and -0, keep the first): so the max over kw of
// each input row, then over the kh rows of those, gives the same bits, and each row max serves two
// output rows. Out-of-range taps, which the reference skips, are -inf here (x > -inf picks any x, and
// a window without one valid tap stays -inf, the reference's start). Units: kMaxPoolRows output
// rows of one plane; a unit whose input rows hold a NaN runs the per-row exact path.
HWY_INLINE bool MaxPool3s2Eligible(const PoolPlan& p) {
  return p.is_max && p.kh == 3 && p.kw == 3 && p.sh == 2 && p.sw == 2 && p.dh == 1 && p.dw == 1 &&
         p.pt <= 1 && p.pl <= 1 && p.ow <= cpu_detail::kMaxPoolMaxWidth &&
         p.w + p.pl <= 2 * cpu_detail::kMaxPoolMaxWidth + 2 && HWY_TARGET != HWY_SCALAR;
}

// x > acc ? x : acc (x86's maxps(x, acc) is exactly that; elsewhere compare and select).
template <class D>
HWY_INLINE hn::Vec<D> MaxFirst(D d, hn::Vec<D> x, hn::Vec<D> acc) {
#if HWY_ARCH_X86
  (void)d;
  return hn::Max(x, acc);
#else
  return hn::IfThenElse(hn::Gt(x, acc), x, acc);
#endif
}

void MaxPool3s2Units(const PoolPlan& p, size_t begin, size_t end) {
  using cpu_detail::kMaxPoolMaxWidth;
  using cpu_detail::kMaxPoolRows;
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t blocks = (p.oh + kMaxPoolRows - 1) / kMaxPoolRows;
  const float ninf = -std::numeric_limits<float>::infinity();
  // Row maxes of 2 kMaxPoolRows + 1 input rows; a padded input row (column x = input x - pl, -inf
  // outside), with slack for the interleaved loads of the last vector.
  HWY_ALIGN float hmax[(2 * kMaxPoolRows + 1) * kMaxPoolMaxWidth];
  HWY_ALIGN float row[2 * kMaxPoolMaxWidth + 4 * 64];
  const int64_t row_len = 2 * p.ow + 2;
  for (size_t u = begin; u < end; ++u) {
    const int64_t plane_index = static_cast<int64_t>(u) / blocks;
    const int64_t oh0 = (static_cast<int64_t>(u) % blocks) * kMaxPoolRows;
    const int64_t oh1 = oh0 + kMaxPoolRows < p.oh ? oh0 + kMaxPoolRows : p.oh;
    const float* plane = p.in + plane_index * p.h * p.w;
    const int64_t ih0 = 2 * oh0 - p.pt, ih1 = 2 * (oh1 - 1) - p.pt + 3;  // input rows [ih0, ih1)
    // The row maxes; a NaN in the rows read sends the block to the exact per-row path (before any
    // output is written).
    auto nan = hn::FirstN(d, 0);
    for (int64_t ih = ih0; ih < ih1; ++ih) {
      float* hrow = hmax + (ih - ih0) * kMaxPoolMaxWidth;
      if (ih < 0 || ih >= p.h) {
        for (int64_t x = 0; x < p.ow; x += lanes) hn::Store(hn::Set(d, ninf), d, hrow + x);
        continue;
      }
      // row[x] = src[x - pl], -inf before and after, NaN noted on the way.
      const float* src = plane + ih * p.w;
      for (int64_t x = 0; x < p.pl; ++x) row[x] = ninf;
      int64_t x = 0;
      for (; x + lanes <= p.w; x += lanes) {
        const V v = hn::LoadU(d, src + x);
        nan = hn::Or(nan, hn::IsNaN(v));
        hn::StoreU(v, d, row + p.pl + x);
      }
      for (; x < p.w; ++x) {
        row[p.pl + x] = src[x];
        if (std::isnan(src[x])) nan = hn::FirstN(d, 1);
      }
      for (x = p.pl + p.w; x < row_len + 2 * lanes + 2; ++x) row[x] = ninf;
      // Output column ow reads row[2 ow], row[2 ow + 1], row[2 ow + 2].
      for (int64_t ow = 0; ow < p.ow; ow += lanes) {
        V e0, o0, e1, o1;
        hn::LoadInterleaved2(d, row + 2 * ow, e0, o0);
        hn::LoadInterleaved2(d, row + 2 * ow + 2, e1, o1);
        hn::Store(MaxFirst(d, e1, MaxFirst(d, o0, e0)), d, hrow + ow);
      }
    }
    if (!hn::AllFalse(d, nan)) {
      PoolUnits<true, true>(p, size_t(plane_index * p.oh + oh0), size_t(plane_index * p.oh + oh1));
      continue;
    }
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* h0 = hmax + (2 * oh - p.pt - ih0) * kMaxPoolMaxWidth;
      float* dst = p.out + (plane_index * p.oh + oh) * p.ow;
      int64_t ow = 0;
      for (; ow + lanes <= p.ow; ow += lanes) {
        const V m = MaxFirst(d, hn::Load(d, h0 + 2 * kMaxPoolMaxWidth + ow),
                             MaxFirst(d, hn::Load(d, h0 + kMaxPoolMaxWidth + ow), hn::Load(d, h0 + ow)));
        hn::StoreU(m, d, dst + ow);
      }
      if (ow < p.ow) {
        const V m = MaxFirst(d, hn::Load(d, h0 + 2 * kMaxPoolMaxWidth + ow),
                             MaxFirst(d, hn::Load(d, h0 + kMaxPoolMaxWidth + ow), hn::Load(d, h0 + ow)));
        StoreTail(d, m, dst + ow, size_t(p.ow - ow));
      }
    }
  }
}

bool MaxPool3s2Fits(const PoolPlan& p) { return MaxPool3s2Eligible(p); }

void pool2d_f32_impl(const PoolPlan& p, size_t begin, size_t end) {
  if (p.is_max) {
    if (p.sw == 1) PoolUnits<true, false>(p, begin, end); else PoolUnits<true, true>(p, begin, end);
  } else {
    if (p.sw == 1) PoolUnits<false, false>(p, begin, end); else PoolUnits<false, true>(p, begin, end);
  }
}

// Mean of each H*W plane.
void global_avg_pool2d_f32_impl(const cpu_detail::GlobalPoolPlan& p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t hw = static_cast<size_t>(p.hw);
  for (size_t c = begin; c < end; ++c) {
    const float* src = p.in + c * hw;
    auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
    size_t i = 0;
    for (; i + 2 * lanes <= hw; i += 2 * lanes) {
      acc0 = hn::Add(acc0, hn::LoadU(d, src + i));
      acc1 = hn::Add(acc1, hn::LoadU(d, src + i + lanes));
    }
    for (; i + lanes <= hw; i += lanes) acc0 = hn::Add(acc0, hn::LoadU(d, src + i));
    if (i < hw) acc1 = hn::Add(acc1, LoadTail(d, src + i, hw - i));
    const float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
    p.out[c] = hw != 0 ? sum / static_cast<float>(hw) : 0.0f;
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(pool2d_f32_impl);
EMBER_HWY_EXPORT(MaxPool3s2Units);
EMBER_HWY_EXPORT(MaxPool3s2Fits);
EMBER_HWY_EXPORT(global_avg_pool2d_f32_impl);

namespace cpu_detail {
namespace {

void pool_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(pool2d_f32_impl)(*static_cast<const PoolPlan*>(plan), begin, end);
}
void max_pool_3s2_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(MaxPool3s2Units)(*static_cast<const PoolPlan*>(plan), begin, end);
}
void global_pool_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(global_avg_pool2d_f32_impl)(*static_cast<const GlobalPoolPlan*>(plan), begin,
                                                 end);
}

void run_pool(KernelContext& ctx, const OpAttrs& attrs, bool is_max, const TensorView& x,
              TensorView& out) {
  PoolPlan p{};
  p.is_max = is_max;
  p.count_include_pad = attrs.count_include_pad;
  p.in = x.data_as<const float>();
  p.out = out.data_as<float>();
  p.nc = x.dims[0] * x.dims[1];
  p.h = x.dims[2];
  p.w = x.dims[3];
  p.oh = out.dims[2];
  p.ow = out.dims[3];
  p.kh = attrs.kernel[0];
  p.kw = attrs.kernel[1];
  p.sh = attrs.stride[0];
  p.sw = attrs.stride[1];
  p.pt = attrs.padding[0];
  p.pl = attrs.padding[1];
  p.pb = attrs.padding[2];
  p.pr = attrs.padding[3];
  p.dh = attrs.dilation[0] > 0 ? attrs.dilation[0] : 1;
  p.dw = attrs.dilation[1] > 0 ? attrs.dilation[1] : 1;
  if (p.nc == 0 || p.oh == 0 || p.ow == 0) return;
  p.ow_lo = (p.pl + p.sw - 1) / p.sw;
  const int64_t num = p.w - 1 + p.pl - (p.kw - 1) * p.dw;
  p.ow_hi = num >= 0 ? num / p.sw + 1 : 0;
  if (p.ow_hi > p.ow) p.ow_hi = p.ow;
  if (p.ow_lo > p.ow_hi) p.ow_lo = p.ow_hi;
  const double work = double(out.numel()) * double(p.kh * p.kw);
  if (EMBER_HWY_DISPATCH(MaxPool3s2Fits)(p)) {
    const int64_t blocks = (p.oh + kMaxPoolRows - 1) / kMaxPoolRows;
    run_units(ctx.pool, static_cast<size_t>(p.nc * blocks), work, 1 << 17, &p, max_pool_3s2_units);
    return;
  }
  run_units(ctx.pool, static_cast<size_t>(p.nc * p.oh), work, 1 << 17, &p, pool_units);
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

void max_pool2d(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  cpu_detail::run_pool(ctx, attrs, true, inputs[0], outputs[0]);
}

void avg_pool2d(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  cpu_detail::run_pool(ctx, attrs, false, inputs[0], outputs[0]);
}

void global_avg_pool2d(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t,
                       TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  cpu_detail::GlobalPoolPlan p{x.data_as<const float>(), outputs[0].data_as<float>(),
                               x.dims[2] * x.dims[3]};
  const size_t planes = static_cast<size_t>(x.dims[0] * x.dims[1]);
  cpu_detail::run_units(ctx.pool, planes, double(x.numel()), 1 << 16, &p,
                        cpu_detail::global_pool_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
