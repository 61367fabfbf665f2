#include "kernels/cpu/register.h"

#include <initializer_list>
#include <utility>

#include "kernels/cpu/ops.h"

namespace ember::kernels {
namespace {

constexpr ScalarType F = ScalarType::F32;
constexpr ScalarType X = ScalarType::Invalid;  // an absent optional input

// The dtypes the movement kernels serve: every type of 8 bits or more that carries data.
constexpr ScalarType kMovementTypes[] = {
    ScalarType::F32,  ScalarType::F16,      ScalarType::BF16,   ScalarType::I8,
    ScalarType::U8,   ScalarType::I16,      ScalarType::I32,    ScalarType::I64,
    ScalarType::Bool, ScalarType::F8E4M3FN, ScalarType::F8E5M2, ScalarType::E8M0,
    ScalarType::UE4M3,
};

constexpr const char* kLibrary = "cpu";

Status add(KernelRegistry& registry, OpCode op, KernelFn fn, std::initializer_list<ScalarType> dtypes,
           ScratchFn scratch = nullptr) {
  KernelKey key;
  key.op = op;
  key.arg_count = static_cast<uint8_t>(dtypes.size());
  int i = 0;
  for (ScalarType t : dtypes) key.dtypes[i++] = t;
  return registry.add(key, fn, kLibrary, scratch);
}

Status add_quantized(KernelRegistry& registry, OpCode op, KernelFn fn, ScratchFn scratch, QuantLayout quant,
                     std::initializer_list<ScalarType> dtypes) {
  KernelKey key;
  key.op = op;
  key.quant = quant;
  key.arg_count = static_cast<uint8_t>(dtypes.size());
  int i = 0;
  for (ScalarType t : dtypes) key.dtypes[i++] = t;
  return registry.add(key, fn, kLibrary, scratch);
}

}  // namespace

Status register_cpu_kernels(KernelRegistry& r) {
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Add, cpu::add, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Sub, cpu::sub, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Mul, cpu::mul, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Div, cpu::div, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Relu, cpu::relu, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Gelu, cpu::gelu, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Silu, cpu::silu, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Sigmoid, cpu::sigmoid, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Tanh, cpu::tanh, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::MatMul, cpu::matmul, {F, F, F}, cpu::matmul_scratch));

  EMBER_RETURN_IF_ERROR(add(r, OpCode::Linear, cpu::linear, {F, F, F, F}, cpu::linear_scratch));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Linear, cpu::linear, {F, F, X, F}, cpu::linear_scratch));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Linear, cpu::linear, {F, F, F}, cpu::linear_scratch));
  constexpr ScalarType F8 = ScalarType::F8E4M3FN, F4 = ScalarType::F4E2M1;
  for (auto [w, layout] : {std::pair{F8, QuantLayout::PerTensor}, std::pair{F8, QuantLayout::PerChannel},
                           std::pair{F8, QuantLayout::Block2d}, std::pair{F8, QuantLayout::Mx},
                           std::pair{F4, QuantLayout::Nvfp4}}) {
    for (auto dtypes : {std::initializer_list<ScalarType>{F, w, F, F}, std::initializer_list<ScalarType>{F, w, X, F},
                        std::initializer_list<ScalarType>{F, w, F}}) {
      EMBER_RETURN_IF_ERROR(add_quantized(r, OpCode::Linear, cpu::linear_quantized, cpu::linear_quantized_scratch,
                                          layout, dtypes));
    }
  }
  constexpr ScalarType BF = ScalarType::BF16;
  for (auto dtypes : {std::initializer_list<ScalarType>{F, BF, F, F}, std::initializer_list<ScalarType>{F, BF, X, F},
                      std::initializer_list<ScalarType>{F, BF, F}}) {
    EMBER_RETURN_IF_ERROR(add_quantized(r, OpCode::Linear, cpu::linear_bf16_weight, cpu::linear_quantized_scratch,
                                        QuantLayout::None, dtypes));
  }
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Conv2d, cpu::conv2d, {F, F, F, F}, cpu::conv2d_scratch));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Conv2d, cpu::conv2d, {F, F, X, F}, cpu::conv2d_scratch));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Conv2d, cpu::conv2d, {F, F, F}, cpu::conv2d_scratch));

  EMBER_RETURN_IF_ERROR(add(r, OpCode::MaxPool2d, cpu::max_pool2d, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::AvgPool2d, cpu::avg_pool2d, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::GlobalAvgPool2d, cpu::global_avg_pool2d, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Softmax, cpu::softmax, {F, F}));

  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, F, X, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, X, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, X, X, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, X, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LayerNorm, cpu::layer_norm, {F, F}));

  // Added for the ONNX importer (gather, equal, cast, expand and non-f32 where/pad: reference).
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Clip, cpu::clip, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::HardSigmoid, cpu::hard_sigmoid, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::HardSwish, cpu::hard_swish, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Erf, cpu::erf, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Sqrt, cpu::sqrt, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Exp, cpu::exp, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Neg, cpu::neg, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Pow, cpu::pow, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Where, cpu::where, {ScalarType::Bool, F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ReduceMean, cpu::reduce_mean, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ReduceSum, cpu::reduce_sum, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::BatchNorm, cpu::batch_norm, {F, F, F, F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Pad, cpu::pad, {F, F}));
  // LLM ops.
  constexpr ScalarType I = ScalarType::I32;
  EMBER_RETURN_IF_ERROR(add(r, OpCode::RmsNorm, cpu::rms_norm, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Rope, cpu::rope, {F, I, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::SiluMul, cpu::silu_mul, {F, F, F}));
  for (ScalarType w : {F, ScalarType::BF16, ScalarType::F16}) {
    EMBER_RETURN_IF_ERROR(add(r, OpCode::Embedding, cpu::embedding, {w, I, F}));
  }
  for (ScalarType c : {F, ScalarType::BF16, ScalarType::F16, ScalarType::F8E4M3FN}) {
    EMBER_RETURN_IF_ERROR(add(r, OpCode::PagedAttention, cpu::paged_attention_op, {F, F, F, c, c, I, I, I, I, F}));
  }
  {
    KernelKey key;
    key.op = OpCode::Sample;
    key.arg_count = 11;
    const ScalarType dtypes[] = {F, F, I, F, F, I, I, I, I, I, F};
    for (int i = 0; i < 11; ++i) key.dtypes[i] = dtypes[i];
    EMBER_RETURN_IF_ERROR(r.add(key, cpu::sample, kLibrary, cpu::sample_scratch));
  }

  // reshape and logits_gather, byte copies, are left to the reference's kernels (one implementation
  // each; register_builtin).
  for (ScalarType t : kMovementTypes) {
    EMBER_RETURN_IF_ERROR(add(r, OpCode::Transpose, cpu::transpose, {t, t}));
    EMBER_RETURN_IF_ERROR(add(r, OpCode::Slice, cpu::slice, {t, t}));
    for (int inputs = 1; inputs < kMaxKernelArgs; ++inputs) {  // concat: 1..15 inputs + output
      KernelKey key;
      key.op = OpCode::Concat;
      key.arg_count = static_cast<uint8_t>(inputs + 1);
      for (int i = 0; i <= inputs; ++i) key.dtypes[i] = t;
      EMBER_RETURN_IF_ERROR(r.add(key, cpu::concat, kLibrary));
    }
  }
  // [issue 17: elementwise ops]
  for (auto [op, fn] : {std::pair{OpCode::Max, &cpu::max}, std::pair{OpCode::Min, &cpu::min},
                        std::pair{OpCode::PRelu, &cpu::prelu}}) {
    EMBER_RETURN_IF_ERROR(add(r, op, fn, {F, F, F}));
  }
  for (auto [op, fn] : {std::pair{OpCode::Greater, &cpu::greater}, std::pair{OpCode::Less, &cpu::less},
                        std::pair{OpCode::GreaterOrEqual, &cpu::greater_equal},
                        std::pair{OpCode::LessOrEqual, &cpu::less_equal}}) {
    EMBER_RETURN_IF_ERROR(add(r, op, fn, {F, F, ScalarType::Bool}));
  }
  for (auto [op, fn] : {std::pair{OpCode::LeakyRelu, &cpu::leaky_relu}, std::pair{OpCode::Elu, &cpu::elu},
                        std::pair{OpCode::Selu, &cpu::selu}, std::pair{OpCode::Softplus, &cpu::softplus},
                        std::pair{OpCode::Log, &cpu::log}, std::pair{OpCode::Abs, &cpu::abs}}) {
    EMBER_RETURN_IF_ERROR(add(r, op, fn, {F, F}));
  }

  // [issue 17: reductions and index ops]
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ReduceMax, cpu::reduce_max, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ReduceMin, cpu::reduce_min, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ArgMax, cpu::argmax, {F, ScalarType::I64}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ArgMin, cpu::argmin, {F, ScalarType::I64}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::GroupNorm, cpu::group_norm, {F, F, F, F}));

  // [issue 17: resize, conv_transpose2d]
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Resize, cpu::resize, {F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ConvTranspose2d, cpu::conv_transpose2d, {F, F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ConvTranspose2d, cpu::conv_transpose2d, {F, F, X, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::ConvTranspose2d, cpu::conv_transpose2d, {F, F, F}));

  // [issue 17: lstm, gru]
  for (const OpCode op : {OpCode::Lstm, OpCode::Gru}) {
    EMBER_RETURN_IF_ERROR(for_each_rnn_key(op, [&](const KernelKey& key) {
      return op == OpCode::Lstm ? r.add(key, cpu::lstm, kLibrary, cpu::lstm_scratch)
                                : r.add(key, cpu::gru, kLibrary, cpu::gru_scratch);
    }));
  }
  return Status::ok();
}

size_t cpu_scratch_bytes(OpCode op, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                         const TensorView* outputs, size_t output_count) {
  if (op == OpCode::Conv2d) return cpu::conv2d_scratch(attrs, inputs, input_count, outputs, output_count, 1);
  if (op == OpCode::Linear && input_count > 0) {
    return cpu::linear_scratch(attrs, inputs, input_count, outputs, output_count, 1);
  }
  if (op == OpCode::MatMul && input_count > 0) {
    return cpu::matmul_scratch(attrs, inputs, input_count, outputs, output_count, 1);
  }
  if (op == OpCode::Lstm && input_count > 0) return cpu::lstm_scratch(attrs, inputs, input_count, outputs, output_count, 1);
  if (op == OpCode::Gru && input_count > 0) return cpu::gru_scratch(attrs, inputs, input_count, outputs, output_count, 1);
  return 0;
}

}  // namespace ember::kernels
