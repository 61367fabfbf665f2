// softmax and layer_norm reference kernels (f32, reductions in double).
#include <cmath>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {

// exp(x - max) / sum(exp(x - max)) along attrs.axis (negative counts from the end).
void softmax(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
             TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const int axis = internal::normalize_axis(attrs.axis, x.rank);
  const int64_t outer = internal::product(x.dims, 0, axis);
  const int64_t size = x.dims[axis];
  const int64_t inner = internal::product(x.dims, axis + 1, x.rank);
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * size * inner + in;
      double max = -INFINITY;
      for (int64_t i = 0; i < size; ++i) {
        const double v = px[base + i * inner];
        if (v > max || std::isnan(v)) max = v;
      }
      double sum = 0.0;
      for (int64_t i = 0; i < size; ++i)
        sum += std::exp(static_cast<double>(px[base + i * inner]) - max);
      for (int64_t i = 0; i < size; ++i) {
        po[base + i * inner] =
            static_cast<float>(std::exp(static_cast<double>(px[base + i * inner]) - max) / sum);
      }
    }
  }
}

// (x - mean) / sqrt(var + eps) * gamma + beta over dims [axis, rank), biased variance.
void layer_norm(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const float* gamma = input_count > 1 ? inputs[1].data_as<const float>() : nullptr;
  const float* beta = input_count > 2 ? inputs[2].data_as<const float>() : nullptr;
  const int axis = internal::normalize_axis(attrs.axis, x.rank);
  const int64_t outer = internal::product(x.dims, 0, axis);
  const int64_t size = internal::product(x.dims, axis, x.rank);
  const double eps = static_cast<double>(attrs.epsilon);
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t o = 0; o < outer; ++o) {
    const float* row = px + o * size;
    double mean = 0.0;
    for (int64_t i = 0; i < size; ++i) mean += static_cast<double>(row[i]);
    mean /= static_cast<double>(size);
    double var = 0.0;
    for (int64_t i = 0; i < size; ++i) {
      const double d = static_cast<double>(row[i]) - mean;
      var += d * d;
    }
    var /= static_cast<double>(size);
    const double inv_std = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < size; ++i) {
      double y = (static_cast<double>(row[i]) - mean) * inv_std;
      if (gamma != nullptr) y *= static_cast<double>(gamma[i]);
      if (beta != nullptr) y += static_cast<double>(beta[i]);
      po[o * size + i] = static_cast<float>(y);
    }
  }
}

}  // namespace ember::kernels::reference
