// conv2d and pooling reference kernels (f32, NCHW, sums in double; conv2d then applies its output
// clamp to the f32 result, as a clip after it would). Padding is [top, left, bottom, right]; output
// sizes were set by the shape function (PyTorch's rules, ceil_mode included), so a window may hang
// past the input's right or bottom edge: taps outside the input are skipped.
#include <cmath>
#include <limits>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {

void conv2d(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
            TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  TensorView& out = outputs[0];
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int64_t batch = x.dims[0], c = x.dims[1], h = x.dims[2], wd = x.dims[3];
  const int64_t o = w.dims[0], kh = w.dims[2], kw = w.dims[3];
  const int64_t oh = out.dims[2], ow = out.dims[3];
  const int64_t groups = attrs.groups;
  const int64_t cg = c / groups, og = o / groups;
  const int64_t sh = attrs.stride[0], sw = attrs.stride[1];
  const int64_t dh = attrs.dilation[0], dw = attrs.dilation[1];
  const int64_t pt = attrs.padding[0], pl = attrs.padding[1];
  const float lo = attrs.out_min, hi = attrs.out_max;
  const float* px = x.data_as<const float>();
  const float* pw = w.data_as<const float>();
  float* po = out.data_as<float>();
  for (int64_t nb = 0; nb < batch; ++nb) {
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t g = oc / og;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bias != nullptr ? static_cast<double>(bias[oc]) : 0.0;
          for (int64_t ic = 0; ic < cg; ++ic) {
            const int64_t cin = g * cg + ic;
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t iy = y * sh - pt + i * dh;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ix = xo * sw - pl + j * dw;
                if (ix < 0 || ix >= wd) continue;
                acc += static_cast<double>(px[((nb * c + cin) * h + iy) * wd + ix]) *
                       static_cast<double>(pw[((oc * cg + ic) * kh + i) * kw + j]);
              }
            }
          }
          // The fused clamp on the f32 result, as clip would see it; NaN fails both tests and stays.
          float r = static_cast<float>(acc);
          r = r < lo ? lo : r;
          po[((nb * o + oc) * oh + y) * ow + xo] = r > hi ? hi : r;
        }
      }
    }
  }
}

namespace {

// The geometry both pools share; N and C are folded into `planes`.
struct PoolGeometry {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

PoolGeometry pool_geometry(const OpAttrs& attrs, const TensorView& x, const TensorView& out) {
  return PoolGeometry{x.dims[0] * x.dims[1], x.dims[2],         x.dims[3],         out.dims[2],
                      out.dims[3],           attrs.kernel[0],   attrs.kernel[1],   attrs.stride[0],
                      attrs.stride[1],       attrs.dilation[0], attrs.dilation[1], attrs.padding[0],
                      attrs.padding[1],      attrs.padding[2],  attrs.padding[3]};
}

}  // namespace

void max_pool2d(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  const PoolGeometry g = pool_geometry(attrs, inputs[0], outputs[0]);
  const float* px = inputs[0].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = px + p * g.h * g.w;
    for (int64_t y = 0; y < g.oh; ++y) {
      for (int64_t xo = 0; xo < g.ow; ++xo) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t iy = y * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ix = xo * g.sw - g.pl + j * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            const float v = plane[iy * g.w + ix];
            // NaN wins, as in PyTorch.
            if (v > best || std::isnan(v)) best = v;
            if (std::isnan(best)) break;
          }
        }
        po[(p * g.oh + y) * g.ow + xo] = best;
      }
    }
  }
}

// Divisor: with count_include_pad, the taps inside the padded input [-pad_begin, size + pad_end)
// (PyTorch: taps past the end padding, possible with ceil_mode, are not counted); otherwise the
// taps inside the input.
void avg_pool2d(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  const PoolGeometry g = pool_geometry(attrs, inputs[0], outputs[0]);
  const float* px = inputs[0].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* plane = px + p * g.h * g.w;
    for (int64_t y = 0; y < g.oh; ++y) {
      for (int64_t xo = 0; xo < g.ow; ++xo) {
        double sum = 0.0;
        int64_t valid = 0, padded = 0;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t iy = y * g.sh - g.pt + i * g.dh;
          if (iy >= g.h + g.pb) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ix = xo * g.sw - g.pl + j * g.dw;
            if (ix >= g.w + g.pr) continue;
            ++padded;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            ++valid;
            sum += static_cast<double>(plane[iy * g.w + ix]);
          }
        }
        const int64_t divisor = attrs.count_include_pad ? padded : valid;
        po[(p * g.oh + y) * g.ow + xo] =
            divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
      }
    }
  }
}

void global_avg_pool2d(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t,
                       TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const int64_t planes = x.dims[0] * x.dims[1], size = x.dims[2] * x.dims[3];
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(px[p * size + i]);
    po[p] = static_cast<float>(sum / static_cast<double>(size));
  }
}

}  // namespace ember::kernels::reference
