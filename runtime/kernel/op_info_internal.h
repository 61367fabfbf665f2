// Shared by op_info.cc (the table) and op_info_<family>.cc (the shape functions); not part of the
// public API. The checks here are the validators' common vocabulary: every product and sum of dims
// goes through mul_nonneg / add_nonneg, every tensor through check_args or check_tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/kernel/op_info.h"

namespace ember::internal {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// a * b for a, b >= 0; false on overflow.
inline bool mul_nonneg(int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > kInt64Max / a) return false;
  *out = a * b;
  return true;
}

// a + b for a, b >= 0; false on overflow.
inline bool add_nonneg(int64_t a, int64_t b, int64_t* out) {
  if (b > kInt64Max - a) return false;
  *out = a + b;
  return true;
}

// Normalizes a possibly negative axis into [0, rank); false when out of range.
inline bool normalize_axis(int64_t axis, int rank, int* out) {
  if (axis < -static_cast<int64_t>(rank) || axis >= rank) return false;
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return true;
}

// Dims formatted for a message, e.g. "[2, 3]" (format_dims); held by value so it can be passed
// straight to EMBER_FAIL as `dims_text(x).text`.
struct DimsText {
  char text[8 * 22 + 4];
};
DimsText dims_text(const int64_t* dims, int rank);
DimsText dims_text(const TensorView& v);

// Writes dtype/rank/dims into *out from a local copy, so `out` may alias an input.
void set_output(TensorView* out, ScalarType dtype, const int64_t* dims, int rank);

// A present tensor: known dtype, rank <= kMaxRank, dims >= 0, byte size fits in int64.
Status check_tensor(const char* op, const char* what, const TensorView& t, ErrorContext* ctx);

// The output dims the shape function computed must also describe a tensor whose size fits.
Status check_output(const char* op, ScalarType dtype, const int64_t* dims, int rank,
                    ErrorContext* ctx);

// Arity, presence of required inputs and the shape of every present input. `optional_mask` has
// bit i set when input i may be absent (dtype Invalid).
Status check_args(const char* op, const TensorView* inputs, size_t input_count, size_t min_inputs,
                  size_t max_inputs, uint32_t optional_mask, TensorView* outputs,
                  size_t output_count, ErrorContext* ctx);

Status check_same_dtype(const char* op, const TensorView& a, size_t ia, const TensorView& b,
                        size_t ib, ErrorContext* ctx);

// Broadcasts dims a[0..ra) and b[0..rb) (numpy rules, aligned at the end) into out; returns the
// rank or -1 on mismatch, with the mismatching axis (of the output) in *bad_axis.
int broadcast_dims(const int64_t* a, int ra, const int64_t* b, int rb, int64_t* out,
                   int* bad_axis);

// The shape functions, by family. Each is a ShapeFn (op_info.h); a function type declares them.
using ShapeFunction = std::remove_pointer_t<ShapeFn>;
using InputCheckFunction = std::remove_pointer_t<InputCheckFn>;

// op_info_elementwise.cc
ShapeFunction add_shape, sub_shape, mul_shape, div_shape, pow_shape, equal_shape, where_shape;
ShapeFunction relu_shape, silu_shape, sigmoid_shape, tanh_shape, hard_swish_shape, erf_shape,
    sqrt_shape, exp_shape, neg_shape, gelu_shape, clip_shape, hard_sigmoid_shape, cast_shape;
// Issue 17.
ShapeFunction softplus_shape, log_shape, abs_shape, reciprocal_shape, floor_shape, ceil_shape, round_shape,
    sin_shape, cos_shape, leaky_relu_shape, elu_shape, selu_shape, prelu_shape, greater_shape, less_shape,
    greater_equal_shape, less_equal_shape, and_shape, or_shape, xor_shape, not_shape, max_shape, min_shape;

// op_info_nn.cc: linear algebra, convolution and pooling, normalization, reductions.
ShapeFunction matmul_shape, linear_shape, conv2d_shape, max_pool2d_shape, avg_pool2d_shape,
    global_avg_pool2d_shape, softmax_shape, layer_norm_shape, batch_norm_shape, reduce_mean_shape,
    reduce_sum_shape;

// [issue 17: elementwise ops]

// [issue 17: reductions and index ops]
// op_info_nn.cc: reduce_max / reduce_min / reduce_prod. op_info_index.cc: the rest, and the input
// checks of gather_elements and gather: every index within [-dim, dim).
ShapeFunction reduce_max_shape, reduce_min_shape, reduce_prod_shape, argmax_shape, argmin_shape, topk_shape,
    cumsum_shape, gather_elements_shape, group_norm_shape;
InputCheckFunction gather_check, gather_elements_check;

// [issue 17: resize, conv_transpose2d]
// op_info_spatial.cc
ShapeFunction resize_shape, conv_transpose2d_shape;

// [issue 17: lstm, gru]
// op_info_rnn.cc: ONNX LSTM / GRU (layout 0); the checks refuse sequence_lens outside [0, T].
ShapeFunction lstm_shape, gru_shape;
Status lstm_check(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, ErrorContext* ctx);
Status gru_check(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, ErrorContext* ctx);

// Ops whose shape function is not written yet: always NotSupported (op_info.cc).
ShapeFunction not_implemented_shape;

// op_info_movement.cc
ShapeFunction reshape_shape, transpose_shape, concat_shape, slice_shape, pad_shape, gather_shape,
    expand_shape;

// op_info_llm.cc: the LLM ops (shape functions and run-time input checks).
ShapeFunction rms_norm_shape, rope_shape, silu_mul_shape, embedding_shape, sample_shape;
InputCheckFunction rope_check, embedding_check, sample_check;

// op_info_attention.cc: paged_attention and logits_gather.
ShapeFunction paged_attention_shape, logits_gather_shape;
InputCheckFunction paged_attention_check, logits_gather_check;

}  // namespace ember::internal
