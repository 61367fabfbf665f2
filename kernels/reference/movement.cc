// Data-movement reference kernels: any dtype of 8 bits or more; bytes are moved, never interpreted
// (except pad's value and cast, which convert with internal.h's Cast rules).
#include <cstring>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {

// Same bytes, new dims. The output may alias the input (in-place reshape), hence memmove.
void reshape(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
             size_t) {
  const size_t bytes = static_cast<size_t>(outputs[0].nbytes());
  if (bytes != 0 && outputs[0].data != inputs[0].data) {
    std::memmove(outputs[0].data, inputs[0].data, bytes);
  }
}

// out.dims[i] = in.dims[perm[i]].
void transpose(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
               TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const size_t elem = internal::element_size(x.dtype);
  int64_t in_strides[kMaxRank];
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    in_strides[i] = stride;
    stride *= x.dims[i];
  }
  int64_t strides[kMaxRank];  // input stride along each output dim
  for (int i = 0; i < out.rank; ++i) strides[i] = in_strides[attrs.perm[i]];
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = strides;
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  const int64_t n = internal::numel(out);
  for (int64_t i = 0; i < n; ++i, it.next()) {
    std::memcpy(dst + static_cast<size_t>(i) * elem, src + static_cast<size_t>(it.offset[0]) * elem,
                elem);
  }
}

// Inputs joined along attrs.axis (negative counts from the end).
void concat(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
            TensorView* outputs, size_t) {
  TensorView& out = outputs[0];
  const int axis = internal::normalize_axis(attrs.axis, out.rank);
  const size_t elem = internal::element_size(out.dtype);
  const int64_t outer = internal::product(out.dims, 0, axis);
  const int64_t inner = internal::product(out.dims, axis + 1, out.rank);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < input_count; ++j) {
      const size_t chunk = static_cast<size_t>(inputs[j].dims[axis] * inner) * elem;
      if (chunk == 0) continue;
      std::memcpy(dst, static_cast<const uint8_t*>(inputs[j].data) + static_cast<size_t>(o) * chunk,
                  chunk);
      dst += chunk;
    }
  }
}

// ONNX Slice: per listed axis, negative starts count from the end and are clamped to [0, dim]
// (step > 0) or [0, dim - 1] (step < 0); the output dims (set by the shape function) give the
// element count along each axis.
void slice(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
           TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const size_t elem = internal::element_size(x.dtype);
  int64_t start[kMaxRank] = {0};
  int64_t step[kMaxRank];
  for (int i = 0; i < x.rank; ++i) step[i] = 1;
  for (int j = 0; j < attrs.count; ++j) {
    const int axis = internal::normalize_axis(attrs.axes[j], x.rank);
    const int64_t dim = x.dims[axis];
    int64_t s = attrs.starts[j];
    if (s < 0) s += dim;
    if (attrs.steps[j] > 0) {
      s = s < 0 ? 0 : (s > dim ? dim : s);
    } else {
      s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s);
    }
    start[axis] = s;
    step[axis] = attrs.steps[j];
  }
  // Strides of the input, and the input offset of output element 0.
  int64_t in_strides[kMaxRank];
  int64_t strides[kMaxRank];
  int64_t stride = 1;
  int64_t base = 0;
  for (int i = x.rank - 1; i >= 0; --i) {
    in_strides[i] = stride;
    stride *= x.dims[i];
  }
  const int64_t n = internal::numel(out);
  if (n == 0) return;
  for (int i = 0; i < x.rank; ++i) {
    // Only reached with out.dims[i] >= 1, so start[i] is a valid index and |step| < dim when
    // out.dims[i] > 1: the products below stay in range.
    base += start[i] * in_strides[i];
    strides[i] = out.dims[i] > 1 ? step[i] * in_strides[i] : 0;
  }
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = strides;
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  for (int64_t i = 0; i < n; ++i, it.next()) {
    std::memcpy(dst + static_cast<size_t>(i) * elem,
                src + static_cast<size_t>(base + it.offset[0]) * elem, elem);
  }
}

// Output index i along an axis reads input index j = i - begin (negative pads crop). Outside
// [0, dim): the pad value (Constant), the mirror image without the border (Reflect: -j, or
// 2 (dim - 1) - j) or the nearest border (Edge). The shape function guarantees reflect pads < dim
// and non-empty edge-padded axes. j is formed in uint64: with a hostile begin (say INT64_MIN) it can
// exceed INT64_MAX, and then it is simply past the end.
void pad(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
         TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const size_t elem = internal::element_size(x.dtype);
  uint8_t value[8] = {0};
  internal::Scalar v;
  v.is_float = true;
  v.f = attrs.pad_value;
  internal::store_scalar(x.dtype, v, value, 0);
  int64_t in_strides[kMaxRank];
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    in_strides[i] = stride;
    stride *= x.dims[i];
  }
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  const int64_t n = internal::numel(out);
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  for (int64_t o = 0; o < n; ++o, it.next()) {
    int64_t offset = 0;
    bool inside = true;
    for (int a = 0; a < x.rank && inside; ++a) {
      const int64_t i = it.index[a], begin = attrs.pads[a];
      const uint64_t dim = static_cast<uint64_t>(x.dims[a]);
      uint64_t j = 0;
      if (begin > 0 && i < begin) {  // before the input
        const uint64_t k = static_cast<uint64_t>(begin - i);  // 1..begin
        if (attrs.pad_mode == PadMode::Reflect) {
          j = k;
        } else if (attrs.pad_mode == PadMode::Edge) {
          j = 0;
        } else {
          inside = false;
        }
      } else {
        j = static_cast<uint64_t>(i) - static_cast<uint64_t>(begin);
        if (j >= dim) {  // past the end
          if (attrs.pad_mode == PadMode::Reflect) {
            j = 2 * (dim - 1) - j;
          } else if (attrs.pad_mode == PadMode::Edge) {
            j = dim - 1;
          } else {
            inside = false;
          }
        }
      }
      offset += static_cast<int64_t>(j) * in_strides[a];
    }
    std::memcpy(dst + static_cast<size_t>(o) * elem,
                inside ? src + static_cast<size_t>(offset) * elem : value, elem);
  }
}

// ONNX Gather along attrs.axis. A negative index is wrapped once (index + dim); an index still
// outside [0, dim) cannot be reported at run time (kernels never fail), so its slice is written as
// zero bytes. Importers fold constant gathers, where out-of-range indices are rejected.
void gather(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
            TensorView* outputs, size_t) {
  const TensorView& data = inputs[0];
  const TensorView& indices = inputs[1];
  const int axis = internal::normalize_axis(attrs.axis, data.rank);
  const size_t elem = internal::element_size(data.dtype);
  const int64_t outer = internal::product(data.dims, 0, axis);
  const int64_t dim = data.dims[axis];
  const size_t chunk =
      static_cast<size_t>(internal::product(data.dims, axis + 1, data.rank)) * elem;
  const int64_t count = internal::numel(indices);
  const uint8_t* src = static_cast<const uint8_t*>(data.data);
  uint8_t* dst = static_cast<uint8_t*>(outputs[0].data);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < count; ++k, dst += chunk) {
      int64_t index = indices.dtype == ScalarType::I32
                          ? indices.data_as<const int32_t>()[k]
                          : indices.data_as<const int64_t>()[k];
      if (index < 0) index += dim;
      if (index < 0 || index >= dim) {
        if (chunk != 0) std::memset(dst, 0, chunk);
        continue;
      }
      if (chunk != 0) {
        std::memcpy(dst, src + static_cast<size_t>(o * dim + index) * chunk, chunk);
      }
    }
  }
}

// numpy broadcast of the input to the output dims (set by the shape function).
void expand(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t,
            TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const size_t elem = internal::element_size(x.dtype);
  int64_t strides[kMaxRank];
  internal::broadcast_strides(x.dims, x.rank, out.rank, strides);
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = strides;
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  const int64_t n = internal::numel(out);
  for (int64_t i = 0; i < n; ++i, it.next()) {
    std::memcpy(dst + static_cast<size_t>(i) * elem,
                src + static_cast<size_t>(it.offset[0]) * elem, elem);
  }
}

// Element by element with internal.h's Cast rules (see store_scalar).
void cast(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
          TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const int64_t n = internal::numel(x);
  for (int64_t i = 0; i < n; ++i) {
    internal::store_scalar(attrs.cast_to, internal::load_scalar(x.dtype, x.data, i),
                           outputs[0].data, i);
  }
}

}  // namespace ember::kernels::reference
