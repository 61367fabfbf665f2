// Shape functions and the run-time input check of lstm and gru (ONNX LSTM / GRU, layout 0). See
// op_info.cc for the rules every shape function follows.
//
// Inputs (f32 unless said): X [T, B, I], W [D, G H, I], R [D, G H, H], B [D, 2 G H]?,
// sequence_lens [B] i32?, initial_h [D, B, H]?, initial_c [D, B, H]? (lstm), P [D, 3 H]? (lstm);
// G = 4 (lstm: i, o, f, c) or 3 (gru: z, r, h), D = 2 for Bidirectional else 1, H = hidden_size.
// Outputs: Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H] (lstm).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "runtime/kernel/op_info_internal.h"

namespace ember::internal {
namespace {

Status check_f32(const char* op, const char* what, const TensorView& t, ErrorContext* ctx) {
  if (t.dtype != ScalarType::F32) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s must be f32, got %s", op, what, to_string(t.dtype));
  }
  return Status::ok();
}

// t has exactly the dims d[0..rank).
Status check_dims(const char* op, const char* what, const TensorView& t, const int64_t* d, int rank,
                  ErrorContext* ctx) {
  bool same = t.rank == rank;
  for (int i = 0; same && i < rank; ++i) same = t.dims[i] == d[i];
  if (!same) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %s must be %s, got %s", op, what, dims_text(d, rank).text,
                      dims_text(t).text);
  }
  return Status::ok();
}

bool present(const TensorView* inputs, size_t input_count, size_t i) {
  return i < input_count && inputs[i].dtype != ScalarType::Invalid;
}

// gates: 4 (lstm) or 3 (gru); acts_per_direction: 3 or 2.
Status rnn_shape(const char* op, int gates, int acts_per_direction, size_t max_inputs, size_t outputs_expected,
                 const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                 size_t output_count, ErrorContext* ctx) {
  if (output_count != outputs_expected || outputs == nullptr) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: expected %zu outputs, got %zu", op, outputs_expected,
                      output_count);
  }
  // Inputs 3.. are optional (an absent one has dtype Invalid).
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 3, max_inputs, ~7u, outputs, 1, ctx));
  if (attrs.rnn_direction != RnnDirection::Forward && attrs.rnn_direction != RnnDirection::Reverse &&
      attrs.rnn_direction != RnnDirection::Bidirectional) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: direction %d is not forward, reverse or bidirectional", op,
                      static_cast<int>(attrs.rnn_direction));
  }
  const int64_t d = attrs.rnn_direction == RnnDirection::Bidirectional ? 2 : 1;
  const int64_t h = attrs.hidden_size;
  if (h <= 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: hidden_size %lld must be > 0", op, static_cast<long long>(h));
  }
  if (attrs.rnn_act_count != d * acts_per_direction) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: %d activations for %lld direction(s), expected %lld", op,
                      static_cast<int>(attrs.rnn_act_count), static_cast<long long>(d),
                      static_cast<long long>(d * acts_per_direction));
  }
  for (int k = 0; k < attrs.rnn_act_count; ++k) {
    if (attrs.rnn_act[k] < RnnActivation::Sigmoid || attrs.rnn_act[k] > RnnActivation::Softplus) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: activation %d is %d (unknown)", op, k,
                        static_cast<int>(attrs.rnn_act[k]));
    }
    if (!std::isfinite(attrs.rnn_alpha[k]) || !std::isfinite(attrs.rnn_beta[k])) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: activation %d has alpha %g, beta %g (must be finite)", op,
                        k, static_cast<double>(attrs.rnn_alpha[k]), static_cast<double>(attrs.rnn_beta[k]));
    }
  }
  if (std::isnan(attrs.rnn_clip)) return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: clip is NaN", op);
  if (gates == 3 && attrs.input_forget) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "gru: input_forget is an lstm attribute");
  }
  if (gates == 4 && attrs.linear_before_reset) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "lstm: linear_before_reset is a gru attribute");
  }

  const TensorView& x = inputs[0];
  EMBER_RETURN_IF_ERROR(check_f32(op, "X", x, ctx));
  if (x.rank != 3) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: X must be [T, B, I], got %s", op, dims_text(x).text);
  }
  const int64_t t = x.dims[0], b = x.dims[1], in = x.dims[2];
  int64_t gh = 0;
  if (!mul_nonneg(gates, h, &gh)) return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: hidden_size overflows", op);
  const int64_t w_dims[3] = {d, gh, in}, r_dims[3] = {d, gh, h}, b_dims[2] = {d, 2 * gh};
  const int64_t state_dims[3] = {d, b, h}, p_dims[2] = {d, 3 * h}, lens_dims[1] = {b};
  EMBER_RETURN_IF_ERROR(check_f32(op, "W", inputs[1], ctx));
  EMBER_RETURN_IF_ERROR(check_dims(op, "W", inputs[1], w_dims, 3, ctx));
  EMBER_RETURN_IF_ERROR(check_f32(op, "R", inputs[2], ctx));
  EMBER_RETURN_IF_ERROR(check_dims(op, "R", inputs[2], r_dims, 3, ctx));
  if (present(inputs, input_count, 3)) {
    EMBER_RETURN_IF_ERROR(check_f32(op, "B", inputs[3], ctx));
    EMBER_RETURN_IF_ERROR(check_dims(op, "B", inputs[3], b_dims, 2, ctx));
  }
  if (present(inputs, input_count, 4)) {
    if (inputs[4].dtype != ScalarType::I32) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "%s: sequence_lens must be i32, got %s", op,
                        to_string(inputs[4].dtype));
    }
    EMBER_RETURN_IF_ERROR(check_dims(op, "sequence_lens", inputs[4], lens_dims, 1, ctx));
  }
  if (present(inputs, input_count, 5)) {
    EMBER_RETURN_IF_ERROR(check_f32(op, "initial_h", inputs[5], ctx));
    EMBER_RETURN_IF_ERROR(check_dims(op, "initial_h", inputs[5], state_dims, 3, ctx));
  }
  if (present(inputs, input_count, 6)) {
    EMBER_RETURN_IF_ERROR(check_f32(op, "initial_c", inputs[6], ctx));
    EMBER_RETURN_IF_ERROR(check_dims(op, "initial_c", inputs[6], state_dims, 3, ctx));
  }
  if (present(inputs, input_count, 7)) {
    EMBER_RETURN_IF_ERROR(check_f32(op, "P", inputs[7], ctx));
    EMBER_RETURN_IF_ERROR(check_dims(op, "P", inputs[7], p_dims, 2, ctx));
  }
  const int64_t y_dims[4] = {t, d, b, h};
  EMBER_RETURN_IF_ERROR(check_output(op, ScalarType::F32, y_dims, 4, ctx));
  set_output(&outputs[0], ScalarType::F32, y_dims, 4);
  for (size_t o = 1; o < outputs_expected; ++o) set_output(&outputs[o], ScalarType::F32, state_dims, 3);
  return Status::ok();
}

}  // namespace

Status lstm_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                  size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return rnn_shape("lstm", 4, 3, 8, 3, attrs, inputs, input_count, outputs, output_count, ctx);
}

Status gru_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
                 size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  return rnn_shape("gru", 3, 2, 6, 2, attrs, inputs, input_count, outputs, output_count, ctx);
}

namespace {

// Every sequence length within [0, T] (the kernels would read past X otherwise).
Status rnn_check(const char* op, const TensorView* inputs, size_t input_count, ErrorContext* ctx) {
  if (input_count <= 4 || inputs[4].data == nullptr) return Status::ok();
  const int32_t* lens = inputs[4].data_as<const int32_t>();
  const int64_t t = inputs[0].dims[0];
  for (int64_t row = 0; row < inputs[4].dims[0]; ++row) {
    if (lens[row] < 0 || lens[row] > t) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "%s: sequence_lens[%lld] = %d is outside [0, %lld] (the sequence length T)",
                        op, static_cast<long long>(row), static_cast<int>(lens[row]), static_cast<long long>(t));
    }
  }
  return Status::ok();
}

}  // namespace

Status lstm_check(const OpAttrs&, const TensorView* inputs, size_t input_count, ErrorContext* ctx) {
  return rnn_check("lstm", inputs, input_count, ctx);
}

Status gru_check(const OpAttrs&, const TensorView* inputs, size_t input_count, ErrorContext* ctx) {
  return rnn_check("gru", inputs, input_count, ctx);
}

}  // namespace ember::internal
