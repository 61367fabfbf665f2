// Helpers shared by the reference kernels (private to kernels/reference/). Shapes were validated by
// the op's shape function, so these only index; they never fail.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Odometer over dims[0..rank) that keeps up to two element offsets in step with the index.
struct Odometer {
  int rank = 0;
  const int64_t* dims = nullptr;
  int64_t index[kMaxRank] = {0};
  const int64_t* strides[2] = {nullptr, nullptr};
  int64_t offset[2] = {0, 0};

  // Advances to the next index in row-major order (no-op past the end).
  void next() {
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) {
        for (int k = 0; k < 2; ++k) {
          if (strides[k] != nullptr) offset[k] += strides[k][d];
        }
        return;
      }
      for (int k = 0; k < 2; ++k) {
        if (strides[k] != nullptr) offset[k] -= strides[k][d] * (dims[d] - 1);
      }
      index[d] = 0;
    }
  }
};

// Bytes per element of a type of 8 bits or more.
inline size_t element_size(ScalarType type) { return static_cast<size_t>(bits_of(type) / 8); }

}  // namespace ember::kernels::reference::internal
