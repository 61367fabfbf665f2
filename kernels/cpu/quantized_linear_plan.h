// Internal to kernels/cpu: the plan the quantized linear kernels (quantized_linear.cc, compiled per
// Highway target) share with their argument checks and scratch layout (quantized_linear_api.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/float_codecs.h"

namespace ember::kernels::cpu_detail {

enum class QuantFormat : uint8_t { Fp8, Mxfp8, Nvfp4, Bf16 };

constexpr int64_t kUnitRows = 16;  // weight rows per work unit
// Elements per prepared-x group on any target: NVFP4 takes 8 lanes of 32 bits per group, and
// Highway's widest vectors are 2048 bits (SVE / RVV): 8 * 64.
constexpr int64_t kMaxGroup = 512;

// One call, as the per-target code sees it.
struct QuantPlan {
  QuantFormat format;
  bool w8a8;               // FP8 codes taken unscaled; y = (S * sx[i]) * s_w[j] + bias[j] afterwards
  bool nan_free;           // e4m3: the caller promises no NaN code (the walkers skip their scan)
  const float* x;          // [m, k]; W8A8: the e4m3 values f32(x8) in the scratch
  const float* sx;         // W8A8: [m]
  int64_t m, n, k;
  const uint8_t* w;        // row j starts at w + j * row_bytes
  int64_t row_bytes;
  const float* fp8_scales;
  const uint8_t* u8_scales;
  int64_t block_n, block_k, block_cols;  // block_k = k (>= 1) where the scale is one per row
  float global_scale;
  const float* bias;
  float* y;
  float* xp;               // prepared x: m rows of kp floats (scratch)
  int64_t kp;              // k rounded up to kMaxGroup
  double* y_scale;         // [m]: y = f32(sum * y_scale[i]), a power of two

  // The exact f32 scale of row j, block column b, as the reference dequantizers compute it.
  float scale(int64_t j, int64_t b) const {
    switch (format) {
      case QuantFormat::Fp8:
        return w8a8 ? 1.0f : fp8_scales[(j / block_n) * block_cols + b];
      case QuantFormat::Mxfp8: return e8m0_to_f32(u8_scales[j * block_cols + b]);
      case QuantFormat::Nvfp4: return global_scale * ue4m3_to_f32(u8_scales[j * block_cols + b]);
      case QuantFormat::Bf16: break;
    }
    return 1.0f;
  }
};

// The 256 e4m3fn values (for the SCALAR target, which has no vector integer ops to decode with).
const float* e4m3fn_table();

// Per-target entry points (dynamic dispatch inside): prepare rows [begin, end) of x into plan.xp
// and plan.y_scale; compute units [begin, end) of kUnitRows weight rows.
void quant_prepare(const QuantPlan& plan, size_t begin, size_t end);
void quant_units(const QuantPlan& plan, size_t begin, size_t end);

}  // namespace ember::kernels::cpu_detail
