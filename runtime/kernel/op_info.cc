// Per-op table and shape functions. Each shape function is the op's validator: it runs at load
// (every symbol at its max) and at run time (symbols bound by set_input_sizes), so everything here
// is O(rank), allocation-free and safe on hostile input: dims come from files and callers, so every
// product and sum is checked for int64 overflow before it is formed.
#include "runtime/kernel/op_info.h"

#include <cstdint>
#include <cstdio>
#include <limits>

#include "runtime/kernel/kernel.h"

namespace ember {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// a * b for a, b >= 0; false on overflow.
bool mul_nonneg(int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > kInt64Max / a) return false;
  *out = a * b;
  return true;
}

// a + b for a, b >= 0; false on overflow.
bool add_nonneg(int64_t a, int64_t b, int64_t* out) {
  if (b > kInt64Max - a) return false;
  *out = a + b;
  return true;
}

// Normalizes a possibly negative axis into [0, rank); false when out of range.
bool normalize_axis(int64_t axis, int rank, int* out) {
  if (axis < -static_cast<int64_t>(rank) || axis >= rank) return false;
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return true;
}

struct DimsText {
  char text[8 * 22 + 4];
};
DimsText dims_text(const int64_t* dims, int rank) {
  DimsText t;
  format_dims(dims, rank, t.text, sizeof(t.text));
  return t;
}
DimsText dims_text(const TensorView& v) {
  return dims_text(v.dims, v.rank <= kMaxRank ? v.rank : kMaxRank);
}

// Writes dtype/rank/dims into *out from a local copy, so `out` may alias an input.
void set_output(TensorView* out, ScalarType dtype, const int64_t* dims, int rank) {
  int64_t copy[kMaxRank] = {0};
  for (int i = 0; i < rank; ++i) copy[i] = dims[i];
  out->dtype = dtype;
  out->rank = static_cast<uint8_t>(rank);
  for (int i = 0; i < kMaxRank; ++i) out->dims[i] = copy[i];
}

// A present tensor: known dtype, rank <= kMaxRank, dims >= 0, byte size fits in int64.
Status check_tensor(const char* op, const char* what, const TensorView& t, ErrorContext* ctx) {
  if (!is_valid(t.dtype)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s has invalid dtype %d", op, what,
                      static_cast<int>(t.dtype));
  }
  if (t.rank > kMaxRank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s has rank %d > %d", op, what,
                      static_cast<int>(t.rank), kMaxRank);
  }
  int64_t numel = 1;
  for (int i = 0; i < t.rank; ++i) {
    if (t.dims[i] < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s has negative dim %lld at %d", op, what,
                        static_cast<long long>(t.dims[i]), i);
    }
    if (!mul_nonneg(numel, t.dims[i], &numel)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s element count overflows: %s", op, what,
                        dims_text(t).text);
    }
  }
  const int64_t elem_bytes = bits_of(t.dtype) >= 8 ? bits_of(t.dtype) / 8 : 1;
  if (numel > kInt64Max / elem_bytes) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s byte size overflows: %s", op, what,
                      dims_text(t).text);
  }
  return Status::ok();
}

// The output dims the shape function computed must also describe a tensor whose size fits.
Status check_output(const char* op, ScalarType dtype, const int64_t* dims, int rank,
                    ErrorContext* ctx) {
  int64_t numel = 1;
  for (int i = 0; i < rank; ++i) {
    if (!mul_nonneg(numel, dims[i], &numel)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: output element count overflows: %s", op,
                        dims_text(dims, rank).text);
    }
  }
  const int64_t elem_bytes = bits_of(dtype) >= 8 ? bits_of(dtype) / 8 : 1;
  if (numel > kInt64Max / elem_bytes) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: output byte size overflows: %s", op,
                      dims_text(dims, rank).text);
  }
  return Status::ok();
}

// Arity, presence of required inputs and the shape of every present input. `optional_mask` has
// bit i set when input i may be absent (dtype Invalid).
Status check_args(const char* op, const TensorView* inputs, size_t input_count, size_t min_inputs,
                  size_t max_inputs, uint32_t optional_mask, TensorView* outputs,
                  size_t output_count, ErrorContext* ctx) {
  if (input_count < min_inputs || input_count > max_inputs) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: expected %zu to %zu inputs, got %zu", op,
                      min_inputs, max_inputs, input_count);
  }
  if (output_count != 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: expected 1 output, got %zu", op,
                      output_count);
  }
  if ((input_count != 0 && inputs == nullptr) || outputs == nullptr) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: null input or output array", op);
  }
  for (size_t i = 0; i < input_count; ++i) {
    const bool optional = i < 32 && ((optional_mask >> i) & 1u) != 0;
    if (optional && inputs[i].dtype == ScalarType::Invalid) continue;
    char what[32];
    snprintf(what, sizeof(what), "input %zu", i);
    EMBER_RETURN_IF_ERROR(check_tensor(op, what, inputs[i], ctx));
  }
  return Status::ok();
}

Status check_same_dtype(const char* op, const TensorView& a, size_t ia, const TensorView& b,
                        size_t ib, ErrorContext* ctx) {
  if (a.dtype != b.dtype) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: input %zu is %s but input %zu is %s", op,
                      ia, to_string(a.dtype), ib, to_string(b.dtype));
  }
  return Status::ok();
}

// Broadcasts dims a[0..ra) and b[0..rb) (numpy rules, aligned at the end) into out; returns the
// rank or -1 on mismatch, with the mismatching axis (of the output) in *bad_axis.
int broadcast_dims(const int64_t* a, int ra, const int64_t* b, int rb, int64_t* out,
                   int* bad_axis) {
  const int r = ra > rb ? ra : rb;
  int64_t tmp[kMaxRank];
  for (int i = 0; i < r; ++i) {
    const int ai = i - (r - ra), bi = i - (r - rb);
    const int64_t da = ai >= 0 ? a[ai] : 1;
    const int64_t db = bi >= 0 ? b[bi] : 1;
    if (da == db || db == 1) {
      tmp[i] = da;
    } else if (da == 1) {
      tmp[i] = db;
    } else {
      if (bad_axis != nullptr) *bad_axis = i;
      return -1;
    }
  }
  for (int i = 0; i < r; ++i) out[i] = tmp[i];
  return r;
}

// ---- Elementwise
// ---------------------------------------------------------------------------------

Status binary_shape(const char* op, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  EMBER_RETURN_IF_ERROR(check_same_dtype(op, a, 0, b, 1, ctx));
  int64_t dims[kMaxRank];
  int bad = 0;
  const int rank = broadcast_dims(a.dims, a.rank, b.dims, b.rank, dims, &bad);
  if (rank < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "%s: shapes %s and %s do not broadcast (axis %d)", op, dims_text(a).text,
                      dims_text(b).text, bad);
  }
  EMBER_RETURN_IF_ERROR(check_output(op, a.dtype, dims, rank, ctx));
  set_output(&outputs[0], a.dtype, dims, rank);
  return Status::ok();
}

#define EMBER_BINARY_SHAPE(fn, name)                                                           \
  Status fn(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs, \
            size_t output_count, Span<const int64_t>, ErrorContext* ctx) {                     \
    return binary_shape(name, inputs, input_count, outputs, output_count, ctx);                \
  }
EMBER_BINARY_SHAPE(add_shape, "add")
EMBER_BINARY_SHAPE(sub_shape, "sub")
EMBER_BINARY_SHAPE(mul_shape, "mul")
EMBER_BINARY_SHAPE(div_shape, "div")
#undef EMBER_BINARY_SHAPE

Status unary_shape(const char* op, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  set_output(&outputs[0], inputs[0].dtype, inputs[0].dims, inputs[0].rank);
  return Status::ok();
}

#define EMBER_UNARY_SHAPE(fn, name)                                                            \
  Status fn(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs, \
            size_t output_count, Span<const int64_t>, ErrorContext* ctx) {                     \
    return unary_shape(name, inputs, input_count, outputs, output_count, ctx);                 \
  }
EMBER_UNARY_SHAPE(relu_shape, "relu")
EMBER_UNARY_SHAPE(silu_shape, "silu")
EMBER_UNARY_SHAPE(sigmoid_shape, "sigmoid")
EMBER_UNARY_SHAPE(tanh_shape, "tanh")
EMBER_UNARY_SHAPE(hard_swish_shape, "hard_swish")
EMBER_UNARY_SHAPE(erf_shape, "erf")
EMBER_UNARY_SHAPE(sqrt_shape, "sqrt")
EMBER_UNARY_SHAPE(exp_shape, "exp")
EMBER_UNARY_SHAPE(neg_shape, "neg")
#undef EMBER_UNARY_SHAPE

Status gelu_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                  TensorView* outputs, size_t output_count, Span<const int64_t>,
                  ErrorContext* ctx) {
  if (attrs.gelu_approx != GeluApprox::None && attrs.gelu_approx != GeluApprox::Tanh) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "gelu: invalid approximation %d",
                      static_cast<int>(attrs.gelu_approx));
  }
  return unary_shape("gelu", inputs, input_count, outputs, output_count, ctx);
}

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

// ---- Data movement
// -------------------------------------------------------------------------------

// Target dims: shape_sym[i] != 0 takes symbols[sym - 1]; otherwise shape[i] is literal (0 is a
// literal zero, not "copy the input dim"); a single -1 is inferred from the element count.
Status reshape_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                     TensorView* outputs, size_t output_count, Span<const int64_t> symbols,
                     ErrorContext* ctx) {
  const char* op = "reshape";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (attrs.count > kMaxRank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "reshape: target rank %d > %d",
                      static_cast<int>(attrs.count), kMaxRank);
  }
  const int rank = attrs.count;
  int64_t dims[kMaxRank] = {0};
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < rank; ++i) {
    int64_t d = attrs.shape[i];
    if (attrs.shape_sym[i] != 0) {
      const size_t sym = attrs.shape_sym[i];
      if (sym > symbols.size()) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "reshape: dim %d names symbol %zu but only %zu are bound", i, sym,
                          symbols.size());
      }
      d = symbols[sym - 1];
      if (d < 0) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "reshape: symbol %zu has negative value %lld", sym,
                          static_cast<long long>(d));
      }
    } else if (d == -1) {
      if (infer >= 0) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "reshape: -1 at both dim %d and dim %d",
                          infer, i);
      }
      infer = i;
      continue;
    } else if (d < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "reshape: invalid target dim %lld at %d",
                        static_cast<long long>(d), i);
    }
    dims[i] = d;
    if (!mul_nonneg(known, d, &known)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "reshape: target element count overflows");
    }
  }
  const int64_t numel = static_cast<int64_t>(x.numel());  // checked to fit by check_tensor
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "reshape: cannot infer dim %d: %lld elements, %lld in the other dims",
                        infer, static_cast<long long>(numel), static_cast<long long>(known));
    }
    dims[infer] = numel / known;
    known = numel;
  }
  if (known != numel) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "reshape: %s has %lld elements, target %s has %lld", dims_text(x).text,
                      static_cast<long long>(numel), dims_text(dims, rank).text,
                      static_cast<long long>(known));
  }
  set_output(&outputs[0], x.dtype, dims, rank);
  return Status::ok();
}

Status transpose_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                       TensorView* outputs, size_t output_count, Span<const int64_t>,
                       ErrorContext* ctx) {
  const char* op = "transpose";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (attrs.count != x.rank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "transpose: perm has %d entries for rank %d",
                      static_cast<int>(attrs.count), static_cast<int>(x.rank));
  }
  int64_t dims[kMaxRank] = {0};
  bool seen[kMaxRank] = {false};
  for (int i = 0; i < x.rank; ++i) {
    const int32_t p = attrs.perm[i];
    if (p < 0 || p >= x.rank || seen[p]) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "transpose: perm entry %d at %d is not part of a permutation of %d", p, i,
                        static_cast<int>(x.rank));
    }
    seen[p] = true;
    dims[i] = x.dims[p];
  }
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
}

Status concat_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t>,
                    ErrorContext* ctx) {
  const char* op = "concat";
  EMBER_RETURN_IF_ERROR(
      check_args(op, inputs, input_count, 1, kMaxKernelArgs - 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "concat: axis %d out of range for rank %d",
                      attrs.axis, static_cast<int>(x.rank));
  }
  int64_t dims[kMaxRank] = {0};
  for (int i = 0; i < x.rank; ++i) dims[i] = x.dims[i];
  for (size_t j = 1; j < input_count; ++j) {
    const TensorView& t = inputs[j];
    EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 0, t, j, ctx));
    bool ok = t.rank == x.rank;
    for (int i = 0; ok && i < x.rank; ++i) ok = i == axis || t.dims[i] == x.dims[i];
    if (!ok) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "concat: input %zu shape %s does not match input 0 %s except on axis %d", j,
                        dims_text(t).text, dims_text(x).text, axis);
    }
    if (!add_nonneg(dims[axis], t.dims[axis], &dims[axis])) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "concat: size along axis %d overflows", axis);
    }
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, x.rank, ctx));
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
}

// ONNX Slice on one axis of size `dim`: negative start/end count from the end, then clamp to
// [0, dim] (step > 0) or [-1, dim - 1] (step < 0). Returns the element count along the axis.
int64_t slice_count(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0) return 0;
  if (start < 0) start += dim;  // cannot overflow: dim >= 0
  if (end < 0) end += dim;
  if (step > 0) {
    start = start < 0 ? 0 : (start > dim ? dim : start);
    end = end < 0 ? 0 : (end > dim ? dim : end);
    if (end <= start) return 0;
    const uint64_t span = static_cast<uint64_t>(end - start);
    const uint64_t s = static_cast<uint64_t>(step);
    return static_cast<int64_t>((span + s - 1) / s);
  }
  start = start < 0 ? 0 : (start > dim - 1 ? dim - 1 : start);
  end = end < -1 ? -1 : (end > dim - 1 ? dim - 1 : end);
  if (start <= end) return 0;
  const uint64_t span = static_cast<uint64_t>(start - end);
  const uint64_t s = static_cast<uint64_t>(-(step + 1)) + 1;  // |step| without overflow
  return static_cast<int64_t>((span + s - 1) / s);
}

Status slice_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, Span<const int64_t>,
                   ErrorContext* ctx) {
  const char* op = "slice";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (attrs.count > x.rank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "slice: %d axes for rank %d",
                      static_cast<int>(attrs.count), static_cast<int>(x.rank));
  }
  int64_t dims[kMaxRank] = {0};
  for (int i = 0; i < x.rank; ++i) dims[i] = x.dims[i];
  bool seen[kMaxRank] = {false};
  for (int j = 0; j < attrs.count; ++j) {
    int axis = 0;
    if (!normalize_axis(attrs.axes[j], x.rank, &axis)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "slice: axis %d out of range for rank %d",
                        attrs.axes[j], static_cast<int>(x.rank));
    }
    if (seen[axis]) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "slice: axis %d repeated", axis);
    }
    seen[axis] = true;
    if (attrs.steps[j] == 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "slice: step 0 on axis %d", axis);
    }
    dims[axis] = slice_count(x.dims[axis], attrs.starts[j], attrs.ends[j], attrs.steps[j]);
  }
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
}

// ---- Ops added for the ONNX importer
// -------------------------------------------------------------

// a + b for any int64 values; false on overflow.
bool add_signed(int64_t a, int64_t b, int64_t* out) {
  if ((b > 0 && a > kInt64Max - b) || (b < 0 && a < std::numeric_limits<int64_t>::min() - b)) {
    return false;
  }
  *out = a + b;
  return true;
}

bool is_finite(float v) {
  return v == v && v <= std::numeric_limits<float>::max() && v >= -std::numeric_limits<float>::max();
}

Status pow_shape(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,
                 size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return binary_shape("pow", inputs, input_count, outputs, output_count, ctx);
}

// Bounds may be infinite (an absent ONNX min or max) but not NaN. min > max is allowed: the
// definition min(max(x, lo), hi) then yields hi everywhere, as PyTorch's clamp does.
Status clip_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                  TensorView* outputs, size_t output_count, Span<const int64_t>,
                  ErrorContext* ctx) {
  if (attrs.clip_min != attrs.clip_min || attrs.clip_max != attrs.clip_max) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "clip: bounds [%g, %g] must not be NaN",
                      static_cast<double>(attrs.clip_min), static_cast<double>(attrs.clip_max));
  }
  return unary_shape("clip", inputs, input_count, outputs, output_count, ctx);
}

Status hard_sigmoid_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                          TensorView* outputs, size_t output_count, Span<const int64_t>,
                          ErrorContext* ctx) {
  if (!is_finite(attrs.alpha) || !is_finite(attrs.beta)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "hard_sigmoid: alpha %g and beta %g must be finite",
                      static_cast<double>(attrs.alpha), static_cast<double>(attrs.beta));
  }
  return unary_shape("hard_sigmoid", inputs, input_count, outputs, output_count, ctx);
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

// Output index j along an axis reads input index j - begin: inside [0, dim) it is copied, outside
// it is the pad value (Constant), the mirror image without repeating the border (Reflect) or the
// nearest border element (Edge). Negative pads crop. So Reflect needs begin, end < dim, and Edge a
// non-empty axis wherever it pads.
Status pad_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                 TensorView* outputs, size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "pad";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (attrs.pad_mode != PadMode::Constant && attrs.pad_mode != PadMode::Reflect &&
      attrs.pad_mode != PadMode::Edge) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "pad: invalid mode %d",
                      static_cast<int>(attrs.pad_mode));
  }
  if (attrs.count != x.rank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "pad: pads cover rank %d but the input has rank %d",
                      static_cast<int>(attrs.count), static_cast<int>(x.rank));
  }
  int64_t dims[kMaxRank] = {0};
  for (int i = 0; i < x.rank; ++i) {
    const int64_t dim = x.dims[i];
    const int64_t begin = attrs.pads[i], end = attrs.pads[x.rank + i];
    int64_t out = 0;
    if (!add_signed(dim, begin, &out) || !add_signed(out, end, &out) || out < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "pad: axis %d of size %lld with pads %lld, %lld gives a negative or "
                        "overflowing size",
                        i, static_cast<long long>(dim), static_cast<long long>(begin),
                        static_cast<long long>(end));
    }
    if (attrs.pad_mode == PadMode::Reflect &&
        ((begin > 0 && begin >= dim) || (end > 0 && end >= dim))) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "pad: reflect pads %lld, %lld on axis %d must be < its size %lld",
                        static_cast<long long>(begin), static_cast<long long>(end), i,
                        static_cast<long long>(dim));
    }
    if (attrs.pad_mode == PadMode::Edge && dim == 0 && (begin > 0 || end > 0)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "pad: edge padding of empty axis %d (pads %lld, %lld)", i,
                        static_cast<long long>(begin), static_cast<long long>(end));
    }
    dims[i] = out;
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, x.rank, ctx));
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
}

// ONNX Gather: data.dims[:axis] + indices.dims + data.dims[axis+1:]. Index values exist only at run
// time, so they cannot be checked here; kernels wrap negative indices once and write zeros for an
// index still outside [0, dim) (an importer folds constant gathers, where the check does happen).
Status gather_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t>,
                    ErrorContext* ctx) {
  const char* op = "gather";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& data = inputs[0];
  const TensorView& indices = inputs[1];
  int axis = 0;
  if (data.rank < 1 || !normalize_axis(attrs.axis, data.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "gather: axis %d out of range for rank %d",
                      attrs.axis, static_cast<int>(data.rank));
  }
  if (indices.dtype != ScalarType::I32 && indices.dtype != ScalarType::I64) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "gather: indices must be i32 or i64, got %s",
                      to_string(indices.dtype));
  }
  const int rank = data.rank - 1 + indices.rank;
  if (rank > kMaxRank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "gather: output rank %d (data %s, indices %s) > %d", rank,
                      dims_text(data).text, dims_text(indices).text, kMaxRank);
  }
  int64_t dims[kMaxRank] = {0};
  int r = 0;
  for (int i = 0; i < axis; ++i) dims[r++] = data.dims[i];
  for (int i = 0; i < indices.rank; ++i) dims[r++] = indices.dims[i];
  for (int i = axis + 1; i < data.rank; ++i) dims[r++] = data.dims[i];
  EMBER_RETURN_IF_ERROR(check_output(op, data.dtype, dims, rank, ctx));
  set_output(&outputs[0], data.dtype, dims, rank);
  return Status::ok();
}

Status where_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, Span<const int64_t>,
                   ErrorContext* ctx) {
  const char* op = "where";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 3, 3, 0, outputs, output_count, ctx));
  const TensorView& cond = inputs[0];
  const TensorView& x = inputs[1];
  const TensorView& y = inputs[2];
  if (cond.dtype != ScalarType::Bool) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "where: condition must be bool, got %s",
                      to_string(cond.dtype));
  }
  EMBER_RETURN_IF_ERROR(check_same_dtype(op, x, 1, y, 2, ctx));
  int64_t dims[kMaxRank];
  int bad = 0;
  int rank = broadcast_dims(cond.dims, cond.rank, x.dims, x.rank, dims, &bad);
  if (rank >= 0) rank = broadcast_dims(dims, rank, y.dims, y.rank, dims, &bad);
  if (rank < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "where: shapes %s, %s and %s do not broadcast (axis %d)",
                      dims_text(cond).text, dims_text(x).text, dims_text(y).text, bad);
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, rank, ctx));
  set_output(&outputs[0], x.dtype, dims, rank);
  return Status::ok();
}

Status equal_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, Span<const int64_t>,
                   ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(
      binary_shape("equal", inputs, input_count, outputs, output_count, ctx));
  outputs[0].dtype = ScalarType::Bool;
  return Status::ok();
}

// The dtypes Cast converts between.
bool is_cast_type(ScalarType t) {
  switch (t) {
    case ScalarType::F32:
    case ScalarType::F16:
    case ScalarType::BF16:
    case ScalarType::I8:
    case ScalarType::U8:
    case ScalarType::I16:
    case ScalarType::I32:
    case ScalarType::I64:
    case ScalarType::Bool:
      return true;
    default:
      return false;
  }
}

Status cast_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                  TensorView* outputs, size_t output_count, Span<const int64_t>,
                  ErrorContext* ctx) {
  const char* op = "cast";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (!is_cast_type(attrs.cast_to)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "cast: target dtype %s (%d) is not one of f32, f16, bf16, i8, u8, i16, i32, "
                      "i64, bool",
                      to_string(attrs.cast_to), static_cast<int>(attrs.cast_to));
  }
  if (!is_cast_type(x.dtype)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "cast: source dtype %s is not one of f32, f16, bf16, i8, u8, i16, i32, i64, "
                      "bool",
                      to_string(x.dtype));
  }
  EMBER_RETURN_IF_ERROR(check_output(op, attrs.cast_to, x.dims, x.rank, ctx));
  set_output(&outputs[0], attrs.cast_to, x.dims, x.rank);
  return Status::ok();
}

// Target dims as Reshape's (literal, or a symbol's value), but -1 is not allowed; the output is the
// numpy broadcast of the input dims and the target dims (a 1 on either side stretches).
Status expand_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t> symbols,
                    ErrorContext* ctx) {
  const char* op = "expand";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (attrs.count > kMaxRank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "expand: target rank %d > %d",
                      static_cast<int>(attrs.count), kMaxRank);
  }
  const int target_rank = attrs.count;
  int64_t target[kMaxRank] = {0};
  for (int i = 0; i < target_rank; ++i) {
    int64_t d = attrs.shape[i];
    if (attrs.shape_sym[i] != 0) {
      const size_t sym = attrs.shape_sym[i];
      if (sym > symbols.size()) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "expand: dim %d names symbol %zu but only %zu are bound", i, sym,
                          symbols.size());
      }
      d = symbols[sym - 1];
      if (d < 0) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "expand: symbol %zu has negative value %lld", sym,
                          static_cast<long long>(d));
      }
    } else if (d < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "expand: invalid target dim %lld at %d",
                        static_cast<long long>(d), i);
    }
    target[i] = d;
  }
  int64_t dims[kMaxRank];
  int bad = 0;
  const int rank = broadcast_dims(x.dims, x.rank, target, target_rank, dims, &bad);
  if (rank < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "expand: input %s does not broadcast to %s (axis %d)", dims_text(x).text,
                      dims_text(target, target_rank).text, bad);
  }
  EMBER_RETURN_IF_ERROR(check_output(op, x.dtype, dims, rank, ctx));
  set_output(&outputs[0], x.dtype, dims, rank);
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

constexpr OpInfo kOpInfos[] = {
    {OpCode::Add, "add", AttrKind::None, 2, 2, 1, add_shape},
    {OpCode::Sub, "sub", AttrKind::None, 2, 2, 1, sub_shape},
    {OpCode::Mul, "mul", AttrKind::None, 2, 2, 1, mul_shape},
    {OpCode::Div, "div", AttrKind::None, 2, 2, 1, div_shape},
    {OpCode::Relu, "relu", AttrKind::None, 1, 1, 1, relu_shape},
    {OpCode::Gelu, "gelu", AttrKind::Gelu, 1, 1, 1, gelu_shape},
    {OpCode::Silu, "silu", AttrKind::None, 1, 1, 1, silu_shape},
    {OpCode::Sigmoid, "sigmoid", AttrKind::None, 1, 1, 1, sigmoid_shape},
    {OpCode::Tanh, "tanh", AttrKind::None, 1, 1, 1, tanh_shape},
    {OpCode::MatMul, "matmul", AttrKind::None, 2, 2, 1, matmul_shape},
    {OpCode::Linear, "linear", AttrKind::Linear, 2, 3, 1, linear_shape},
    {OpCode::Conv2d, "conv2d", AttrKind::Conv2d, 2, 3, 1, conv2d_shape},
    {OpCode::MaxPool2d, "max_pool2d", AttrKind::Pool2d, 1, 1, 1, max_pool2d_shape},
    {OpCode::AvgPool2d, "avg_pool2d", AttrKind::Pool2d, 1, 1, 1, avg_pool2d_shape},
    {OpCode::GlobalAvgPool2d, "global_avg_pool2d", AttrKind::None, 1, 1, 1,
     global_avg_pool2d_shape},
    {OpCode::Softmax, "softmax", AttrKind::Axis, 1, 1, 1, softmax_shape},
    {OpCode::LayerNorm, "layer_norm", AttrKind::Norm, 1, 3, 1, layer_norm_shape},
    {OpCode::Reshape, "reshape", AttrKind::Reshape, 1, 1, 1, reshape_shape},
    {OpCode::Transpose, "transpose", AttrKind::Permute, 1, 1, 1, transpose_shape},
    {OpCode::Concat, "concat", AttrKind::Axis, 1, kMaxKernelArgs - 1, 1, concat_shape},
    {OpCode::Slice, "slice", AttrKind::Slice, 1, 1, 1, slice_shape},
    {OpCode::Clip, "clip", AttrKind::Clip, 1, 1, 1, clip_shape},
    {OpCode::HardSigmoid, "hard_sigmoid", AttrKind::HardSigmoid, 1, 1, 1, hard_sigmoid_shape},
    {OpCode::HardSwish, "hard_swish", AttrKind::None, 1, 1, 1, hard_swish_shape},
    {OpCode::Erf, "erf", AttrKind::None, 1, 1, 1, erf_shape},
    {OpCode::Sqrt, "sqrt", AttrKind::None, 1, 1, 1, sqrt_shape},
    {OpCode::Exp, "exp", AttrKind::None, 1, 1, 1, exp_shape},
    {OpCode::Pow, "pow", AttrKind::None, 2, 2, 1, pow_shape},
    {OpCode::ReduceMean, "reduce_mean", AttrKind::Reduce, 1, 1, 1, reduce_mean_shape},
    {OpCode::ReduceSum, "reduce_sum", AttrKind::Reduce, 1, 1, 1, reduce_sum_shape},
    {OpCode::Pad, "pad", AttrKind::Pad, 1, 1, 1, pad_shape},
    {OpCode::Gather, "gather", AttrKind::Axis, 2, 2, 1, gather_shape},
    {OpCode::Where, "where", AttrKind::None, 3, 3, 1, where_shape},
    {OpCode::Equal, "equal", AttrKind::None, 2, 2, 1, equal_shape},
    {OpCode::Cast, "cast", AttrKind::Cast, 1, 1, 1, cast_shape},
    {OpCode::Expand, "expand", AttrKind::Reshape, 1, 1, 1, expand_shape},
    {OpCode::BatchNorm, "batch_norm", AttrKind::Norm, 5, 5, 1, batch_norm_shape},
    {OpCode::Neg, "neg", AttrKind::None, 1, 1, 1, neg_shape},
};
static_assert(sizeof(kOpInfos) / sizeof(kOpInfos[0]) == kOpCodeCount - 1, "one OpInfo per OpCode");

}  // namespace

const OpInfo* find_op_info(OpCode op) {
  const size_t index = static_cast<size_t>(op);
  if (index == 0 || index >= static_cast<size_t>(kOpCodeCount)) return nullptr;
  const OpInfo* info = &kOpInfos[index - 1];
  return info->op == op ? info : nullptr;
}

bool broadcast_shapes(const TensorView& a, const TensorView& b, TensorView* out) {
  if (a.rank > kMaxRank || b.rank > kMaxRank || out == nullptr) return false;
  int64_t dims[kMaxRank];
  const int rank = broadcast_dims(a.dims, a.rank, b.dims, b.rank, dims, nullptr);
  if (rank < 0) return false;
  out->rank = static_cast<uint8_t>(rank);
  for (int i = 0; i < kMaxRank; ++i) out->dims[i] = i < rank ? dims[i] : 0;
  return true;
}

}  // namespace ember
