// Data-movement reference kernels: any dtype of 8 bits or more; bytes are moved, never interpreted.
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

}  // namespace ember::kernels::reference
