// Shape functions of the data-movement ops: reshape, transpose, concat, slice, pad, gather and
// expand. See op_info.cc for the rules every shape function follows.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "runtime/kernel/kernel.h"
#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {
namespace {

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

// a + b for any int64 values; false on overflow.
bool add_signed(int64_t a, int64_t b, int64_t* out) {
  if ((b > 0 && a > kInt64Max - b) || (b < 0 && a < std::numeric_limits<int64_t>::min() - b)) {
    return false;
  }
  *out = a + b;
  return true;
}

}  // namespace

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

Status slice_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                   TensorView* outputs, size_t output_count, Span<const int64_t> symbols,
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
    int64_t end = attrs.ends[j];
    if (attrs.ends_sym[j] != 0) {
      const size_t sym = attrs.ends_sym[j];
      if (sym > symbols.size()) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "slice: end %d names symbol %zu but only %zu are bound", j, sym,
                          symbols.size());
      }
      end = symbols[sym - 1];
    }
    dims[axis] = slice_count(x.dims[axis], attrs.starts[j], end, attrs.steps[j]);
  }
  set_output(&outputs[0], x.dtype, dims, x.rank);
  return Status::ok();
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
// time: gather_check (op_info_index.cc) refuses one outside [-dim, dim) before the kernel runs;
// kernels wrap negative indices once and, called unchecked, write zeros for an index still outside.
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

}  // namespace ember::internal
