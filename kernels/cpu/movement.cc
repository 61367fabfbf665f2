// Movement ops for any dtype of 8 bits or more: bytes are moved, never interpreted, so one code
// path per element size (1, 2, 4, 8 bytes) serves every dtype. Plain C++ (no Highway): these are
// memory-bound copies; contiguous runs go through memcpy and the 2-D transpose is tiled. pad is f32
// only (its value must be converted for other dtypes; the reference serves those): output rows along
// the last axis are a memcpy of the source row between the two pad runs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {
namespace {

size_t element_size(const TensorView& t) { return static_cast<size_t>(bits_of(t.dtype) / 8); }

// Walks an N-d index (dims[0..rank), innermost last) calling fn(in_offset) with strided offsets.
struct Counter {
  int rank;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
  int64_t idx[kMaxRank] = {0};
  int64_t offset = 0;
  void next() {
    for (int i = rank - 1; i >= 0; --i) {
      offset += strides[i];
      if (++idx[i] < dims[i]) return;
      offset -= idx[i] * strides[i];
      idx[i] = 0;
    }
  }
};

template <typename T>
void copy_strided(const uint8_t* src, int64_t stride, uint8_t* dst, int64_t count) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < count; ++i) d[i] = s[i * stride];
}

void copy_strided_bytes(size_t elem, const uint8_t* src, int64_t stride, uint8_t* dst,
                        int64_t count) {
  switch (elem) {
    case 1: return copy_strided<uint8_t>(src, stride, dst, count);
    case 2: return copy_strided<uint16_t>(src, stride, dst, count);
    case 4: return copy_strided<uint32_t>(src, stride, dst, count);
    case 8: return copy_strided<uint64_t>(src, stride, dst, count);
    default:
      for (int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * elem, src + i * stride * static_cast<int64_t>(elem), elem);
      }
  }
}

// out[c, r] = in[r, c] for an [rows, cols] matrix, in 32 x 32 tiles (both sides stay in cache).
template <typename T>
void transpose_2d(const T* in, T* out, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = r0 + kTile < rows ? r0 + kTile : rows;
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = c0 + kTile < cols ? c0 + kTile : cols;
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
      }
    }
  }
}

void transpose_2d_bytes(size_t elem, const uint8_t* in, uint8_t* out, int64_t rows, int64_t cols) {
  switch (elem) {
    case 1: return transpose_2d(in, out, rows, cols);
    case 2:
      return transpose_2d(reinterpret_cast<const uint16_t*>(in), reinterpret_cast<uint16_t*>(out),
                          rows, cols);
    case 4:
      return transpose_2d(reinterpret_cast<const uint32_t*>(in), reinterpret_cast<uint32_t*>(out),
                          rows, cols);
    case 8:
      return transpose_2d(reinterpret_cast<const uint64_t*>(in), reinterpret_cast<uint64_t*>(out),
                          rows, cols);
    default: break;
  }
}

}  // namespace

void transpose(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
               TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const size_t elem = element_size(x);
  if (out.numel() == 0) return;
  // Drop size-1 input dims, then merge input dims that stay adjacent and in order in the output.
  int keep[kMaxRank];  // old input dim -> new index, or -1
  int kept = 0;
  for (int i = 0; i < x.rank; ++i) keep[i] = x.dims[i] == 1 ? -1 : kept++;
  int perm[kMaxRank];
  int64_t dims[kMaxRank];
  int r = 0;
  for (int i = 0; i < x.rank; ++i) {
    const int src = keep[attrs.perm[i]];
    if (src >= 0) perm[r++] = src;
  }
  for (int i = 0; i < x.rank; ++i) {
    if (keep[i] >= 0) dims[keep[i]] = x.dims[i];
  }
  // Merge: output positions j, j+1 with perm[j+1] == perm[j] + 1 are one input dim.
  int group_of[kMaxRank];  // input dim -> merged dim
  int64_t mdims[kMaxRank];
  int mperm[kMaxRank];
  int m = 0;
  {
    // Mark input dims that start a merged group: dim k starts one unless k-1 precedes it in out.
    bool starts[kMaxRank];
    for (int k = 0; k < r; ++k) starts[k] = true;
    for (int j = 0; j + 1 < r; ++j) {
      if (perm[j + 1] == perm[j] + 1) starts[perm[j + 1]] = false;
    }
    int g = -1;
    for (int k = 0; k < r; ++k) {
      if (starts[k]) {
        ++g;
        mdims[g] = 1;
      }
      group_of[k] = g;
      mdims[g] *= dims[k];
    }
    m = g + 1;
    int n = 0;
    for (int j = 0; j < r; ++j) {
      if (j == 0 || group_of[perm[j]] != group_of[perm[j - 1]]) mperm[n++] = group_of[perm[j]];
    }
  }
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  if (m <= 1) {  // identity
    std::memcpy(dst, src, static_cast<size_t>(out.nbytes()));
    return;
  }
  int64_t in_strides[kMaxRank];
  int64_t s = 1;
  for (int k = m - 1; k >= 0; --k) {
    in_strides[k] = s;
    s *= mdims[k];
  }
  // Batched 2-D swap of the two innermost merged dims: tiled.
  bool swap2d = mperm[m - 1] == m - 2 && mperm[m - 2] == m - 1;
  for (int j = 0; j + 2 < m && swap2d; ++j) swap2d = mperm[j] == j;
  if (swap2d && (elem == 1 || elem == 2 || elem == 4 || elem == 8)) {
    const int64_t rows = mdims[m - 2], cols = mdims[m - 1];
    const int64_t batch = static_cast<int64_t>(out.numel()) / (rows * cols);
    const int64_t plane = rows * cols * static_cast<int64_t>(elem);
    for (int64_t b = 0; b < batch; ++b) transpose_2d_bytes(elem, src + b * plane, dst + b * plane, rows, cols);
    return;
  }
  // General: walk the output; the innermost output dim is one run (contiguous if it maps to the
  // innermost input dim).
  Counter c{};
  c.rank = m - 1;
  for (int j = 0; j < m - 1; ++j) {
    c.dims[j] = mdims[mperm[j]];
    c.strides[j] = in_strides[mperm[j]];
  }
  const int64_t run = mdims[mperm[m - 1]];
  const int64_t run_stride = in_strides[mperm[m - 1]];
  const int64_t runs = static_cast<int64_t>(out.numel()) / run;
  const size_t run_bytes = static_cast<size_t>(run) * elem;
  for (int64_t i = 0; i < runs; ++i) {
    const uint8_t* from = src + c.offset * static_cast<int64_t>(elem);
    if (run_stride == 1) {
      std::memcpy(dst, from, run_bytes);
    } else {
      copy_strided_bytes(elem, from, run_stride, dst, run);
    }
    dst += run_bytes;
    c.next();
  }
}

void concat(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
            TensorView* outputs, size_t) {
  TensorView& out = outputs[0];
  const size_t elem = element_size(out);
  const int axis = attrs.axis < 0 ? attrs.axis + out.rank : attrs.axis;
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= out.dims[i];
  size_t chunk[kMaxKernelArgs];
  for (size_t k = 0; k < input_count; ++k) {
    int64_t inner = 1;
    for (int i = axis; i < inputs[k].rank; ++i) inner *= inputs[k].dims[i];
    chunk[k] = static_cast<size_t>(inner) * elem;
  }
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t k = 0; k < input_count; ++k) {
      if (chunk[k] == 0) continue;
      std::memcpy(dst, static_cast<const uint8_t*>(inputs[k].data) + static_cast<size_t>(o) * chunk[k],
                  chunk[k]);
      dst += chunk[k];
    }
  }
}

void slice(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
           TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const size_t elem = element_size(x);
  if (out.numel() == 0) return;
  const int rank = x.rank;
  int64_t start[kMaxRank], step[kMaxRank], in_strides[kMaxRank];
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    in_strides[i] = s;
    s *= x.dims[i];
    start[i] = 0;
    step[i] = 1;
  }
  // ONNX Slice: negative starts count from the end; clamp to [0, dim] (step > 0) or
  // [0, dim - 1] (step < 0). The output dims (from the shape function) give the counts.
  for (int j = 0; j < attrs.count; ++j) {
    const int a = attrs.axes[j] < 0 ? attrs.axes[j] + rank : attrs.axes[j];
    const int64_t dim = x.dims[a];
    const int64_t st = attrs.steps[j] == 0 ? 1 : attrs.steps[j];
    int64_t b = attrs.starts[j];
    if (b < 0) b += dim;
    if (st > 0) {
      b = b < 0 ? 0 : (b > dim ? dim : b);
    } else {
      b = b < 0 ? 0 : (b > dim - 1 ? dim - 1 : b);
    }
    start[a] = b;
    step[a] = st;
  }
  Counter c{};
  c.rank = rank - 1;
  int64_t base = 0;
  for (int i = 0; i < rank; ++i) base += start[i] * in_strides[i];
  for (int i = 0; i < rank - 1; ++i) {
    c.dims[i] = out.dims[i];
    c.strides[i] = step[i] * in_strides[i];
  }
  const int64_t run = rank > 0 ? out.dims[rank - 1] : 1;
  const int64_t run_stride = rank > 0 ? step[rank - 1] : 1;
  const int64_t runs = static_cast<int64_t>(out.numel()) / run;
  const size_t run_bytes = static_cast<size_t>(run) * elem;
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  for (int64_t i = 0; i < runs; ++i) {
    const uint8_t* from = src + (base + c.offset) * static_cast<int64_t>(elem);
    if (run_stride == 1) {
      std::memcpy(dst, from, run_bytes);
    } else {
      copy_strided_bytes(elem, from, run_stride, dst, run);
    }
    dst += run_bytes;
    c.next();
  }
}

namespace {

// The input index that output index i along an axis reads (the reference's rule: j = i - begin,
// mirrored or clamped outside [0, dim) by the mode); -1 for the constant value.
int64_t pad_source(int64_t i, int64_t begin, int64_t dim, PadMode mode) {
  uint64_t j = 0;
  const uint64_t udim = static_cast<uint64_t>(dim);
  if (begin > 0 && i < begin) {
    if (mode == PadMode::Constant) return -1;
    j = mode == PadMode::Reflect ? static_cast<uint64_t>(begin - i) : 0;
  } else {
    j = static_cast<uint64_t>(i) - static_cast<uint64_t>(begin);
    if (j >= udim) {
      if (mode == PadMode::Constant) return -1;
      j = mode == PadMode::Reflect ? 2 * (udim - 1) - j : udim - 1;
    }
  }
  return static_cast<int64_t>(j);
}

struct PadPlan {
  const float* in;
  float* out;
  const OpAttrs* attrs;
  int rank;
  const int64_t* in_dims;
  const int64_t* out_dims;
  int64_t in_strides[kMaxRank];
};

// Output rows [begin, end) along the last axis.
void pad_rows(const void* plan, size_t begin, size_t end) {
  const PadPlan& p = *static_cast<const PadPlan*>(plan);
  const int last = p.rank - 1;
  const int64_t in_w = p.in_dims[last], out_w = p.out_dims[last];
  const int64_t pb = p.attrs->pads[last];
  const PadMode mode = p.attrs->pad_mode;
  const float value = p.attrs->pad_value;
  // Output columns [lo, hi) read the contiguous input columns [lo - pb, hi - pb).
  const int64_t lo = pb > 0 ? (pb < out_w ? pb : out_w) : 0;
  // i - pb < in_w  <=>  i < in_w + pb, which the shape function checked not to overflow.
  const int64_t limit = in_w + pb;
  const int64_t hi = limit < lo ? lo : (limit > out_w ? out_w : limit);
  for (size_t r = begin; r < end; ++r) {
    float* dst = p.out + r * static_cast<size_t>(out_w);
    // Source offset of the row from the outer indices (row-major decomposition of r).
    int64_t offset = 0;
    bool constant_row = false;
    size_t rem = r;
    for (int a = last - 1; a >= 0; --a) {
      const int64_t i = static_cast<int64_t>(rem % static_cast<size_t>(p.out_dims[a]));
      rem /= static_cast<size_t>(p.out_dims[a]);
      const int64_t j = pad_source(i, p.attrs->pads[a], p.in_dims[a], mode);
      if (j < 0) {
        constant_row = true;
        break;
      }
      offset += j * p.in_strides[a];
    }
    if (constant_row) {
      for (int64_t i = 0; i < out_w; ++i) dst[i] = value;
      continue;
    }
    const float* src = p.in + offset;
    for (int64_t i = 0; i < lo; ++i) {
      const int64_t j = pad_source(i, pb, in_w, mode);
      dst[i] = j < 0 ? value : src[j];
    }
    if (hi > lo) {
      std::memcpy(dst + lo, src + (lo - pb), static_cast<size_t>(hi - lo) * sizeof(float));
    }
    for (int64_t i = hi; i < out_w; ++i) {
      const int64_t j = pad_source(i, pb, in_w, mode);
      dst[i] = j < 0 ? value : src[j];
    }
  }
}

}  // namespace

void pad(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t,
         TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const uint64_t n = out.numel();
  if (n == 0) return;
  float* po = out.data_as<float>();
  if (x.rank == 0) {
    po[0] = x.data_as<const float>()[0];
    return;
  }
  PadPlan p{x.data_as<const float>(), po, &attrs, x.rank, x.dims, out.dims, {0}};
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    p.in_strides[i] = stride;
    stride *= x.dims[i];
  }
  const size_t rows = static_cast<size_t>(n / static_cast<uint64_t>(out.dims[x.rank - 1]));
  cpu_detail::run_units(ctx.pool, rows, double(n), 1 << 16, &p, pad_rows);
}

}  // namespace ember::kernels::cpu
