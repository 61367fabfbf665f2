// conv2d's geometry and the choice of algorithm, shared by conv.cc (direct) and conv_gemm.cc
// (packed GEMM, depthwise) and by the scratch function (internal to kernels/cpu).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "runtime/kernel/kernel.h"

namespace ember::kernels::cpu_detail {

constexpr int64_t kConvOcBlock = 4;  // direct path: output channels per micro-tile

// Packed GEMM blocking, the same on every target so the scratch size is a function of the shapes
// alone: a block of kConvKc reduction rows x kConvNc output positions of B (im2col) is packed per
// task, its columns rounded up to whole panels of 2 vectors (at most kConvMaxNr columns: AVX-512).
constexpr int64_t kConvKc = 256;
constexpr int64_t kConvNc = 256;
constexpr int64_t kConvMaxNr = 32;
constexpr int64_t kConvLdPad = 16;  // floats after each packed row of B
constexpr size_t kConvAlign = 64;
constexpr int64_t kMaxDepthwiseTaps = 64;  // kh * kw of the depthwise path (larger: direct)

enum class ConvPath { Direct, Gemm, Depthwise };

struct ConvPlan {
  const float* in;
  const float* w;     // [O, C / groups, kH, kW]
  const float* bias;  // [O] or null
  float* out;
  int64_t n, c, h, w_in, o, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  int64_t groups, cpg, opg;        // channels per group (in / out)
  int64_t blocks_per_group;        // direct: ceil(opg / kConvOcBlock)
  int64_t ow_lo, ow_hi;            // direct: interior output columns
  ConvPath path;
  bool clamp;                      // conv2d_has_clamp: every output goes through conv_clamp
  float out_min, out_max;
};

// The output clamp of one element after the bias, the reference's (and ClampKeepNaN's) selects.
inline float conv_clamp(const ConvPlan& p, float v) {
  v = v < p.out_min ? p.out_min : v;
  return v > p.out_max ? p.out_max : v;
}

inline int64_t conv_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Geometry from the views' dims (data may be null: the scratch function).
inline void conv_fill_plan(const OpAttrs& attrs, const TensorView& x, const TensorView& w,
                           const TensorView& out, ConvPlan* plan) {
  ConvPlan& p = *plan;
  p.clamp = conv2d_has_clamp(attrs);
  p.out_min = attrs.out_min;
  p.out_max = attrs.out_max;
  p.n = x.dims[0];
  p.c = x.dims[1];
  p.h = x.dims[2];
  p.w_in = x.dims[3];
  p.o = out.dims[1];
  p.oh = out.dims[2];
  p.ow = out.dims[3];
  p.kh = w.dims[2];
  p.kw = w.dims[3];
  p.sh = attrs.stride[0];
  p.sw = attrs.stride[1];
  p.pt = attrs.padding[0];
  p.pl = attrs.padding[1];
  p.pb = attrs.padding[2];
  p.pr = attrs.padding[3];
  p.dh = attrs.dilation[0];
  p.dw = attrs.dilation[1];
  p.groups = attrs.groups > 0 ? attrs.groups : 1;
  p.cpg = p.c / p.groups;
  p.opg = p.o / p.groups;
  // Depthwise at stride 1, or 2 without dilation, has its own path; other strided depthwise (M = 1,
  // K = kh * kw per group: no GEMM worth packing for) stays direct; everything else is a GEMM per
  // group.
  if (p.cpg == 1 && p.opg == 1) {
    const bool s1 = p.sh == 1 && p.sw == 1;
    const bool s2 = p.sh == 2 && p.sw == 2 && p.dh == 1 && p.dw == 1;
    p.path = (s1 || s2) && p.kh * p.kw <= kMaxDepthwiseTaps ? ConvPath::Depthwise : ConvPath::Direct;
  } else {
    p.path = ConvPath::Gemm;
  }
}

// Depthwise: the zero-padded input plane split into stride x stride phase planes (stride 1: the
// plane itself; 2: rows and columns of each parity), each Hq x Wq with Hq = OH + (kh - 1) dh,
// Wq = OW + (kw - 1) dw at stride 1 and Hq = OH + kh / 2, Wq = OW + kw / 2 at stride 2; tap (i, j)
// of output q = oh Wq + ow reads phase (i % s, j % s) at q + (i / s) Wq + j / s (stride 1: i dh Wq +
// j dw). The outputs over the phase width (OH x Wq); each with slack for whole vectors.
inline int64_t conv_dw_wq(const ConvPlan& p) { return p.sw == 1 ? p.ow + (p.kw - 1) * p.dw : p.ow + p.kw / 2; }
inline int64_t conv_dw_hq(const ConvPlan& p) { return p.sh == 1 ? p.oh + (p.kh - 1) * p.dh : p.oh + p.kh / 2; }
inline int64_t conv_dw_plane_floats(const ConvPlan& p) {
  const int64_t wq = conv_dw_wq(p), hq = conv_dw_hq(p);
  return conv_round_up(p.sh * p.sw * hq * wq + (p.kw - 1) * p.dw + 4 * 16, 16);
}
inline int64_t conv_dw_outq_floats(const ConvPlan& p) { return conv_round_up(p.oh * conv_dw_wq(p) + 4 * 16, 16); }

// Scratch bytes one task uses (a multiple of kConvAlign); 0 for the direct path.
inline size_t conv_slot_bytes(const ConvPlan& p) {
  int64_t floats = 0;
  if (p.path == ConvPath::Gemm) {
    const int64_t k = p.cpg * p.kh * p.kw, positions = p.oh * p.ow;
    const int64_t kc = k < kConvKc ? k : kConvKc;
    const int64_t cols = positions < kConvNc ? conv_round_up(positions, kConvMaxNr) : kConvNc;
    floats = kc * (cols + kConvLdPad);  // the packed block: kc rows of the block's columns
  } else if (p.path == ConvPath::Depthwise) {
    floats = conv_dw_plane_floats(p) + conv_dw_outq_floats(p);
  }
  return static_cast<size_t>(conv_round_up(floats * 4, static_cast<int64_t>(kConvAlign)));
}

// One output element, skipping taps outside the input (as the reference does), then + bias and the
// clamp: the packed paths recompute with it the elements that came out NaN when the conv has padding,
// since a padded tap there contributed 0 * w, which is NaN for w = ±inf / NaN where the reference
// skips it (the clamp keeps NaN, so a clamped NaN is still found).
inline float conv_point(const ConvPlan& p, int64_t n, int64_t oc, int64_t oh, int64_t ow) {
  const int64_t g = oc / p.opg;
  const float* in_g = p.in + (n * p.c + g * p.cpg) * p.h * p.w_in;
  const float* w_oc = p.w + oc * p.cpg * p.kh * p.kw;
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
  if (p.bias != nullptr) acc += p.bias[oc];
  return p.clamp ? conv_clamp(p, acc) : acc;
}

// Runs the packed GEMM or depthwise path (conv_gemm.cc) when p.path is one of them and ctx.scratch
// holds at least one task's slot; false: the caller runs the direct path.
bool conv2d_packed(KernelContext& ctx, const ConvPlan& p);

}  // namespace ember::kernels::cpu_detail
