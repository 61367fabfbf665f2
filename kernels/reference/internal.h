// Helpers shared by the reference kernels (private to kernels/reference/). Shapes were validated by
// the op's shape function, so these only index; they never fail.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/core/float_codecs.h"
#include "runtime/core/tensor_view.h"

namespace ember::kernels::reference::internal {

inline int64_t numel(const TensorView& t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

// Product of dims[begin, end).
inline int64_t product(const int64_t* dims, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= dims[i];
  return n;
}

// Axis in [-rank, rank) -> [0, rank).
inline int normalize_axis(int64_t axis, int rank) {
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Element strides of a contiguous tensor with `dims[0..rank)` seen as an operand broadcast to
// rank `out_rank` (aligned at the end): 0 along broadcast (size-1 or missing) dims.
inline void broadcast_strides(const int64_t* dims, int rank, int out_rank, int64_t* strides) {
  int64_t stride = 1;
  for (int i = out_rank - 1; i >= 0; --i) {
    const int src = i - (out_rank - rank);
    if (src < 0 || dims[src] == 1) {
      strides[i] = 0;
    } else {
      strides[i] = stride;
    }
    if (src >= 0) stride *= dims[src];
  }
}

// Odometer over dims[0..rank) that keeps up to three element offsets in step with the index.
struct Odometer {
  static constexpr int kOffsets = 3;
  int rank = 0;
  const int64_t* dims = nullptr;
  int64_t index[kMaxRank] = {0};
  const int64_t* strides[kOffsets] = {nullptr, nullptr, nullptr};
  int64_t offset[kOffsets] = {0, 0, 0};

  // Advances to the next index in row-major order (no-op past the end).
  void next() {
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) {
        for (int k = 0; k < kOffsets; ++k) {
          if (strides[k] != nullptr) offset[k] += strides[k][d];
        }
        return;
      }
      for (int k = 0; k < kOffsets; ++k) {
        if (strides[k] != nullptr) offset[k] -= strides[k][d] * (dims[d] - 1);
      }
      index[d] = 0;
    }
  }
};

// Bytes per element of a type of 8 bits or more.
inline size_t element_size(ScalarType type) { return static_cast<size_t>(bits_of(type) / 8); }

// ---- Scalar conversions (Cast's rules; Pad converts its f32 value with them too) -----------------

// f16 / bf16 <-> f32: runtime/core/float_codecs.h (f16_to_f32, f32_to_f16, bf16_to_f32, f32_to_bf16).

// An integer as an f32 rounded to odd (truncate to 24 significant bits, then set the last bit if
// anything was dropped). Rounding that to nearest even at <= 22 bits (f16, bf16) equals rounding the
// integer directly: no double-rounding error.
inline float int_to_float_odd(int64_t v) {
  const bool negative = v < 0;
  uint64_t m = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  int shift = 0;
  while ((m >> shift) >= (1ull << 24)) ++shift;
  if (shift > 0) {
    const bool sticky = (m & ((1ull << shift) - 1)) != 0;
    m = (m >> shift) | (sticky ? 1u : 0u);
  }
  const float f = std::ldexp(static_cast<float>(m), shift);  // exact: m < 2^24
  return negative ? -f : f;
}

// f32 -> integer type T: truncation toward zero, NaN -> 0, out of range saturates.
template <typename T>
T float_to_int(float f) {
  if (f != f) return 0;
  const double d = std::trunc(static_cast<double>(f));
  if (d <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  // 2^63 as a double is > INT64_MAX; every smaller double converts exactly.
  if (d >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(d);
}

// One element on its way through a cast: floats (f32, f16, bf16) as f32 (exact), everything else as
// int64 (bool as 0 or 1).
struct Scalar {
  bool is_float = false;
  float f = 0.0f;
  int64_t i = 0;
};

// Reads element `index` of a buffer of a cast type (op_info.cc's is_cast_type).
inline Scalar load_scalar(ScalarType type, const void* data, int64_t index) {
  Scalar s;
  const size_t at = static_cast<size_t>(index);
  switch (type) {
    case ScalarType::F32: s.is_float = true; s.f = static_cast<const float*>(data)[at]; break;
    case ScalarType::F16:
      s.is_float = true;
      s.f = f16_to_f32(static_cast<const uint16_t*>(data)[at]);
      break;
    case ScalarType::BF16:
      s.is_float = true;
      s.f = bf16_to_f32(static_cast<const uint16_t*>(data)[at]);
      break;
    case ScalarType::I8: s.i = static_cast<const int8_t*>(data)[at]; break;
    case ScalarType::U8: s.i = static_cast<const uint8_t*>(data)[at]; break;
    case ScalarType::I16: s.i = static_cast<const int16_t*>(data)[at]; break;
    case ScalarType::I32: s.i = static_cast<const int32_t*>(data)[at]; break;
    case ScalarType::I64: s.i = static_cast<const int64_t*>(data)[at]; break;
    case ScalarType::Bool: s.i = static_cast<const uint8_t*>(data)[at] != 0 ? 1 : 0; break;
    default: break;
  }
  return s;
}

// An integer narrowed to T modulo 2^bits (two's complement), as numpy and ONNX Runtime do.
template <typename T>
T wrap_int(int64_t v) {
  using U = std::make_unsigned_t<T>;
  const U u = static_cast<U>(static_cast<uint64_t>(v));
  T out;
  std::memcpy(&out, &u, sizeof(T));
  return out;
}

// Writes s converted to `type` into element `index`: float -> int truncates toward zero, NaN -> 0,
// out of range saturates; int -> int wraps; -> bool is != 0 (NaN is true); -> f16/bf16 rounds to
// nearest even.
inline void store_scalar(ScalarType type, const Scalar& s, void* data, int64_t index) {
  const size_t at = static_cast<size_t>(index);
  switch (type) {
    case ScalarType::F32:
      static_cast<float*>(data)[at] = s.is_float ? s.f : static_cast<float>(s.i);
      break;
    case ScalarType::F16:
      static_cast<uint16_t*>(data)[at] = f32_to_f16(s.is_float ? s.f : int_to_float_odd(s.i));
      break;
    case ScalarType::BF16:
      static_cast<uint16_t*>(data)[at] = f32_to_bf16(s.is_float ? s.f : int_to_float_odd(s.i));
      break;
    case ScalarType::I8:
      static_cast<int8_t*>(data)[at] = s.is_float ? float_to_int<int8_t>(s.f) : wrap_int<int8_t>(s.i);
      break;
    case ScalarType::U8:
      static_cast<uint8_t*>(data)[at] =
          s.is_float ? float_to_int<uint8_t>(s.f) : wrap_int<uint8_t>(s.i);
      break;
    case ScalarType::I16:
      static_cast<int16_t*>(data)[at] =
          s.is_float ? float_to_int<int16_t>(s.f) : wrap_int<int16_t>(s.i);
      break;
    case ScalarType::I32:
      static_cast<int32_t*>(data)[at] =
          s.is_float ? float_to_int<int32_t>(s.f) : wrap_int<int32_t>(s.i);
      break;
    case ScalarType::I64:
      static_cast<int64_t*>(data)[at] = s.is_float ? float_to_int<int64_t>(s.f) : s.i;
      break;
    case ScalarType::Bool:
      static_cast<uint8_t*>(data)[at] = (s.is_float ? s.f != 0.0f : s.i != 0) ? 1 : 0;
      break;
    default:
      break;
  }
}

// out[i] = fn(a[ia], b[ib]) over the numpy broadcast of a and b; In and Out are the element types.
template <typename In, typename Out, typename Fn>
void binary_typed(const TensorView* inputs, TensorView* outputs, Fn fn) {
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  TensorView& out = outputs[0];
  const In* pa = a.data_as<const In>();
  const In* pb = b.data_as<const In>();
  Out* po = out.data_as<Out>();
  int64_t sa[kMaxRank], sb[kMaxRank];
  broadcast_strides(a.dims, a.rank, out.rank, sa);
  broadcast_strides(b.dims, b.rank, out.rank, sb);
  Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = sa;
  it.strides[1] = sb;
  const int64_t n = numel(out);
  for (int64_t i = 0; i < n; ++i, it.next()) po[i] = fn(pa[it.offset[0]], pb[it.offset[1]]);
}

}  // namespace ember::kernels::reference::internal
