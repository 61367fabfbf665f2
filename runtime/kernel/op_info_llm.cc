// Shape functions and run-time input checks of the LLM ops (docs/DESIGN.md §4, §6): rms_norm, rope,
// silu_mul, embedding and sample. See op_info.cc for the rules every shape function follows; the
// input checks (op_info.h, InputCheckFn) cover what only the data can tell: ids within the
// vocabulary, non-negative positions with finite angles, sampling parameters in range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {
namespace {

Status check_dtype(const char* op, const char* what, const TensorView& t, ScalarType dtype,
                   ErrorContext* ctx) {
  if (t.dtype != dtype) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s must be %s, got %s", op, what,
                      to_string(dtype), to_string(t.dtype));
  }
  return Status::ok();
}

// t is [dims0] (rank 1) of `dtype`.
Status check_vector(const char* op, const char* what, const TensorView& t, ScalarType dtype,
                    int64_t size, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_dtype(op, what, t, dtype, ctx));
  if (t.rank != 1 || t.dims[0] != size) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s must be [%lld], got %s", op, what,
                      static_cast<long long>(size), dims_text(t).text);
  }
  return Status::ok();
}

bool same_dims(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return true;
}

}  // namespace

// x [.., H] f32 (rank >= 1, H > 0), weight [H] f32; NormAttrs axis must name the last dim.
Status rms_norm_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t output_count, Span<const int64_t>,
                      ErrorContext* ctx) {
  const char* op = "rms_norm";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  EMBER_RETURN_IF_ERROR(check_dtype(op, "x", x, ScalarType::F32, ctx));
  int axis = 0;
  if (x.rank < 1 || !normalize_axis(attrs.axis, x.rank, &axis) || axis != x.rank - 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "rms_norm: axis %d must name the last dim of rank %d", attrs.axis,
                      static_cast<int>(x.rank));
  }
  if (!(attrs.epsilon >= 0.0f) || attrs.epsilon > std::numeric_limits<float>::max()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "rms_norm: epsilon %g must be finite and >= 0",
                      static_cast<double>(attrs.epsilon));
  }
  const int64_t h = x.dims[axis];
  if (h == 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "rms_norm: normalized dim of %s is empty",
                      dims_text(x).text);
  }
  EMBER_RETURN_IF_ERROR(check_vector(op, "weight", inputs[1], ScalarType::F32, h, ctx));
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

// x [T, heads, D] f32 with D even and > 0, positions [T] i32, inv_freq [D / 2] f32.
Status rope_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                  TensorView* outputs, size_t output_count, Span<const int64_t>,
                  ErrorContext* ctx) {
  const char* op = "rope";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 3, 3, 0, outputs, output_count, ctx));
  const TensorView& x = inputs[0];
  EMBER_RETURN_IF_ERROR(check_dtype(op, "x", x, ScalarType::F32, ctx));
  if (x.rank != 3 || x.dims[2] == 0 || x.dims[2] % 2 != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "rope: x must be [T, heads, D] with D even and > 0, got %s", dims_text(x).text);
  }
  EMBER_RETURN_IF_ERROR(check_vector(op, "positions", inputs[1], ScalarType::I32, x.dims[0], ctx));
  EMBER_RETURN_IF_ERROR(check_vector(op, "inv_freq", inputs[2], ScalarType::F32, x.dims[2] / 2, ctx));
  set_output(&outputs[0], x.dtype, x.dims, x.rank);
  return Status::ok();
}

// Every position >= 0 and every angle float(position) * inv_freq[i] (f32) finite.
Status rope_check(const OpAttrs&, const TensorView* inputs, size_t, ErrorContext* ctx) {
  const TensorView& positions = inputs[1];
  const TensorView& inv_freq = inputs[2];
  if (positions.data == nullptr || inv_freq.data == nullptr) return Status::ok();
  const int32_t* pos = positions.data_as<const int32_t>();
  const float* freq = inv_freq.data_as<const float>();
  const int64_t half = inv_freq.dims[0];
  for (int64_t t = 0; t < positions.dims[0]; ++t) {
    if (pos[t] < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "rope: position %d at index %lld is negative",
                        static_cast<int>(pos[t]), static_cast<long long>(t));
    }
    const float p = static_cast<float>(pos[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = p * freq[i];
      if (!std::isfinite(angle)) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "rope: angle of position %d (index %lld) x inv_freq[%lld] = %g is not finite",
                          static_cast<int>(pos[t]), static_cast<long long>(t),
                          static_cast<long long>(i), static_cast<double>(angle));
      }
    }
  }
  return Status::ok();
}

// gate, up f32 of equal dims (any rank).
Status silu_mul_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t output_count, Span<const int64_t>,
                      ErrorContext* ctx) {
  const char* op = "silu_mul";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  EMBER_RETURN_IF_ERROR(check_dtype(op, "gate", inputs[0], ScalarType::F32, ctx));
  EMBER_RETURN_IF_ERROR(check_dtype(op, "up", inputs[1], ScalarType::F32, ctx));
  if (!same_dims(inputs[0], inputs[1])) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "silu_mul: gate %s and up %s differ",
                      dims_text(inputs[0]).text, dims_text(inputs[1]).text);
  }
  set_output(&outputs[0], ScalarType::F32, inputs[0].dims, inputs[0].rank);
  return Status::ok();
}

// weight [V, H] f32 / bf16 / f16, ids [T] i32 -> f32 [T, H].
Status embedding_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                       TensorView* outputs, size_t output_count, Span<const int64_t>,
                       ErrorContext* ctx) {
  const char* op = "embedding";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& w = inputs[0];
  const TensorView& ids = inputs[1];
  if (w.dtype != ScalarType::F32 && w.dtype != ScalarType::BF16 && w.dtype != ScalarType::F16) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "embedding: weight must be f32, bf16 or f16, got %s",
                      to_string(w.dtype));
  }
  if (w.rank != 2) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "embedding: weight must be [V, H], got %s",
                      dims_text(w).text);
  }
  EMBER_RETURN_IF_ERROR(check_dtype(op, "ids", ids, ScalarType::I32, ctx));
  if (ids.rank != 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "embedding: ids must be [T], got %s",
                      dims_text(ids).text);
  }
  const int64_t dims[2] = {ids.dims[0], w.dims[1]};
  EMBER_RETURN_IF_ERROR(check_output(op, ScalarType::F32, dims, 2, ctx));
  set_output(&outputs[0], ScalarType::F32, dims, 2);
  return Status::ok();
}

// Every id in [0, V).
Status embedding_check(const OpAttrs&, const TensorView* inputs, size_t, ErrorContext* ctx) {
  const TensorView& ids = inputs[1];
  if (ids.data == nullptr) return Status::ok();
  const int64_t vocab = inputs[0].dims[0];
  const int32_t* p = ids.data_as<const int32_t>();
  for (int64_t t = 0; t < ids.dims[0]; ++t) {
    if (p[t] < 0 || p[t] >= vocab) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "embedding: id %d at index %lld is outside [0, %lld)",
                        static_cast<int>(p[t]), static_cast<long long>(t), static_cast<long long>(vocab));
    }
  }
  return Status::ok();
}

// logits [S, V] f32 (V > 0), temperature [S] f32, top_k [S] i32, top_p [S] f32,
// repetition_penalty [S] f32, seed [S] i32, position [S] i32, history [S, Hmax] i32,
// history_len [S] i32 -> next_ids [S] i32, logprobs [S] f32.
Status sample_shape(const OpAttrs&, const TensorView* inputs, size_t input_count,
                    TensorView* outputs, size_t output_count, Span<const int64_t>,
                    ErrorContext* ctx) {
  const char* op = "sample";
  if (output_count != 2 || outputs == nullptr) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: expected 2 outputs, got %zu", output_count);
  }
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 9, 9, 0, outputs, 1, ctx));
  const TensorView& logits = inputs[0];
  EMBER_RETURN_IF_ERROR(check_dtype(op, "logits", logits, ScalarType::F32, ctx));
  if (logits.rank != 2 || logits.dims[1] == 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: logits must be [S, V] with V > 0, got %s",
                      dims_text(logits).text);
  }
  const int64_t s = logits.dims[0];
  EMBER_RETURN_IF_ERROR(check_vector(op, "temperature", inputs[1], ScalarType::F32, s, ctx));
  EMBER_RETURN_IF_ERROR(check_vector(op, "top_k", inputs[2], ScalarType::I32, s, ctx));
  EMBER_RETURN_IF_ERROR(check_vector(op, "top_p", inputs[3], ScalarType::F32, s, ctx));
  EMBER_RETURN_IF_ERROR(check_vector(op, "repetition_penalty", inputs[4], ScalarType::F32, s, ctx));
  EMBER_RETURN_IF_ERROR(check_vector(op, "seed", inputs[5], ScalarType::I32, s, ctx));
  EMBER_RETURN_IF_ERROR(check_vector(op, "position", inputs[6], ScalarType::I32, s, ctx));
  const TensorView& history = inputs[7];
  EMBER_RETURN_IF_ERROR(check_dtype(op, "history", history, ScalarType::I32, ctx));
  if (history.rank != 2 || history.dims[0] != s) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: history must be [%lld, Hmax], got %s",
                      static_cast<long long>(s), dims_text(history).text);
  }
  EMBER_RETURN_IF_ERROR(check_vector(op, "history_len", inputs[8], ScalarType::I32, s, ctx));
  const int64_t dims[1] = {s};
  set_output(&outputs[0], ScalarType::I32, dims, 1);
  set_output(&outputs[1], ScalarType::F32, dims, 1);
  return Status::ok();
}

// Per row: temperature finite and >= 0, top_p in [0, 1], repetition_penalty finite and > 0,
// position >= 0, history_len in [0, Hmax], history[0, history_len) < V (negative = padding).
Status sample_check(const OpAttrs&, const TensorView* inputs, size_t, ErrorContext* ctx) {
  for (int i = 1; i < 9; ++i) {
    if (inputs[i].data == nullptr) return Status::ok();
  }
  const int64_t rows = inputs[0].dims[0], vocab = inputs[0].dims[1], hmax = inputs[7].dims[1];
  const float* temperature = inputs[1].data_as<const float>();
  const float* top_p = inputs[3].data_as<const float>();
  const float* penalty = inputs[4].data_as<const float>();
  const int32_t* position = inputs[6].data_as<const int32_t>();
  const int32_t* history = inputs[7].data_as<const int32_t>();
  const int32_t* history_len = inputs[8].data_as<const int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const long long row = static_cast<long long>(r);
    if (!(temperature[r] >= 0.0f) || !std::isfinite(temperature[r])) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: temperature %g of row %lld must be finite and >= 0",
                        static_cast<double>(temperature[r]), row);
    }
    if (!(top_p[r] >= 0.0f && top_p[r] <= 1.0f)) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: top_p %g of row %lld must be in [0, 1]",
                        static_cast<double>(top_p[r]), row);
    }
    if (!(penalty[r] > 0.0f) || !std::isfinite(penalty[r])) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "sample: repetition_penalty %g of row %lld must be finite and > 0",
                        static_cast<double>(penalty[r]), row);
    }
    if (position[r] < 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: position %d of row %lld is negative",
                        static_cast<int>(position[r]), row);
    }
    if (history_len[r] < 0 || history_len[r] > hmax) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "sample: history_len %d of row %lld is outside [0, %lld]",
                        static_cast<int>(history_len[r]), row, static_cast<long long>(hmax));
    }
    for (int64_t j = 0; j < history_len[r]; ++j) {
      const int32_t id = history[r * hmax + j];
      if (id >= vocab) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "sample: history id %d at [%lld, %lld] is outside [0, %lld) (negative = padding)",
                          static_cast<int>(id), row, static_cast<long long>(j),
                          static_cast<long long>(vocab));
      }
    }
  }
  return Status::ok();
}

}  // namespace ember::internal
