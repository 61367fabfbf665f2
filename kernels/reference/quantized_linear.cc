#include "kernels/reference/quantized_linear.h"

#include <cstdint>

#include "kernels/reference/quantize.h"
#include "runtime/core/float_codecs.h"
#include "runtime/core/quant.h"

namespace ember::kernels::reference {
namespace {

long long ll(int64_t v) { return static_cast<long long>(v); }

bool product_fits(int64_t a, int64_t b) { return a == 0 || b <= INT64_MAX / 2 / a; }

Status check_dims(int64_t m, int64_t n, int64_t k, ErrorContext* ctx) {
  if (m < 0 || n < 0 || k < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "linear m = %lld, n = %lld, k = %lld: negative",
                      ll(m), ll(n), ll(k));
  }
  if (!product_fits(m, k) || !product_fits(n, k) || !product_fits(m, n)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "linear m = %lld, n = %lld, k = %lld: too large",
                      ll(m), ll(n), ll(k));
  }
  return Status::ok();
}

// x, the weight data, its scales and y must be present wherever they hold at least one element.
Status check_pointers(int64_t m, int64_t n, int64_t k, const void* x, const void* w,
                      const void* scales, bool has_scales, const float* y, ErrorContext* ctx) {
  const char* missing = nullptr;
  if (m * k > 0 && x == nullptr) missing = "x";
  else if (n * k > 0 && w == nullptr) missing = "the weight";
  else if (has_scales && n * k > 0 && scales == nullptr) missing = "the weight scales";
  else if (m * n > 0 && y == nullptr) missing = "y";
  if (missing != nullptr) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "linear: %s is null", missing);
  }
  return Status::ok();
}

Status check_fp8_blocks(int64_t block_n, int64_t block_k, ErrorContext* ctx) {
  if (block_n < 1 || block_k < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "FP8 block [%lld, %lld] must be at least [1, 1]",
                      ll(block_n), ll(block_k));
  }
  return Status::ok();
}

Status check_multiple(int64_t k, int64_t block, const char* scheme, ErrorContext* ctx) {
  if (k % block != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "%s needs k to be a multiple of %lld, got k = %lld",
                      scheme, ll(block), ll(k));
  }
  return Status::ok();
}

// y = x · wᵀ + bias with w[j, p] = weight(j, p), an f32; the sum and the bias add in double.
template <typename Weight>
void linear_double(const float* x, int64_t m, int64_t n, int64_t k, Weight weight,
                   const float* bias, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(x[i * k + p]) * static_cast<double>(weight(j, p));
      }
      if (bias != nullptr) acc += static_cast<double>(bias[j]);
      y[i * n + j] = static_cast<float>(acc);
    }
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

Status linear_fp8_e4m3(const float* x, int64_t m, const uint8_t* codes, int64_t n, int64_t k,
                       int64_t block_n, int64_t block_k, const float* scales, const float* bias,
                       float* y, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_dims(m, n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_fp8_blocks(block_n, block_k, ctx));
  EMBER_RETURN_IF_ERROR(check_pointers(m, n, k, x, codes, scales, true, y, ctx));
  const int64_t block_cols = ceil_div(k, block_k);
  // dequantize_fp8_e4m3's arithmetic: one f32 multiply.
  auto weight = [&](int64_t j, int64_t p) {
    return e4m3fn_to_f32(codes[j * k + p]) * scales[(j / block_n) * block_cols + p / block_k];
  };
  linear_double(x, m, n, k, weight, bias, y);
  return Status::ok();
}

Status linear_mxfp8(const float* x, int64_t m, const uint8_t* codes, int64_t n, int64_t k,
                    const uint8_t* scales, const float* bias, float* y, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_dims(m, n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_multiple(k, kMxfp8Block, "MXFP8", ctx));
  EMBER_RETURN_IF_ERROR(check_pointers(m, n, k, x, codes, scales, true, y, ctx));
  const int64_t blocks = k / kMxfp8Block;
  auto weight = [&](int64_t j, int64_t p) {
    return e4m3fn_to_f32(codes[j * k + p]) * e8m0_to_f32(scales[j * blocks + p / kMxfp8Block]);
  };
  linear_double(x, m, n, k, weight, bias, y);
  return Status::ok();
}

Status linear_nvfp4(const float* x, int64_t m, const uint8_t* packed, int64_t n, int64_t k,
                    const uint8_t* scales, float global_scale, const float* bias, float* y,
                    ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_dims(m, n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_multiple(k, kNvfp4Block, "NVFP4", ctx));
  EMBER_RETURN_IF_ERROR(check_pointers(m, n, k, x, packed, scales, true, y, ctx));
  EMBER_RETURN_IF_ERROR(check_nvfp4_global_scale(global_scale, ctx));
  const int64_t blocks = k / kNvfp4Block;
  EMBER_RETURN_IF_ERROR(check_ue4m3_scales(scales, n, blocks, ctx));
  // dequantize_nvfp4's arithmetic: the scale product is rounded to f32, then one multiply.
  auto weight = [&](int64_t j, int64_t p) {
    const float scale = global_scale * ue4m3_to_f32(scales[j * blocks + p / kNvfp4Block]);
    const uint8_t byte = packed[(j * k + p) / 2];
    return e2m1_to_f32(static_cast<uint8_t>((p & 1) != 0 ? byte >> 4 : byte)) * scale;
  };
  linear_double(x, m, n, k, weight, bias, y);
  return Status::ok();
}

Status linear_bf16(const float* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                   const float* bias, float* y, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_dims(m, n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_pointers(m, n, k, x, w, nullptr, false, y, ctx));
  auto weight = [&](int64_t j, int64_t p) { return bf16_to_f32(w[j * k + p]); };
  linear_double(x, m, n, k, weight, bias, y);
  return Status::ok();
}

Status linear_fp8_e4m3_w8a8(const float* x, int64_t m, const uint8_t* codes, int64_t n, int64_t k,
                            int64_t block_n, int64_t block_k, const float* scales,
                            const float* bias, float* y, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check_dims(m, n, k, ctx));
  EMBER_RETURN_IF_ERROR(check_fp8_blocks(block_n, block_k, ctx));
  if (block_k < k || (block_n != 1 && block_n < n)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "W8A8 needs a per-tensor or per-channel FP8 weight scale; block [%lld, %lld] "
                      "of a [%lld, %lld] weight is neither", ll(block_n), ll(block_k), ll(n), ll(k));
  }
  EMBER_RETURN_IF_ERROR(check_pointers(m, n, k, x, codes, scales, true, y, ctx));
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * k;
    float amax = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const float a = f32_from_bits(f32_bits(xi[p]) & 0x7FFFFFFFu);
      if (a > amax) amax = a;
    }
    float sx = amax / kFp8E4m3Max;
    if (sx == 0.0f) sx = 1.0f;
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;  // exact for k < 2^17 (see the header)
      for (int64_t p = 0; p < k; ++p) {
        const float x8 = e4m3fn_to_f32(f32_to_e4m3fn(xi[p] / sx));
        acc += static_cast<double>(x8) * static_cast<double>(e4m3fn_to_f32(codes[j * k + p]));
      }
      // A weight with k = 0 has no scales: the sum is 0 and y = bias.
      const double sw = k > 0 ? static_cast<double>(scales[j / block_n]) : 1.0;
      double out = acc * static_cast<double>(sx) * sw;
      if (bias != nullptr) out += static_cast<double>(bias[j]);
      y[i * n + j] = static_cast<float>(out);
    }
  }
  return Status::ok();
}

}  // namespace ember::kernels::reference
