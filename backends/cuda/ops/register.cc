// The CUDA kernels' signatures: the reference's keys for the ops of an LLM `step` graph
// (kernels/reference/register.cc), so a step exported for the portable kernels retargets here.
#include <initializer_list>

#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
namespace {

constexpr ScalarType F = ScalarType::F32;
constexpr ScalarType I = ScalarType::I32;
constexpr ScalarType X = ScalarType::Invalid;  // an absent optional input

Status add(KernelRegistry& r, OpCode op, KernelFn fn, ScratchFn scratch, QuantLayout quant,
           std::initializer_list<ScalarType> dtypes) {
  KernelKey key;
  key.op = op;
  key.quant = quant;
  key.arg_count = static_cast<uint8_t>(dtypes.size());
  int i = 0;
  for (ScalarType t : dtypes) key.dtypes[i++] = t;
  return r.add(key, fn, "cuda", scratch);
}

Status add(KernelRegistry& r, OpCode op, KernelFn fn, std::initializer_list<ScalarType> dtypes) {
  return add(r, op, fn, nullptr, QuantLayout::None, dtypes);
}

}  // namespace

Status register_cuda_kernels(KernelRegistry& r) {
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Add, add, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::RmsNorm, rms_norm, {F, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::Rope, rope, {F, I, F, F}));
  EMBER_RETURN_IF_ERROR(add(r, OpCode::SiluMul, silu_mul, {F, F, F}));
  for (ScalarType w : {F, ScalarType::BF16, ScalarType::F16}) {
    EMBER_RETURN_IF_ERROR(add(r, OpCode::Embedding, embedding, {w, I, F}));
  }
  EMBER_RETURN_IF_ERROR(add(r, OpCode::LogitsGather, logits_gather, {F, I, F}));
  for (ScalarType t : {F, ScalarType::F16, ScalarType::BF16, ScalarType::I32, ScalarType::I64, ScalarType::I8,
                       ScalarType::U8, ScalarType::F8E4M3FN}) {
    EMBER_RETURN_IF_ERROR(add(r, OpCode::Reshape, reshape, {t, t}));
  }
  for (ScalarType c : {F, ScalarType::BF16, ScalarType::F16, ScalarType::F8E4M3FN}) {
    EMBER_RETURN_IF_ERROR(add(r, OpCode::PagedAttention, paged_attention, paged_attention_scratch, QuantLayout::None,
                              {F, F, F, c, c, I, I, I, I, F}));
  }
  EMBER_RETURN_IF_ERROR(
      add(r, OpCode::Sample, sample, sample_scratch, QuantLayout::None, {F, F, I, F, F, I, I, I, I, I, F}));
  // Linear: f32 and bf16 weights, FP8 in every f32-scale layout, MXFP8, NVFP4; bias present, absent
  // (Invalid) or omitted.
  for (ScalarType w : {F, ScalarType::BF16}) {
    for (auto dtypes : {std::initializer_list<ScalarType>{F, w, F, F}, std::initializer_list<ScalarType>{F, w, X, F},
                        std::initializer_list<ScalarType>{F, w, F}}) {
      EMBER_RETURN_IF_ERROR(add(r, OpCode::Linear, linear, linear_scratch, QuantLayout::None, dtypes));
    }
  }
  constexpr ScalarType F8 = ScalarType::F8E4M3FN, F4 = ScalarType::F4E2M1;
  for (auto [w, layout] : {std::pair{F8, QuantLayout::PerTensor}, std::pair{F8, QuantLayout::PerChannel},
                           std::pair{F8, QuantLayout::Block2d}, std::pair{F8, QuantLayout::Mx},
                           std::pair{F4, QuantLayout::Nvfp4}}) {
    for (auto dtypes : {std::initializer_list<ScalarType>{F, w, F, F}, std::initializer_list<ScalarType>{F, w, X, F},
                        std::initializer_list<ScalarType>{F, w, F}}) {
      EMBER_RETURN_IF_ERROR(add(r, OpCode::Linear, linear, linear_scratch, layout, dtypes));
    }
  }
  return Status::ok();
}

}  // namespace ember::backends::cuda
