// Per-op table and shape functions. Each shape function is the op's validator: it runs at load
// (every symbol at its max) and at run time (symbols bound by set_input_sizes), so everything here
// is O(rank), allocation-free and safe on hostile input: dims come from files and callers, so every
// product and sum is checked for int64 overflow before it is formed.
//
// The shape functions live in op_info_elementwise.cc, op_info_nn.cc, op_info_movement.cc and
// op_info_llm.cc (with the LLM ops' run-time input checks); this
// file holds the table and the helpers they share (declared in op_info_internal.h).
#include "runtime/kernel/op_info.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "runtime/kernel/kernel.h"
#include "runtime/kernel/op_info_internal.h"

namespace ember {
namespace internal {

DimsText dims_text(const int64_t* dims, int rank) {
  DimsText t;
  format_dims(dims, rank, t.text, sizeof(t.text));
  return t;
}
DimsText dims_text(const TensorView& v) {
  return dims_text(v.dims, v.rank <= kMaxRank ? v.rank : kMaxRank);
}

void set_output(TensorView* out, ScalarType dtype, const int64_t* dims, int rank) {
  int64_t copy[kMaxRank] = {0};
  for (int i = 0; i < rank; ++i) copy[i] = dims[i];
  out->dtype = dtype;
  out->rank = static_cast<uint8_t>(rank);
  for (int i = 0; i < kMaxRank; ++i) out->dims[i] = copy[i];
}

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

Status not_implemented_shape(const OpAttrs&, const TensorView*, size_t, TensorView*, size_t, Span<const int64_t>,
                             ErrorContext* ctx) {
  return EMBER_FAIL(ctx, Error::NotSupported, "this op's shape function is not implemented yet");
}

namespace {

constexpr OpInfo kOpInfos[] = {
    {OpCode::Add, "add", AttrKind::None, 2, 2, 1, add_shape, nullptr},
    {OpCode::Sub, "sub", AttrKind::None, 2, 2, 1, sub_shape, nullptr},
    {OpCode::Mul, "mul", AttrKind::None, 2, 2, 1, mul_shape, nullptr},
    {OpCode::Div, "div", AttrKind::None, 2, 2, 1, div_shape, nullptr},
    {OpCode::Relu, "relu", AttrKind::None, 1, 1, 1, relu_shape, nullptr},
    {OpCode::Gelu, "gelu", AttrKind::Gelu, 1, 1, 1, gelu_shape, nullptr},
    {OpCode::Silu, "silu", AttrKind::None, 1, 1, 1, silu_shape, nullptr},
    {OpCode::Sigmoid, "sigmoid", AttrKind::None, 1, 1, 1, sigmoid_shape, nullptr},
    {OpCode::Tanh, "tanh", AttrKind::None, 1, 1, 1, tanh_shape, nullptr},
    {OpCode::MatMul, "matmul", AttrKind::None, 2, 2, 1, matmul_shape, nullptr},
    {OpCode::Linear, "linear", AttrKind::Linear, 2, 3, 1, linear_shape, nullptr},
    {OpCode::Conv2d, "conv2d", AttrKind::Conv2d, 2, 3, 1, conv2d_shape, nullptr},
    {OpCode::MaxPool2d, "max_pool2d", AttrKind::Pool2d, 1, 1, 1, max_pool2d_shape, nullptr},
    {OpCode::AvgPool2d, "avg_pool2d", AttrKind::Pool2d, 1, 1, 1, avg_pool2d_shape, nullptr},
    {OpCode::GlobalAvgPool2d, "global_avg_pool2d", AttrKind::None, 1, 1, 1,
     global_avg_pool2d_shape, nullptr},
    {OpCode::Softmax, "softmax", AttrKind::Axis, 1, 1, 1, softmax_shape, nullptr},
    {OpCode::LayerNorm, "layer_norm", AttrKind::Norm, 1, 3, 1, layer_norm_shape, nullptr},
    {OpCode::Reshape, "reshape", AttrKind::Reshape, 1, 1, 1, reshape_shape, nullptr},
    {OpCode::Transpose, "transpose", AttrKind::Permute, 1, 1, 1, transpose_shape, nullptr},
    {OpCode::Concat, "concat", AttrKind::Axis, 1, kMaxKernelArgs - 1, 1, concat_shape, nullptr},
    {OpCode::Slice, "slice", AttrKind::Slice, 1, 1, 1, slice_shape, nullptr},
    {OpCode::Clip, "clip", AttrKind::Clip, 1, 1, 1, clip_shape, nullptr},
    {OpCode::HardSigmoid, "hard_sigmoid", AttrKind::HardSigmoid, 1, 1, 1, hard_sigmoid_shape, nullptr},
    {OpCode::HardSwish, "hard_swish", AttrKind::None, 1, 1, 1, hard_swish_shape, nullptr},
    {OpCode::Erf, "erf", AttrKind::None, 1, 1, 1, erf_shape, nullptr},
    {OpCode::Sqrt, "sqrt", AttrKind::None, 1, 1, 1, sqrt_shape, nullptr},
    {OpCode::Exp, "exp", AttrKind::None, 1, 1, 1, exp_shape, nullptr},
    {OpCode::Pow, "pow", AttrKind::None, 2, 2, 1, pow_shape, nullptr},
    {OpCode::ReduceMean, "reduce_mean", AttrKind::Reduce, 1, 1, 1, reduce_mean_shape, nullptr},
    {OpCode::ReduceSum, "reduce_sum", AttrKind::Reduce, 1, 1, 1, reduce_sum_shape, nullptr},
    {OpCode::Pad, "pad", AttrKind::Pad, 1, 1, 1, pad_shape, nullptr},
    {OpCode::Gather, "gather", AttrKind::Axis, 2, 2, 1, gather_shape, gather_check},
    {OpCode::Where, "where", AttrKind::None, 3, 3, 1, where_shape, nullptr},
    {OpCode::Equal, "equal", AttrKind::None, 2, 2, 1, equal_shape, nullptr},
    {OpCode::Cast, "cast", AttrKind::Cast, 1, 1, 1, cast_shape, nullptr},
    {OpCode::Expand, "expand", AttrKind::Reshape, 1, 1, 1, expand_shape, nullptr},
    {OpCode::BatchNorm, "batch_norm", AttrKind::Norm, 5, 5, 1, batch_norm_shape, nullptr},
    {OpCode::Neg, "neg", AttrKind::None, 1, 1, 1, neg_shape, nullptr},
    {OpCode::RmsNorm, "rms_norm", AttrKind::Norm, 2, 2, 1, rms_norm_shape, nullptr},
    {OpCode::Rope, "rope", AttrKind::None, 3, 3, 1, rope_shape, rope_check},
    {OpCode::SiluMul, "silu_mul", AttrKind::None, 2, 2, 1, silu_mul_shape, nullptr},
    {OpCode::Embedding, "embedding", AttrKind::None, 2, 2, 1, embedding_shape, embedding_check},
    {OpCode::Sample, "sample", AttrKind::None, 9, 9, 2, sample_shape, sample_check},
    {OpCode::PagedAttention, "paged_attention", AttrKind::Attention, 9, 9, 1, paged_attention_shape,
     paged_attention_check, (1u << 3) | (1u << 4)},
    {OpCode::LogitsGather, "logits_gather", AttrKind::None, 2, 2, 1, logits_gather_shape, logits_gather_check},
    // Issue 17.
    {OpCode::LeakyRelu, "leaky_relu", AttrKind::HardSigmoid, 1, 1, 1, leaky_relu_shape, nullptr},
    {OpCode::PRelu, "prelu", AttrKind::None, 2, 2, 1, prelu_shape, nullptr},
    {OpCode::Elu, "elu", AttrKind::HardSigmoid, 1, 1, 1, elu_shape, nullptr},
    {OpCode::Selu, "selu", AttrKind::HardSigmoid, 1, 1, 1, selu_shape, nullptr},
    {OpCode::Softplus, "softplus", AttrKind::None, 1, 1, 1, softplus_shape, nullptr},
    {OpCode::Log, "log", AttrKind::None, 1, 1, 1, log_shape, nullptr},
    {OpCode::Abs, "abs", AttrKind::None, 1, 1, 1, abs_shape, nullptr},
    {OpCode::Reciprocal, "reciprocal", AttrKind::None, 1, 1, 1, reciprocal_shape, nullptr},
    {OpCode::Floor, "floor", AttrKind::None, 1, 1, 1, floor_shape, nullptr},
    {OpCode::Ceil, "ceil", AttrKind::None, 1, 1, 1, ceil_shape, nullptr},
    {OpCode::Round, "round", AttrKind::None, 1, 1, 1, round_shape, nullptr},
    {OpCode::Sin, "sin", AttrKind::None, 1, 1, 1, sin_shape, nullptr},
    {OpCode::Cos, "cos", AttrKind::None, 1, 1, 1, cos_shape, nullptr},
    {OpCode::Greater, "greater", AttrKind::None, 2, 2, 1, greater_shape, nullptr},
    {OpCode::Less, "less", AttrKind::None, 2, 2, 1, less_shape, nullptr},
    {OpCode::GreaterOrEqual, "greater_equal", AttrKind::None, 2, 2, 1, greater_equal_shape, nullptr},
    {OpCode::LessOrEqual, "less_equal", AttrKind::None, 2, 2, 1, less_equal_shape, nullptr},
    {OpCode::And, "and", AttrKind::None, 2, 2, 1, and_shape, nullptr},
    {OpCode::Or, "or", AttrKind::None, 2, 2, 1, or_shape, nullptr},
    {OpCode::Xor, "xor", AttrKind::None, 2, 2, 1, xor_shape, nullptr},
    {OpCode::Not, "not", AttrKind::None, 1, 1, 1, not_shape, nullptr},
    {OpCode::Max, "max", AttrKind::None, 2, 2, 1, max_shape, nullptr},
    {OpCode::Min, "min", AttrKind::None, 2, 2, 1, min_shape, nullptr},
    {OpCode::ReduceMax, "reduce_max", AttrKind::Reduce, 1, 1, 1, reduce_max_shape, nullptr},
    {OpCode::ReduceMin, "reduce_min", AttrKind::Reduce, 1, 1, 1, reduce_min_shape, nullptr},
    {OpCode::ReduceProd, "reduce_prod", AttrKind::Reduce, 1, 1, 1, reduce_prod_shape, nullptr},
    {OpCode::ArgMax, "argmax", AttrKind::Arg, 1, 1, 1, argmax_shape, nullptr},
    {OpCode::ArgMin, "argmin", AttrKind::Arg, 1, 1, 1, argmin_shape, nullptr},
    {OpCode::TopK, "topk", AttrKind::TopK, 1, 1, 2, topk_shape, nullptr},
    {OpCode::CumSum, "cumsum", AttrKind::CumSum, 1, 1, 1, cumsum_shape, nullptr},
    {OpCode::GatherElements, "gather_elements", AttrKind::Axis, 2, 2, 1, gather_elements_shape,
     gather_elements_check},
    {OpCode::GroupNorm, "group_norm", AttrKind::GroupNorm, 3, 3, 1, group_norm_shape, nullptr},
    {OpCode::Resize, "resize", AttrKind::Resize, 1, 1, 1, resize_shape, nullptr},
    {OpCode::ConvTranspose2d, "conv_transpose2d", AttrKind::Conv2d, 2, 3, 1, conv_transpose2d_shape, nullptr},
    {OpCode::Lstm, "lstm", AttrKind::Rnn, 3, 8, 3, lstm_shape, lstm_check},
    {OpCode::Gru, "gru", AttrKind::Rnn, 3, 6, 2, gru_shape, gru_check},
};
static_assert(sizeof(kOpInfos) / sizeof(kOpInfos[0]) == kOpCodeCount - 1, "one OpInfo per OpCode");

}  // namespace
}  // namespace internal

const OpInfo* find_op_info(OpCode op) {
  const size_t index = static_cast<size_t>(op);
  if (index == 0 || index >= static_cast<size_t>(kOpCodeCount)) return nullptr;
  const OpInfo* info = &internal::kOpInfos[index - 1];
  return info->op == op ? info : nullptr;
}

bool broadcast_shapes(const TensorView& a, const TensorView& b, TensorView* out) {
  if (a.rank > kMaxRank || b.rank > kMaxRank || out == nullptr) return false;
  int64_t dims[kMaxRank];
  const int rank = internal::broadcast_dims(a.dims, a.rank, b.dims, b.rank, dims, nullptr);
  if (rank < 0) return false;
  out->rank = static_cast<uint8_t>(rank);
  for (int i = 0; i < kMaxRank; ++i) out->dims[i] = i < rank ? dims[i] : 0;
  return true;
}

}  // namespace ember
