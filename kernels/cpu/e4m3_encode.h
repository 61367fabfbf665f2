// Vectorized FP8 E4M3 encoding (kernels/cpu/e4m3_encode.cc): bit exact with runtime/core's
// f32_to_e4m3fn for every f32 input (tested over all 2^32 bit patterns on every compiled target),
// and the per-row dynamic activation quantization of W8A8 (kernels/reference/quantized_linear.h).
//
// Assumes the default floating-point environment (round to nearest even; no DAZ / FTZ): codes below
// 2^-6 are rounded with an f32 add, and decoded values are built from f32 subnormals. Pure functions,
// no heap, thread-safe; outputs must not overlap inputs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::kernels::cpu {

// out[i] = f32_to_e4m3fn(in[i]) for i < count.
void encode_e4m3fn(const float* in, uint8_t* out, size_t count);

// Rows [row_begin, row_end) of x [*, k], each quantized to FP8 with its own scale:
// scales[i] = amax_i / 448 (f32; 1 when that is 0) and values[i, p] = e4m3fn_to_f32(f32_to_e4m3fn(
// x[i, p] / scales[i])), the dequantized-but-unscaled activations W8A8 multiplies. amax_i is the
// largest |x[i, p]| compared as bits, so a NaN in the row makes its scale and every value NaN.
// values is [*, k] like x.
void quantize_rows_e4m3fn(const float* x, int64_t k, size_t row_begin, size_t row_end,
                          float* values, float* scales);

}  // namespace ember::kernels::cpu
