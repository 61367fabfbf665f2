// Paged attention test cases shared by tests/kernels/reference and tests/kernels/cpu: a step built
// from per-sequence (cached history, new tokens) specs, with a block pool whose unused memory is
// NaN, an independent dense oracle (causal attention over the unpaged history in double), and
// helpers to run either implementation on a fresh copy of the initial cache.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/reference/paged_attention.h"
#include "runtime/core/float_codecs.h"
#include "runtime/core/scalar_type.h"
#include "runtime/core/status.h"

namespace ember::kernels::paged_test {

struct SeqSpec {
  int64_t cached = 0;  // positions already in the cache before this step
  int64_t q_len = 0;   // tokens of this step
};

struct CaseSpec {
  int64_t q_heads = 4, kv_heads = 2, head_dim = 32, block_size = 16;
  ScalarType dtype = ScalarType::F32;
  float cache_scale = 1.0f;
  std::vector<SeqSpec> seqs;
  int64_t pad_seqs = 0;    // extra rows with q_len 0, context_len 0
  int64_t pad_tokens = 0;  // extra tokens with slot -1
  bool shuffle = true;     // random block ids (else 0, 1, 2, ...)
  int64_t spare_blocks = 3;
  uint32_t seed = 1;
};

inline size_t ElementBytes(ScalarType t) {
  return t == ScalarType::F32 ? 4 : (t == ScalarType::F8E4M3FN ? 1 : 2);
}

// x as the cache stores it, decoded (the rounding the write applies).
inline float RoundTrip(ScalarType t, float x, float cache_scale) {
  switch (t) {
    case ScalarType::F32: return x;
    case ScalarType::BF16: return bf16_to_f32(f32_to_bf16(x));
    case ScalarType::F16: return f16_to_f32(f32_to_f16(x));
    default: return e4m3fn_to_f32(f32_to_e4m3fn(x / cache_scale)) * cache_scale;
  }
}

inline void Encode(ScalarType t, float x, float cache_scale, uint8_t* cache, int64_t index) {
  switch (t) {
    case ScalarType::F32: std::memcpy(cache + index * 4, &x, 4); break;
    case ScalarType::BF16: { const uint16_t b = f32_to_bf16(x); std::memcpy(cache + index * 2, &b, 2); break; }
    case ScalarType::F16: { const uint16_t b = f32_to_f16(x); std::memcpy(cache + index * 2, &b, 2); break; }
    default: cache[index] = f32_to_e4m3fn(x / cache_scale); break;
  }
}

// Fills bytes with the dtype's NaN.
inline void FillNan(ScalarType t, std::vector<uint8_t>& bytes) {
  const size_t size = ElementBytes(t);
  const uint8_t f32nan[4] = {0x00, 0x00, 0xC0, 0x7F}, bf16nan[2] = {0xC0, 0x7F},
                f16nan[2] = {0x00, 0x7E}, f8nan[1] = {0x7F};
  const uint8_t* pattern = t == ScalarType::F32 ? f32nan
                           : t == ScalarType::BF16 ? bf16nan
                           : t == ScalarType::F16 ? f16nan : f8nan;
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern[i % size];
}

struct Step {
  CaseSpec spec;
  int64_t T = 0, S = 0, block_count = 0, max_blocks = 0;
  std::vector<float> q, k, v;
  std::vector<int32_t> slots, tables, lens, starts;
  std::vector<uint8_t> k_cache, v_cache;       // the pool before this step
  std::vector<std::vector<float>> hist_k, hist_v;  // per live sequence: [ctx, Hkv, D], decoded
};

inline Step MakeStep(const CaseSpec& spec) {
  Step st;
  st.spec = spec;
  std::mt19937 rng(spec.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t hkv = spec.kv_heads, D = spec.head_dim, bs = spec.block_size;
  const int64_t live = int64_t(spec.seqs.size());
  st.S = live + spec.pad_seqs;
  int64_t blocks_needed = 0, tokens = 0;
  for (const SeqSpec& s : spec.seqs) {
    const int64_t nb = (s.cached + s.q_len + bs - 1) / bs;
    blocks_needed += nb;
    st.max_blocks = std::max(st.max_blocks, nb);
    tokens += s.q_len;
  }
  st.max_blocks += 1;  // one column beyond any sequence's need: -1, never read
  st.T = tokens + spec.pad_tokens;
  st.block_count = blocks_needed + spec.spare_blocks;
  std::vector<int32_t> ids(size_t(st.block_count));
  std::iota(ids.begin(), ids.end(), 0);
  if (spec.shuffle) std::shuffle(ids.begin(), ids.end(), rng);
  const int64_t row = hkv * D;
  const size_t cache_bytes = size_t(st.block_count * bs * row) * ElementBytes(spec.dtype);
  st.k_cache.resize(cache_bytes);
  st.v_cache.resize(cache_bytes);
  FillNan(spec.dtype, st.k_cache);
  FillNan(spec.dtype, st.v_cache);
  st.tables.assign(size_t(st.S * st.max_blocks), -1);
  st.lens.assign(size_t(st.S), 0);
  st.starts.assign(size_t(st.S + 1), 0);
  st.q.resize(size_t(st.T * spec.q_heads * D));
  for (float& x : st.q) x = dist(rng);
  st.k.resize(size_t(st.T * row));
  st.v.resize(size_t(st.T * row));
  for (float& x : st.k) x = dist(rng);
  for (float& x : st.v) x = dist(rng);
  st.slots.assign(size_t(st.T), -1);
  size_t next_block = 0;
  int64_t t = 0;
  for (int64_t s = 0; s < live; ++s) {
    const SeqSpec& sq = spec.seqs[size_t(s)];
    const int64_t ctx = sq.cached + sq.q_len;
    const int64_t nb = (ctx + bs - 1) / bs;
    for (int64_t b = 0; b < nb; ++b) st.tables[size_t(s * st.max_blocks + b)] = ids[next_block++];
    st.lens[size_t(s)] = int32_t(ctx);
    st.starts[size_t(s)] = int32_t(t);
    std::vector<float> hk(size_t(ctx * row)), hv(size_t(ctx * row));
    for (int64_t j = 0; j < ctx; ++j) {
      const int64_t slot = int64_t(st.tables[size_t(s * st.max_blocks + j / bs)]) * bs + j % bs;
      for (int64_t e = 0; e < row; ++e) {
        float kx, vx;
        if (j < sq.cached) {  // written by an earlier step
          kx = dist(rng) * 2.0f;
          vx = dist(rng) * 2.0f;
          Encode(spec.dtype, kx, spec.cache_scale, st.k_cache.data(), slot * row + e);
          Encode(spec.dtype, vx, spec.cache_scale, st.v_cache.data(), slot * row + e);
        } else {  // this step's token
          const int64_t tok = t + (j - sq.cached);
          kx = st.k[size_t(tok * row + e)];
          vx = st.v[size_t(tok * row + e)];
          st.slots[size_t(tok)] = int32_t(slot);
        }
        hk[size_t(j * row + e)] = RoundTrip(spec.dtype, kx, spec.cache_scale);
        hv[size_t(j * row + e)] = RoundTrip(spec.dtype, vx, spec.cache_scale);
      }
    }
    st.hist_k.push_back(std::move(hk));
    st.hist_v.push_back(std::move(hv));
    t += sq.q_len;
  }
  for (int64_t s = live; s <= st.S; ++s) st.starts[size_t(s)] = int32_t(t);
  return st;
}

// Dense causal attention in double over each live sequence's unpaged history: the oracle. With a
// window, position p sees j > p - window only; with a softcap, scores are softcap · tanh(s / softcap).
inline std::vector<float> Oracle(const Step& st, float scale, int64_t window = 0, double softcap = 0.0) {
  const CaseSpec& sp = st.spec;
  const int64_t hq = sp.q_heads, hkv = sp.kv_heads, D = sp.head_dim, g = hq / hkv;
  std::vector<float> out(size_t(st.T * hq * D), 0.0f);
  for (size_t s = 0; s < sp.seqs.size(); ++s) {
    const int64_t ctx = st.lens[s], q_len = st.starts[s + 1] - st.starts[s];
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t t = st.starts[s] + i, p = ctx - q_len + i;
      for (int64_t h = 0; h < hq; ++h) {
        std::vector<double> sc(size_t(p + 1));
        double mx = -INFINITY;
        const int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
        for (int64_t j = first; j <= p; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(st.q[size_t((t * hq + h) * D + d)]) *
                   double(st.hist_k[s][size_t((j * hkv + h / g) * D + d)]);
          sc[size_t(j)] = double(scale) * dot;
          if (softcap > 0) sc[size_t(j)] = softcap * std::tanh(sc[size_t(j)] / softcap);
          mx = std::max(mx, sc[size_t(j)]);
        }
        double sum = 0;
        std::vector<double> acc(size_t(D), 0.0);
        for (int64_t j = first; j <= p; ++j) {
          const double w = std::exp(sc[size_t(j)] - mx);
          sum += w;
          for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += w * st.hist_v[s][size_t((j * hkv + h / g) * D + d)];
        }
        for (int64_t d = 0; d < D; ++d) out[size_t((t * hq + h) * D + d)] = float(acc[size_t(d)] / sum);
      }
    }
  }
  return out;
}

// Runs an implementation with the reference's argument list on copies of the initial caches.
using RunFn = std::function<Status(const Step&, uint8_t* kc, uint8_t* vc, float* out, float scale,
                                   ErrorContext* error)>;

// The reference with attention options (sliding window, soft-capping) as a RunFn.
inline RunFn ReferenceWith(AttentionOptions options) {
  return [options](const Step& s, uint8_t* kc, uint8_t* vc, float* out, float scale, ErrorContext* e) {
    return reference::paged_attention(s.q.data(), s.k.data(), s.v.data(), s.T, s.S, s.spec.q_heads, s.spec.kv_heads,
                                      s.spec.head_dim, s.spec.dtype, kc, vc, s.block_count, s.spec.block_size,
                                      s.spec.cache_scale, s.slots.data(), s.tables.data(), s.max_blocks,
                                      s.lens.data(), s.starts.data(), scale, out, e, options);
  };
}

struct Result {
  Status status;
  std::vector<float> out;
  std::vector<uint8_t> k_cache, v_cache;
};

inline Result RunStep(const Step& st, const RunFn& fn, float scale) {
  Result r;
  r.k_cache = st.k_cache;
  r.v_cache = st.v_cache;
  r.out.assign(size_t(st.T * st.spec.q_heads * st.spec.head_dim), 12345.0f);
  ErrorContext error;
  r.status = fn(st, r.k_cache.data(), r.v_cache.data(), r.out.data(), scale, &error);
  EXPECT_TRUE(r.status.is_ok()) << error.message;
  return r;
}

// Largest relative L2 error over output rows (token, head).
inline double MaxRowRelL2(const std::vector<float>& a, const std::vector<float>& e, int64_t dim) {
  double worst = 0;
  for (size_t r = 0; r + size_t(dim) <= e.size(); r += size_t(dim)) {
    double num = 0, den = 0;
    for (size_t d = 0; d < size_t(dim); ++d) {
      const double diff = double(a[r + d]) - double(e[r + d]);
      num += diff * diff;
      den += double(e[r + d]) * double(e[r + d]);
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (!(rel <= worst)) worst = rel;  // NaN sticks
  }
  return worst;
}

// The sub-step holding live sequence s alone (its tokens, table row and length), with the same
// initial caches, optionally followed by pad_tokens padding tokens.
inline Step Single(const Step& st, size_t s, int64_t pad_tokens = 0) {
  Step o;
  o.spec = st.spec;
  o.spec.seqs = {st.spec.seqs[s]};
  const int64_t hq = st.spec.q_heads, row = st.spec.kv_heads * st.spec.head_dim;
  const int64_t t0 = st.starts[s], q_len = st.starts[s + 1] - t0;
  o.T = q_len + pad_tokens;
  o.S = 1;
  o.block_count = st.block_count;
  o.max_blocks = st.max_blocks;
  o.q.assign(st.q.begin() + t0 * hq * st.spec.head_dim,
             st.q.begin() + (t0 + q_len) * hq * st.spec.head_dim);
  o.q.resize(size_t(o.T * hq * st.spec.head_dim), 0.5f);
  o.k.assign(st.k.begin() + t0 * row, st.k.begin() + (t0 + q_len) * row);
  o.v.assign(st.v.begin() + t0 * row, st.v.begin() + (t0 + q_len) * row);
  o.k.resize(size_t(o.T * row), 0.25f);
  o.v.resize(size_t(o.T * row), 0.25f);
  o.slots.assign(st.slots.begin() + t0, st.slots.begin() + t0 + q_len);
  o.slots.resize(size_t(o.T), -1);
  o.tables.assign(st.tables.begin() + int64_t(s) * st.max_blocks,
                  st.tables.begin() + int64_t(s + 1) * st.max_blocks);
  o.lens = {st.lens[s]};
  o.starts = {0, int32_t(q_len)};
  o.k_cache = st.k_cache;
  o.v_cache = st.v_cache;
  o.hist_k = {st.hist_k[s]};
  o.hist_v = {st.hist_v[s]};
  return o;
}

}  // namespace ember::kernels::paged_test
