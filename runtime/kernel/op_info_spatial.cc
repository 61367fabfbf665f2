// Shape functions of resize and conv_transpose2d (issue 17). See op_info.cc for the rules every
// shape function follows.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {

Status resize_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                    size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "resize";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (x.rank < 1 || attrs.count != x.rank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: %d sizes / scales for input %s (one per dim)",
                      static_cast<int>(attrs.count), dims_text(x).text);
  }
  if (attrs.resize_mode < ResizeMode::Nearest || attrs.resize_mode > ResizeMode::Cubic ||
      attrs.resize_coord < ResizeCoord::HalfPixel || attrs.resize_coord > ResizeCoord::HalfPixelSymmetric ||
      attrs.resize_nearest < ResizeNearest::RoundPreferFloor || attrs.resize_nearest > ResizeNearest::Ceil) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: mode %u / coordinate mode %u / nearest mode %u out of range",
                      static_cast<unsigned>(attrs.resize_mode), static_cast<unsigned>(attrs.resize_coord),
                      static_cast<unsigned>(attrs.resize_nearest));
  }
  if (attrs.resize_mode == ResizeMode::Cubic && !std::isfinite(attrs.cubic_a)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: cubic coefficient %g is not finite",
                      static_cast<double>(attrs.cubic_a));
  }
  int64_t dims[kMaxRank];
  for (int d = 0; d < x.rank; ++d) {
    const float scale = attrs.resize_scales[d];
    if (!(scale > 0.0f) || !std::isfinite(scale)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: scale %g of dim %d must be finite and > 0",
                        static_cast<double>(scale), d);
    }
    const int64_t in = x.dims[d];
    if (attrs.shape[d] >= 0) {
      dims[d] = attrs.shape[d];
    } else if (attrs.shape[d] == -1) {
      // onnxruntime: static_cast<int64_t>(scale * in) with the product in f32.
      const float size = scale * static_cast<float>(in);
      if (!(size < 9.0e18f)) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: dim %d: %lld * scale %g overflows", d,
                          static_cast<long long>(in), static_cast<double>(scale));
      }
      dims[d] = static_cast<int64_t>(size);
    } else {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: output size %lld of dim %d (expected >= 0, or -1)",
                        static_cast<long long>(attrs.shape[d]), d);
    }
    if (in == 0 && dims[d] != 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "resize: dim %d is empty in input %s but %lld in the output",
                        d, dims_text(x).text, static_cast<long long>(dims[d]));
    }
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, x.rank, ctx));
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
}

Status conv_transpose2d_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                              TensorView* outputs, size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "conv_transpose2d";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 3, 1u << 2, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, w, 1, ctx));
  if (x.rank != 4) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: input must be [N, C, H, W], got %s",
                      dims_text(x).text);
  }
  if (w.rank != 4) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: weight must be [C, O/groups, kH, kW], got %s",
                      dims_text(w).text);
  }
  const int64_t groups = attrs.groups;
  if (groups < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: groups %lld < 1", static_cast<long long>(groups));
  }
  for (int i = 0; i < 2; ++i) {
    if (attrs.stride[i] < 1 || attrs.dilation[i] < 1 || attrs.output_padding[i] < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "conv_transpose2d: stride %d and dilation %d must be >= 1, output padding %d >= 0",
                        attrs.stride[i], attrs.dilation[i], attrs.output_padding[i]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    if (attrs.padding[i] < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: negative padding %d", attrs.padding[i]);
    }
  }
  if (attrs.out_min != attrs.out_min || attrs.out_max != attrs.out_max || attrs.out_min > attrs.out_max) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "conv_transpose2d: output clamp [%g, %g] needs bounds that are not NaN, min <= max",
                      static_cast<double>(attrs.out_min), static_cast<double>(attrs.out_max));
  }
  const int64_t c = x.dims[1];
  if (w.dims[0] != c) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: weight %s needs %lld input channels (input %s)",
                      dims_text(w).text, static_cast<long long>(c), dims_text(x).text);
  }
  if (c % groups != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: input channels %lld not divisible by groups %lld",
                      static_cast<long long>(c), static_cast<long long>(groups));
  }
  if (w.dims[2] < 1 || w.dims[3] < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: empty kernel in weight %s", dims_text(w).text);
  }
  int64_t o = 0;
  if (!mul_nonneg(w.dims[1], groups, &o)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: output channels overflow");
  }
  if (input_count == 3 && inputs[2].dtype != ScalarType::Invalid) {
    const TensorView& b = inputs[2];
    EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, b, 2, ctx));
    if (b.rank != 1 || b.dims[0] != o) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "conv_transpose2d: bias must be [%lld], got %s",
                        static_cast<long long>(o), dims_text(b).text);
    }
  }
  int64_t dims[4] = {x.dims[0], o, 0, 0};
  for (int i = 0; i < 2; ++i) {
    // ONNX: stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pad_begin - pad_end.
    const int64_t in = x.dims[2 + i];
    int64_t span = 0, eff = 0, total = 0;
    const bool ok = in >= 1 && mul_nonneg(attrs.stride[i], in - 1, &span) &&
                    mul_nonneg(attrs.dilation[i], w.dims[2 + i] - 1, &eff) && add_nonneg(span, eff, &total) &&
                    add_nonneg(total, 1 + static_cast<int64_t>(attrs.output_padding[i]), &total);
    const int64_t pads = static_cast<int64_t>(attrs.padding[i]) + attrs.padding[2 + i];
    if (!ok || total - pads < 1) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "conv_transpose2d: empty output along %s: input %lld, kernel %lld, stride %d, dilation %d, "
                        "output padding %d, pads %d+%d",
                        i == 0 ? "H" : "W", static_cast<long long>(in), static_cast<long long>(w.dims[2 + i]),
                        attrs.stride[i], attrs.dilation[i], attrs.output_padding[i], attrs.padding[i],
                        attrs.padding[2 + i]);
    }
    dims[2 + i] = total - pads;
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, 4, ctx));
  set_output(&outputs[0], x.dtype, dims, 4);
  return Status::ok();
}

}  // namespace ember::internal
