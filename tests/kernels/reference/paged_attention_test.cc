// Reference paged attention against an independent oracle (dense causal attention in double over
// each sequence's unpaged K/V history): decode, prefill, chunked prefill, mixed batches, GQA, the
// cache dtypes, padding, NaN-filled unused pool memory, shuffled block tables; the cache writes;
// and every documented error (nothing written on error).
#include "kernels/reference/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/reference/paged_attention_test_util.h"

namespace ember::kernels::paged_test {
namespace {

Status RunRef(const Step& st, uint8_t* kc, uint8_t* vc, float* out, float scale, ErrorContext* e) {
  return reference::paged_attention(st.q.data(), st.k.data(), st.v.data(), st.T, st.S,
                                    st.spec.q_heads, st.spec.kv_heads, st.spec.head_dim,
                                    st.spec.dtype, kc, vc, st.block_count, st.spec.block_size,
                                    st.spec.cache_scale, st.slots.data(), st.tables.data(),
                                    st.max_blocks, st.lens.data(), st.starts.data(), scale, out, e);
}

float ScaleFor(const CaseSpec& c) { return 1.0f / std::sqrt(float(c.head_dim)); }

void CheckAgainstOracle(const CaseSpec& c) {
  const Step st = MakeStep(c);
  const Result r = RunStep(st, RunRef, ScaleFor(c));
  const std::vector<float> want = Oracle(st, ScaleFor(c));
  EXPECT_LE(MaxRowRelL2(r.out, want, c.head_dim), 1e-6) << "dtype " << to_string(c.dtype);
  // Padding rows are exactly zero.
  const int64_t owned = st.starts[size_t(st.S)];
  for (size_t i = size_t(owned * c.q_heads * c.head_dim); i < r.out.size(); ++i) ASSERT_EQ(r.out[i], 0.0f);
  // This step's K/V are in the cache at their slots, rounded; nothing else changed.
  const int64_t row = c.kv_heads * c.head_dim;
  const size_t eb = ElementBytes(c.dtype);
  std::vector<uint8_t> kc = st.k_cache, vc = st.v_cache;
  for (int64_t t = 0; t < st.T; ++t) {
    if (st.slots[size_t(t)] < 0) continue;
    for (int64_t e = 0; e < row; ++e) {
      Encode(c.dtype, st.k[size_t(t * row + e)], c.cache_scale, kc.data(), st.slots[size_t(t)] * row + e);
      Encode(c.dtype, st.v[size_t(t * row + e)], c.cache_scale, vc.data(), st.slots[size_t(t)] * row + e);
    }
  }
  EXPECT_EQ(r.k_cache, kc);
  EXPECT_EQ(r.v_cache, vc);
  (void)eb;
}

TEST(PagedAttentionReferenceTest, DecodeMatchesOracle) {
  CaseSpec c;
  c.seqs = {{0, 1}, {5, 1}, {16, 1}, {40, 1}};
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16, ScalarType::F16}) {
    c.dtype = dt;
    CheckAgainstOracle(c);
  }
}

// Issue 17: sliding window (Mistral, Gemma) and score soft-capping (Gemma 2), alone and together,
// on decode and prefill rows whose context is shorter, equal to and longer than the window.
TEST(PagedAttentionReferenceTest, SlidingWindowAndSoftcapMatchOracle) {
  CaseSpec c;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.block_size = 4;
  c.seqs = {{0, 9}, {7, 1}, {30, 3}, {2, 1}};
  c.pad_seqs = 1;
  c.pad_tokens = 2;
  const Step st = MakeStep(c);
  const float scale = ScaleFor(c);
  for (int64_t window : {0, 1, 3, 8, 100}) {
    for (float softcap : {0.0f, 0.5f, 30.0f}) {
      const Result r = RunStep(st, ReferenceWith(AttentionOptions{window, softcap}), scale);
      ASSERT_TRUE(r.status.is_ok());
      EXPECT_LE(MaxRowRelL2(r.out, Oracle(st, scale, window, softcap), c.head_dim), 1e-6)
          << "window " << window << " softcap " << softcap;
      if (window == 1 || softcap == 0.5f) {  // the options change the result (the test can fail)
        EXPECT_GT(MaxRowRelL2(r.out, Oracle(st, scale), c.head_dim), 1e-3) << "window " << window;
      }
    }
  }
  // Bad options are InvalidArgument, nothing written.
  for (const AttentionOptions bad : {AttentionOptions{-1, 0.0f}, AttentionOptions{0, -1.0f}, AttentionOptions{0, NAN}}) {
    std::vector<uint8_t> kc = st.k_cache, vc = st.v_cache;
    std::vector<float> out(st.q.size(), 7.0f);
    const Status status = reference::paged_attention(
        st.q.data(), st.k.data(), st.v.data(), st.T, st.S, c.q_heads, c.kv_heads, c.head_dim, c.dtype, kc.data(),
        vc.data(), st.block_count, c.block_size, c.cache_scale, st.slots.data(), st.tables.data(), st.max_blocks,
        st.lens.data(), st.starts.data(), scale, out.data(), nullptr, bad);
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_EQ(kc, st.k_cache);
    EXPECT_EQ(out, std::vector<float>(st.q.size(), 7.0f));
  }
}

TEST(PagedAttentionReferenceTest, PrefillAndMixedMatchOracle) {
  CaseSpec c;
  c.q_heads = 4;
  c.kv_heads = 1;
  c.head_dim = 64;
  c.block_size = 1;
  c.seqs = {{0, 9}, {7, 1}, {3, 5}};
  c.pad_seqs = 2;
  c.pad_tokens = 3;
  CheckAgainstOracle(c);
  c.block_size = 16;
  c.q_heads = c.kv_heads = 2;
  c.head_dim = 128;
  c.dtype = ScalarType::BF16;
  CheckAgainstOracle(c);
}

TEST(PagedAttentionReferenceTest, Fp8CacheMatchesOracle) {
  CaseSpec c;
  c.dtype = ScalarType::F8E4M3FN;
  c.cache_scale = 0.01f;
  c.seqs = {{10, 3}, {0, 1}};
  CheckAgainstOracle(c);
}

// Two chunks of a prefill give exactly the outputs of the one-shot prefill.
TEST(PagedAttentionReferenceTest, ChunkedPrefillEqualsOneShot) {
  CaseSpec c;
  c.seqs = {{0, 20}};
  c.block_size = 4;
  const Step full = MakeStep(c);
  const float scale = ScaleFor(c);
  const Result one = RunStep(full, RunRef, scale);
  // Chunk 1: tokens 0..11 (context 12); chunk 2: tokens 12..19 on the cache chunk 1 left.
  Step a = full;
  const int64_t split = 12, hq = c.q_heads, D = c.head_dim, row = c.kv_heads * D;
  a.T = split;
  a.q.resize(size_t(split * hq * D));
  a.k.resize(size_t(split * row));
  a.v.resize(size_t(split * row));
  a.slots.resize(size_t(split));
  a.lens = {int32_t(split)};
  a.starts = {0, int32_t(split)};
  const Result ra = RunStep(a, RunRef, scale);
  Step b = full;
  b.T = 20 - split;
  b.q.erase(b.q.begin(), b.q.begin() + split * hq * D);
  b.k.erase(b.k.begin(), b.k.begin() + split * row);
  b.v.erase(b.v.begin(), b.v.begin() + split * row);
  b.slots.erase(b.slots.begin(), b.slots.begin() + split);
  b.starts = {0, int32_t(b.T)};
  b.k_cache = ra.k_cache;
  b.v_cache = ra.v_cache;
  const Result rb = RunStep(b, RunRef, scale);
  std::vector<float> both = ra.out;
  both.insert(both.end(), rb.out.begin(), rb.out.end());
  EXPECT_EQ(both, one.out);
  EXPECT_EQ(rb.k_cache, one.k_cache);
}

// Each documented error: InvalidArgument, a message, and nothing written.
void ExpectRejected(const Step& st, const char* what) {
  std::vector<uint8_t> kc = st.k_cache, vc = st.v_cache;
  std::vector<float> out(size_t(std::max<int64_t>(st.T * st.spec.q_heads * st.spec.head_dim, 0)) + 1,
                         7.0f);
  ErrorContext e;
  const Status s = RunRef(st, kc.data(), vc.data(), out.data(), 0.125f, &e);
  EXPECT_EQ(s.code(), Error::InvalidArgument) << what;
  EXPECT_NE(e.message[0], '\0') << what;
  EXPECT_EQ(kc, st.k_cache) << what;
  EXPECT_EQ(vc, st.v_cache) << what;
  for (float x : out) ASSERT_EQ(x, 7.0f) << what;
}

TEST(PagedAttentionReferenceTest, RejectsBadArguments) {
  CaseSpec c;
  c.seqs = {{3, 2}, {0, 1}};
  c.pad_tokens = 1;
  c.pad_seqs = 1;
  const Step good = MakeStep(c);
  {
    Step st = good;
    st.spec.kv_heads = 3;
    ExpectRejected(st, "Hq not a multiple of Hkv");
  }
  {
    Step st = good;
    st.spec.head_dim = 0;
    ExpectRejected(st, "head_dim 0");
  }
  {
    Step st = good;
    st.spec.block_size = 0;
    ExpectRejected(st, "block_size 0");
  }
  {
    Step st = good;
    st.T = -1;
    ExpectRejected(st, "negative T");
  }
  {
    Step st = good;
    st.block_count = int64_t(1) << 61;
    ExpectRejected(st, "too large");
  }
  {
    Step st = good;
    st.spec.dtype = ScalarType::I32;
    ExpectRejected(st, "cache dtype");
  }
  {
    Step st = good;
    st.spec.dtype = ScalarType::F8E4M3FN;
    st.spec.cache_scale = 0.0f;
    ExpectRejected(st, "fp8 scale 0");
    st.spec.cache_scale = INFINITY;
    ExpectRejected(st, "fp8 scale inf");
  }
  {
    Step st = good;
    st.q.clear();
    st.q.shrink_to_fit();
    ExpectRejected(st, "null q");
  }
  {
    Step st = good;
    st.starts[0] = 1;
    ExpectRejected(st, "query_start[0]");
  }
  {
    Step st = good;
    st.starts[1] = 4;  // 4 > starts[2] = 3
    ExpectRejected(st, "query_start decreasing");
  }
  {
    Step st = good;
    st.starts[3] = int32_t(st.T + 1);
    ExpectRejected(st, "query_start[S] > T");
  }
  {
    Step st = good;
    st.lens[0] = 1;  // < q_len 2
    ExpectRejected(st, "context_len < q_len");
  }
  {
    Step st = good;
    st.lens[1] = int32_t(st.max_blocks * c.block_size + 1);
    ExpectRejected(st, "context_len beyond the table");
  }
  {
    Step st = good;
    st.tables[0] = int32_t(st.block_count);
    ExpectRejected(st, "block id too large");
    st.tables[0] = -1;
    ExpectRejected(st, "negative block id");
  }
  {
    Step st = good;
    st.slots[0] += 1;
    ExpectRejected(st, "wrong slot for a live token");
    st.slots[0] = -1;
    ExpectRejected(st, "slot -1 for a live token");
    st.slots[0] = int32_t(st.block_count * c.block_size);
    ExpectRejected(st, "slot out of range");
  }
  {
    Step st = good;
    st.slots[size_t(st.T - 1)] = 0;
    ExpectRejected(st, "padding token with a slot");
  }
}

TEST(PagedAttentionReferenceTest, EmptyStepIsValid) {
  CaseSpec c;
  c.pad_seqs = 2;
  c.pad_tokens = 2;
  c.spare_blocks = 0;
  const Step st = MakeStep(c);
  const Result r = RunStep(st, RunRef, 0.5f);
  for (float x : r.out) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace ember::kernels::paged_test
