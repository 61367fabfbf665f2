// Reference paged attention (docs/DESIGN.md §6): one step of an LLM layer's attention over a block-pool KV
// cache, for any mix of prefill chunks and decode tokens. It defines the semantics that the fast
// kernel (kernels/cpu/paged_attention.h) is tested against; a plain function, not a registered
// kernel (an op wraps it).
//
// Shapes (all row-major; T tokens, S sequences, Hq query heads, Hkv kv heads, head dim D):
//   q                [T, Hq, D]   f32, this step's queries
//   k, v             [T, Hkv, D]  f32, this step's keys / values (already position-encoded)
//   k_cache, v_cache [block_count, block_size, Hkv, D] of cache_dtype: F32, BF16, F16 (raw bits,
//                    uint16_t) or F8E4M3FN (one byte per element, with the per-tensor f32
//                    cache_scale: value = e4m3fn_to_f32(code) · cache_scale)
//   slot_mapping     [T] int32    token t's K/V go to slot block · block_size + offset; -1 = none
//   block_tables     [S, max_blocks] int32, the pool blocks of each sequence in position order
//   context_lens     [S] int32    each sequence's KV length AFTER this step's writes
//   query_start      [S + 1] int32: sequence s owns query tokens [query_start[s], query_start[s+1])
//   out              [T, Hq, D]   f32
// Hq must be a multiple of Hkv (GQA): query head h reads kv head h / (Hq / Hkv).
//
// Semantics, in this order:
// 1. Write. For every token t with slot_mapping[t] = slot >= 0, in increasing t: the cache element
//    [slot / block_size, slot % block_size, h, d] = encode(k[t, h, d]) (v likewise), where encode is
//    the identity (F32), f32_to_bf16 / f32_to_f16 (round to nearest even), or
//    f32_to_e4m3fn(x / cache_scale) (f32 division, saturating to ±448; F8E4M3FN).
// 2. Attend. Sequence s has q_len = query_start[s+1] - query_start[s] and ctx = context_lens[s]; its
//    i-th query token t = query_start[s] + i sits at position p = ctx - q_len + i and attends to
//    the positions 0..p of its sequence (causal; chunked prefill and decode are the same rule).
//    Position j is read from the cache at block block_tables[s, j / block_size], offset
//    j % block_size, decoded to f32 (so this step's K/V are seen as the cache stores them). Then
//      score_j   = scale · Σ_d q[t, h, d] · K_j[d]
//      out[t, h] = Σ_j exp(score_j - max_j score) · V_j  /  Σ_j exp(score_j - max_j score)
//    The reference computes every sum, the scale product and exp in double (max subtraction first),
//    and rounds each output element to f32 once.
//    Options (issue 17): with window > 0 the query at position p attends positions
//    max(0, p - window + 1)..p only (Mistral / Gemma sliding-window layers: key j is visible when
//    p - j < window); with softcap > 0 each score becomes softcap · tanh(score / softcap) before the
//    softmax (Gemma 2), in double.
// 3. Tokens t >= query_start[S] (owned by no sequence: padding) get out[t] = 0.
// Cache slots at or beyond a sequence's context_len are never read (the pool is uninitialised), nor
// is any block a sequence does not list for a position < its context_len. Every live token's slot
// must be the slot of its own position (checked), so this step's positions are exactly the ones
// written this step; positions below ctx - q_len must have been written by earlier steps (not
// checkable: the caller's guarantee). Sequences with q_len = 0 (e.g. the padding rows beyond the
// live sequences, with context_len 0) produce nothing.
//
// Errors (Error::InvalidArgument, the reason in *ctx when not null and in the log). All checks run
// before the first write, so on error neither the cache nor out is modified:
// - sizes: any negative; q_heads, kv_heads, head_dim or block_size < 1 (T = 0 and S = 0 are valid,
//   as is block_count = 0 when nothing reads the cache); q_heads not a multiple of kv_heads;
//   products of sizes beyond 2^62;
// - cache_dtype not one of F32, BF16, F16, F8E4M3FN; for F8E4M3FN a cache_scale that is not finite
//   and > 0 (ignored for the other dtypes);
// - a null pointer where the sizes need data;
// - query_start[0] != 0, query_start decreasing at some s, or query_start[S] > T;
// - context_lens[s] < q_len of s, or > max_blocks · block_size;
// - a block id block_tables[s, b] outside [0, block_count) for b < ceil(context_lens[s] / block_size)
//   (columns beyond that are never read and may hold anything, e.g. -1);
// - a live token whose slot_mapping is not the slot of its position (this covers slots out of
//   range); a padding token (t >= query_start[S]) whose slot_mapping is not -1.
// No heap, no exceptions. Pointers are borrowed for the call. out must not overlap any input;
// q, k, v must not overlap the caches. Concurrent calls need distinct caches and outputs.
#pragma once

#include <cstdint>

#include "runtime/core/scalar_type.h"
#include "runtime/core/status.h"
#include "runtime/kernel/paged_attention_args.h"

namespace ember::kernels::reference {

Status paged_attention(const float* q, const float* k, const float* v, int64_t token_count,
                       int64_t seq_count, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       ScalarType cache_dtype, void* k_cache, void* v_cache, int64_t block_count,
                       int64_t block_size, float cache_scale, const int32_t* slot_mapping,
                       const int32_t* block_tables, int64_t max_blocks,
                       const int32_t* context_lens, const int32_t* query_start, float scale,
                       float* out, ErrorContext* ctx = nullptr, AttentionOptions options = {});

}  // namespace ember::kernels::reference
