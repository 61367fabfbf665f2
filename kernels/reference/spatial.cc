// resize and conv_transpose2d reference kernels (f32, sums in double).
//
// resize: any rank, runtime/kernel/resize_math.h's resize_elements: each output element is the
// weighted sum, over the product of its per-dim taps (1 for nearest and identity dims, 2 for
// linear, 4 for cubic), of the f32 weights' product times the input, in double, rounded once.
// Nearest copies the element. When every output dim equals its input dim the output is the input
// (onnxruntime's rule).
//
// conv_transpose2d: out[n, o, y, x] = bias[o] + sum over c in o's group, i < kH, j < kW with
// y + pad_top - i * dilation_h = iy * stride_h (0 <= iy < H) and likewise for x, of
// in[n, c, iy, ix] * w[c, o % (O / groups), i, j]; then clamped as conv2d is.
#include <cstring>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"
#include "runtime/kernel/resize_math.h"

namespace ember::kernels::reference {

void resize(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
            size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const int rank = x.rank;
  const float* px = x.data_as<const float>();
  float* po = out.data_as<float>();
  const int64_t count = internal::numel(out);
  if (count == 0) return;
  if (resize::is_identity(x.dims, out.dims, rank)) {
    std::memcpy(po, px, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  resize::resize_elements(attrs, px, x.dims, po, out.dims, rank, 0, count);
}

void conv_transpose2d(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  TensorView& out = outputs[0];
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int64_t batch = x.dims[0], c = x.dims[1], h = x.dims[2], wd = x.dims[3];
  const int64_t og = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  const int64_t o = out.dims[1], oh = out.dims[2], ow = out.dims[3];
  const int64_t groups = attrs.groups;
  const int64_t cg = c / groups;
  const int64_t sh = attrs.stride[0], sw = attrs.stride[1];
  const int64_t dh = attrs.dilation[0], dw = attrs.dilation[1];
  const int64_t pt = attrs.padding[0], pl = attrs.padding[1];
  const float lo = attrs.out_min, hi = attrs.out_max;
  const float* px = x.data_as<const float>();
  const float* pw = w.data_as<const float>();
  float* po = out.data_as<float>();
  for (int64_t nb = 0; nb < batch; ++nb) {
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t g = oc / og, ocg = oc % og;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bias != nullptr ? static_cast<double>(bias[oc]) : 0.0;
          for (int64_t ic = 0; ic < cg; ++ic) {
            const int64_t cin = g * cg + ic;
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t ty = y + pt - i * dh;
              if (ty < 0 || ty % sh != 0 || ty / sh >= h) continue;
              const int64_t iy = ty / sh;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t tx = xo + pl - j * dw;
                if (tx < 0 || tx % sw != 0 || tx / sw >= wd) continue;
                const int64_t ix = tx / sw;
                acc += static_cast<double>(px[((nb * c + cin) * h + iy) * wd + ix]) *
                       static_cast<double>(pw[((cin * og + ocg) * kh + i) * kw + j]);
              }
            }
          }
          float r = static_cast<float>(acc);
          r = r < lo ? lo : r;
          po[((nb * o + oc) * oh + y) * ow + xo] = r > hi ? hi : r;
        }
      }
    }
  }
}

}  // namespace ember::kernels::reference
