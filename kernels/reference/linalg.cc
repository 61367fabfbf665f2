// matmul and linear reference kernels (f32, dot products accumulated in double), and linear with a
// quantized weight.
#include <limits>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/quantized_linear.h"
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
void linear_bf16_weight(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t input_count,
                        TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const int64_t m = x.dims[0] == 0 ? 0 : int64_t(x.numel() / uint64_t(x.dims[x.rank - 1]));
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  if (!linear_bf16(x.data_as<const float>(), m, w.data_as<const uint16_t>(), w.dims[0], w.dims[1], bias,
                   outputs[0].data_as<float>())
           .is_ok()) {
    std::memset(outputs[0].data, 0, size_t(outputs[0].nbytes()));
  }
}

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

// The registered kernel for a quantized weight: unpacks its QuantView and calls the plain reference
// functions of quantized_linear.h (weight-only: dequantize, then an f32 linear in double; W8A8: FP8
// activations per token).
void linear_quantized(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                      TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const QuantView& q = *w.quant;
  const float* bias = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int64_t m = internal::product(x.dims, 0, x.rank - 1), n = w.dims[0], k = w.dims[1];
  const float* px = x.data_as<const float>();
  const uint8_t* codes = w.data_as<const uint8_t>();
  float* y = outputs[0].data_as<float>();
  Status s(Error::InvalidArgument);
  switch (q.layout) {
    case QuantLayout::PerTensor:
    case QuantLayout::PerChannel:
    case QuantLayout::Block2d: {
      const float* scales = static_cast<const float*>(q.scale);
      s = attrs.activation_quant == ActivationQuant::Fp8PerToken
              ? linear_fp8_e4m3_w8a8(px, m, codes, n, k, q.block[0], q.block[1], scales, bias, y)
              : linear_fp8_e4m3(px, m, codes, n, k, q.block[0], q.block[1], scales, bias, y);
      break;
    }
    case QuantLayout::Mx: s = linear_mxfp8(px, m, codes, n, k, static_cast<const uint8_t*>(q.scale), bias, y); break;
    case QuantLayout::Nvfp4:
      s = linear_nvfp4(px, m, codes, n, k, static_cast<const uint8_t*>(q.scale), *q.global_scale, bias, y);
      break;
    case QuantLayout::None: break;
  }
  // Unreachable after load (the validator checked the layout); never leave stale numbers behind.
  if (!s.is_ok()) {
    for (int64_t i = 0; i < m * n; ++i) y[i] = std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace ember::kernels::reference
