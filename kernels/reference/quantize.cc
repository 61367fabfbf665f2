#include "kernels/reference/quantize.h"

#include <cstddef>
#include <cstdint>

#include "runtime/core/float_codecs.h"
#include "runtime/core/quant.h"

namespace ember::kernels::reference {
namespace {

constexpr uint32_t kF32ExpMask = 0x7F800000u;
// The smallest NVFP4 global scale, so that (1 / g) / s8 <= 2^121 / 2^-6 = 2^127 stays finite.
constexpr float kNvfp4MinGlobalScale = 0x1p-121f;
constexpr float kE4m3MinNormal = 0x1p-6f;  // torch.finfo(float8_e4m3fn).tiny

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

float abs_f32(float f) { return f32_from_bits(f32_bits(f) & 0x7FFFFFFFu); }

Status check_shape(int64_t n, int64_t k, ErrorContext* ctx) {
  if (n < 0 || k < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "weight shape [%lld, %lld] is negative",
                      static_cast<long long>(n), static_cast<long long>(k));
  }
  // Element counts must fit in size_t and int64 (k is the larger factor of most weights).
  if (n > 0 && k > INT64_MAX / 2 / n) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "weight shape [%lld, %lld] is too large",
                      static_cast<long long>(n), static_cast<long long>(k));
  }
  return Status::ok();
}

Status check_multiple(int64_t k, int64_t block, const char* scheme, ErrorContext* ctx) {
  if (k % block != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "%s needs k to be a multiple of %lld (blocks run along k), got k = %lld", scheme,
                      static_cast<long long>(block), static_cast<long long>(k));
  }
  return Status::ok();
}

Status check_finite(const float* w, int64_t n, int64_t k, ErrorContext* ctx) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      if ((f32_bits(w[i * k + j]) & kF32ExpMask) == kF32ExpMask) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "weight element [%lld, %lld] is NaN or infinite; quantizers take finite "
                          "weights", static_cast<long long>(i), static_cast<long long>(j));
      }
    }
  }
  return Status::ok();
}

// max |w| over rows [r0, r1) and columns [c0, c1) of a row-major [*, k] matrix (finite input).
float block_amax(const float* w, int64_t k, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  float amax = 0.0f;
  for (int64_t i = r0; i < r1; ++i) {
    for (int64_t j = c0; j < c1; ++j) {
      const float a = abs_f32(w[i * k + j]);
      if (a > amax) amax = a;
    }
  }
  return amax;
}

Status check_fp8_blocks(int64_t block_n, int64_t block_k, ErrorContext* ctx) {
  if (block_n < 1 || block_k < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "FP8 block [%lld, %lld] must be at least [1, 1]",
                      static_cast<long long>(block_n), static_cast<long long>(block_k));
  }
  return Status::ok();
}

// The NVFP4 global decode scale of a tensor whose max |x| is `amax` (see quantize.h).
float nvfp4_global_scale(float amax) {
  if (amax == 0.0f) return 1.0f;
  const float g = amax / (kFp8E4m3Max * kE2m1Max);
  return g < kNvfp4MinGlobalScale ? kNvfp4MinGlobalScale : g;
}

}  // namespace

Status quantize_fp8_e4m3(const float* w, int64_t n, int64_t k, int64_t block_n, int64_t block_k,
                         uint8_t* codes, float* scales, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_shape(n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_fp8_blocks(block_n, block_k, ctx));
  EMBER_RETURN_IF_ERROR(check_finite(w, n, k, ctx));
  const int64_t block_cols = ceil_div(k, block_k);
  for (int64_t bi = 0; bi * block_n < n; ++bi) {
    const int64_t r0 = bi * block_n, r1 = r0 + block_n < n ? r0 + block_n : n;
    for (int64_t bj = 0; bj * block_k < k; ++bj) {
      const int64_t c0 = bj * block_k, c1 = c0 + block_k < k ? c0 + block_k : k;
      float scale = block_amax(w, k, r0, r1, c0, c1) / kFp8E4m3Max;
      if (scale == 0.0f) scale = 1.0f;
      scales[bi * block_cols + bj] = scale;
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = c0; j < c1; ++j) codes[i * k + j] = f32_to_e4m3fn(w[i * k + j] / scale);
      }
    }
  }
  return Status::ok();
}

Status dequantize_fp8_e4m3(const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                           int64_t block_k, const float* scales, float* out, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_shape(n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_fp8_blocks(block_n, block_k, ctx));
  const int64_t block_cols = ceil_div(k, block_k);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const float scale = scales[(i / block_n) * block_cols + j / block_k];
      out[i * k + j] = e4m3fn_to_f32(codes[i * k + j]) * scale;
    }
  }
  return Status::ok();
}

Status quantize_mxfp8(const float* w, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales,
                      ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_shape(n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_multiple(k, kMxfp8Block, "MXFP8", ctx));
  EMBER_RETURN_IF_ERROR(check_finite(w, n, k, ctx));
  const float inv_max = 1.0f / kFp8E4m3Max;  // rounded to f32 once, like torchao's 1.0 / max_pos
  const int64_t blocks = k / kMxfp8Block;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kMxfp8Block;
      const float descale = block_amax(w, k, i, i + 1, c0, c0 + kMxfp8Block) * inv_max;
      const uint8_t e = e8m0_rceil(descale);
      scales[i * blocks + b] = e;
      // 2^(127 - e): the e8m0 value of code 254 - e (e <= 247 here, so never the NaN code).
      const float rcp = e8m0_to_f32(static_cast<uint8_t>(254 - e));
      for (int64_t j = c0; j < c0 + kMxfp8Block; ++j) {
        codes[i * k + j] = f32_to_e4m3fn(w[i * k + j] * rcp);
      }
    }
  }
  return Status::ok();
}

Status dequantize_mxfp8(const uint8_t* codes, int64_t n, int64_t k, const uint8_t* scales,
                        float* out, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_shape(n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_multiple(k, kMxfp8Block, "MXFP8", ctx));
  const int64_t blocks = k / kMxfp8Block;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const float scale = e8m0_to_f32(scales[i * blocks + j / kMxfp8Block]);
      out[i * k + j] = e4m3fn_to_f32(codes[i * k + j]) * scale;
    }
  }
  return Status::ok();
}

Status quantize_nvfp4(const float* w, int64_t n, int64_t k, uint8_t* packed, uint8_t* scales,
                      float* global_scale, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_shape(n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_multiple(k, kNvfp4Block, "NVFP4", ctx));
  EMBER_RETURN_IF_ERROR(check_finite(w, n, k, ctx));
  const float g = nvfp4_global_scale(block_amax(w, k, 0, n, 0, k));
  const float inv_g = 1.0f / g;
  const int64_t blocks = k / kNvfp4Block;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kNvfp4Block;
      const float block_scale = block_amax(w, k, i, i + 1, c0, c0 + kNvfp4Block) / kE2m1Max;
      float s = block_scale / g;
      if (s < kE4m3MinNormal) s = kE4m3MinNormal;
      if (s > kFp8E4m3Max) s = kFp8E4m3Max;
      const uint8_t s8 = f32_to_ue4m3(s);
      scales[i * blocks + b] = s8;
      const float recip = inv_g / ue4m3_to_f32(s8);
      for (int64_t j = c0; j < c0 + kNvfp4Block; j += 2) {
        // f32_to_e2m1 clamps to ±6 before rounding, as torchao's clamp then cast.
        const uint8_t lo = f32_to_e2m1(w[i * k + j] * recip);
        const uint8_t hi = f32_to_e2m1(w[i * k + j + 1] * recip);
        packed[(i * k + j) / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
  *global_scale = g;
  return Status::ok();
}

Status dequantize_nvfp4(const uint8_t* packed, int64_t n, int64_t k, const uint8_t* scales,
                        float global_scale, float* out, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_shape(n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_multiple(k, kNvfp4Block, "NVFP4", ctx));
  EMBER_RETURN_IF_ERROR(check_nvfp4_global_scale(global_scale, ctx));
  const int64_t blocks = k / kNvfp4Block;
  EMBER_RETURN_IF_ERROR(check_ue4m3_scales(scales, n, blocks, ctx));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = global_scale * ue4m3_to_f32(scales[i * blocks + b]);
      for (int64_t j = b * kNvfp4Block; j < (b + 1) * kNvfp4Block; ++j) {
        const uint8_t byte = packed[(i * k + j) / 2];
        out[i * k + j] = e2m1_to_f32(static_cast<uint8_t>((j & 1) != 0 ? byte >> 4 : byte)) * scale;
      }
    }
  }
  return Status::ok();
}

}  // namespace ember::kernels::reference
