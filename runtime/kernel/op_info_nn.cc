// Shape functions of the neural-network ops: linear algebra, convolution and pooling, normalization
// and reductions. See op_info.cc for the rules every shape function follows.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {
namespace {

// One spatial output size, PyTorch's pooling_output_shape:
//   out = floor_or_ceil((in + pad_begin + pad_end - dilation * (k - 1) - 1) / stride) + 1,
// and with ceil_mode the last window must start inside the input or the left padding.
// Returns -1 when the output would be empty (or its computation overflows).
int64_t spatial_out(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t k, int64_t stride,
                    int64_t dilation, bool ceil_mode) {
  int64_t eff = 0;  // dilation * (k - 1) + 1
  if (!mul_nonneg(dilation, k - 1, &eff) || !add_nonneg(eff, 1, &eff)) return -1;
  int64_t total = 0;
  if (!add_nonneg(in, pad_begin, &total) || !add_nonneg(total, pad_end, &total)) return -1;
  int64_t out = 0;
  if (total >= eff) {
    const int64_t span = total - eff;
    out = span / stride + ((ceil_mode && span % stride != 0) ? 1 : 0) + 1;
  } else {
    // Numerator negative: floor((span + (ceil ? stride - 1 : 0)) / stride) + 1 is 1 only when the
    // ceil term lifts it to >= 0.
    const int64_t deficit = eff - total;
    out = (ceil_mode && deficit <= stride - 1) ? 1 : 0;
  }
  if (ceil_mode && out > 0) {
    int64_t last_start = 0;
    int64_t limit = 0;
    if (!add_nonneg(in, pad_begin, &limit)) return -1;
    if (!mul_nonneg(out - 1, stride, &last_start) || last_start >= limit) --out;
  }
  return out >= 1 ? out : -1;
}

Status pool2d_shape(const char* op, const OpAttrs& attrs, const TensorView* inputs,
                    size_t input_count, TensorView* outputs, size_t output_count,
                    ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (x.rank != 4) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: input must be [N, C, H, W], got %s", op,
                      dims_text(x).text);
  }
  int64_t dims[4] = {x.dims[0], x.dims[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int32_t k = attrs.kernel[i], s = attrs.stride[i], d = attrs.dilation[i];
    const int32_t pb = attrs.padding[i], pe = attrs.padding[2 + i];
    if (k < 1 || s < 1 || d < 1) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "%s: kernel %d, stride %d and dilation %d must be >= 1", op, k, s, d);
    }
    if (pb < 0 || pe < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: negative padding %d, %d", op, pb, pe);
    }
    // PyTorch's rule: padding at most half the effective window, so no window lies entirely in
    // padding (an average over zero elements, a max over none).
    const int64_t eff = static_cast<int64_t>(d) * (k - 1) + 1;
    if (pb > eff / 2 || pe > eff / 2) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "%s: padding %d, %d exceeds half the window %lld", op, pb, pe,
                        static_cast<long long>(eff));
    }
    dims[2 + i] = spatial_out(x.dims[2 + i], pb, pe, k, s, d, attrs.ceil_mode);
    if (dims[2 + i] < 1) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "%s: empty output along %s: input %lld, pads %d+%d, kernel %d, stride %d, "
                        "dilation %d",
                        op, i == 0 ? "H" : "W", static_cast<long long>(x.dims[2 + i]), pb, pe, k, s,
                        d);
    }
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, 4, ctx));
  set_output(&outputs[0], x.dtype, dims, 4);
  return Status::ok();
}

// axes[0..count) unique (negative count from the end); count 0 reduces every dim. A reduced
// extent may be empty: the sum is then 0 and the mean NaN (numpy's result).
Status reduce_shape(const char* op, const OpAttrs& attrs, const TensorView* inputs,
                    size_t input_count, TensorView* outputs, size_t output_count,
                    ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (attrs.count > x.rank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %d axes for rank %d", op,
                      static_cast<int>(attrs.count), static_cast<int>(x.rank));
  }
  bool reduced[kMaxRank] = {false};
  for (int j = 0; j < attrs.count; ++j) {
    int axis = 0;
    if (!normalize_axis(attrs.axes[j], x.rank, &axis)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: axis %d out of range for rank %d", op,
                        attrs.axes[j], static_cast<int>(x.rank));
    }
    if (reduced[axis]) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: axis %d repeated", op, axis);
    }
    reduced[axis] = true;
  }
  if (attrs.count == 0) {
    for (int i = 0; i < x.rank; ++i) reduced[i] = true;
  }
  int64_t dims[kMaxRank] = {0};
  int rank = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (!reduced[i]) {
      dims[rank++] = x.dims[i];
    } else if (attrs.keepdims) {
      dims[rank++] = 1;
    }
  }
  // Reducing an empty axis can leave huge dims that the zero had kept in range: [0, 2^62, 4].
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, rank, ctx));
  set_output(&outputs[0], x.dtype, dims, rank);
  return Status::ok();
}

}  // namespace

// ---- Linear algebra
// ------------------------------------------------------------------------------

// [.., M, K] x [.., K, N] -> [broadcast(..), M, N]. Both ranks >= 2 (1-D operands are unsqueezed
// by the exporter).
Status matmul_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t>,
                    ErrorContext* ctx) {
  const char* op = "matmul";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  EMBER_RETURN_IF_ERROR(check_same_dtype(op, a, 0, b, 1, ctx));
  if (a.rank < 2 || b.rank < 2) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "matmul: operands need rank >= 2, got %d and %d",
                      static_cast<int>(a.rank), static_cast<int>(b.rank));
  }
  const int64_t m = a.dims[a.rank - 2], k = a.dims[a.rank - 1];
  const int64_t kb = b.dims[b.rank - 2], n = b.dims[b.rank - 1];
  if (k != kb) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "matmul: K mismatch: %s x %s (%lld vs %lld)",
                      dims_text(a).text, dims_text(b).text, static_cast<long long>(k),
                      static_cast<long long>(kb));
  }
  int64_t dims[kMaxRank];
  int bad = 0;
  const int batch = broadcast_dims(a.dims, a.rank - 2, b.dims, b.rank - 2, dims, &bad);
  if (batch < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "matmul: batch dims of %s and %s do not broadcast (axis %d)",
                      dims_text(a).text, dims_text(b).text, bad);
  }
  dims[batch] = m;
  dims[batch + 1] = n;
  EMBER_RETURN_IF_ERROR(check_output(op, a.dtype, dims, batch + 2, ctx));
  set_output(&outputs[0], a.dtype, dims, batch + 2);
  return Status::ok();
}

// x [.., K], w [N, K] (any weight dtype: quantized weights are chosen by the kernel key), b [N]?
// with x's dtype -> [.., N] with x's dtype.
Status linear_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t>,
                    ErrorContext* ctx) {
  const char* op = "linear";
  EMBER_RETURN_IF_ERROR(
      check_args(op, inputs, input_count, 2, 3, 1u << 2, outputs, output_count, ctx));
  if (attrs.activation_quant != ActivationQuant::None &&
      attrs.activation_quant != ActivationQuant::Fp8PerToken) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "linear: invalid activation_quant %d",
                      static_cast<int>(attrs.activation_quant));
  }
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  if (x.rank < 1) return EMBER_FAIL(ctx, Error::InvalidArgument, "linear: x must have rank >= 1");
  if (w.rank != 2) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "linear: weight must be [N, K], got %s",
                      dims_text(w).text);
  }
  const int64_t k = x.dims[x.rank - 1];
  const int64_t n = w.dims[0];
  if (w.dims[1] != k) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "linear: K mismatch: x %s, weight %s",
                      dims_text(x).text, dims_text(w).text);
  }
  if (input_count == 3 && inputs[2].dtype != ScalarType::Invalid) {
    const TensorView& b = inputs[2];
    EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, b, 2, ctx));
    if (b.rank != 1 || b.dims[0] != n) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "linear: bias must be [%lld], got %s",
                        static_cast<long long>(n), dims_text(b).text);
    }
  }
  int64_t dims[kMaxRank];
  for (int i = 0; i < x.rank - 1; ++i) dims[i] = x.dims[i];
  dims[x.rank - 1] = n;
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, x.rank, ctx));
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
}

// ---- Convolution and pooling
// ---------------------------------------------------------------------

Status conv2d_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t>,
                    ErrorContext* ctx) {
  const char* op = "conv2d";
  EMBER_RETURN_IF_ERROR(
      check_args(op, inputs, input_count, 2, 3, 1u << 2, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, w, 1, ctx));
  if (x.rank != 4) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv2d: input must be [N, C, H, W], got %s",
                      dims_text(x).text);
  }
  if (w.rank != 4) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "conv2d: weight must be [O, C/groups, kH, kW], got %s", dims_text(w).text);
  }
  const int64_t groups = attrs.groups;
  if (groups < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv2d: groups %lld < 1",
                      static_cast<long long>(groups));
  }
  for (int i = 0; i < 2; ++i) {
    if (attrs.stride[i] < 1 || attrs.dilation[i] < 1) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "conv2d: stride %d and dilation %d must be >= 1", attrs.stride[i],
                        attrs.dilation[i]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    if (attrs.padding[i] < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "conv2d: negative padding %d",
                        attrs.padding[i]);
    }
  }
  // The validator refuses these in a program; kernels called directly (the exporter's evaluator)
  // are checked here.
  if (attrs.out_min != attrs.out_min || attrs.out_max != attrs.out_max || attrs.out_min > attrs.out_max) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "conv2d: output clamp [%g, %g] needs bounds that are not NaN, min <= max",
                      static_cast<double>(attrs.out_min), static_cast<double>(attrs.out_max));
  }
  const int64_t c = x.dims[1], o = w.dims[0];
  if (c % groups != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "conv2d: input channels %lld not divisible by groups %lld",
                      static_cast<long long>(c), static_cast<long long>(groups));
  }
  if (o % groups != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "conv2d: output channels %lld not divisible by groups %lld",
                      static_cast<long long>(o), static_cast<long long>(groups));
  }
  if (w.dims[1] != c / groups) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "conv2d: weight %s needs %lld input channels per group (C %lld, groups %lld)",
                      dims_text(w).text, static_cast<long long>(c / groups),
                      static_cast<long long>(c), static_cast<long long>(groups));
  }
  if (w.dims[2] < 1 || w.dims[3] < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "conv2d: empty kernel in weight %s",
                      dims_text(w).text);
  }
  if (input_count == 3 && inputs[2].dtype != ScalarType::Invalid) {
    const TensorView& b = inputs[2];
    EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, b, 2, ctx));
    if (b.rank != 1 || b.dims[0] != o) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "conv2d: bias must be [%lld], got %s",
                        static_cast<long long>(o), dims_text(b).text);
    }
  }
  int64_t dims[4] = {x.dims[0], o, 0, 0};
  for (int i = 0; i < 2; ++i) {
    dims[2 + i] = spatial_out(x.dims[2 + i], attrs.padding[i], attrs.padding[2 + i], w.dims[2 + i],
                              attrs.stride[i], attrs.dilation[i], false);
    if (dims[2 + i] < 1) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "conv2d: empty output along %s: input %lld, pads %d+%d, kernel %lld, "
                        "stride %d, dilation %d",
                        i == 0 ? "H" : "W", static_cast<long long>(x.dims[2 + i]), attrs.padding[i],
                        attrs.padding[2 + i], static_cast<long long>(w.dims[2 + i]),
                        attrs.stride[i], attrs.dilation[i]);
    }
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, 4, ctx));
  set_output(&outputs[0], x.dtype, dims, 4);
  return Status::ok();
}

Status max_pool2d_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  return pool2d_shape("max_pool2d", attrs, inputs, input_count, outputs, output_count, ctx);
}

Status avg_pool2d_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  return pool2d_shape("avg_pool2d", attrs, inputs, input_count, outputs, output_count, ctx);
}

Status global_avg_pool2d_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                               TensorView* outputs, size_t output_count, Span<const int64_t>,
                               ErrorContext* ctx) {
  const char* op = "global_avg_pool2d";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (x.rank != 4) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: input must be [N, C, H, W], got %s", op,
                      dims_text(x).text);
  }
  if (x.dims[2] < 1 || x.dims[3] < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: empty spatial dims in %s", op,
                      dims_text(x).text);
  }
  const int64_t dims[4] = {x.dims[0], x.dims[1], 1, 1};
  set_output(&outputs[0], x.dtype, dims, 4);
  return Status::ok();
}

// ---- Normalization
// -------------------------------------------------------------------------------

Status softmax_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                     TensorView* outputs, size_t output_count, Span<const int64_t>,
                     ErrorContext* ctx) {
  const char* op = "softmax";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "softmax: axis %d out of range for rank %d",
                      attrs.axis, static_cast<int>(x.rank));
  }
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

Status layer_norm_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  const char* op = "layer_norm";
  EMBER_RETURN_IF_ERROR(
      check_args(op, inputs, input_count, 1, 3, (1u << 1) | (1u << 2), outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "layer_norm: axis %d out of range for rank %d",
                      attrs.axis, static_cast<int>(x.rank));
  }
  if (!(attrs.epsilon >= 0.0f) || attrs.epsilon > std::numeric_limits<float>::max()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "layer_norm: epsilon %g must be finite and >= 0",
                      static_cast<double>(attrs.epsilon));
  }
  for (int i = axis; i < x.rank; ++i) {
    if (x.dims[i] == 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "layer_norm: normalized dims of %s from axis %d are empty",
                        dims_text(x).text, axis);
    }
  }
  const int norm_rank = x.rank - axis;
  for (size_t p = 1; p < input_count; ++p) {
    const TensorView& t = inputs[p];
    if (t.dtype == ScalarType::Invalid) continue;  // absent gamma / beta
    EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, t, p, ctx));
    bool ok = t.rank == norm_rank;
    for (int i = 0; ok && i < norm_rank; ++i) ok = t.dims[i] == x.dims[axis + i];
    if (!ok) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "layer_norm: %s shape %s must equal %s",
                        p == 1 ? "gamma" : "beta", dims_text(t).text,
                        dims_text(x.dims + axis, norm_rank).text);
    }
  }
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

// Inference batch norm: x [N, C, ...]; scale, bias, mean, var [C] f32; attrs.axis is ignored
// (the channel axis is always 1).
Status batch_norm_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  const char* op = "batch_norm";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 5, 5, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (x.rank < 2) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "batch_norm: input must be [N, C, ...], got %s",
                      dims_text(x).text);
  }
  if (!(attrs.epsilon >= 0.0f) || attrs.epsilon > std::numeric_limits<float>::max()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "batch_norm: epsilon %g must be finite and >= 0",
                      static_cast<double>(attrs.epsilon));
  }
  static const char* const kNames[] = {"x", "scale", "bias", "mean", "var"};
  const int64_t c = x.dims[1];
  for (size_t p = 1; p < 5; ++p) {
    const TensorView& t = inputs[p];
    if (t.dtype != ScalarType::F32) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "batch_norm: %s must be f32, got %s",
                        kNames[p], to_string(t.dtype));
    }
    if (t.rank != 1 || t.dims[0] != c) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "batch_norm: %s must be [%lld], got %s",
                        kNames[p], static_cast<long long>(c), dims_text(t).text);
    }
  }
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

// ---- Reductions
// ----------------------------------------------------------------------------------

Status reduce_mean_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                         TensorView* outputs, size_t output_count, Span<const int64_t>,
                         ErrorContext* ctx) {
  return reduce_shape("reduce_mean", attrs, inputs, input_count, outputs, output_count, ctx);
}

Status reduce_sum_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  return reduce_shape("reduce_sum", attrs, inputs, input_count, outputs, output_count, ctx);
}

// [issue 17: reductions and index ops] reduce_max / reduce_min: f32, i32, i64; reduce_prod: f32.
// An empty reduced extent is allowed (ONNX: the identity, -inf / +inf / 1, or the integer type's
// lowest / highest).
namespace {
Status reduce_typed_shape(const char* op, bool integers, const OpAttrs& attrs, const TensorView* inputs,
                          size_t input_count, TensorView* outputs, size_t output_count, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(reduce_shape(op, attrs, inputs, input_count, outputs, output_count, ctx));
  const ScalarType t = inputs[0].dtype;
  if (t != ScalarType::F32 && !(integers && (t == ScalarType::I32 || t == ScalarType::I64))) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: input must be %s, got %s", op,
                      integers ? "f32, i32 or i64" : "f32", to_string(t));
  }
  return Status::ok();
}
}  // namespace

Status reduce_max_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  return reduce_typed_shape("reduce_max", true, attrs, inputs, input_count, outputs, output_count, ctx);
}

Status reduce_min_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>,
                        ErrorContext* ctx) {
  return reduce_typed_shape("reduce_min", true, attrs, inputs, input_count, outputs, output_count, ctx);
}

Status reduce_prod_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                         TensorView* outputs, size_t output_count, Span<const int64_t>,
                         ErrorContext* ctx) {
  return reduce_typed_shape("reduce_prod", false, attrs, inputs, input_count, outputs, output_count, ctx);
}

}  // namespace ember::internal
