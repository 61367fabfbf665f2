// LLM ops: rms_norm, rope, silu_mul, logits_gather, embedding (sample is in sample.cc). Semantics in ops.h; the
// f32 roundings follow Hugging Face's float32 modules step by step, reductions are in double.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"
#include "runtime/core/float_codecs.h"

namespace ember::kernels::reference {

// LlamaRMSNorm in f32: variance = mean(x^2) (here summed in double, rounded once), then
// x * rsqrt(variance + eps) and weight * that, each an f32 operation.
void rms_norm(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
              size_t) {
  const TensorView& x = inputs[0];
  const int64_t h = x.dims[x.rank - 1];
  const int64_t rows = h == 0 ? 0 : internal::numel(x) / h;
  const float* px = x.data_as<const float>();
  const float* w = inputs[1].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * h;
    double sum = 0.0;
    for (int64_t i = 0; i < h; ++i) sum += static_cast<double>(row[i]) * static_cast<double>(row[i]);
    const float variance = static_cast<float>(sum / static_cast<double>(h));
    const float rstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance + attrs.epsilon)));
    for (int64_t i = 0; i < h; ++i) {
      const float normed = row[i] * rstd;
      po[r * h + i] = w[i] * normed;
    }
  }
}

// apply_rotary_pos_emb with rotate_half: y = x * cos + rotate_half(x) * sin, f32 products and sum.
// A negative position (rejected by rope_check) gives a NaN token.
void rope(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const int64_t tokens = x.dims[0], heads = x.dims[1], d = x.dims[2], half = d / 2;
  const float* px = x.data_as<const float>();
  const int32_t* pos = inputs[1].data_as<const int32_t>();
  const float* inv_freq = inputs[2].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    const float p = pos[t] < 0 ? NAN : static_cast<float>(pos[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = p * inv_freq[i];
      const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
      for (int64_t hd = 0; hd < heads; ++hd) {
        const int64_t base = (t * heads + hd) * d;
        const float x1 = px[base + i], x2 = px[base + half + i];
        const float a1 = x1 * c, b1 = -x2 * s;
        const float a2 = x2 * c, b2 = x1 * s;
        po[base + i] = a1 + b1;
        po[base + half + i] = a2 + b2;
      }
    }
  }
}

// act_fn(gate) * up: silu rounded to f32 (as the silu kernel), then an f32 product.
void silu_mul(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const int64_t n = internal::numel(inputs[0]);
  const float* g = inputs[0].data_as<const float>();
  const float* u = inputs[1].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t i = 0; i < n; ++i) {
    const double x = g[i];
    const float silu = static_cast<float>(x / (1.0 + std::exp(-x)));
    po[i] = silu * u[i];
  }
}

// Row indices[s] of hidden; -1 (and anything logits_gather_check rejects) gives a zero row. Rows
// are copied as bytes (a NaN keeps its payload). The one logits_gather: the cpu library has none.
void logits_gather(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
                   size_t) {
  const int64_t rows = inputs[0].dims[0], h = inputs[0].dims[1], count = inputs[1].dims[0];
  const int32_t* idx = inputs[1].data_as<const int32_t>();
  const float* hidden = inputs[0].data_as<const float>();
  float* out = outputs[0].data_as<float>();
  for (int64_t s = 0; s < count; ++s) {
    if (idx[s] >= 0 && idx[s] < rows) {
      std::memcpy(out + s * h, hidden + idx[s] * h, static_cast<size_t>(h) * sizeof(float));
    } else {
      std::memset(out + s * h, 0, static_cast<size_t>(h) * sizeof(float));
    }
  }
}

// Row ids[t] of weight, converted to f32 exactly; an id outside [0, V) (rejected by
// embedding_check) gives a zero row.
void embedding(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
               size_t) {
  const TensorView& w = inputs[0];
  const int64_t vocab = w.dims[0], h = w.dims[1], tokens = inputs[1].dims[0];
  const int32_t* ids = inputs[1].data_as<const int32_t>();
  float* po = outputs[0].data_as<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t id = ids[t];
    float* out = po + t * h;
    for (int64_t i = 0; i < h; ++i) {
      if (id < 0 || id >= vocab) {
        out[i] = 0.0f;
      } else if (w.dtype == ScalarType::F32) {
        out[i] = w.data_as<const float>()[id * h + i];
      } else if (w.dtype == ScalarType::BF16) {
        out[i] = bf16_to_f32(w.data_as<const uint16_t>()[id * h + i]);
      } else {
        out[i] = f16_to_f32(w.data_as<const uint16_t>()[id * h + i]);
      }
    }
  }
}

}  // namespace ember::kernels::reference
