// f32 conv_transpose2d (NCHW, weight [C, O/groups, kH, kW], bias [O]?, conv2d's output clamp).
//
// Gather form, one output row at a time: for an output row y, the kernel rows i that reach it are
// those with y + pad_top - i * dilation_h a multiple of stride_h, at input row iy. Along the row,
// kernel column j reaches the output columns of one phase, x = (j * dilation_w - pad_left) mod
// stride_w, and consecutive outputs of a phase read consecutive input columns: so the row is
// accumulated phase-major in a stack buffer (one contiguous run per phase, an axpy of w[c, o, i, j]
// times an input row segment per (c, i, j)) and written out interleaved with the bias and clamp.
// Columns go in chunks of up to 1024 (a multiple of stride_w). Every output element sums its taps in
// the same order (c, then i, then j) in f32, whatever the chunk, unit or thread: bitwise thread
// invariant; not the reference's double sum (within f32 dot-product error of it). Work units are
// blocks of output rows of one (n, o). Strides above 512 take a per-element loop in the same order.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/conv_transpose.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_CONV_TRANSPOSE_PLAN_
#define EMBER_KERNELS_CPU_CONV_TRANSPOSE_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

constexpr int64_t kConvTBuffer = 2048;  // floats of the phase-major row buffer (stack)
constexpr int64_t kConvTMaxStride = 512;
constexpr int64_t kConvTRows = 4;  // output rows per work unit

struct ConvTPlan {
  const float* in;
  const float* w;
  const float* bias;  // null: none
  float* out;
  int64_t n, c, h, wd, o, og, cg, kh, kw, oh, ow;
  int64_t sh, sw, dh, dw, pt, pl;
  float lo, hi;
  int64_t row_blocks;
};

}  // namespace ember::kernels::cpu_detail
#endif  // EMBER_KERNELS_CPU_CONV_TRANSPOSE_PLAN_

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::ConvTPlan;

inline float Finish(const ConvTPlan& p, float acc, int64_t oc) {
  float r = p.bias != nullptr ? acc + p.bias[oc] : acc;
  r = r < p.lo ? p.lo : r;
  return r > p.hi ? p.hi : r;
}

// One output row of (nb, oc), columns [c0, c0 + len), c0 a multiple of sw.
void ConvTRowChunk(const ConvTPlan& p, int64_t nb, int64_t oc, int64_t y, int64_t c0, int64_t len,
                   float* HWY_RESTRICT buf, float* HWY_RESTRICT orow) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t per = (len + p.sw - 1) / p.sw;  // buffer entries per phase
  std::memset(buf, 0, static_cast<size_t>(per * p.sw) * sizeof(float));
  const int64_t g = oc / p.og, ocg = oc % p.og;
  for (int64_t ic = 0; ic < p.cg; ++ic) {
    const int64_t cin = g * p.cg + ic;
    const float* xplane = p.in + (nb * p.c + cin) * p.h * p.wd;
    const float* wk = p.w + (cin * p.og + ocg) * p.kh * p.kw;
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t ty = y + p.pt - i * p.dh;
      if (ty < 0 || ty % p.sh != 0 || ty / p.sh >= p.h) continue;
      const float* xrow = xplane + (ty / p.sh) * p.wd;
      for (int64_t j = 0; j < p.kw; ++j) {
        // Phase of the outputs this tap reaches, and the input column of the phase's first output.
        const int64_t off = j * p.dw - p.pl;  // x + pl - j * dw = ix * sw  <=>  x = ix * sw + off
        int64_t phase = off % p.sw;
        if (phase < 0) phase += p.sw;
        const int64_t plen = phase < len ? (len - phase + p.sw - 1) / p.sw : 0;
        const int64_t ix0 = (c0 + phase - off) / p.sw;  // exact: c0 + phase - off is a multiple of sw
        // Entries k in [klo, khi) have input column ix0 + k inside [0, wd).
        const int64_t klo = ix0 < 0 ? -ix0 : 0;
        const int64_t khi = p.wd - ix0 < plen ? p.wd - ix0 : plen;
        if (klo >= khi) continue;
        const auto wv = hn::Set(d, wk[i * p.kw + j]);
        float* acc = buf + phase * per + klo;
        const float* src = xrow + ix0 + klo;
        const int64_t count = khi - klo;
        int64_t k = 0;
        for (; k + lanes <= count; k += lanes) {
          hn::StoreU(hn::MulAdd(wv, hn::LoadU(d, src + k), hn::LoadU(d, acc + k)), d, acc + k);
        }
        const float ws = wk[i * p.kw + j];
        for (; k < count; ++k) acc[k] = hn::GetLane(hn::MulAdd(hn::Set(d, ws), hn::Set(d, src[k]), hn::Set(d, acc[k])));
      }
    }
  }
  for (int64_t phase = 0; phase < p.sw && phase < len; ++phase) {
    const float* acc = buf + phase * per;
    for (int64_t k = 0, x = phase; x < len; ++k, x += p.sw) orow[c0 + x] = Finish(p, acc[k], oc);
  }
}

// The same sums one element at a time (strides above kConvTMaxStride).
float ConvTPoint(const ConvTPlan& p, int64_t nb, int64_t oc, int64_t y, int64_t x) {
  const hn::ScalableTag<float> d;
  const int64_t g = oc / p.og, ocg = oc % p.og;
  float acc = 0.0f;
  for (int64_t ic = 0; ic < p.cg; ++ic) {
    const int64_t cin = g * p.cg + ic;
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t ty = y + p.pt - i * p.dh;
      if (ty < 0 || ty % p.sh != 0 || ty / p.sh >= p.h) continue;
      for (int64_t j = 0; j < p.kw; ++j) {
        const int64_t tx = x + p.pl - j * p.dw;
        if (tx < 0 || tx % p.sw != 0 || tx / p.sw >= p.wd) continue;
        const float xv = p.in[((nb * p.c + cin) * p.h + ty / p.sh) * p.wd + tx / p.sw];
        const float wv = p.w[((cin * p.og + ocg) * p.kh + i) * p.kw + j];
        acc = hn::GetLane(hn::MulAdd(hn::Set(d, wv), hn::Set(d, xv), hn::Set(d, acc)));
      }
    }
  }
  return acc;
}

void ConvTUnits(const ConvTPlan& p, size_t begin, size_t end) {
  HWY_ALIGN float buf[cpu_detail::kConvTBuffer];
  // A chunk of columns: a multiple of sw whose phase-major layout fits the buffer.
  const int64_t chunk = (cpu_detail::kConvTBuffer / 2 / p.sw) * p.sw;
  for (size_t u = begin; u < end; ++u) {
    const int64_t plane = static_cast<int64_t>(u) / p.row_blocks;  // nb * o + oc
    const int64_t nb = plane / p.o, oc = plane % p.o;
    const int64_t y0 = (static_cast<int64_t>(u) % p.row_blocks) * cpu_detail::kConvTRows;
    const int64_t y1 = y0 + cpu_detail::kConvTRows < p.oh ? y0 + cpu_detail::kConvTRows : p.oh;
    for (int64_t y = y0; y < y1; ++y) {
      float* orow = p.out + (plane * p.oh + y) * p.ow;
      if (p.sw > cpu_detail::kConvTMaxStride) {
        for (int64_t x = 0; x < p.ow; ++x) orow[x] = Finish(p, ConvTPoint(p, nb, oc, y, x), oc);
        continue;
      }
      for (int64_t c0 = 0; c0 < p.ow; c0 += chunk) {
        ConvTRowChunk(p, nb, oc, y, c0, p.ow - c0 < chunk ? p.ow - c0 : chunk, buf, orow);
      }
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(ConvTUnits);

namespace cpu_detail {
namespace {
void conv_t_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(ConvTUnits)(*static_cast<const ConvTPlan*>(plan), begin, end);
}
}  // namespace
}  // namespace cpu_detail

namespace cpu {

void conv_transpose2d(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  TensorView& out = outputs[0];
  cpu_detail::ConvTPlan p{};
  p.in = x.data_as<const float>();
  p.w = w.data_as<const float>();
  p.bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  p.out = out.data_as<float>();
  p.n = x.dims[0];
  p.c = x.dims[1];
  p.h = x.dims[2];
  p.wd = x.dims[3];
  p.og = w.dims[1];
  p.kh = w.dims[2];
  p.kw = w.dims[3];
  p.o = out.dims[1];
  p.oh = out.dims[2];
  p.ow = out.dims[3];
  p.cg = p.c / attrs.groups;
  p.sh = attrs.stride[0];
  p.sw = attrs.stride[1];
  p.dh = attrs.dilation[0];
  p.dw = attrs.dilation[1];
  p.pt = attrs.padding[0];
  p.pl = attrs.padding[1];
  p.lo = attrs.out_min;
  p.hi = attrs.out_max;
  if (out.numel() == 0) return;
  p.row_blocks = (p.oh + cpu_detail::kConvTRows - 1) / cpu_detail::kConvTRows;
  const double work = double(out.numel()) * double(p.cg * p.kh * p.kw) / double(p.sh * p.sw);
  cpu_detail::run_units(ctx.pool, static_cast<size_t>(p.n * p.o * p.row_blocks), work, 1 << 17, &p,
                        cpu_detail::conv_t_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
