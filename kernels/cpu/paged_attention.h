// Highway paged attention (kernels/cpu/paged_attention.cc): the fast twin of
// kernels/reference/paged_attention.h, whose header defines the shapes, the semantics (write this
// step's K/V into the block-pool cache, then causal attention of every live query token over its
// sequence's cache, zeros for padding tokens) and the argument checks.
//
// Numerics: f32 throughout, caches decoded to f32 (bf16 / f16 exactly, FP8 E4M3 as
// e4m3fn_to_f32(code) · cache_scale in f32). For one query token t at position p and one query
// head, with q' = q · scale (f32):
//   positions 0..p are visited in tiles [16i, 16i + 16) (cut at p + 1; tiles follow positions, not
//   cache blocks, so the result does not depend on block_size or on where the blocks lie);
//   per tile: s_j = q' · K_j (lane-wise FMA chain over d, then a lane sum), m' = max(m, max_j s_j),
//   c = exp(m - m') (0 for the first tile), w_j = exp(s_j - m') (Highway's Exp),
//   l = l · c + Σ_j w_j (lane sum), acc = acc · c + Σ_j w_j · V_j (FMAs in increasing j);
//   out = acc / l.
// AttentionOptions (the reference's step 2): a window starts the walk at max(0, p - window + 1) (the
// tiles then start there); a softcap maps each s_j to softcap · tanh(s_j / softcap) (Highway's Tanh)
// before the max.
// This is the online ("flash") softmax: one pass over K and V, O(D) state per query head. Against
// the reference (exact max, sums in double) the error is that of f32 dot products and exp (tests:
// relative L2 <= 1e-5 per output). NaN inputs give unspecified outputs (the reference propagates
// them); unread cache slots never matter.
//
// Threads: this step's K/V are written by the calling thread first (token order, as the
// reference); the attention is then split over units (token, kv head), each computing the
// Hq / Hkv query heads of its kv head (groups of up to 8 share each decoded K/V row). A unit's
// operation sequence depends only on its token's q, its sequence's cache and its position, never on
// the thread count, T or the other sequences: results are bitwise identical for any thread count
// and for a sequence alone or inside any batch (batch invariance).
//
// Memory: no heap and no scratch; each thread uses about 48 KB of stack (tiles of decoded K/V rows
// and the accumulators). head_dim is limited to kPagedAttentionMaxHeadDim.
//
// Arguments: those of reference::paged_attention, plus `context.pool` (null = the calling thread);
// context.scratch is not used. Errors: the reference's (Error::InvalidArgument, nothing written),
// and Error::NotSupported when head_dim > kPagedAttentionMaxHeadDim.
#pragma once

#include <cstdint>

#include "runtime/core/scalar_type.h"
#include "runtime/core/status.h"
#include "runtime/kernel/kernel.h"
#include "runtime/kernel/paged_attention_args.h"

namespace ember::kernels::cpu {

constexpr int64_t kPagedAttentionMaxHeadDim = 256;

Status paged_attention(const KernelContext& context, const float* q, const float* k,
                       const float* v, int64_t token_count, int64_t seq_count, int64_t q_heads,
                       int64_t kv_heads, int64_t head_dim, ScalarType cache_dtype, void* k_cache,
                       void* v_cache, int64_t block_count, int64_t block_size, float cache_scale,
                       const int32_t* slot_mapping, const int32_t* block_tables,
                       int64_t max_blocks, const int32_t* context_lens,
                       const int32_t* query_start, float scale, float* out,
                       ErrorContext* error = nullptr, AttentionOptions options = {});

}  // namespace ember::kernels::cpu
