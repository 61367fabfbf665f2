// The argument checks of paged attention (kernels/reference/paged_attention.h, "Errors"), shared by
// the reference and Highway kernels and by the paged_attention op's run-time input check
// (op_info.h), so the three can never disagree. No heap; reads every index it checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/scalar_type.h"
#include "runtime/core/status.h"

namespace ember {

// Variants of the paged attention rule (kernels/reference/paged_attention.h, step 2); the defaults
// are plain causal attention. From the op's AttentionAttrs (sliding_window, softcap).
struct AttentionOptions {
  int64_t window = 0;    // > 0: sliding window of this many positions (the query's own included)
  float softcap = 0.0f;  // > 0: score soft-capping
};

// Bytes of one cache element of `dtype`: 4 (F32), 2 (BF16, F16), 1 (F8E4M3FN); 0 for any other.
size_t paged_cache_element_bytes(ScalarType dtype);

// Ok, or Error::InvalidArgument naming the first problem (sizes, cache dtype and scale, null
// pointers, query_start, context_lens, block ids, slots) in ctx.
Status check_paged_attention_args(const float* q, const float* k, const float* v, int64_t T, int64_t S,
                                  int64_t hq, int64_t hkv, int64_t dim, ScalarType dtype,
                                  const void* k_cache, const void* v_cache, int64_t block_count,
                                  int64_t block_size, float cache_scale, const int32_t* slots,
                                  const int32_t* tables, int64_t max_blocks, const int32_t* lens,
                                  const int32_t* starts, const float* out, ErrorContext* ctx);

}  // namespace ember
