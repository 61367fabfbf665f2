// Device FP8 E4M3 helpers shared by ops/linear.cu and ops/elementwise.cu: the exact codecs
// (runtime/core/float_codecs.h's, bit for bit) and the W8A8 per-token quantization of one row, so
// the fused producers (rms_norm, silu_mul) and the linear's own quantization are the same code.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace ember::backends::cuda {

__device__ __forceinline__ float f32_nan(uint32_t sign) { return __uint_as_float(0x7FC00000u | sign); }

__device__ __forceinline__ float e4m3_dec(uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7Fu) return f32_nan(sign);
  const uint32_t e = mag >> 3, man = mag & 7u;
  const float v = e != 0 ? __uint_as_float(((e + 120u) << 23) | (man << 20)) : static_cast<float>(man) * 0.001953125f;
  return __uint_as_float(__float_as_uint(v) | sign);
}

// f32 -> e4m3fn, bit-exact with runtime/core/float_codecs.h's f32_to_e4m3fn.
__device__ __forceinline__ uint32_t f32_to_e4m3(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7Fu;
  if (abs >= 0x43E00000u) return sign | 0x7Eu;
  const uint32_t exp_field = abs >> 23;
  const int e = exp_field == 0 ? 1 : static_cast<int>(exp_field);
  const uint32_t sig = exp_field == 0 ? abs : ((abs & 0x7FFFFFu) | 0x800000u);
  const int unbiased = e - 127;
  const bool normal = unbiased >= -6;
  const int unit_exp = (normal ? unbiased : -6) - 3;
  const int shift = unit_exp - (e - 150);
  if (shift > 24) return sign;
  uint32_t q = sig >> shift;
  const uint32_t rest = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u) != 0)) ++q;
  const uint32_t base = normal ? static_cast<uint32_t>(unbiased + 6) << 3 : 0u;
  return sign | (base + q);
}

// What quantize_row writes per element.
enum QuantOut : int { kQuantF32 = 0, kQuantCodes = 1, kQuantBf16 = 2 };

// W8A8 activations of one row, by the whole block (every thread must call it; blockDim a multiple
// of 32): amax = max |x| (NaN ignored), s = amax / 448 (1 when 0), code = e4m3fn(x / s) (the
// reference's numerics). Writes s to *sx and the codes as `kind` says: the e4m3 codes, or their
// (exact) f32 / bf16 values. The row may have been written by this block just before the call.
__device__ inline void quantize_row(const float* xi, int64_t k, float* sx, void* out, int kind) {
  __shared__ float warp_max[32];
  __syncthreads();  // the row's writers are done; warp_max is free
  float amax = 0.0f;
  for (int64_t p = threadIdx.x; p < k; p += blockDim.x) amax = fmaxf(amax, fabsf(xi[p]));
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x < 32) {
    amax = threadIdx.x < (blockDim.x >> 5) ? warp_max[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
    if (threadIdx.x == 0) warp_max[0] = amax;
  }
  __syncthreads();
  float s = __fdiv_rn(warp_max[0], 448.0f);
  if (s == 0.0f) s = 1.0f;
  if (threadIdx.x == 0) *sx = s;
  for (int64_t p = threadIdx.x; p < k; p += blockDim.x) {
    const uint32_t code = f32_to_e4m3(__fdiv_rn(xi[p], s));
    if (kind == kQuantCodes) {
      static_cast<uint8_t*>(out)[p] = static_cast<uint8_t>(code);
    } else if (kind == kQuantF32) {
      static_cast<float*>(out)[p] = e4m3_dec(code);
    } else {
      static_cast<__nv_bfloat16*>(out)[p] = __float2bfloat16_rn(e4m3_dec(code));
    }
  }
}

}  // namespace ember::backends::cuda
