// The registered `linear` kernels for quantized weights: unpack the weight's QuantView
// (runtime/core/quant.h) and call the Highway kernels of quantized_linear.h. Plain C++, compiled
// once (the dispatch happens inside those functions).
#include <cmath>
#include <limits>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantized_linear.h"
#include "runtime/core/quant.h"

namespace ember::kernels::cpu {
namespace {

int64_t rows_of(const TensorView& x) {
  int64_t m = 1;
  for (int i = 0; i + 1 < x.rank; ++i) m *= x.dims[i];
  return m;
}

}  // namespace

void linear_quantized(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const QuantView& q = *w.quant;
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int64_t m = rows_of(x), n = w.dims[0], k = w.dims[1];
  const float* px = x.data_as<const float>();
  const uint8_t* codes = w.data_as<const uint8_t>();
  float* y = outputs[0].data_as<float>();
  Status s;
  switch (q.layout) {
    case QuantLayout::PerTensor:
    case QuantLayout::PerChannel:
    case QuantLayout::Block2d: {
      const float* scales = static_cast<const float*>(q.scale);
      s = attrs.activation_quant == ActivationQuant::Fp8PerToken
              ? linear_fp8_e4m3_w8a8(ctx, px, m, codes, n, k, q.block[0], q.block[1], scales, bias, y,
                                     nullptr, !q.nan_codes)
              : linear_fp8_e4m3(ctx, px, m, codes, n, k, q.block[0], q.block[1], scales, bias, y, nullptr,
                                !q.nan_codes);
      break;
    }
    case QuantLayout::Mx:
      s = linear_mxfp8(ctx, px, m, codes, n, k, static_cast<const uint8_t*>(q.scale), bias, y, nullptr,
                       !q.nan_codes);
      break;
    case QuantLayout::Nvfp4:
      s = linear_nvfp4(ctx, px, m, codes, n, k, static_cast<const uint8_t*>(q.scale), *q.global_scale, bias, y);
      break;
    case QuantLayout::None:
      s = Status(Error::InvalidArgument);
      break;
  }
  // Unreachable after load: the validator checked the layout and load_method sized the scratch
  // with linear_quantized_scratch. Never leave stale numbers behind if it happens anyway.
  if (!s.is_ok()) {
    for (int64_t i = 0; i < m * n; ++i) y[i] = std::numeric_limits<float>::quiet_NaN();
  }
}

size_t linear_quantized_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t, const TensorView*, size_t,
                                size_t threads) {
  return quantized_linear_scratch_bytes(rows_of(inputs[0]), inputs[1].dims[1], threads,
                                        attrs.activation_quant == ActivationQuant::Fp8PerToken);
}

}  // namespace ember::kernels::cpu
