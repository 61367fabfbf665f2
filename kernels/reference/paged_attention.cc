#include "kernels/reference/paged_attention.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/core/float_codecs.h"
#include "kernels/reference/ops.h"
#include "runtime/kernel/paged_attention_args.h"

namespace ember::kernels::reference {
namespace {

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
                       float* out, ErrorContext* ctx, AttentionOptions options) {
  if (options.window < 0 || !(options.softcap >= 0.0f) || !std::isfinite(options.softcap)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: window %lld must be >= 0 and softcap %g finite and >= 0",
                      static_cast<long long>(options.window), static_cast<double>(options.softcap));
  }
  EMBER_RETURN_IF_ERROR(check_paged_attention_args(q, k, v, token_count, seq_count, q_heads, kv_heads,
                                                   head_dim, cache_dtype, k_cache, v_cache, block_count,
                                                   block_size, cache_scale, slot_mapping, block_tables,
                                                   max_blocks, context_lens, query_start, out, ctx));
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
          const double sc = double(scale) * dot;
          return options.softcap > 0.0f ? double(options.softcap) * std::tanh(sc / double(options.softcap)) : sc;
        };
        const int64_t first = options.window > 0 && pos - options.window + 1 > 0 ? pos - options.window + 1 : 0;
        double max_score = -INFINITY;  // a NaN score sticks, so NaN inputs give NaN outputs
        for (int64_t j = first; j <= pos; ++j) {
          const double sc = score(j);
          if (sc > max_score || std::isnan(sc)) max_score = sc;
        }
        for (int64_t d0 = 0; d0 < D; d0 += kTile) {
          const int64_t n = D - d0 < kTile ? D - d0 : kTile;
          double acc[kTile] = {};
          double sum = 0.0;
          for (int64_t j = first; j <= pos; ++j) {
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


void paged_attention_op(KernelContext&, const OpAttrs& attrs, const TensorView* in, size_t, TensorView* outputs,
                        size_t) {
  const TensorView& kc = in[3];
  float* out = outputs[0].data_as<float>();
  const Status status = paged_attention(
      in[0].data_as<const float>(), in[1].data_as<const float>(), in[2].data_as<const float>(), in[0].dims[0],
      in[6].dims[0], in[0].dims[1], in[1].dims[1], in[0].dims[2], kc.dtype, kc.data, in[4].data, kc.dims[0],
      kc.dims[1], attrs.kv_scale, in[5].data_as<const int32_t>(), in[6].data_as<const int32_t>(), in[6].dims[1],
      in[7].data_as<const int32_t>(), in[8].data_as<const int32_t>(), attrs.attn_scale, out, nullptr,
      AttentionOptions{attrs.attn_window, attrs.attn_softcap});
  if (!status.is_ok()) std::memset(out, 0, static_cast<size_t>(outputs[0].nbytes()));
}

}  // namespace ember::kernels::reference
