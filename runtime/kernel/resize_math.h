// Resize's per-dim source indices and weights (ONNX Resize as onnxruntime 1.22's CPU kernel computes
// them, in f32), shared by kernels/reference and kernels/cpu so that every library picks the same
// input elements with the same weights. Header only, no heap, never fails (the shape function
// checked the attributes: scales finite and > 0, dims with in == 0 have out == 0).
//
// Files including this must be compiled with -ffp-contract=off: onnxruntime's scalar arithmetic
// is not fused, and a fused cubic coefficient or coordinate picks other bits (or another nearest
// index at a .5 tie).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/kernel/op.h"

namespace ember::resize {

// The whole op is a copy when every output dim equals its input dim (onnxruntime checks this first,
// whatever the scales: a scale of 1.1 on a dim of 5 gives 5 and copies).
inline bool is_identity(const int64_t* in_dims, const int64_t* out_dims, int rank) {
  for (int d = 0; d < rank; ++d) {
    if (in_dims[d] != out_dims[d]) return false;
  }
  return true;
}

// A dim with scale 1 and equal sizes maps index i to i, without the coordinate transformation
// (onnxruntime's nearest and cubic paths skip it; for linear it is the same index).
inline bool dim_is_identity(float scale, int64_t in, int64_t out) { return scale == 1.0f && in == out; }

// The source coordinate of output index `x` along a dim of `in` -> `out` elements.
inline float source_coord(ResizeCoord coord, float x, float scale, int64_t out, int64_t in) {
  const float len_out = static_cast<float>(out), len_in = static_cast<float>(in);
  switch (coord) {
    case ResizeCoord::Asymmetric:
      return x / scale;
    case ResizeCoord::PytorchHalfPixel:
      return len_out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoord::AlignCorners:
      return len_out == 1 ? 0.0f : x * (len_in - 1) / (len_out - 1);
    case ResizeCoord::HalfPixelSymmetric: {
      // onnxruntime mixes f32 and f64 here (its 0.5 literals are doubles).
      const float output_width = scale * len_in;
      const float adjustment = len_out / output_width;
      const float center = len_in / 2;
      const float offset = center * (1 - adjustment);
      return static_cast<float>(offset + (static_cast<double>(x) + 0.5) / static_cast<double>(scale) - 0.5);
    }
    case ResizeCoord::HalfPixel:
    default:
      return (x + 0.5f) / scale - 0.5f;
  }
}

inline int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : (i >= in ? in - 1 : i); }

// Nearest mode's index for coordinate c, clamped into [0, in).
inline int64_t nearest_index(ResizeNearest mode, float c, int64_t in) {
  // Coordinates are within about [-1, in] for valid scales; the clamp keeps the float -> int
  // conversion defined whatever they are (NaN included) without changing a clamped result.
  const float hi = static_cast<float>(in);
  if (!(c > -1.0f)) c = -1.0f;
  if (c > hi) c = hi;
  int64_t i = 0;
  switch (mode) {
    case ResizeNearest::RoundPreferCeil: i = static_cast<int64_t>(std::round(c)); break;
    case ResizeNearest::Floor: i = static_cast<int64_t>(std::floor(c)); break;
    case ResizeNearest::Ceil: i = static_cast<int64_t>(std::ceil(c)); break;
    case ResizeNearest::RoundPreferFloor:
    default:
      // Halfway cases round down (onnxruntime's test, truncation included).
      i = c == static_cast<float>(static_cast<int64_t>(c)) + 0.5f ? static_cast<int64_t>(std::floor(c))
                                                                  : static_cast<int64_t>(std::round(c));
      break;
  }
  return clamp_index(i, in);
}

// Up to four source indices (clamped into [0, in)) and their f32 weights.
struct Taps {
  int count = 1;
  int64_t index[4] = {0, 0, 0, 0};
  float weight[4] = {1.0f, 0.0f, 0.0f, 0.0f};
};

// Linear: the coordinate clamped into [0, in - 1], then its two neighbours; at the last element
// both taps are that element with weight 0.5 each (onnxruntime's rule).
inline Taps linear_taps(float c, int64_t in) {
  const float hi = static_cast<float>(in - 1);
  float v = c < hi ? c : hi;
  v = 0.0f < v ? v : 0.0f;  // also maps NaN to 0
  Taps t;
  t.count = 2;
  const int64_t i0 = static_cast<int64_t>(v) < in - 1 ? static_cast<int64_t>(v) : in - 1;
  const int64_t i1 = i0 + 1 < in - 1 ? i0 + 1 : in - 1;
  t.index[0] = i0;
  t.index[1] = i1;
  if (i0 == i1) {
    t.weight[0] = 0.5f;
    t.weight[1] = 0.5f;
  } else {
    t.weight[0] = std::fabs(v - static_cast<float>(i1));
    t.weight[1] = std::fabs(v - static_cast<float>(i0));
  }
  return t;
}

// Cubic (Keys, coefficient a): taps floor(c) - 1 .. floor(c) + 2, indices clamped to the edge;
// with exclude_outside the taps outside [0, in) get weight 0 and the rest are divided by their sum.
inline Taps cubic_taps(float c, int64_t in, float a, bool exclude_outside) {
  const float lim = static_cast<float>(in) + 2.0f;
  if (!(c > -lim)) c = -lim;  // keeps floor() -> int64 defined; taps beyond the edge clamp anyway
  if (c > lim) c = lim;
  const int64_t base = static_cast<int64_t>(std::floor(c));
  const float s = std::fabs(c - static_cast<float>(base));
  float coeff[4];
  coeff[0] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
  coeff[1] = ((a + 2) * s - (a + 3)) * s * s + 1;
  coeff[2] = ((a + 2) * (1 - s) - (a + 3)) * (1 - s) * (1 - s) + 1;
  coeff[3] = ((a * (2 - s) - 5 * a) * (2 - s) + 8 * a) * (2 - s) - 4 * a;
  Taps t;
  t.count = 4;
  float sum = 1.0f;
  if (exclude_outside) {
    sum = 0.0f;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = base - 1 + k;
      if (i < 0 || i >= in) coeff[k] = 0.0f;
      sum += coeff[k];
    }
  }
  for (int k = 0; k < 4; ++k) {
    t.index[k] = clamp_index(base - 1 + k, in);
    t.weight[k] = coeff[k] / sum;
  }
  return t;
}

// The taps of output index `x` along one dim for `attrs`' mode (scale = attrs.resize_scales[d]).
inline Taps dim_taps(const OpAttrs& attrs, float scale, int64_t x, int64_t in, int64_t out) {
  Taps t;
  if (dim_is_identity(scale, in, out)) {
    t.index[0] = x;
    return t;
  }
  const float c = source_coord(attrs.resize_coord, static_cast<float>(x), scale, out, in);
  switch (attrs.resize_mode) {
    case ResizeMode::Linear: return linear_taps(c, in);
    case ResizeMode::Cubic: return cubic_taps(c, in, attrs.cubic_a, attrs.exclude_outside);
    case ResizeMode::Nearest:
    default:
      t.index[0] = nearest_index(attrs.resize_nearest, c, in);
      return t;
  }
}

// Output elements [begin, end) (row-major) of resize on any rank and mode: each element is the sum,
// over the product of its dims' taps, of the weights' product times the input, in double, rounded
// once; nearest copies the element (NaN payloads and -0 kept). The reference kernel runs all of
// them; the cpu kernel runs the cases its vector paths do not cover.
inline void resize_elements(const OpAttrs& attrs, const float* in, const int64_t* in_dims, float* out,
                            const int64_t* out_dims, int rank, int64_t begin, int64_t end) {
  int64_t in_stride[kMaxRank];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_stride[d] = stride;
    stride *= in_dims[d];
  }
  int64_t index[kMaxRank] = {0};
  for (int64_t rest = begin, d = rank - 1; d >= 0; --d) {
    index[d] = rest % out_dims[d];
    rest /= out_dims[d];
  }
  Taps taps[kMaxRank];
  for (int64_t e = begin; e < end; ++e) {
    for (int d = 0; d < rank; ++d) taps[d] = dim_taps(attrs, attrs.resize_scales[d], index[d], in_dims[d], out_dims[d]);
    if (attrs.resize_mode == ResizeMode::Nearest) {
      int64_t offset = 0;
      for (int d = 0; d < rank; ++d) offset += taps[d].index[0] * in_stride[d];
      std::memcpy(&out[e], &in[offset], sizeof(float));
    } else {
      int k[kMaxRank] = {0};  // an odometer over the dims' taps
      double acc = 0.0;
      for (;;) {
        double w = 1.0;
        int64_t offset = 0;
        for (int d = 0; d < rank; ++d) {
          w *= static_cast<double>(taps[d].weight[k[d]]);
          offset += taps[d].index[k[d]] * in_stride[d];
        }
        acc += w * static_cast<double>(in[offset]);
        int d = rank - 1;
        for (; d >= 0; --d) {
          if (++k[d] < taps[d].count) break;
          k[d] = 0;
        }
        if (d < 0) break;
      }
      out[e] = static_cast<float>(acc);
    }
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < out_dims[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace ember::resize
