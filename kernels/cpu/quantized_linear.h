// Highway linear layers with a quantized weight (kernels/cpu/quantized_linear.cc): the fast twins
// of kernels/reference/quantized_linear.h, whose header defines the layouts and the semantics.
// y [m, n] = x [m, k] · Wᵀ + bias, x / y f32 row-major, bias an optional f32 [n] (null = none).
//
// Weight-only: each output is an f32 dot product of x with the codes' exact values, one partial sum
// per scale block multiplied by the block scale once (quantized_linear.cc has the sequence); against
// the reference (dequantize, then sums in double) the error is that of an f32 dot product (tests:
// relative L2 <= 1e-5). x is prepared per call into the scratch (permuted to the decoder's element
// order, and for e4m3 formats scaled by a power of two so the raw-code products stay normal).
// - FP8 codes are decoded with a bit trick (f32 bits sign << 31 | magnitude << 20 read as
//   value · 2^-120), E2M1 through a 16-entry table (on AVX-512 vpermps for nibbles in bits 0..3
//   of a lane and a zero-masked vpermw of bf16 bits for bits 16..19; on AVX2 / SSE4 / SSSE3 /
//   NEON / EMU128 byte shuffles of whole groups (single rows of x; x86 row groups vpermps on the
//   magnitudes); a gather elsewhere), bf16 by shifts; the SCALAR target uses a 256-entry f32
//   table for e4m3.
// - m <= kQuantGemvMaxRows: GEMV, each weight byte read from memory once per call.
// - m > kQuantGemvMaxRows: the same micro-kernel over groups of 4 rows of x per unit of 16 weight
//   rows; the unit's weights are decoded once per group, from cache after the first.
// W8A8 (linear_fp8_e4m3_w8a8): x is quantized per row into the scratch (quantize_rows_e4m3fn,
// e4m3_encode.h), S = Σ f32(x8) · f32(w8) is computed as above, and y = (S · s_x) · s_w + bias (one
// FMA on FMA targets).
//
// Threads: work is split over n (units of 16 weight rows), never over k, and a row of y is computed
// by the same sequence whatever m is, so results are bitwise identical for any thread count and for
// a row of x alone or inside a batch (batch invariance, which the LLM path relies on).
//
// Floating-point environment: the default one (round to nearest even, no DAZ / FTZ). The decoder
// builds e4m3 subnormals as f32 subnormals before scaling, and the W8A8 encoder rounds e4m3
// subnormals with an f32 add.
//
// NaN codes: the e4m3 kernels scan each chunk of codes for 0x7F / 0xFF before decoding it (the bit
// trick decodes them as ±480, the reference as NaN). `nan_free` = true promises that no code is NaN
// (QuantView::nan_codes == false: bind scanned the constant once) and skips the scan; with a NaN
// code present the results are then unspecified. NVFP4 and bf16 have no NaN codes.
//
// Arguments: `context.pool` (null = the calling thread) and `context.scratch`, which must hold
// quantized_linear_scratch_bytes(m, k, threads, w8a8) bytes (any alignment; its contents are
// overwritten, never read).
// Pointers are borrowed for the call; y must not overlap the inputs or the scratch. Concurrent calls
// need distinct y and scratch. No heap, no exceptions.
//
// Errors (Error::InvalidArgument, the reason in *error when not null, and in the log; nothing is
// written): the reference's argument checks (negative or too large sizes, null pointers, blocks
// < 1, k not a multiple of 32 / 16, an NVFP4 global scale not finite and > 0, a W8A8 block that is
// not per tensor / per channel), and a scratch smaller than needed. The data are not scanned: an
// invalid ue4m3 block scale (0x7F or sign bit set) decodes to NaN as ue4m3_to_f32 does, where the
// reference refuses it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/status.h"
#include "runtime/kernel/kernel.h"

namespace ember::kernels::cpu {

constexpr int64_t kQuantGemvMaxRows = 4;  // m up to this takes one pass over the weights

// Scratch bytes for x [m, k]: the prepared x (m rows of k rounded up to 512 floats, and m doubles);
// W8A8 adds the quantized activations (m * k + m floats). Independent of the thread count (kept as
// a parameter for the kernel registry's ScratchFn). Saturates at SIZE_MAX.
size_t quantized_linear_scratch_bytes(int64_t m, int64_t k, size_t thread_count, bool w8a8);

Status linear_fp8_e4m3(const KernelContext& context, const float* x, int64_t m,
                       const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                       int64_t block_k, const float* scales, const float* bias, float* y,
                       ErrorContext* error = nullptr, bool nan_free = false);

Status linear_mxfp8(const KernelContext& context, const float* x, int64_t m, const uint8_t* codes,
                    int64_t n, int64_t k, const uint8_t* scales, const float* bias, float* y,
                    ErrorContext* error = nullptr, bool nan_free = false);

Status linear_nvfp4(const KernelContext& context, const float* x, int64_t m,
                    const uint8_t* packed, int64_t n, int64_t k, const uint8_t* scales,
                    float global_scale, const float* bias, float* y, ErrorContext* error = nullptr);

Status linear_bf16(const KernelContext& context, const float* x, int64_t m, const uint16_t* w,
                   int64_t n, int64_t k, const float* bias, float* y,
                   ErrorContext* error = nullptr);

Status linear_fp8_e4m3_w8a8(const KernelContext& context, const float* x, int64_t m,
                            const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                            int64_t block_k, const float* scales, const float* bias, float* y,
                            ErrorContext* error = nullptr, bool nan_free = false);

}  // namespace ember::kernels::cpu
