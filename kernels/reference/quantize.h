// Reference block quantizers and dequantizers for a 2-D weight w [n, k], row-major (k contiguous;
// blocks run along k): FP8 E4M3 with f32 scales (per tensor, per channel, 128x128 blocks or any
// block shape), MXFP8 and NVFP4. They define the numerics every other implementation (the
// exporter, CPU and GPU kernels) is tested against; the formats and their element codecs are in
// runtime/core/float_codecs.h, the rules in docs/DESIGN.md §4. Checked bit for bit against numpy golden data
// (tests/kernels/reference/make_quant_golden.py).
//
// Scales are decode multipliers: x ≈ decode(code) * scale. Scale arrays are row-major,
// [ceil(n / block_n), ceil(k / block_k)] (MXFP8 and NVFP4: [n, k / 32] and [n, k / 16]).
// Arithmetic is f32 throughout, in the order written below; no heap, no exceptions. Each function
// reads its inputs and writes only its outputs (caller-owned, sized as stated, not overlapping the
// inputs), so calls on different buffers may run concurrently.
//
// Errors (Error::InvalidArgument, with the reason in *ctx when ctx is not null, and in the log):
// a negative n or k, n * k overflowing, a block size < 1, k not a multiple of 32 (MXFP8) or 16
// (NVFP4), a NaN or ±Inf in w (weights must be finite), a dequantizer given an invalid ue4m3 block
// scale (sign bit set or 0x7F) or an NVFP4 global scale that is not finite and > 0. Nothing is
// written when a check fails. n = 0 or k = 0 is valid and writes nothing.
#pragma once

#include <cstdint>

#include "runtime/core/quant.h"
#include "runtime/core/status.h"

namespace ember::kernels::reference {

// Elements along k per E8M0 (MXFP8) and per UE4M3 (NVFP4) scale: runtime/core/quant.h's.
constexpr int64_t kMxfp8Block = kMxBlock;
using ember::kNvfp4Block;
constexpr float kFp8E4m3Max = 448.0f;
constexpr float kE2m1Max = 6.0f;

// ---- FP8 E4M3, f32 scale per block ----------------------------------------------------------------
// Per tensor: block {n, k}. Per channel (row): {1, k}. DeepSeek-V3 / Qwen3-FP8: {128, 128} (edge
// blocks may be partial; the checkpoint's `weight_scale_inv` is this decode scale).
// For each block: amax = max |x|; scale = amax / 448, or 1 when that is 0 (amax = 0, or an amax
// below 448 * 2^-150 whose quotient underflows); code = e4m3fn(x / scale) (clamp to ±448, round to
// nearest even). codes: n * k bytes; scales: ceil(n / block_n) * ceil(k / block_k) floats.
Status quantize_fp8_e4m3(const float* w, int64_t n, int64_t k, int64_t block_n, int64_t block_k,
                         uint8_t* codes, float* scales, ErrorContext* ctx = nullptr);
// out[i, j] = f32(code) * scale of its block (one f32 multiply; codes 0x7F / 0xFF give NaN).
Status dequantize_fp8_e4m3(const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                           int64_t block_k, const float* scales, float* out,
                           ErrorContext* ctx = nullptr);

// ---- MXFP8: E4M3 data, E8M0 scale per 32 along k, RCEIL ---------------------------------------------
// Reproduces torchao's RCEIL path (torchao/prototype/mx_formats/mx_tensor.py, `_to_mx_rceil` and
// `_f32_to_e8m0_rceil` at pytorch/ao 050515e8a09c3fcad27b5fac7ad1c742f13c97f3) for finite input:
// descale = amax * f32(1/448) (a multiply by the f32 reciprocal, as torchao; over every positive
// f32 this gives the same code as amax / 448); e = e8m0_rceil(descale), the code of the smallest
// power of two >= descale, so an all-zero block gets e = 0 (2^-127) and codes ±0; the data is
// multiplied by 2^(127 - e) (torchao's reciprocal code 254 - e; 2^127 for e = 0) and encoded with
// e4m3fn, which saturates at ±448 (RCEIL keeps |x| * 2^(127 - e) <= 448 anyway). No other clamp:
// descale <= f32 max / 448 keeps e <= 247. torchao's NaN/Inf blocks (scale 0xFF) cannot happen here:
// non-finite input is rejected. codes: n * k bytes; scales: n * (k / 32) e8m0 codes.
Status quantize_mxfp8(const float* w, int64_t n, int64_t k, uint8_t* codes, uint8_t* scales,
                      ErrorContext* ctx = nullptr);
// out = f32(code) * 2^(e - 127) (exact unless it overflows; an e of 0xFF gives NaN).
Status dequantize_mxfp8(const uint8_t* codes, int64_t n, int64_t k, const uint8_t* scales,
                        float* out, ErrorContext* ctx = nullptr);

// ---- NVFP4: E2M1 data (two per byte), UE4M3 scale per 16 along k, f32 global scale --------------------
// Reproduces the two-level path of torchao v0.18.0's `nvfp4_quantize` (torchao/prototype/
// mx_formats/nvfp4_tensor.py), whose reciprocal arithmetic dates from commit 5c0c81487 (v0.17.0;
// v0.18.0's a302c10bb changed only the single-level path), with the per-tensor scale of
// `per_tensor_amax_to_scale`:
//   g = amax / 2688 (= 448 * 6), the f32 global decode scale; g = 1 when amax = 0, and g is raised
//       to 2^-121 when smaller (only for amax < ~1e-33; torchao does not guard this: its 1 / g
//       overflows there and the codes become NaN), so that (1 / g) / s8 below stays finite;
//   per block: s = (amax_block / 6) / g (two f32 divisions), clamped to [2^-6, 448] (2^-6 is
//       torch.finfo(float8_e4m3fn).tiny), s8 = e4m3(s) (the ue4m3 scale code);
//       recip = (1 / g) / f32(s8) (two f32 divisions); code = e2m1(clamp(x * recip, -6, 6)).
// An all-zero block gets s8 = 2^-6 (code 0x08) and codes ±0. packed: n * k / 2 bytes, element
// 2i in the low nibble; scales: n * (k / 16) ue4m3 codes; *global_scale = g.
Status quantize_nvfp4(const float* w, int64_t n, int64_t k, uint8_t* packed, uint8_t* scales,
                      float* global_scale, ErrorContext* ctx = nullptr);
// out = e2m1 * f32(g * f32(s8)): the scale product is rounded to f32 first, as torchao's
// `get_hp_scales` then `to_dtype` do.
Status dequantize_nvfp4(const uint8_t* packed, int64_t n, int64_t k, const uint8_t* scales,
                        float global_scale, float* out, ErrorContext* ctx = nullptr);

}  // namespace ember::kernels::reference
