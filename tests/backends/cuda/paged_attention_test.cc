// paged_attention on the device vs kernels/reference/paged_attention.h on the same inputs: the
// output (rel L2) and the caches after the write (bitwise), for every cache dtype, decode and
// prefill mixes, GQA ratios, block sizes, head dims, padding, long contexts (several KV splits) and a
// pool poisoned with NaN everywhere no sequence may read; plus the device error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/paged_attention.h"
#include "runtime/core/float_codecs.h"
#include "tests/backends/cuda/cuda_op_harness.h"

namespace ember {
namespace {

using backends::cuda::DeviceError;
using testing::CudaOpHarness;

struct Case {
  ScalarType dtype = ScalarType::F32;
  int hq = 8, hkv = 2, dim = 128, block_size = 16;
  float kv_scale = 0.01f;
  std::vector<std::pair<int, int>> seqs;  // (q_len, context_len) of the live sequences
  int pad_tokens = 0;                     // tokens owned by no sequence (slot -1)
  int pad_seqs = 0;                       // sequences with q_len 0, context 0
  int spare_blocks = 3;                   // pool blocks nobody uses (left NaN)
  int spare_cols = 1;                     // block-table columns beyond the longest sequence (-1)
  uint64_t seed = 1;
};

size_t element_bytes(ScalarType t) {
  return t == ScalarType::F32 ? 4 : (t == ScalarType::F8E4M3FN ? 1 : 2);
}

void store_code(ScalarType t, float scale, float x, uint8_t* at) {
  switch (t) {
    case ScalarType::F32: std::memcpy(at, &x, 4); break;
    case ScalarType::BF16: { const uint16_t c = f32_to_bf16(x); std::memcpy(at, &c, 2); break; }
    case ScalarType::F16: { const uint16_t c = f32_to_f16(x); std::memcpy(at, &c, 2); break; }
    default: *at = f32_to_e4m3fn(x / scale); break;
  }
}

void store_nan(ScalarType t, uint8_t* at) {
  switch (t) {
    case ScalarType::F32: { const uint32_t c = 0x7FC00000u; std::memcpy(at, &c, 4); break; }
    case ScalarType::BF16: { const uint16_t c = 0x7FC0u; std::memcpy(at, &c, 2); break; }
    case ScalarType::F16: { const uint16_t c = 0x7E00u; std::memcpy(at, &c, 2); break; }
    default: *at = 0x7Fu; break;
  }
}

TensorView view(void* data, ScalarType dtype, std::initializer_list<int64_t> dims) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) v.dims[i++] = d;
  return v;
}

// Every buffer of one call, host side.
struct Problem {
  Case c;
  int T = 0, S = 0, block_count = 0, max_blocks = 0;
  std::vector<float> q, k, v;
  std::vector<uint8_t> k_cache, v_cache;
  std::vector<int32_t> slots, tables, lens, starts;
  std::vector<int> token_seq;  // live sequence of each token, -1 = padding
};

Problem build(const Case& c) {
  Problem p;
  p.c = c;
  std::mt19937_64 rng(c.seed);
  const int live = static_cast<int>(c.seqs.size());
  p.S = live + c.pad_seqs;
  int needed_total = 0, needed_max = 0;
  for (auto [q_len, ctx] : c.seqs) {
    const int n = (ctx + c.block_size - 1) / c.block_size;
    needed_total += n;
    needed_max = std::max(needed_max, n);
    p.T += q_len;
  }
  p.T += c.pad_tokens;
  p.block_count = needed_total + c.spare_blocks;
  p.max_blocks = needed_max + c.spare_cols;
  std::vector<int32_t> ids(p.block_count);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.tables.assign(static_cast<size_t>(p.S) * p.max_blocks, -1);
  p.lens.assign(p.S, 0);
  p.starts.assign(p.S + 1, 0);
  p.slots.assign(p.T, -1);
  p.token_seq.assign(p.T, -1);
  const size_t row = static_cast<size_t>(c.hkv) * c.dim, eb = element_bytes(c.dtype);
  const size_t pool = static_cast<size_t>(p.block_count) * c.block_size * row;
  p.k_cache.assign(pool * eb, 0);
  p.v_cache.assign(pool * eb, 0);
  for (size_t i = 0; i < pool; ++i) {  // NaN wherever no sequence's history lies
    store_nan(c.dtype, &p.k_cache[i * eb]);
    store_nan(c.dtype, &p.v_cache[i * eb]);
  }
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int next_block = 0, t = 0;
  for (int s = 0; s < live; ++s) {
    const auto [q_len, ctx] = c.seqs[s];
    const int n = (ctx + c.block_size - 1) / c.block_size;
    for (int b = 0; b < n; ++b) p.tables[static_cast<size_t>(s) * p.max_blocks + b] = ids[next_block++];
    p.lens[s] = ctx;
    p.starts[s + 1] = p.starts[s] + q_len;
    auto slot_of = [&](int pos) {
      return p.tables[static_cast<size_t>(s) * p.max_blocks + pos / c.block_size] * c.block_size + pos % c.block_size;
    };
    for (int pos = 0; pos < ctx - q_len; ++pos) {  // earlier steps' K/V
      const size_t at = static_cast<size_t>(slot_of(pos)) * row;
      for (size_t i = 0; i < row; ++i) {
        store_code(c.dtype, c.kv_scale, dist(rng), &p.k_cache[(at + i) * eb]);
        store_code(c.dtype, c.kv_scale, dist(rng), &p.v_cache[(at + i) * eb]);
      }
    }
    for (int i = 0; i < q_len; ++i, ++t) {
      p.slots[t] = slot_of(ctx - q_len + i);
      p.token_seq[t] = s;
    }
  }
  for (int s = live; s < p.S; ++s) p.starts[s + 1] = p.starts[s];
  p.q = testing::random_floats(static_cast<size_t>(p.T) * c.hq * c.dim, c.seed * 3 + 1);
  p.k = testing::random_floats(static_cast<size_t>(p.T) * row, c.seed * 3 + 2);
  p.v = testing::random_floats(static_cast<size_t>(p.T) * row, c.seed * 3 + 3);
  return p;
}

float attn_scale(const Case& c) { return 1.0f / std::sqrt(static_cast<float>(c.dim)); }

// The reference on copies of p's caches: writes ref_out and the caches after its write.
void run_reference(const Problem& p, std::vector<float>& ref_out, std::vector<uint8_t>& kc, std::vector<uint8_t>& vc) {
  const Case& c = p.c;
  kc = p.k_cache;
  vc = p.v_cache;
  ref_out.assign(static_cast<size_t>(p.T) * c.hq * c.dim, -7.0f);
  ErrorContext err;
  const Status st = kernels::reference::paged_attention(
      p.q.data(), p.k.data(), p.v.data(), p.T, p.S, c.hq, c.hkv, c.dim, c.dtype, kc.data(), vc.data(), p.block_count,
      c.block_size, c.kv_scale, p.slots.data(), p.tables.data(), p.max_blocks, p.lens.data(), p.starts.data(),
      attn_scale(c), ref_out.data(), &err);
  ASSERT_TRUE(st.is_ok()) << "reference refused the case";
}

// Runs the CUDA kernel on copies of p's buffers; the caches come back written.
CudaOpHarness::Result run_cuda(CudaOpHarness& h, const Problem& p, std::vector<float>& out, std::vector<uint8_t>& kc,
                               std::vector<uint8_t>& vc) {
  const Case& c = p.c;
  kc = p.k_cache;
  vc = p.v_cache;
  Problem m = p;  // mutable copies of the inputs the harness uploads
  out.assign(static_cast<size_t>(p.T) * c.hq * c.dim, 0.0f);
  OpAttrs attrs;
  attrs.attn_scale = attn_scale(c);
  attrs.kv_scale = c.kv_scale;
  const int64_t T = p.T, S = p.S;
  std::vector<TensorView> in = {
      view(m.q.data(), ScalarType::F32, {T, c.hq, c.dim}),
      view(m.k.data(), ScalarType::F32, {T, c.hkv, c.dim}),
      view(m.v.data(), ScalarType::F32, {T, c.hkv, c.dim}),
      view(kc.data(), c.dtype, {p.block_count, c.block_size, c.hkv, c.dim}),
      view(vc.data(), c.dtype, {p.block_count, c.block_size, c.hkv, c.dim}),
      view(m.slots.data(), ScalarType::I32, {T}),
      view(m.tables.data(), ScalarType::I32, {S, p.max_blocks}),
      view(m.lens.data(), ScalarType::I32, {S}),
      view(m.starts.data(), ScalarType::I32, {S + 1}),
  };
  std::vector<TensorView> outs = {view(out.data(), ScalarType::F32, {T, c.hq, c.dim})};
  return h.run(backends::cuda::paged_attention, backends::cuda::paged_attention_scratch, attrs, in, outs);
}

std::string describe(const Case& c) {
  std::string s = std::string("dtype ") + std::to_string(static_cast<int>(c.dtype)) + " hq " + std::to_string(c.hq) +
                  " hkv " + std::to_string(c.hkv) + " D " + std::to_string(c.dim) + " bs " +
                  std::to_string(c.block_size) + " seqs";
  for (auto [ql, ctx] : c.seqs) s += " (" + std::to_string(ql) + "," + std::to_string(ctx) + ")";
  return s + " pad " + std::to_string(c.pad_tokens) + "/" + std::to_string(c.pad_seqs);
}

size_t first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return i;
  }
  return a.size();
}

constexpr double kTolerance = 2e-5;

void check_case(CudaOpHarness& h, const Case& c) {
  SCOPED_TRACE(describe(c));
  const Problem p = build(c);
  std::vector<float> ref, out;
  std::vector<uint8_t> ref_k, ref_v, k, v;
  run_reference(p, ref, ref_k, ref_v);
  if (::testing::Test::HasFatalFailure() || !h.ok()) return;  // no GPU: the harness has failed the test
  const CudaOpHarness::Result r = run_cuda(h, p, out, k, v);
  ASSERT_FALSE(r.failed) << r.message;
  EXPECT_EQ(r.error_word, 0u);
  EXPECT_FALSE(testing::any_nan(out.data(), out.size()));
  EXPECT_LE(testing::rel_l2(out.data(), ref.data(), out.size()), kTolerance);
  // Padding tokens: exactly zero.
  for (int t = 0; t < p.T; ++t) {
    if (p.token_seq[t] >= 0) continue;
    for (int i = 0; i < c.hq * c.dim; ++i) {
      ASSERT_EQ(out[static_cast<size_t>(t) * c.hq * c.dim + i], 0.0f) << "padding token " << t;
    }
  }
  EXPECT_EQ(first_diff(k, ref_k), k.size()) << "k_cache differs at byte " << first_diff(k, ref_k);
  EXPECT_EQ(first_diff(v, ref_v), v.size()) << "v_cache differs at byte " << first_diff(v, ref_v);
}

constexpr ScalarType kDtypes[] = {ScalarType::F32, ScalarType::BF16, ScalarType::F16, ScalarType::F8E4M3FN};

uint32_t word(DeviceError e) {
  return (static_cast<uint32_t>(OpCode::PagedAttention) << 8) | static_cast<uint32_t>(e);
}

TEST(CudaPagedAttention, DecodeOnly) {
  CudaOpHarness h;
  std::mt19937 rng(7);
  for (ScalarType dt : kDtypes) {
    for (int S : {1, 3, 32}) {
      Case c;
      c.dtype = dt;
      c.seed = 100 + S;
      for (int s = 0; s < S; ++s) c.seqs.push_back({1, 1 + static_cast<int>(rng() % 600)});
      check_case(h, c);
    }
  }
}

TEST(CudaPagedAttention, PrefillMixedWithDecode) {
  CudaOpHarness h;
  for (ScalarType dt : kDtypes) {
    Case c;
    c.dtype = dt;
    c.hq = 14;
    c.hkv = 2;
    c.dim = 80;
    c.block_size = 5;
    c.seqs = {{70, 70}, {1, 45}, {17, 100}, {1, 1}, {33, 90}, {5, 5}, {2, 61}};
    c.pad_tokens = 3;
    c.pad_seqs = 2;
    c.seed = 200 + static_cast<int>(dt);
    check_case(h, c);
  }
}

TEST(CudaPagedAttention, GqaHeadDimBlockSize) {
  CudaOpHarness h;
  int i = 0;
  for (int ratio : {1, 4, 7}) {
    for (int dim : {64, 128, 80}) {
      for (int bs : {1, 16, 5}) {
        Case c;
        c.dtype = kDtypes[i % 4];
        c.hkv = ratio == 7 ? 1 : 2;
        c.hq = c.hkv * ratio;
        c.dim = dim;
        c.block_size = bs;
        c.seqs = {{1, 37}, {9, 23}, {1, 1}, {4, 4}};
        c.pad_tokens = i % 3;
        c.pad_seqs = i % 2;
        c.seed = 300 + i++;
        check_case(h, c);
      }
    }
  }
}

TEST(CudaPagedAttention, LargeGroupAndOddDims) {
  CudaOpHarness h;
  // A GQA group above 8 (two head chunks per kv head), D 96 / 33 / 256.
  const int dims[] = {96, 33, 256};
  for (int i = 0; i < 3; ++i) {
    Case c;
    c.dtype = kDtypes[(i + 1) % 4];
    c.hq = 12;
    c.hkv = 1;
    c.dim = dims[i];
    c.block_size = 7;
    c.seqs = {{1, 300}, {6, 41}};
    c.seed = 400 + i;
    check_case(h, c);
  }
}

TEST(CudaPagedAttention, LongContextSeveralSplits) {
  CudaOpHarness h;
  for (ScalarType dt : kDtypes) {
    Case c;
    c.dtype = dt;
    c.kv_scale = 0.003f;  // some encodes saturate at 448
    c.seqs = {{1, 3000}, {40, 3000}, {1, 777}};
    c.pad_tokens = 1;
    c.seed = 500 + static_cast<int>(dt);
    check_case(h, c);
  }
}

TEST(CudaPagedAttention, LongPrefillOneSplit) {
  // Enough tokens that the grid needs no KV split: the attend kernel writes out directly.
  CudaOpHarness h;
  for (ScalarType dt : {ScalarType::F32, ScalarType::F8E4M3FN}) {
    Case c;
    c.dtype = dt;
    c.hq = 4;
    c.hkv = 2;
    c.dim = 96;
    c.block_size = 16;
    c.seqs = {{600, 900}, {1, 1200}};
    c.pad_tokens = 2;
    c.seed = 600 + static_cast<int>(dt);
    check_case(h, c);
  }
}

TEST(CudaPagedAttention, OnlyPadding) {
  CudaOpHarness h;
  Case c;
  c.seqs = {};
  c.pad_tokens = 5;
  c.pad_seqs = 2;
  check_case(h, c);
  Case none;  // S = 0
  none.pad_tokens = 3;
  check_case(h, none);
}

TEST(CudaPagedAttention, ZeroTokens) {
  CudaOpHarness h;
  Case c;
  c.pad_seqs = 1;
  check_case(h, c);
}

// Bad device data: error word, finite outputs, no crash; the sequences not involved match the
// reference on the repaired inputs.
TEST(CudaPagedAttention, BlockOutOfRange) {
  CudaOpHarness h;
  for (ScalarType dt : kDtypes) {
    Case c;
    c.dtype = dt;
    c.seqs = {{1, 50}, {3, 40}};
    c.seed = 700;
    Problem p = build(c);
    p.tables[0] = p.block_count + 3;  // sequence 0, block 0: history positions 0..15
    p.tables[static_cast<size_t>(p.max_blocks) + 0] = -2;  // sequence 1, block 0
    std::vector<float> out;
    std::vector<uint8_t> k, v;
    const CudaOpHarness::Result r = run_cuda(h, p, out, k, v);
    ASSERT_FALSE(r.failed) << r.message;
    EXPECT_EQ(r.error_word, word(DeviceError::BlockOutOfRange));
    EXPECT_FALSE(testing::any_nan(out.data(), out.size()));
  }
}

TEST(CudaPagedAttention, SlotOutOfRange) {
  CudaOpHarness h;
  for (ScalarType dt : kDtypes) {
    Case c;
    c.dtype = dt;
    c.seqs = {{1, 20}, {4, 9}};
    c.pad_tokens = 2;
    c.seed = 800;
    const Problem good = build(c);
    std::vector<float> ref, out;
    std::vector<uint8_t> ref_k, ref_v, k, v;
    run_reference(good, ref, ref_k, ref_v);
    Problem bad = good;
    bad.slots[good.T - 1] = good.block_count * c.block_size + 3;  // a padding token, beyond the pool
    const CudaOpHarness::Result r = run_cuda(h, bad, out, k, v);
    ASSERT_FALSE(r.failed) << r.message;
    EXPECT_EQ(r.error_word, word(DeviceError::SlotOutOfRange));
    EXPECT_LE(testing::rel_l2(out.data(), ref.data(), out.size()), kTolerance);
    EXPECT_EQ(first_diff(k, ref_k), k.size());
    EXPECT_EQ(first_diff(v, ref_v), v.size());
  }
}

TEST(CudaPagedAttention, ContextTooLongOrShort) {
  CudaOpHarness h;
  for (int variant = 0; variant < 2; ++variant) {
    Case c;
    c.seqs = {{1, 30}, {5, 12}, {2, 17}};
    c.seed = 900 + variant;
    const Problem good = build(c);
    std::vector<float> ref, out;
    std::vector<uint8_t> ref_k, ref_v, k, v;
    run_reference(good, ref, ref_k, ref_v);
    Problem bad = good;
    // Sequence 1: context beyond the block table, or below its query length.
    bad.lens[1] = variant == 0 ? good.max_blocks * c.block_size + 1 : 4;
    const CudaOpHarness::Result r = run_cuda(h, bad, out, k, v);
    ASSERT_FALSE(r.failed) << r.message;
    EXPECT_EQ(r.error_word, word(DeviceError::ContextTooLong));
    const size_t row = static_cast<size_t>(c.hq) * c.dim;
    for (int t = 0; t < good.T; ++t) {
      for (size_t i = 0; i < row; ++i) {
        const size_t at = t * row + i;
        if (good.token_seq[t] == 1) {
          ASSERT_EQ(out[at], 0.0f) << "token " << t;
        } else {
          ASSERT_NEAR(out[at], ref[at], 1e-4f) << "token " << t;
        }
      }
    }
    EXPECT_EQ(first_diff(k, ref_k), k.size());  // the writes do not depend on context_lens
  }
}

}  // namespace
}  // namespace ember
