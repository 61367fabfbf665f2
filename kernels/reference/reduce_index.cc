// Issue 17's reductions and index ops: reduce_max / reduce_min / reduce_prod, argmax / argmin, topk,
// cumsum, gather_elements and group_norm. Semantics (NaN, ties, empty extents) are in ops.h.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {
namespace {

// The kept and reduced axes of a reduction (attrs.axes, or every axis when count is 0), each with
// its input stride: output element i walks its own reduced sub-box.
struct ReduceLayout {
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank], red_dims[kMaxRank], red_strides[kMaxRank];
  int kept = 0, red = 0;
  int64_t outer = 1, count = 1;
};

ReduceLayout reduce_layout(const OpAttrs& attrs, const TensorView& x) {
  bool reduced[kMaxRank] = {false};
  for (int j = 0; j < attrs.count; ++j) reduced[internal::normalize_axis(attrs.axes[j], x.rank)] = true;
  if (attrs.count == 0) {
    for (int i = 0; i < x.rank; ++i) reduced[i] = true;
  }
  ReduceLayout l;
  int64_t stride = 1;
  int64_t strides[kMaxRank];
  for (int i = x.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= x.dims[i];
  }
  for (int i = 0; i < x.rank; ++i) {
    if (reduced[i]) {
      l.red_dims[l.red] = x.dims[i];
      l.red_strides[l.red++] = strides[i];
    } else {
      l.kept_dims[l.kept] = x.dims[i];
      l.kept_strides[l.kept++] = strides[i];
    }
  }
  l.outer = internal::product(l.kept_dims, 0, l.kept);
  l.count = internal::product(l.red_dims, 0, l.red);
  return l;
}

// Calls visit(output index, input element offset) for every element of every output's sub-box, in
// row-major order of the reduced axes.
template <typename Visit>
void for_each_reduced(const ReduceLayout& l, Visit visit) {
  internal::Odometer o;
  o.rank = l.kept;
  o.dims = l.kept_dims;
  o.strides[0] = l.kept_strides;
  for (int64_t i = 0; i < l.outer; ++i, o.next()) {
    internal::Odometer r;
    r.rank = l.red;
    r.dims = l.red_dims;
    r.strides[0] = l.red_strides;
    for (int64_t k = 0; k < l.count; ++k, r.next()) visit(i, o.offset[0] + r.offset[0]);
  }
}

// max / min in the IEEE 754-2019 maximum / minimum sense: NaN if any element is NaN (the canonical
// quiet NaN), +0 > -0, so the result does not depend on the order of the elements.
float float_extreme(float a, float b, bool max) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return (std::signbit(a) != max) ? a : b;  // ±0: max takes +0, min takes -0
  return (a > b) == max ? a : b;
}

template <typename T>
void reduce_extreme(const OpAttrs& attrs, const TensorView& x, TensorView& out, bool max) {
  const ReduceLayout l = reduce_layout(attrs, x);
  const T* px = x.data_as<const T>();
  T* po = out.data_as<T>();
  constexpr bool kFloat = std::is_same_v<T, float>;
  T identity;
  if constexpr (kFloat) {
    identity = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  } else {
    identity = max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  for (int64_t i = 0; i < l.outer; ++i) po[i] = identity;
  for_each_reduced(l, [&](int64_t i, int64_t at) {
    if constexpr (kFloat) {
      po[i] = float_extreme(po[i], px[at], max);
    } else {
      po[i] = max ? (px[at] > po[i] ? px[at] : po[i]) : (px[at] < po[i] ? px[at] : po[i]);
    }
  });
}

template <typename T>
void arg_extreme(const OpAttrs& attrs, const TensorView& x, TensorView& out, bool max) {
  const int axis = internal::normalize_axis(attrs.axis, x.rank);
  const int64_t outer = internal::product(x.dims, 0, axis);
  const int64_t size = x.dims[axis];
  const int64_t inner = internal::product(x.dims, axis + 1, x.rank);
  const T* px = x.data_as<const T>();
  int64_t* po = out.data_as<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* row = px + o * size * inner + in;
      // onnxruntime's scan: the first element is the candidate and an element replaces it only when
      // strictly better (or equal, with select_last_index). Comparisons with NaN are false, so a NaN
      // at index 0 is the answer and a NaN anywhere else is skipped.
      T best = row[0];
      int64_t index = 0;
      for (int64_t i = 1; i < size; ++i) {
        const T v = row[i * inner];
        const bool better = max ? (attrs.select_last_index ? v >= best : v > best)
                                : (attrs.select_last_index ? v <= best : v < best);
        if (better) {
          best = v;
          index = i;
        }
      }
      po[o * inner + in] = index;
    }
  }
}

// topk's order: whether (a, ia) comes before (b, ib). NaN ranks above every number (torch.topk), so
// it comes first when largest and last otherwise; equal values (NaN with NaN) keep index order.
bool topk_before(float a, int64_t ia, float b, int64_t ib, bool largest) {
  const bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) {
    if (an && bn) return ia < ib;
    return largest ? an : bn;
  }
  if (a == b) return ia < ib;
  return largest ? a > b : a < b;
}

template <typename T>
void cumsum_typed(const OpAttrs& attrs, const TensorView& x, TensorView& out) {
  const int axis = internal::normalize_axis(attrs.axis, x.rank);
  const int64_t outer = internal::product(x.dims, 0, axis);
  const int64_t size = x.dims[axis];
  const int64_t inner = internal::product(x.dims, axis + 1, x.rank);
  const T* px = x.data_as<const T>();
  T* po = out.data_as<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * size * inner + in;
      // f32 sums in double, each output rounded once; integers wrap around modulo 2^bits (unsigned
      // arithmetic, no overflow UB), as numpy and onnxruntime do.
      using Acc = std::conditional_t<std::is_same_v<T, float>, double, uint64_t>;
      Acc acc = 0;
      for (int64_t step = 0; step < size; ++step) {
        const int64_t i = attrs.reverse ? size - 1 - step : step;
        const T v = px[base + i * inner];
        if (!attrs.exclusive) acc += static_cast<Acc>(v);
        if constexpr (std::is_same_v<T, float>) {
          po[base + i * inner] = static_cast<float>(acc);
        } else {
          po[base + i * inner] = internal::wrap_int<T>(static_cast<int64_t>(acc));
        }
        if (attrs.exclusive) acc += static_cast<Acc>(v);
      }
    }
  }
}

}  // namespace

void reduce_max(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  switch (inputs[0].dtype) {
    case ScalarType::I32: reduce_extreme<int32_t>(attrs, inputs[0], outputs[0], true); break;
    case ScalarType::I64: reduce_extreme<int64_t>(attrs, inputs[0], outputs[0], true); break;
    default: reduce_extreme<float>(attrs, inputs[0], outputs[0], true); break;
  }
}

void reduce_min(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  switch (inputs[0].dtype) {
    case ScalarType::I32: reduce_extreme<int32_t>(attrs, inputs[0], outputs[0], false); break;
    case ScalarType::I64: reduce_extreme<int64_t>(attrs, inputs[0], outputs[0], false); break;
    default: reduce_extreme<float>(attrs, inputs[0], outputs[0], false); break;
  }
}

void reduce_prod(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                 size_t) {
  const TensorView& x = inputs[0];
  const ReduceLayout l = reduce_layout(attrs, x);
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  // The product in double, rounded once per output (an empty extent gives 1).
  int64_t current = -1;
  double prod = 1.0;
  for_each_reduced(l, [&](int64_t i, int64_t at) {
    if (i != current) {
      if (current >= 0) po[current] = static_cast<float>(prod);
      current = i;
      prod = 1.0;
    }
    prod *= static_cast<double>(px[at]);
  });
  if (current >= 0) po[current] = static_cast<float>(prod);
  if (l.count == 0) {
    for (int64_t i = 0; i < l.outer; ++i) po[i] = 1.0f;
  }
}

void argmax(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  switch (inputs[0].dtype) {
    case ScalarType::I32: arg_extreme<int32_t>(attrs, inputs[0], outputs[0], true); break;
    case ScalarType::I64: arg_extreme<int64_t>(attrs, inputs[0], outputs[0], true); break;
    default: arg_extreme<float>(attrs, inputs[0], outputs[0], true); break;
  }
}

void argmin(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  switch (inputs[0].dtype) {
    case ScalarType::I32: arg_extreme<int32_t>(attrs, inputs[0], outputs[0], false); break;
    case ScalarType::I64: arg_extreme<int64_t>(attrs, inputs[0], outputs[0], false); break;
    default: arg_extreme<float>(attrs, inputs[0], outputs[0], false); break;
  }
}

// Insertion into the k output slots (the outputs themselves are the working list, so no scratch):
// elements arrive in index order, and one equal to a listed element goes after it.
void topk(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const int axis = internal::normalize_axis(attrs.axis, x.rank);
  const int64_t outer = internal::product(x.dims, 0, axis);
  const int64_t size = x.dims[axis];
  const int64_t inner = internal::product(x.dims, axis + 1, x.rank);
  const int64_t k = attrs.k;
  const float* px = x.data_as<const float>();
  float* values = outputs[0].data_as<float>();
  int64_t* indices = outputs[1].data_as<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const float* row = px + o * size * inner + in;
      float* vals = values + o * k * inner + in;
      int64_t* idx = indices + o * k * inner + in;
      int64_t filled = 0;
      for (int64_t i = 0; i < size && k > 0; ++i) {
        const float v = row[i * inner];
        int64_t pos = filled;
        if (filled == k) {
          if (!topk_before(v, i, vals[(k - 1) * inner], idx[(k - 1) * inner], attrs.largest)) continue;
          pos = k - 1;
        } else {
          ++filled;
        }
        while (pos > 0 && topk_before(v, i, vals[(pos - 1) * inner], idx[(pos - 1) * inner], attrs.largest)) {
          vals[pos * inner] = vals[(pos - 1) * inner];
          idx[pos * inner] = idx[(pos - 1) * inner];
          --pos;
        }
        vals[pos * inner] = v;
        idx[pos * inner] = i;
      }
    }
  }
}

void cumsum(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  switch (inputs[0].dtype) {
    case ScalarType::I32: cumsum_typed<int32_t>(attrs, inputs[0], outputs[0]); break;
    case ScalarType::I64: cumsum_typed<int64_t>(attrs, inputs[0], outputs[0]); break;
    default: cumsum_typed<float>(attrs, inputs[0], outputs[0]); break;
  }
}

// out[p] = data[p with its axis coordinate replaced by indices[p]] (wrapped once if negative); an index
// still outside [0, dim) writes zero bytes (the op's input check refuses it before this runs).
void gather_elements(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                     size_t) {
  const TensorView& data = inputs[0];
  const TensorView& indices = inputs[1];
  const int axis = internal::normalize_axis(attrs.axis, data.rank);
  const size_t elem = internal::element_size(data.dtype);
  int64_t data_strides[kMaxRank];
  int64_t stride = 1;
  for (int i = data.rank - 1; i >= 0; --i) {
    data_strides[i] = i == axis ? 0 : stride;  // the axis coordinate comes from the index
    stride *= data.dims[i];
  }
  const int64_t axis_stride = internal::product(data.dims, axis + 1, data.rank);
  const int64_t dim = data.dims[axis];
  internal::Odometer it;
  it.rank = indices.rank;
  it.dims = indices.dims;
  it.strides[0] = data_strides;
  const uint8_t* src = static_cast<const uint8_t*>(data.data);
  uint8_t* dst = static_cast<uint8_t*>(outputs[0].data);
  const int64_t n = internal::numel(indices);
  for (int64_t p = 0; p < n; ++p, it.next()) {
    int64_t index = indices.dtype == ScalarType::I32 ? indices.data_as<const int32_t>()[p]
                                                     : indices.data_as<const int64_t>()[p];
    if (index < 0) index += dim;
    uint8_t* out = dst + static_cast<size_t>(p) * elem;
    if (index < 0 || index >= dim) {
      std::memset(out, 0, elem);
      continue;
    }
    std::memcpy(out, src + static_cast<size_t>(it.offset[0] + index * axis_stride) * elem, elem);
  }
}

// y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c], mean and biased variance over each group of
// C / groups channels and every spatial position, in double (two passes).
void group_norm(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  const TensorView& x = inputs[0];
  const float* scale = inputs[1].data_as<const float>();
  const float* bias = inputs[2].data_as<const float>();
  const int64_t n = x.dims[0], c = x.dims[1];
  const int64_t groups = attrs.groups;
  const int64_t per_group = c / groups;
  const int64_t spatial = internal::product(x.dims, 2, x.rank);
  const int64_t size = per_group * spatial;
  const double eps = static_cast<double>(attrs.epsilon);
  const float* px = x.data_as<const float>();
  float* po = outputs[0].data_as<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups && size > 0; ++g) {
      const int64_t base = (b * c + g * per_group) * spatial;
      double mean = 0.0;
      for (int64_t i = 0; i < size; ++i) mean += static_cast<double>(px[base + i]);
      mean /= static_cast<double>(size);
      double var = 0.0;
      for (int64_t i = 0; i < size; ++i) {
        const double dv = static_cast<double>(px[base + i]) - mean;
        var += dv * dv;
      }
      var /= static_cast<double>(size);
      const double inv_std = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < size; ++i) {
        const int64_t ch = g * per_group + i / spatial;
        po[base + i] = static_cast<float>((static_cast<double>(px[base + i]) - mean) * inv_std *
                                              static_cast<double>(scale[ch]) +
                                          static_cast<double>(bias[ch]));
      }
    }
  }
}

}  // namespace ember::kernels::reference
