// Highway linear layers with a quantized weight (kernels/cpu/quantized_linear.cc): the fast twins
// of kernels/reference/quantized_linear.h, whose header defines the layouts and the semantics.
// y [m, n] = x [m, k] · Wᵀ + bias, x / y f32 row-major, bias an optional f32 [n] (null = none).
//
// Weight-only: the result is bit for bit what cpu::linear gives on the weight dequantized by the
// reference dequantizer (each element f32(code) · scale, rounded once), on the same target: both
// run one lane-wise FMA chain over k per output (linear_tile-inl.h). Against the reference (sums in
// double) the error is that of an f32 dot product (tests: relative L2 <= 1e-5).
// - m <= kQuantGemvMaxRows: GEMV. Each weight byte comes from memory once per call (for e4m3 codes
//   a byte scan for NaN codes touches a chunk of 4 rows first; the decode re-reads it from L1); the
//   rows of x are consumed while a weight vector is in registers. FP8 codes are decoded with a bit trick (f32 bits sign << 31 | magnitude << 20 read as
//   value · 2^-120, the 2^120 folded into the block scale), E2M1 through a 16-entry table (vpermps on
//   AVX-512, pshufb elsewhere); the SCALAR target uses a 256-entry f32 table.
// - m > kQuantGemvMaxRows: GEMM. Each task dequantizes panels of kQuantPanelRows weight rows into
//   its slot of the scratch once and runs the f32 linear micro-kernel over all m rows.
// W8A8 (linear_fp8_e4m3_w8a8): x is quantized per row into the scratch (quantize_rows_e4m3fn,
// e4m3_encode.h), S = Σ f32(x8) · f32(w8) is an f32 FMA chain as above, and
// y = (S · s_x) · s_w + bias (one FMA on FMA targets).
//
// Threads: work is split over n (GEMV: tiles of 16 rows; GEMM: ranges of panels), never over k, so
// every output is computed by the same sequence for any thread count (bitwise identical), and the
// GEMV and GEMM paths give a row of y the same bits (batch invariance).
//
// Floating-point environment: the default one (round to nearest even, no DAZ / FTZ). The decoder
// builds e4m3 subnormals as f32 subnormals before scaling, and the W8A8 encoder rounds e4m3
// subnormals with an f32 add.
//
// Arguments: `context.pool` (null = the calling thread) and `context.scratch`, which must hold
// quantized_linear_scratch_bytes(m, k, threads, w8a8) bytes (threads = pool->thread_count(), 1
// without a pool; any alignment); fewer GEMM tasks run when the scratch has room for fewer slots.
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

constexpr int64_t kQuantGemvMaxRows = 4;  // m up to this takes the GEMV path
constexpr int64_t kQuantPanelRows = 16;   // weight rows per dequantized GEMM panel

// Scratch bytes for x [m, k]: 0 for weight-only GEMV; GEMM panels (one per thread, 16 * k floats
// each); W8A8 adds the quantized activations (m * k + m floats). Saturates at SIZE_MAX.
size_t quantized_linear_scratch_bytes(int64_t m, int64_t k, size_t thread_count, bool w8a8);

Status linear_fp8_e4m3(const KernelContext& context, const float* x, int64_t m,
                       const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                       int64_t block_k, const float* scales, const float* bias, float* y,
                       ErrorContext* error = nullptr);

Status linear_mxfp8(const KernelContext& context, const float* x, int64_t m, const uint8_t* codes,
                    int64_t n, int64_t k, const uint8_t* scales, const float* bias, float* y,
                    ErrorContext* error = nullptr);

Status linear_nvfp4(const KernelContext& context, const float* x, int64_t m,
                    const uint8_t* packed, int64_t n, int64_t k, const uint8_t* scales,
                    float global_scale, const float* bias, float* y, ErrorContext* error = nullptr);

Status linear_bf16(const KernelContext& context, const float* x, int64_t m, const uint16_t* w,
                   int64_t n, int64_t k, const float* bias, float* y,
                   ErrorContext* error = nullptr);

Status linear_fp8_e4m3_w8a8(const KernelContext& context, const float* x, int64_t m,
                            const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                            int64_t block_k, const float* scales, const float* bias, float* y,
                            ErrorContext* error = nullptr);

}  // namespace ember::kernels::cpu
