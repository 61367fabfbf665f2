// Shape functions of the index and normalization ops of issue 17: argmax / argmin, topk, cumsum,
// gather_elements (with its run-time index check) and group_norm. See op_info.cc for the rules every
// shape function follows; exact semantics are in kernels/reference/ops.h.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {
namespace {

bool is_numeric(ScalarType t) { return t == ScalarType::F32 || t == ScalarType::I32 || t == ScalarType::I64; }

Status check_numeric(const char* op, const TensorView& x, ErrorContext* ctx) {
  if (!is_numeric(x.dtype)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: input must be f32, i32 or i64, got %s", op,
                      to_string(x.dtype));
  }
  return Status::ok();
}

Status arg_shape(const char* op, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                 TensorView* outputs, size_t output_count, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  EMBER_RETURN_IF_ERROR(check_numeric(op, x, ctx));
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: axis %d out of range for rank %d", op, attrs.axis,
                      static_cast<int>(x.rank));
  }
  // An index of nothing does not exist (onnxruntime refuses it too).
  if (x.dims[axis] == 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: axis %d of %s is empty", op, axis, dims_text(x).text);
  }
  int64_t dims[kMaxRank] = {0};
  int rank = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (i != axis) {
      dims[rank++] = x.dims[i];
    } else if (attrs.keepdims) {
      dims[rank++] = 1;
    }
  }
  set_output(&outputs[0], ScalarType::I64, dims, rank);
  return Status::ok();
}

// Writes the coordinates of element `flat` of a tensor of dims[0..rank) as "[i, j, ...]".
DimsText position_text(int64_t flat, const int64_t* dims, int rank) {
  int64_t coords[kMaxRank] = {0};
  for (int i = rank - 1; i >= 0; --i) {
    if (dims[i] > 0) {
      coords[i] = flat % dims[i];
      flat /= dims[i];
    }
  }
  return dims_text(coords, rank);
}

int64_t read_index(const TensorView& indices, int64_t i) {
  return indices.dtype == ScalarType::I32 ? indices.data_as<const int32_t>()[i] : indices.data_as<const int64_t>()[i];
}

// Every index of `indices` within [-dim, dim) (negative ones wrap once, as ONNX says).
Status check_indices(const char* op, const TensorView& data, const TensorView& indices, int axis,
                     ErrorContext* ctx) {
  if (indices.data == nullptr) return Status::ok();
  const int64_t dim = data.dims[axis];
  const int64_t count = static_cast<int64_t>(indices.numel());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = read_index(indices, i);
    if (index < -dim || index >= dim) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "%s: index %lld at indices%s is outside [-%lld, %lld) (axis %d of data %s)", op,
                        static_cast<long long>(index), position_text(i, indices.dims, indices.rank).text,
                        static_cast<long long>(dim), static_cast<long long>(dim), axis, dims_text(data).text);
    }
  }
  return Status::ok();
}

}  // namespace

// x [..] f32 / i32 / i64 -> i64 with attrs.axis removed (keepdims: kept as 1); the axis is not empty.
Status argmax_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                    size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return arg_shape("argmax", attrs, inputs, input_count, outputs, output_count, ctx);
}

Status argmin_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                    size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return arg_shape("argmin", attrs, inputs, input_count, outputs, output_count, ctx);
}

// x [..] f32 -> values (f32) and indices (i64), both x's dims with attrs.axis of size k,
// 0 <= k <= dims[axis].
Status topk_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                  size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "topk";
  if (output_count != 2 || outputs == nullptr) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "topk: expected 2 outputs, got %zu", output_count);
  }
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, 1, ctx));
  const TensorView& x = inputs[0];
  if (x.dtype != ScalarType::F32) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "topk: input must be f32, got %s", to_string(x.dtype));
  }
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "topk: axis %d out of range for rank %d", attrs.axis,
                      static_cast<int>(x.rank));
  }
  if (attrs.k < 0 || attrs.k > x.dims[axis]) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "topk: k = %lld is outside [0, %lld] (axis %d of %s)",
                      static_cast<long long>(attrs.k), static_cast<long long>(x.dims[axis]), axis,
                      dims_text(x).text);
  }
  int64_t dims[kMaxRank] = {0};
  for (int i = 0; i < x.rank; ++i) dims[i] = i == axis ? attrs.k : x.dims[i];
  set_output(&outputs[0], ScalarType::F32, dims, x.rank);
  set_output(&outputs[1], ScalarType::I64, dims, x.rank);
  return Status::ok();
}

// x f32 / i32 / i64, same dims out; attrs.axis in range.
Status cumsum_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                    size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "cumsum";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 1, 1, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  EMBER_RETURN_IF_ERROR(check_numeric(op, x, ctx));
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "cumsum: axis %d out of range for rank %d", attrs.axis,
                      static_cast<int>(x.rank));
  }
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

// data [..] (any dtype), indices i32 / i64 of data's rank with dims <= data's off the axis -> data's
// dtype, indices' dims.
Status gather_elements_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                             TensorView* outputs, size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "gather_elements";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& data = inputs[0];
  const TensorView& indices = inputs[1];
  int axis = 0;
  if (data.rank < 1 || !normalize_axis(attrs.axis, data.rank, &axis)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "gather_elements: axis %d out of range for rank %d",
                      attrs.axis, static_cast<int>(data.rank));
  }
  if (indices.dtype != ScalarType::I32 && indices.dtype != ScalarType::I64) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "gather_elements: indices must be i32 or i64, got %s",
                      to_string(indices.dtype));
  }
  bool ok = indices.rank == data.rank;
  for (int i = 0; ok && i < data.rank; ++i) ok = i == axis || indices.dims[i] <= data.dims[i];
  if (!ok) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "gather_elements: indices %s must have data %s's rank and dims no larger off axis %d",
                      dims_text(indices).text, dims_text(data).text, axis);
  }
  if (data.dims[axis] == 0 && indices.numel() != 0u) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "gather_elements: axis %d of data %s is empty, so no index of indices %s is valid", axis,
                      dims_text(data).text, dims_text(indices).text);
  }
  set_output(&outputs[0], data.dtype, indices.dims, indices.rank);
  return Status::ok();
}

Status gather_elements_check(const OpAttrs& attrs, const TensorView* inputs, size_t, ErrorContext* ctx) {
  const int axis = static_cast<int>(attrs.axis < 0 ? attrs.axis + inputs[0].rank : attrs.axis);
  return check_indices("gather_elements", inputs[0], inputs[1], axis, ctx);
}

Status gather_check(const OpAttrs& attrs, const TensorView* inputs, size_t, ErrorContext* ctx) {
  const int axis = static_cast<int>(attrs.axis < 0 ? attrs.axis + inputs[0].rank : attrs.axis);
  return check_indices("gather", inputs[0], inputs[1], axis, ctx);
}

// x [N, C, ...] f32 (rank >= 2), scale [C] f32, bias [C] f32; groups >= 1 divides C; epsilon finite
// and >= 0.
Status group_norm_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "group_norm";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 3, 3, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  if (x.dtype != ScalarType::F32 || x.rank < 2) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "group_norm: x must be f32 [N, C, ...], got %s %s",
                      to_string(x.dtype), dims_text(x).text);
  }
  const int64_t c = x.dims[1];
  if (attrs.groups < 1 || c % attrs.groups != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "group_norm: %d groups do not divide %lld channels",
                      static_cast<int>(attrs.groups), static_cast<long long>(c));
  }
  if (!(attrs.epsilon >= 0.0f) || attrs.epsilon > std::numeric_limits<float>::max()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "group_norm: epsilon %g must be finite and >= 0",
                      static_cast<double>(attrs.epsilon));
  }
  static const char* const kNames[] = {"x", "scale", "bias"};
  for (size_t p = 1; p < 3; ++p) {
    const TensorView& t = inputs[p];
    if (t.dtype != ScalarType::F32 || t.rank != 1 || t.dims[0] != c) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "group_norm: %s must be f32 [%lld], got %s %s", kNames[p],
                        static_cast<long long>(c), to_string(t.dtype), dims_text(t).text);
    }
  }
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

}  // namespace ember::internal
