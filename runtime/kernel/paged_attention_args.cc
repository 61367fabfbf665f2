#include "runtime/kernel/paged_attention_args.h"

#include <cmath>

namespace ember {
namespace {

long long ll(int64_t v) { return static_cast<long long>(v); }

constexpr int64_t kSizeLimit = int64_t(1) << 62;
// a * b <= kSizeLimit for non-negative a, b.
bool fits(int64_t a, int64_t b) { return a == 0 || b <= kSizeLimit / a; }

}  // namespace

size_t paged_cache_element_bytes(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::F32: return 4;
    case ScalarType::BF16:
    case ScalarType::F16: return 2;
    case ScalarType::F8E4M3FN: return 1;
    default: return 0;
  }
}

Status check_paged_attention_args(const float* q, const float* k, const float* v, int64_t T, int64_t S, int64_t hq,
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
  if (paged_cache_element_bytes(dtype) == 0) {
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

}  // namespace ember
