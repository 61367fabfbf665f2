#include "kernels/reference/register.h"

#include <initializer_list>
#include <utility>

#include "kernels/reference/ops.h"

namespace ember::kernels {
namespace {

constexpr ScalarType F = ScalarType::F32;
constexpr ScalarType X = ScalarType::Invalid;  // an absent optional input

// Every dtype the data-movement kernels handle: all types of 8 bits or more that carry data.
constexpr ScalarType kMovementTypes[] = {
    ScalarType::F32,    ScalarType::F16,  ScalarType::BF16,  ScalarType::I8,   ScalarType::U8,
    ScalarType::I16,    ScalarType::I32,  ScalarType::I64,   ScalarType::Bool, ScalarType::F8E4M3FN,
    ScalarType::F8E5M2, ScalarType::E8M0, ScalarType::UE4M3,
};

// The dtypes Cast converts between; also pad's dtypes (its value is converted like a cast).
constexpr ScalarType kCastTypes[] = {
    ScalarType::F32, ScalarType::F16, ScalarType::BF16, ScalarType::I8,   ScalarType::U8,
    ScalarType::I16, ScalarType::I32, ScalarType::I64,  ScalarType::Bool,
};

class Registrar {
 public:
  Registrar(KernelRegistry& registry, bool only_missing)
      : registry_(registry), only_missing_(only_missing) {}

  // dtypes of the inputs then the outputs.
  Status add(OpCode op, KernelFn fn, std::initializer_list<ScalarType> dtypes) {
    KernelKey key;
    key.op = op;
    key.arg_count = static_cast<uint8_t>(dtypes.size());
    int i = 0;
    for (ScalarType t : dtypes) key.dtypes[i++] = t;
    return add(key, fn);
  }

  // A kernel whose weight (argument 1) is quantized in `quant`'s layout.
  Status add_quantized(OpCode op, KernelFn fn, QuantLayout quant, std::initializer_list<ScalarType> dtypes) {
    KernelKey key;
    key.op = op;
    key.quant = quant;
    key.arg_count = static_cast<uint8_t>(dtypes.size());
    int i = 0;
    for (ScalarType t : dtypes) key.dtypes[i++] = t;
    return add(key, fn);
  }

  // A kernel that uses KernelContext::scratch, sized by `scratch`.
  Status add_with_scratch(OpCode op, KernelFn fn, ScratchFn scratch, std::initializer_list<ScalarType> dtypes) {
    KernelKey key;
    key.op = op;
    key.arg_count = static_cast<uint8_t>(dtypes.size());
    int i = 0;
    for (ScalarType t : dtypes) key.dtypes[i++] = t;
    return add(key, fn, scratch);
  }

  Status add(const KernelKey& key, KernelFn fn, ScratchFn scratch = nullptr) {
    return only_missing_ ? registry_.add_if_absent(key, fn, "reference", scratch)
                         : registry_.add(key, fn, "reference", scratch);
  }

 private:
  KernelRegistry& registry_;
  bool only_missing_;
};

}  // namespace

Status register_reference_kernels(KernelRegistry& registry, bool only_missing) {
  namespace ref = reference;
  Registrar r(registry, only_missing);

  EMBER_RETURN_IF_ERROR(r.add(OpCode::Add, ref::add, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Sub, ref::sub, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Mul, ref::mul, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Div, ref::div, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Relu, ref::relu, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Gelu, ref::gelu, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Silu, ref::silu, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Sigmoid, ref::sigmoid, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Tanh, ref::tanh, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::MatMul, ref::matmul, {F, F, F}));

  // Optional inputs: a key either lists the slot as Invalid (the instruction names -1 there) or
  // omits trailing absent inputs (a shorter input list); both forms are registered.
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Linear, ref::linear, {F, F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Linear, ref::linear, {F, F, X, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Linear, ref::linear, {F, F, F}));
  for (auto dtypes : {std::initializer_list<ScalarType>{F, ScalarType::BF16, F, F},
                      std::initializer_list<ScalarType>{F, ScalarType::BF16, X, F},
                      std::initializer_list<ScalarType>{F, ScalarType::BF16, F}}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Linear, ref::linear_bf16_weight, dtypes));
  }
  // Quantized weights (runtime/core/quant.h): FP8 in every f32-scale layout and MXFP8, NVFP4.
  constexpr ScalarType F8 = ScalarType::F8E4M3FN, F4 = ScalarType::F4E2M1;
  for (auto [w, layout] : {std::pair{F8, QuantLayout::PerTensor}, std::pair{F8, QuantLayout::PerChannel},
                           std::pair{F8, QuantLayout::Block2d}, std::pair{F8, QuantLayout::Mx},
                           std::pair{F4, QuantLayout::Nvfp4}}) {
    EMBER_RETURN_IF_ERROR(r.add_quantized(OpCode::Linear, ref::linear_quantized, layout, {F, w, F, F}));
    EMBER_RETURN_IF_ERROR(r.add_quantized(OpCode::Linear, ref::linear_quantized, layout, {F, w, X, F}));
    EMBER_RETURN_IF_ERROR(r.add_quantized(OpCode::Linear, ref::linear_quantized, layout, {F, w, F}));
  }
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Conv2d, ref::conv2d, {F, F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Conv2d, ref::conv2d, {F, F, X, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Conv2d, ref::conv2d, {F, F, F}));

  EMBER_RETURN_IF_ERROR(r.add(OpCode::MaxPool2d, ref::max_pool2d, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::AvgPool2d, ref::avg_pool2d, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::GlobalAvgPool2d, ref::global_avg_pool2d, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Softmax, ref::softmax, {F, F}));

  // layer_norm(x, gamma?, beta?): the four presence combinations, plus the shorter lists.
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, F, X, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, X, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, X, X, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, X, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LayerNorm, ref::layer_norm, {F, F}));

  for (ScalarType t : kMovementTypes) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Reshape, ref::reshape, {t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Transpose, ref::transpose, {t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Slice, ref::slice, {t, t}));
    // concat: 1 to kMaxKernelArgs - 1 inputs, then the output.
    for (int inputs = 1; inputs < kMaxKernelArgs; ++inputs) {
      KernelKey key;
      key.op = OpCode::Concat;
      key.arg_count = static_cast<uint8_t>(inputs + 1);
      for (int i = 0; i <= inputs; ++i) key.dtypes[i] = t;
      EMBER_RETURN_IF_ERROR(r.add(key, ref::concat));
    }
  }

  // Added for the ONNX importer.
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Clip, ref::clip, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::HardSigmoid, ref::hard_sigmoid, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::HardSwish, ref::hard_swish, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Erf, ref::erf, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Sqrt, ref::sqrt, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Exp, ref::exp, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Neg, ref::neg, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Pow, ref::pow, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::ReduceMean, ref::reduce_mean, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::ReduceSum, ref::reduce_sum, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::BatchNorm, ref::batch_norm, {F, F, F, F, F, F}));
  constexpr ScalarType B = ScalarType::Bool;
  for (ScalarType t : {F, ScalarType::I32, ScalarType::I64, B}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Equal, ref::equal, {t, t, B}));
  }
  for (ScalarType t : kMovementTypes) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Where, ref::where, {B, t, t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Expand, ref::expand, {t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Gather, ref::gather, {t, ScalarType::I32, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Gather, ref::gather, {t, ScalarType::I64, t}));
  }
  // LLM ops.
  constexpr ScalarType I = ScalarType::I32;
  EMBER_RETURN_IF_ERROR(r.add(OpCode::RmsNorm, ref::rms_norm, {F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Rope, ref::rope, {F, I, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::SiluMul, ref::silu_mul, {F, F, F}));
  for (ScalarType w : {F, ScalarType::BF16, ScalarType::F16}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Embedding, ref::embedding, {w, I, F}));
  }
  EMBER_RETURN_IF_ERROR(r.add(OpCode::LogitsGather, ref::logits_gather, {F, I, F}));
  for (ScalarType c : {F, ScalarType::BF16, ScalarType::F16, ScalarType::F8E4M3FN}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::PagedAttention, ref::paged_attention_op, {F, F, F, c, c, I, I, I, I, F}));
  }
  EMBER_RETURN_IF_ERROR(
      r.add_with_scratch(OpCode::Sample, ref::sample, ref::sample_scratch, {F, F, I, F, F, I, I, I, I, I, F}));
  for (ScalarType from : kCastTypes) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Pad, ref::pad, {from, from}));
    for (ScalarType to : kCastTypes) {
      EMBER_RETURN_IF_ERROR(r.add(OpCode::Cast, ref::cast, {from, to}));
    }
  }
  // [issue 17: elementwise ops]
  for (auto [op, fn] : {std::pair{OpCode::LeakyRelu, &ref::leaky_relu}, std::pair{OpCode::Elu, &ref::elu},
                        std::pair{OpCode::Selu, &ref::selu}, std::pair{OpCode::Softplus, &ref::softplus},
                        std::pair{OpCode::Log, &ref::log}, std::pair{OpCode::Reciprocal, &ref::reciprocal},
                        std::pair{OpCode::Floor, &ref::floor}, std::pair{OpCode::Ceil, &ref::ceil},
                        std::pair{OpCode::Round, &ref::round}, std::pair{OpCode::Sin, &ref::sin},
                        std::pair{OpCode::Cos, &ref::cos}}) {
    EMBER_RETURN_IF_ERROR(r.add(op, fn, {F, F}));
  }
  EMBER_RETURN_IF_ERROR(r.add(OpCode::PRelu, ref::prelu, {F, F, F}));
  for (ScalarType t : {F, ScalarType::I32, ScalarType::I64}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Abs, ref::abs, {t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Max, ref::max, {t, t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Min, ref::min, {t, t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Greater, ref::greater, {t, t, B}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Less, ref::less, {t, t, B}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::GreaterOrEqual, ref::greater_equal, {t, t, B}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::LessOrEqual, ref::less_equal, {t, t, B}));
  }
  for (ScalarType t : {ScalarType::I32, ScalarType::I64}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::Neg, ref::neg_int, {t, t}));
  }
  EMBER_RETURN_IF_ERROR(r.add(OpCode::And, ref::logical_and, {B, B, B}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Or, ref::logical_or, {B, B, B}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Xor, ref::logical_xor, {B, B, B}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Not, ref::logical_not, {B, B}));

  // [issue 17: reductions and index ops]
  for (ScalarType t : {F, ScalarType::I32, ScalarType::I64}) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::ReduceMax, ref::reduce_max, {t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::ReduceMin, ref::reduce_min, {t, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::ArgMax, ref::argmax, {t, ScalarType::I64}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::ArgMin, ref::argmin, {t, ScalarType::I64}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::CumSum, ref::cumsum, {t, t}));
  }
  EMBER_RETURN_IF_ERROR(r.add(OpCode::ReduceProd, ref::reduce_prod, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::TopK, ref::topk, {F, F, ScalarType::I64}));
  for (ScalarType t : kMovementTypes) {
    EMBER_RETURN_IF_ERROR(r.add(OpCode::GatherElements, ref::gather_elements, {t, ScalarType::I32, t}));
    EMBER_RETURN_IF_ERROR(r.add(OpCode::GatherElements, ref::gather_elements, {t, ScalarType::I64, t}));
  }
  EMBER_RETURN_IF_ERROR(r.add(OpCode::GroupNorm, ref::group_norm, {F, F, F, F}));

  // [issue 17: resize, conv_transpose2d]
  EMBER_RETURN_IF_ERROR(r.add(OpCode::Resize, ref::resize, {F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::ConvTranspose2d, ref::conv_transpose2d, {F, F, F, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::ConvTranspose2d, ref::conv_transpose2d, {F, F, X, F}));
  EMBER_RETURN_IF_ERROR(r.add(OpCode::ConvTranspose2d, ref::conv_transpose2d, {F, F, F}));

  // [issue 17: lstm, gru]
  for (const OpCode op : {OpCode::Lstm, OpCode::Gru}) {
    EMBER_RETURN_IF_ERROR(for_each_rnn_key(op, [&](const KernelKey& key) {
      return r.add(key, op == OpCode::Lstm ? ref::lstm : ref::gru, ref::rnn_scratch);
    }));
  }
  return Status::ok();
}

}  // namespace ember::kernels
