// matmul and linear reference kernels (f32, dot products accumulated in double), and linear with a
// quantized weight.
#include <algorithm>
#include <cmath>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"
#include "runtime/core/float_codecs.h"
#include "runtime/core/quant.h"

namespace ember::kernels::reference {

// [.., M, K] x [.., K, N] -> [.., M, N]; the batch dims broadcast (numpy).
void matmul(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
            size_t) {
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  TensorView& out = outputs[0];
  const int64_t m = a.dims[a.rank - 2], k = a.dims[a.rank - 1], n = b.dims[b.rank - 1];
  const int batch_rank = out.rank - 2;
  // Batch strides in units of whole matrices.
  int64_t sa[kMaxRank], sb[kMaxRank];
  internal::broadcast_strides(a.dims, a.rank - 2, batch_rank, sa);
  internal::broadcast_strides(b.dims, b.rank - 2, batch_rank, sb);
  internal::Odometer it;
  it.rank = batch_rank;
  it.dims = out.dims;
  it.strides[0] = sa;
  it.strides[1] = sb;
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* po = out.data_as<float>();
  const int64_t batches = internal::product(out.dims, 0, batch_rank);
  for (int64_t bi = 0; bi < batches; ++bi, it.next()) {
    const float* ma = pa + it.offset[0] * m * k;
    const float* mb = pb + it.offset[1] * k * n;
    float* mo = po + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<double>(ma[i * k + p]) * static_cast<double>(mb[p * n + j]);
        }
        mo[i * n + j] = static_cast<float>(acc);
      }
    }
  }
}

// y[.., n] = sum_k x[.., k] w[n, k] + b[n].
void linear(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t input_count,
            TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int64_t k = w.dims[1], n = w.dims[0];
  const int64_t rows = internal::product(x.dims, 0, x.rank - 1);
  const float* px = x.data_as<const float>();
  const float* pw = w.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias != nullptr ? static_cast<double>(bias[j]) : 0.0;
      for (int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(px[r * k + p]) * static_cast<double>(pw[j * k + p]);
      }
      po[r * n + j] = static_cast<float>(acc);
    }
  }
}

namespace {

// One weight element of a quantized [N, K] weight, decoded exactly as kernels/reference/quantize.h's
// dequantizers do (the kernel semantics: dequantize, then an f32 linear).
float dequantized(const TensorView& w, int64_t n, int64_t k) {
  const QuantView& q = *w.quant;
  const int64_t cols = (w.dims[1] + q.block[1] - 1) / q.block[1];
  const int64_t s = (n / q.block[0]) * cols + k / q.block[1];
  const uint8_t* codes = w.data_as<const uint8_t>();
  switch (q.layout) {
    case QuantLayout::PerTensor:
    case QuantLayout::PerChannel:
    case QuantLayout::Block2d:
      return e4m3fn_to_f32(codes[n * w.dims[1] + k]) * static_cast<const float*>(q.scale)[s];
    case QuantLayout::Mx:
      return e4m3fn_to_f32(codes[n * w.dims[1] + k]) * e8m0_to_f32(static_cast<const uint8_t*>(q.scale)[s]);
    case QuantLayout::Nvfp4: {
      const uint8_t byte = codes[(n * w.dims[1] + k) / 2];
      const float scale = *q.global_scale * ue4m3_to_f32(static_cast<const uint8_t*>(q.scale)[s]);
      return e2m1_to_f32(static_cast<uint8_t>((k & 1) ? byte >> 4 : byte & 0xF)) * scale;
    }
    case QuantLayout::None: break;
  }
  return 0.0f;
}

}  // namespace

// Weight-only: y = x · dequantize(W)ᵀ + b, accumulated in double. W8A8 (FP8 per-token activations,
// FP8 weights with per-tensor or per-channel scales): per row, s_x = amax / 448 (1 when 0),
// x8 = e4m3fn(x / s_x); y = (Σ f32(x8) · f32(w8)) · s_x · s_w[n] + b.
void linear_quantized(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int64_t k = w.dims[1], n = w.dims[0];
  const int64_t rows = internal::product(x.dims, 0, x.rank - 1);
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  const bool w8a8 = attrs.activation_quant == ActivationQuant::Fp8PerToken;
  for (int64_t r = 0; r < rows; ++r) {
    float sx = 1.0f;
    if (w8a8) {
      float amax = 0.0f;
      for (int64_t p = 0; p < k; ++p) amax = std::max(amax, std::fabs(px[r * k + p]));
      if (amax / 448.0f != 0.0f) sx = amax / 448.0f;
    }
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        if (w8a8) {
          const float xq = e4m3fn_to_f32(f32_to_e4m3fn(px[r * k + p] / sx));
          acc += static_cast<double>(xq) * e4m3fn_to_f32(w.data_as<const uint8_t>()[j * k + p]);
        } else {
          acc += static_cast<double>(px[r * k + p]) * static_cast<double>(dequantized(w, j, p));
        }
      }
      if (w8a8) {
        const QuantView& q = *w.quant;
        const float sw = static_cast<const float*>(q.scale)[q.layout == QuantLayout::PerChannel ? j : 0];
        acc *= static_cast<double>(sx) * static_cast<double>(sw);
      }
      po[r * n + j] = static_cast<float>(acc + (bias != nullptr ? static_cast<double>(bias[j]) : 0.0));
    }
  }
}

}  // namespace ember::kernels::reference
