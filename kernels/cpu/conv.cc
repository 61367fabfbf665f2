// f32 NCHW conv2d (groups incl. depthwise, stride, dilation, asymmetric padding, optional bias, the
// fused output clamp of OpAttrs::out_min / out_max).
// With conv2d_scratch's bytes in ctx.scratch, conv_gemm.cc runs it (a packed GEMM per group;
// depthwise stride 1 over a padded plane). This file is the direct path, which needs no scratch:
// strided depthwise, and any conv called without the scratch.
//
// A work unit is one output row of a block of up to 4 output channels of one group. Columns whose
// every tap lies inside the input (the interior) are done in vectors of output columns: for each
// (input channel, kh, kw) one input vector (a contiguous load for stride 1, a gather otherwise)
// meets 4 broadcast weights, so 2 vectors x 4 channels = 8 accumulators. The last partial vector is
// shifted back to end at the interior's end (recomputing a few columns identically). Columns that
// touch the padding are done one by one, skipping taps outside the input. Every output element is
// one FMA chain over (ic, kh, kw) in order, then + bias, then the output clamp (if any), whatever
// task or thread computes it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/conv.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_CONV_DIRECT_
#define EMBER_KERNELS_CPU_CONV_DIRECT_
#include "kernels/cpu/conv_plan.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::ConvPlan;

// One output element, skipping taps outside the input.
HWY_INLINE float ConvPoint(const ConvPlan& p, const float* in_g, const float* w_oc, int64_t oh,
                           int64_t ow) {
  float acc = 0.0f;
  const int64_t ih0 = oh * p.sh - p.pt, iw0 = ow * p.sw - p.pl;
  for (int64_t ic = 0; ic < p.cpg; ++ic) {
    const float* in_c = in_g + ic * p.h * p.w_in;
    const float* w_c = w_oc + ic * p.kh * p.kw;
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      const int64_t ih = ih0 + kh * p.dh;
      if (ih < 0 || ih >= p.h) continue;
      for (int64_t kw = 0; kw < p.kw; ++kw) {
        const int64_t iw = iw0 + kw * p.dw;
        if (iw < 0 || iw >= p.w_in) continue;
        acc = std::fma(in_c[ih * p.w_in + iw], w_c[kh * p.kw + kw], acc);
      }
    }
  }
  return acc;
}

// kNv vectors of output columns starting at ow0 (all interior) for kOcb output channels.
template <int kOcb, int kNv, bool kStrided>
HWY_INLINE void ConvChunk(const ConvPlan& p, const float* in_g, const float* w_oc, int64_t oh,
                          int64_t ow0, float* out_oc, const float* bias_oc) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto gather_idx = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(p.sw)));
  V acc[kOcb][kNv];
  for (int o = 0; o < kOcb; ++o)
    for (int v = 0; v < kNv; ++v) acc[o][v] = hn::Zero(d);
  const int64_t w_oc_stride = p.cpg * p.kh * p.kw;
  const int64_t ih0 = oh * p.sh - p.pt, iw0 = ow0 * p.sw - p.pl;
  for (int64_t ic = 0; ic < p.cpg; ++ic) {
    const float* in_c = in_g + ic * p.h * p.w_in;
    const float* w_c = w_oc + ic * p.kh * p.kw;
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      const int64_t ih = ih0 + kh * p.dh;
      if (ih < 0 || ih >= p.h) continue;
      const float* row = in_c + ih * p.w_in + iw0;
      const float* w_k = w_c + kh * p.kw;
      for (int64_t kw = 0; kw < p.kw; ++kw) {
        const float* src = row + kw * p.dw;
        V x[kNv];
        for (int v = 0; v < kNv; ++v) {
          if constexpr (kStrided) {
            x[v] = hn::GatherIndex(d, src + v * lanes * p.sw, gather_idx);
          } else {
            x[v] = hn::LoadU(d, src + v * lanes);
          }
        }
        for (int o = 0; o < kOcb; ++o) {
          const V wv = hn::Set(d, w_k[o * w_oc_stride + kw]);
          for (int v = 0; v < kNv; ++v) acc[o][v] = hn::MulAdd(x[v], wv, acc[o][v]);
        }
      }
    }
  }
  const int64_t out_oc_stride = p.oh * p.ow;
  const V lo = hn::Set(d, p.out_min), hi = hn::Set(d, p.out_max);
  for (int o = 0; o < kOcb; ++o) {
    float* dst = out_oc + o * out_oc_stride + oh * p.ow + ow0;
    for (int v = 0; v < kNv; ++v) {
      V r = acc[o][v];
      if (bias_oc != nullptr) r = hn::Add(r, hn::Set(d, bias_oc[o]));
      if (p.clamp) r = ClampKeepNaN(r, lo, hi);
      hn::StoreU(r, d, dst + v * lanes);
    }
  }
}

template <int kOcb, bool kStrided>
HWY_INLINE void ConvRow(const ConvPlan& p, const float* in_g, const float* w_oc, int64_t oh,
                        float* out_oc, const float* bias_oc) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t lo = p.ow_lo, hi = p.ow_hi;
  if (hi - lo < lanes) lo = hi = p.ow_hi;  // too narrow for a vector: all columns point-wise
  int64_t ow = lo;
  for (; ow + 2 * lanes <= hi; ow += 2 * lanes) {
    ConvChunk<kOcb, 2, kStrided>(p, in_g, w_oc, oh, ow, out_oc, bias_oc);
  }
  for (; ow + lanes <= hi; ow += lanes) {
    ConvChunk<kOcb, 1, kStrided>(p, in_g, w_oc, oh, ow, out_oc, bias_oc);
  }
  if (ow < hi) ConvChunk<kOcb, 1, kStrided>(p, in_g, w_oc, oh, hi - lanes, out_oc, bias_oc);
  // Columns outside the interior.
  const int64_t w_oc_stride = p.cpg * p.kh * p.kw;
  for (int o = 0; o < kOcb; ++o) {
    float* dst = out_oc + o * p.oh * p.ow + oh * p.ow;
    const float b = bias_oc != nullptr ? bias_oc[o] : 0.0f;
    for (int64_t x = 0; x < p.ow; ++x) {
      if (x == lo) x = hi;
      if (x >= p.ow) break;
      float v = ConvPoint(p, in_g, w_oc + o * w_oc_stride, oh, x);
      if (bias_oc != nullptr) v += b;
      dst[x] = p.clamp ? cpu_detail::conv_clamp(p, v) : v;
    }
  }
}

template <bool kStrided>
void ConvUnits(const ConvPlan& p, size_t begin, size_t end) {
  const int64_t blocks_per_image = p.groups * p.blocks_per_group;
  for (size_t u = begin; u < end; ++u) {
    const int64_t oh = static_cast<int64_t>(u) % p.oh;
    const int64_t blk = static_cast<int64_t>(u) / p.oh;
    const int64_t n = blk / blocks_per_image;
    const int64_t g = (blk % blocks_per_image) / p.blocks_per_group;
    const int64_t ob = blk % p.blocks_per_group;
    const int64_t oc0 = g * p.opg + ob * cpu_detail::kConvOcBlock;
    const int64_t oc_end = (ob + 1) * cpu_detail::kConvOcBlock < p.opg
                               ? oc0 + cpu_detail::kConvOcBlock
                               : g * p.opg + p.opg;
    const float* in_g = p.in + (n * p.c + g * p.cpg) * p.h * p.w_in;
    float* out_n = p.out + n * p.o * p.oh * p.ow;
    if (oc_end - oc0 == cpu_detail::kConvOcBlock) {
      ConvRow<cpu_detail::kConvOcBlock, kStrided>(
          p, in_g, p.w + oc0 * p.cpg * p.kh * p.kw, oh, out_n + oc0 * p.oh * p.ow,
          p.bias != nullptr ? p.bias + oc0 : nullptr);
    } else {
      for (int64_t oc = oc0; oc < oc_end; ++oc) {
        ConvRow<1, kStrided>(p, in_g, p.w + oc * p.cpg * p.kh * p.kw, oh,
                             out_n + oc * p.oh * p.ow, p.bias != nullptr ? p.bias + oc : nullptr);
      }
    }
  }
}

void conv2d_f32_impl(const ConvPlan& p, size_t begin, size_t end) {
  if (p.sw == 1) {
    ConvUnits<false>(p, begin, end);
  } else {
    ConvUnits<true>(p, begin, end);
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(conv2d_f32_impl);

namespace cpu_detail {
namespace {
void conv_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(conv2d_f32_impl)(*static_cast<const ConvPlan*>(plan), begin, end);
}
}  // namespace
}  // namespace cpu_detail

namespace cpu {

void conv2d(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs,
            size_t input_count, TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  TensorView& out = outputs[0];
  cpu_detail::ConvPlan p{};
  p.in = x.data_as<const float>();
  p.w = w.data_as<const float>();
  p.bias = input_count > 2 && inputs[2].is_present() ? inputs[2].data_as<const float>() : nullptr;
  p.out = out.data_as<float>();
  cpu_detail::conv_fill_plan(attrs, x, w, out, &p);
  if (p.n == 0 || p.o == 0 || p.oh == 0 || p.ow == 0) return;
  if (cpu_detail::conv2d_packed(ctx, p)) return;
  p.blocks_per_group = (p.opg + cpu_detail::kConvOcBlock - 1) / cpu_detail::kConvOcBlock;
  // Interior columns: every kw tap inside [0, W).
  p.ow_lo = (p.pl + p.sw - 1) / p.sw;
  const int64_t num = p.w_in - 1 + p.pl - (p.kw - 1) * p.dw;
  p.ow_hi = num >= 0 ? num / p.sw + 1 : 0;
  if (p.ow_hi > p.ow) p.ow_hi = p.ow;
  if (p.ow_lo > p.ow_hi) p.ow_lo = p.ow_hi;
  const size_t units = static_cast<size_t>(p.n * p.groups * p.blocks_per_group * p.oh);
  const double flops = 2.0 * double(out.numel()) * double(p.cpg * p.kh * p.kw);
  cpu_detail::run_units(ctx.pool, units, flops, 1 << 18, &p, cpu_detail::conv_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
