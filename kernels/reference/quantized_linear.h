// Reference linear layers with a quantized weight: y [m, n] = x [m, k] · Wᵀ + bias, x and y f32
// row-major, W [n, k] row-major (k contiguous) in the layouts kernels/reference/quantize.h produces,
// bias an optional f32 [n] (null = none). They define the semantics the fast kernels
// (kernels/cpu/quantized_linear.h) are tested against; plain functions, not registered kernels.
//
// Weight-only (linear_fp8_e4m3, linear_mxfp8, linear_nvfp4, linear_bf16): W is dequantized exactly
// as quantize.h's dequantizers do it (each element one f32 value: f32(code) · scale, the scale
// product rounded to f32 first where there are two factors), then
//   y[i, j] = f32(Σ_p x[i, p] · w[j, p] + bias[j]), the sum and the bias add in double.
// A NaN code (e4m3fn 0x7F / 0xFF) or scale makes its elements NaN, so every y it touches is NaN.
//
// W8A8 (linear_fp8_e4m3_w8a8): FP8 weights whose scale does not vary along k (per tensor: block
// {>= n, >= k}; per channel: block {1, >= k}), and FP8 activations quantized per row at run time:
//   amax_i  = max_p |x[i, p]|                    (f32; a NaN element makes row i of y NaN anyway)
//   s_x[i]  = amax_i / 448 in f32, or 1 when that quotient is 0
//   x8[i,p] = f32_to_e4m3fn(x[i, p] / s_x[i])  (f32 division, then the runtime/core codec)
//   S[i, j] = Σ_p e4m3fn_to_f32(x8[i, p]) · e4m3fn_to_f32(w8[j, p])   in double; every product is
//             a multiple of 2^-18 below 2^18, so the sum is exact for k < 2^17
//   y[i, j] = f32(S[i, j] · s_x[i] · s_w[j] + bias[j])   in double, s_w[j] = scales[j / block_n]
//
// Arithmetic: f32 codecs from runtime/core/float_codecs.h, sums in double; no heap, no exceptions.
// Each function reads its inputs and writes only y (caller-owned, m * n floats, not overlapping the
// inputs); calls on different outputs may run concurrently.
//
// Errors (Error::InvalidArgument, the reason in *ctx when ctx is not null, and in the log; nothing
// is written): m, n or k negative, or m * k, n * k or m * n too large; a null x, W, scales or y
// where the sizes need them; a block size < 1 (FP8); k not a multiple of 32 (MXFP8) or 16 (NVFP4);
// an NVFP4 global scale that is not finite and > 0, or an invalid ue4m3 block scale (sign bit set
// or 0x7F), as dequantize_nvfp4 checks; a W8A8 weight block other than per tensor / per channel.
// k = 0 is valid (y = bias, or 0); m = 0 or n = 0 writes nothing.
#pragma once

#include <cstdint>

#include "runtime/core/status.h"

namespace ember::kernels::reference {

// FP8 E4M3 codes [n, k] with f32 scales [ceil(n / block_n), ceil(k / block_k)] (any block:
// {n, k} per tensor, {1, k} per channel, {128, 128}, ...).
Status linear_fp8_e4m3(const float* x, int64_t m, const uint8_t* codes, int64_t n, int64_t k,
                       int64_t block_n, int64_t block_k, const float* scales, const float* bias,
                       float* y, ErrorContext* ctx = nullptr);

// MXFP8: E4M3 codes [n, k] with E8M0 scales [n, k / 32].
Status linear_mxfp8(const float* x, int64_t m, const uint8_t* codes, int64_t n, int64_t k,
                    const uint8_t* scales, const float* bias, float* y, ErrorContext* ctx = nullptr);

// NVFP4: packed E2M1 [n, k / 2] (element 2i in the low nibble) with UE4M3 scales [n, k / 16] and
// the f32 global scale; element = e2m1 · f32(global_scale · ue4m3).
Status linear_nvfp4(const float* x, int64_t m, const uint8_t* packed, int64_t n, int64_t k,
                    const uint8_t* scales, float global_scale, const float* bias, float* y,
                    ErrorContext* ctx = nullptr);

// bf16 weight [n, k] (raw bf16 bits), no scale: the unquantized baseline of the same kernels.
Status linear_bf16(const float* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                   const float* bias, float* y, ErrorContext* ctx = nullptr);

// W8A8 with dynamic per-row FP8 activations (see the header comment). The weight arguments are
// linear_fp8_e4m3's; block_k must be >= k and block_n 1 or >= n.
Status linear_fp8_e4m3_w8a8(const float* x, int64_t m, const uint8_t* codes, int64_t n, int64_t k,
                            int64_t block_n, int64_t block_k, const float* scales,
                            const float* bias, float* y, ErrorContext* ctx = nullptr);

}  // namespace ember::kernels::reference
