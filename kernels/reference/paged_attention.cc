#include "kernels/reference/paged_attention.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/core/float_codecs.h"

namespace ember::kernels::reference {
namespace {

long long ll(int64_t v) { return static_cast<long long>(v); }

constexpr int64_t kSizeLimit = int64_t(1) << 62;
// a * b <= kSizeLimit for non-negative a, b.
bool fits(int64_t a, int64_t b) { return a == 0 || b <= kSizeLimit / a; }

size_t cache_element_bytes(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::F32: return 4;
    case ScalarType::BF16:
    case ScalarType::F16: return 2;
    case ScalarType::F8E4M3FN: return 1;
    default: return 0;
  }
}

// Every check of the header's Errors list, before anything is written.
Status check(const float* q, const float* k, const float* v, int64_t T, int64_t S, int64_t hq,
             int64_t hkv, int64_t dim, ScalarType dtype, const void* k_cache, const void* v_cache,
             int64_t block_count, int64_t block_size, float cache_scale, const int32_t* slots,
             const int32_t* tables, int64_t max_blocks, const int32_t* lens,
             const int32_t* starts, const float* out, ErrorContext* ctx) {
  if (T < 0 || S < 0 || hq < 1 || hkv < 1 || dim < 1 || block_count < 0 || block_size < 1 ||
      max_blocks < 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: bad sizes T = %lld, S = %lld, Hq = %lld, Hkv = %lld, D = %lld, "
                      "blocks = %lld, block_size = %lld, max_blocks = %lld",
                      ll(T), ll(S), ll(hq), ll(hkv), ll(dim), ll(block_count), ll(block_size),
                      ll(max_blocks));
  }
  if (hq % hkv != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: Hq = %lld is not a multiple of Hkv = %lld", ll(hq), ll(hkv));
  }
  if (!fits(T, hq) || !fits(T * hq, dim) || !fits(block_count, block_size) ||
      !fits(block_count * block_size, hkv) || !fits(block_count * block_size * hkv, dim) ||
      !fits(S, max_blocks) || !fits(max_blocks, block_size)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: sizes too large");
  }
  if (cache_element_bytes(dtype) == 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: cache dtype %s is not F32, BF16, F16 or F8E4M3FN",
                      to_string(dtype));
  }
  if (dtype == ScalarType::F8E4M3FN && !(cache_scale > 0.0f && std::isfinite(cache_scale))) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: FP8 cache scale %g must be finite and > 0",
                      static_cast<double>(cache_scale));
  }
  const char* missing = nullptr;
  if (T > 0 && (q == nullptr || k == nullptr || v == nullptr || out == nullptr || slots == nullptr)) {
    missing = "q, k, v, out or slot_mapping";
  } else if (starts == nullptr) {
    missing = "query_start";
  } else if (S > 0 && (lens == nullptr || (max_blocks > 0 && tables == nullptr))) {
    missing = "context_lens or block_tables";
  } else if (block_count > 0 && (k_cache == nullptr || v_cache == nullptr)) {
    missing = "the KV cache";
  }
  if (missing != nullptr) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: %s is null", missing);
  }
  if (starts[0] != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: query_start[0] = %d, not 0",
                      int(starts[0]));
  }
  for (int64_t s = 0; s < S; ++s) {
    if (starts[s + 1] < starts[s]) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "paged_attention: query_start decreases at sequence %lld (%d -> %d)", ll(s),
                        int(starts[s]), int(starts[s + 1]));
    }
  }
  if (starts[S] > T) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: query_start[S = %lld] = %d exceeds the %lld tokens", ll(S),
                      int(starts[S]), ll(T));
  }
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q_len = starts[s + 1] - starts[s];
    const int64_t len = lens[s];
    if (len < q_len || len > max_blocks * block_size) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "paged_attention: sequence %lld has context_len %lld, outside [q_len %lld, "
                        "max_blocks * block_size %lld]", ll(s), ll(len), ll(q_len),
                        ll(max_blocks * block_size));
    }
    const int64_t used = (len + block_size - 1) / block_size;
    for (int64_t b = 0; b < used; ++b) {
      const int64_t id = tables[s * max_blocks + b];
      if (id < 0 || id >= block_count) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "paged_attention: sequence %lld block_tables[%lld] = %lld, outside [0, %lld)",
                          ll(s), ll(b), ll(id), ll(block_count));
      }
    }
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = starts[s] + i;
      const int64_t pos = len - q_len + i;
      const int64_t want = tables[s * max_blocks + pos / block_size] * block_size + pos % block_size;
      if (slots[t] != want) {
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "paged_attention: token %lld (sequence %lld, position %lld) has slot %d, "
                          "expected %lld", ll(t), ll(s), ll(pos), int(slots[t]), ll(want));
      }
    }
  }
  for (int64_t t = S > 0 ? starts[S] : 0; t < T; ++t) {
    if (slots[t] != -1) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "paged_attention: padding token %lld (no sequence) has slot %d, not -1",
                        ll(t), int(slots[t]));
    }
  }
  return Status::ok();
}

void encode(ScalarType dtype, float cache_scale, const float* in, void* cache, int64_t index,
            int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case ScalarType::F32: static_cast<float*>(cache)[index + i] = in[i]; break;
      case ScalarType::BF16: static_cast<uint16_t*>(cache)[index + i] = f32_to_bf16(in[i]); break;
      case ScalarType::F16: static_cast<uint16_t*>(cache)[index + i] = f32_to_f16(in[i]); break;
      default: static_cast<uint8_t*>(cache)[index + i] = f32_to_e4m3fn(in[i] / cache_scale); break;
    }
  }
}

double decode(ScalarType dtype, float cache_scale, const void* cache, int64_t index) {
  switch (dtype) {
    case ScalarType::F32: return static_cast<const float*>(cache)[index];
    case ScalarType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(cache)[index]);
    case ScalarType::F16: return f16_to_f32(static_cast<const uint16_t*>(cache)[index]);
    default:
      return double(e4m3fn_to_f32(static_cast<const uint8_t*>(cache)[index])) * double(cache_scale);
  }
}

}  // namespace

Status paged_attention(const float* q, const float* k, const float* v, int64_t token_count,
                       int64_t seq_count, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       ScalarType cache_dtype, void* k_cache, void* v_cache, int64_t block_count,
                       int64_t block_size, float cache_scale, const int32_t* slot_mapping,
                       const int32_t* block_tables, int64_t max_blocks,
                       const int32_t* context_lens, const int32_t* query_start, float scale,
                       float* out, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(check(q, k, v, token_count, seq_count, q_heads, kv_heads, head_dim,
                              cache_dtype, k_cache, v_cache, block_count, block_size, cache_scale,
                              slot_mapping, block_tables, max_blocks, context_lens, query_start, out,
                              ctx));
  const int64_t T = token_count, D = head_dim, row = kv_heads * head_dim;
  // 1. Write this step's K/V (in token order: a later token wins a shared slot).
  for (int64_t t = 0; t < T; ++t) {
    if (slot_mapping[t] < 0) continue;
    encode(cache_dtype, cache_scale, k + t * row, k_cache, slot_mapping[t] * row, row);
    encode(cache_dtype, cache_scale, v + t * row, v_cache, slot_mapping[t] * row, row);
  }
  // 2. Attend. The output is accumulated in tiles of kTile elements of d (a stack array of doubles,
  // no heap); each tile recomputes the scores, which keeps the reference obviously correct.
  constexpr int64_t kTile = 64;
  const int64_t group = q_heads / kv_heads;
  const int64_t owned = seq_count > 0 ? query_start[seq_count] : 0;
  for (int64_t s = 0; s < seq_count; ++s) {
    const int64_t q_len = query_start[s + 1] - query_start[s];
    const int64_t len = context_lens[s];
    const int32_t* table = block_tables + s * max_blocks;
    // Element index of position j, kv head h, dim 0 in the cache.
    auto at = [&](int64_t j, int64_t h) {
      return ((int64_t(table[j / block_size]) * block_size + j % block_size) * kv_heads + h) * D;
    };
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = query_start[s] + i;
      const int64_t pos = len - q_len + i;
      for (int64_t h = 0; h < q_heads; ++h) {
        const float* qh = q + (t * q_heads + h) * D;
        const int64_t kvh = h / group;
        auto score = [&](int64_t j) {
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            dot += double(qh[d]) * decode(cache_dtype, cache_scale, k_cache, at(j, kvh) + d);
          }
          return double(scale) * dot;
        };
        double max_score = -INFINITY;  // a NaN score sticks, so NaN inputs give NaN outputs
        for (int64_t j = 0; j <= pos; ++j) {
          const double sc = score(j);
          if (sc > max_score || std::isnan(sc)) max_score = sc;
        }
        for (int64_t d0 = 0; d0 < D; d0 += kTile) {
          const int64_t n = D - d0 < kTile ? D - d0 : kTile;
          double acc[kTile] = {};
          double sum = 0.0;
          for (int64_t j = 0; j <= pos; ++j) {
            const double w = std::exp(score(j) - max_score);
            sum += w;
            for (int64_t d = 0; d < n; ++d) {
              acc[d] += w * decode(cache_dtype, cache_scale, v_cache, at(j, kvh) + d0 + d);
            }
          }
          for (int64_t d = 0; d < n; ++d) out[(t * q_heads + h) * D + d0 + d] = float(acc[d] / sum);
        }
      }
    }
  }
  // 3. Padding tokens.
  for (int64_t t = owned; t < T; ++t) {
    std::memset(out + t * q_heads * D, 0, size_t(q_heads * D) * sizeof(float));
  }
  return Status::ok();
}

}  // namespace ember::kernels::reference
