// softmax, layer_norm, batch_norm and the reductions (f32, reductions in double).
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

namespace {

// Sum over the reduced axes (attrs.axes, or all when count is 0) in double; each output element
// walks its own reduced sub-box, so no accumulator buffer is needed. Returns nothing: `finish`
// turns (sum, reduced element count) into the stored value.
template <typename Finish>
void reduce(const OpAttrs& attrs, const TensorView& x, TensorView& out, Finish finish) {
  bool reduced[kMaxRank] = {false};
  for (int j = 0; j < attrs.count; ++j) reduced[internal::normalize_axis(attrs.axes[j], x.rank)] = true;
  if (attrs.count == 0) {
    for (int i = 0; i < x.rank; ++i) reduced[i] = true;
  }
  int64_t in_strides[kMaxRank];
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    in_strides[i] = stride;
    stride *= x.dims[i];
  }
  // Kept and reduced axes, each with its input stride.
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank], red_dims[kMaxRank], red_strides[kMaxRank];
  int kept = 0, red = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (reduced[i]) {
      red_dims[red] = x.dims[i];
      red_strides[red++] = in_strides[i];
    } else {
      kept_dims[kept] = x.dims[i];
      kept_strides[kept++] = in_strides[i];
    }
  }
  const int64_t outer = internal::product(kept_dims, 0, kept);
  const int64_t count = internal::product(red_dims, 0, red);
  const float* px = x.data_as<const float>();
  float* po = out.data_as<float>();
  internal::Odometer o;
  o.rank = kept;
  o.dims = kept_dims;
  o.strides[0] = kept_strides;
  for (int64_t i = 0; i < outer; ++i, o.next()) {
    internal::Odometer r;
    r.rank = red;
    r.dims = red_dims;
    r.strides[0] = red_strides;
    // From -0 (the additive identity of IEEE addition), so a sum of -0 is -0, as onnxruntime's;
    // an empty extent gives +0.
    double sum = count > 0 ? -0.0 : 0.0;
    for (int64_t k = 0; k < count; ++k, r.next()) sum += px[o.offset[0] + r.offset[0]];
    po[i] = static_cast<float>(finish(sum, count));
  }
}

}  // namespace

void reduce_sum(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  reduce(attrs, inputs[0], outputs[0], [](double sum, int64_t) { return sum; });
}

// An empty reduced extent gives 0 / 0 = NaN, as numpy.
void reduce_mean(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
                 TensorView* outputs, size_t) {
  reduce(attrs, inputs[0], outputs[0],
         [](double sum, int64_t count) { return sum / static_cast<double>(count); });
}

// y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], c = index along dim 1.
void batch_norm(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const float* scale = inputs[1].data_as<const float>();
  const float* bias = inputs[2].data_as<const float>();
  const float* mean = inputs[3].data_as<const float>();
  const float* var = inputs[4].data_as<const float>();
  const int64_t n = x.dims[0], c = x.dims[1];
  const int64_t inner = internal::product(x.dims, 2, x.rank);
  const double eps = static_cast<double>(attrs.epsilon);
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const double inv_std = 1.0 / std::sqrt(static_cast<double>(var[ch]) + eps);
      const int64_t base = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        po[base + i] = static_cast<float>(
            (static_cast<double>(px[base + i]) - static_cast<double>(mean[ch])) * inv_std *
                static_cast<double>(scale[ch]) +
            static_cast<double>(bias[ch]));
      }
    }
  }
}

}  // namespace ember::kernels::reference
