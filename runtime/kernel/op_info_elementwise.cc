// Shape functions of the elementwise ops: binary (numpy broadcasting), unary, comparison, select
// and cast. See op_info.cc for the rules every shape function follows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {
namespace {

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

Status unary_shape(const char* op, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  set_output(&outputs[0], inputs[0].dtype, inputs[0].dims, inputs[0].rank);
  return Status::ok();
}

bool is_finite(float v) {
  return v == v && v <= std::numeric_limits<float>::max() && v >= -std::numeric_limits<float>::max();
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

}  // namespace

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

Status equal_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, Span<const int64_t>,
                   ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(
      binary_shape("equal", inputs, input_count, outputs, output_count, ctx));
  outputs[0].dtype = ScalarType::Bool;
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

// ---- Issue 17 (real-world ONNX models) ----------------------------------------------------------

#define EMBER_UNARY_SHAPE(fn, name)                                                            \
  Status fn(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs, \
            size_t output_count, Span<const int64_t>, ErrorContext* ctx) {                     \
    return unary_shape(name, inputs, input_count, outputs, output_count, ctx);                 \
  }
EMBER_UNARY_SHAPE(softplus_shape, "softplus")
EMBER_UNARY_SHAPE(log_shape, "log")
EMBER_UNARY_SHAPE(abs_shape, "abs")
EMBER_UNARY_SHAPE(reciprocal_shape, "reciprocal")
EMBER_UNARY_SHAPE(floor_shape, "floor")
EMBER_UNARY_SHAPE(ceil_shape, "ceil")
EMBER_UNARY_SHAPE(round_shape, "round")
EMBER_UNARY_SHAPE(sin_shape, "sin")
EMBER_UNARY_SHAPE(cos_shape, "cos")
#undef EMBER_UNARY_SHAPE

// The activations with parameters (alpha, beta in the HardSigmoid table): finite parameters.
#define EMBER_PARAM_UNARY_SHAPE(fn, name)                                                           \
  Status fn(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs, \
            size_t output_count, Span<const int64_t>, ErrorContext* ctx) {                          \
    if (!is_finite(attrs.alpha) || !is_finite(attrs.beta)) {                                        \
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: alpha %g and beta %g must be finite", name, \
                        static_cast<double>(attrs.alpha), static_cast<double>(attrs.beta));         \
    }                                                                                               \
    return unary_shape(name, inputs, input_count, outputs, output_count, ctx);                      \
  }
EMBER_PARAM_UNARY_SHAPE(leaky_relu_shape, "leaky_relu")
EMBER_PARAM_UNARY_SHAPE(elu_shape, "elu")
EMBER_PARAM_UNARY_SHAPE(selu_shape, "selu")
#undef EMBER_PARAM_UNARY_SHAPE

// ONNX PRelu: the slope broadcasts to x (unidirectionally): the output has x's dims.
Status prelu_shape(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,
                   size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(binary_shape("prelu", inputs, input_count, outputs, output_count, ctx));
  if (outputs[0].rank != inputs[0].rank ||
      !std::equal(outputs[0].dims, outputs[0].dims + outputs[0].rank, inputs[0].dims)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "prelu: slope %s does not broadcast to x %s",
                      dims_text(inputs[1]).text, dims_text(inputs[0]).text);
  }
  return Status::ok();
}

// Comparisons: a, b of one dtype -> bool. And / Or / Xor: bool inputs.
#define EMBER_COMPARE_SHAPE(fn, name, bool_inputs)                                                  \
  Status fn(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,      \
            size_t output_count, Span<const int64_t>, ErrorContext* ctx) {                          \
    EMBER_RETURN_IF_ERROR(binary_shape(name, inputs, input_count, outputs, output_count, ctx));      \
    if ((bool_inputs) && inputs[0].dtype != ScalarType::Bool) {                                     \
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: inputs must be bool, got %s", name,         \
                        to_string(inputs[0].dtype));                                                \
    }                                                                                               \
    outputs[0].dtype = ScalarType::Bool;                                                            \
    return Status::ok();                                                                            \
  }
EMBER_COMPARE_SHAPE(greater_shape, "greater", false)
EMBER_COMPARE_SHAPE(less_shape, "less", false)
EMBER_COMPARE_SHAPE(greater_equal_shape, "greater_equal", false)
EMBER_COMPARE_SHAPE(less_equal_shape, "less_equal", false)
EMBER_COMPARE_SHAPE(and_shape, "and", true)
EMBER_COMPARE_SHAPE(or_shape, "or", true)
EMBER_COMPARE_SHAPE(xor_shape, "xor", true)
#undef EMBER_COMPARE_SHAPE

Status not_shape(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,
                 size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(unary_shape("not", inputs, input_count, outputs, output_count, ctx));
  if (inputs[0].dtype != ScalarType::Bool) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "not: input must be bool, got %s", to_string(inputs[0].dtype));
  }
  return Status::ok();
}

Status max_shape(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,
                 size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return binary_shape("max", inputs, input_count, outputs, output_count, ctx);
}

Status min_shape(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,
                 size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return binary_shape("min", inputs, input_count, outputs, output_count, ctx);
}

}  // namespace ember::internal
