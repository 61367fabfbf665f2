// Quantized tensors at run time (docs/DESIGN.md §4): the layout classes kernels are keyed by, and the view a
// quantized weight carries to its kernel. The file's QuantInfo (scale value, scale dtype, block per
// dim, optional global scale) is checked by the validator and turned into a QuantView at bind time.
//
// Supported today: 2-D weights [N, K] (row-major, K contiguous, blocks along K):
//   f8_e4m3fn + f32 scales, block {N, K}          per tensor
//   f8_e4m3fn + f32 scales, block {1, K}          per channel (row)
//   f8_e4m3fn + f32 scales, any other block       2-D blocks (128x128: Qwen3-FP8, DeepSeek-V3)
//   f8_e4m3fn + e8m0 scales, block {1, 32}        MXFP8
//   f4_e2m1   + ue4m3 scales, block {1, 16}, f32 global scale    NVFP4
// Scales are decode multipliers stored row-major [ceil(N / bn), ceil(K / bk)]; x ≈ decode(code) ·
// scale (· global). The numerics are kernels/reference/quantize.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "runtime/core/scalar_type.h"
#include "runtime/core/status.h"

namespace ember {

enum class QuantLayout : uint8_t {
  None = 0,
  PerTensor = 1,
  PerChannel = 2,
  Block2d = 3,    // e.g. 128x128
  Mx = 4,         // E8M0 per 32 along K
  Nvfp4 = 5,      // UE4M3 per 16 along K + f32 global
};

constexpr int64_t kMxBlock = 32;
constexpr int64_t kNvfp4Block = 16;

// "per_tensor", "per_channel", "block2d", "mx", "nvfp4", "none" (the capability manifest's names).
// Never null.
const char* to_string(QuantLayout layout);

// The layout class of a quantized 2-D weight [n, k] with blocks [bn, bk], or None when the
// combination is not one Ember computes with.
constexpr QuantLayout classify_quant(ScalarType data, ScalarType scale, int64_t n, int64_t k, int64_t bn,
                                     int64_t bk, bool has_global) {
  if (data == ScalarType::F8E4M3FN && scale == ScalarType::F32 && !has_global) {
    if (bn >= n && bk >= k) return QuantLayout::PerTensor;
    if (bn == 1 && bk >= k) return QuantLayout::PerChannel;
    return QuantLayout::Block2d;
  }
  if (data == ScalarType::F8E4M3FN && scale == ScalarType::E8M0 && !has_global && bn == 1 && bk == kMxBlock &&
      k % kMxBlock == 0) {
    return QuantLayout::Mx;
  }
  if (data == ScalarType::F4E2M1 && scale == ScalarType::UE4M3 && has_global && bn == 1 && bk == kNvfp4Block &&
      k % kNvfp4Block == 0) {
    return QuantLayout::Nvfp4;
  }
  return QuantLayout::None;
}

// What a kernel sees of a quantized weight: TensorView::quant points at one of these.
struct QuantView {
  QuantLayout layout = QuantLayout::None;
  ScalarType scale_dtype = ScalarType::Invalid;
  const void* scale = nullptr;          // [ceil(n / block[0]), ceil(k / block[1])] row-major
  int64_t block[2] = {0, 0};            // along n and k
  const float* global_scale = nullptr;  // NVFP4's f32 decode multiplier; null otherwise
  // f8_e4m3fn data: whether any code is NaN (0x7F / 0xFF). Bind scans the constant once and sets it;
  // false lets the CPU kernels skip their per-call NaN scan (true, the default, is always safe).
  bool nan_codes = true;
};

// Whether any of `count` e4m3fn codes is a NaN code (0x7F or 0xFF). Reads every byte once, 8 at a
// time; null with count 0 is fine.
bool e4m3_any_nan_code(const uint8_t* codes, size_t count);

// NVFP4 scale checks, one definition for every consumer (the reference dequantizer and linear, the
// cpu linear). A global scale is usable when it is finite and greater than 0 (not NaN, ±Inf, ±0 or
// negative); a ue4m3 block scale when ue4m3_is_valid (runtime/core/float_codecs.h).
inline bool nvfp4_global_scale_is_valid(float global_scale) {
  return global_scale > 0.0f && global_scale <= std::numeric_limits<float>::max();
}
// Error::InvalidArgument (the value in *ctx when not null, and in the log) unless the global scale
// is valid.
Status check_nvfp4_global_scale(float global_scale, ErrorContext* ctx);
// Error::InvalidArgument (the first invalid code and its [row, column] in *ctx when not null, and
// in the log) unless every code of scales [rows, cols] (row-major) is a valid ue4m3 block scale.
// scales may be null when rows * cols is 0.
Status check_ue4m3_scales(const uint8_t* scales, int64_t rows, int64_t cols, ErrorContext* ctx);

}  // namespace ember
