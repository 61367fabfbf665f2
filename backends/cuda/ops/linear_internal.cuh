// Internals of ops/linear.cu that its tests reach (host-only declarations, includable from .cc):
// the GemmCache's capacity and contents, and the row-chunk size the GEMM path decodes weights in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {

// The plan table's default capacity (gemm_cache_create()).
constexpr int kGemmCacheCapacity = 256;

// A cache holding at most `capacity` plans (0 <= capacity <= kGemmCacheCapacity): the tests force
// the "table full" failure with it. gemm_cache_destroy() frees it.
GemmCache* gemm_cache_create_with_capacity(int capacity);

// Plans in the table, and how many of them run FP8 E4M3 inputs (W8A8 through cuBLASLt). A plan the
// heuristic refused counts too (it is kept so the refusal is not asked again).
int gemm_cache_plan_count(const GemmCache* cache);
int gemm_cache_fp8_plan_count(const GemmCache* cache, bool usable_only);

// Weight rows decoded per cuBLASLt call on the GEMM path (bounded scratch): a multiple of 128, at
// most n.
int64_t linear_chunk_rows(int64_t n, int64_t k);

}  // namespace ember::backends::cuda
