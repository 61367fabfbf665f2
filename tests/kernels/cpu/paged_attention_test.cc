// kernels/cpu paged attention on every compiled Highway target: within 1e-5 relative L2 (per
// output row) of kernels/reference/paged_attention.h for decode, prefill chunks, mixed batches,
// GQA 1/2/4 (and 16 > one head group), head_dim 32/64/80/128, block sizes 1/16, f32/bf16/f16/FP8
// caches, padding rows and tokens, NaN-filled unused pool memory and shuffled block tables; the
// same cache bytes as the reference; bitwise equal for 1 and 2 threads, for a sequence alone or in
// a batch, and for a prefill in one step or in two chunks; every documented error.
#include "kernels/cpu/paged_attention.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/reference/paged_attention.h"
#include "tests/kernels/cpu/test_util.h"
#include "tests/kernels/reference/paged_attention_test_util.h"

namespace ember::kernels::paged_test {
namespace {

class PagedAttentionTest : public cpu_test::TargetTest {};
EMBER_INSTANTIATE_TARGETS(PagedAttentionTest);

ThreadPool* Pool2() {
  static FixedThreadPool pool(2);
  return &pool;
}

Status RunRef(const Step& st, uint8_t* kc, uint8_t* vc, float* out, float scale, ErrorContext* e) {
  return reference::paged_attention(st.q.data(), st.k.data(), st.v.data(), st.T, st.S,
                                    st.spec.q_heads, st.spec.kv_heads, st.spec.head_dim,
                                    st.spec.dtype, kc, vc, st.block_count, st.spec.block_size,
                                    st.spec.cache_scale, st.slots.data(), st.tables.data(),
                                    st.max_blocks, st.lens.data(), st.starts.data(), scale, out, e);
}

RunFn CpuRunner(int threads) {
  return [threads](const Step& st, uint8_t* kc, uint8_t* vc, float* out, float scale,
                   ErrorContext* e) {
    KernelContext context;
    context.pool = threads == 2 ? Pool2() : nullptr;
    return cpu::paged_attention(context, st.q.data(), st.k.data(), st.v.data(), st.T, st.S,
                                st.spec.q_heads, st.spec.kv_heads, st.spec.head_dim,
                                st.spec.dtype, kc, vc, st.block_count, st.spec.block_size,
                                st.spec.cache_scale, st.slots.data(), st.tables.data(),
                                st.max_blocks, st.lens.data(), st.starts.data(), scale, out, e);
  };
}

float ScaleFor(const CaseSpec& c) { return 1.0f / std::sqrt(float(c.head_dim)); }

// cpu (1 and 2 threads) against the reference; returns the 1-thread result.
Result CheckTwin(const CaseSpec& c, const char* what) {
  const Step st = MakeStep(c);
  const float scale = ScaleFor(c);
  const Result want = RunStep(st, RunRef, scale);
  const Result one = RunStep(st, CpuRunner(1), scale);
  const Result two = RunStep(st, CpuRunner(2), scale);
  const double err = MaxRowRelL2(one.out, want.out, c.head_dim);
  EXPECT_LE(err, 1e-5) << what << " dtype " << to_string(c.dtype) << " Hq " << c.q_heads << " Hkv "
                       << c.kv_heads << " D " << c.head_dim << " bs " << c.block_size;
  EXPECT_EQ(one.out, two.out) << what << ": 1 vs 2 threads";
  EXPECT_EQ(one.k_cache, want.k_cache) << what;
  EXPECT_EQ(one.v_cache, want.v_cache) << what;
  return one;
}

TEST_P(PagedAttentionTest, Decode) {
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16, ScalarType::F16}) {
    for (int64_t group : {1, 2, 4}) {
      for (int64_t dim : {32, 64, 128}) {
        for (int64_t bs : {1, 16}) {
          CaseSpec c;
          c.dtype = dt;
          c.kv_heads = 2;
          c.q_heads = 2 * group;
          c.head_dim = dim;
          c.block_size = bs;
          c.seqs = {{0, 1}, {16, 1}, {37, 1}, {70, 1}};
          c.pad_seqs = 1;
          c.pad_tokens = 2;
          c.seed = uint32_t(dim + bs + group);
          CheckTwin(c, "decode");
        }
      }
    }
  }
}

TEST_P(PagedAttentionTest, PrefillAndMixed) {
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16, ScalarType::F16}) {
    for (int64_t group : {1, 2, 4}) {
      for (int64_t bs : {1, 16}) {
        CaseSpec c;
        c.dtype = dt;
        c.kv_heads = 2;
        c.q_heads = 2 * group;
        c.head_dim = 64;
        c.block_size = bs;
        c.seqs = {{0, 33}, {5, 1}, {20, 7}, {0, 1}, {40, 17}};
        c.pad_seqs = 2;
        c.pad_tokens = 3;
        CheckTwin(c, "mixed");
      }
    }
  }
}

// Odd head_dim (tails of every vector width), one kv head of 16 query heads (two head groups),
// and an FP8 cache.
TEST_P(PagedAttentionTest, OddShapesAndFp8) {
  CaseSpec c;
  c.head_dim = 80;
  c.seqs = {{3, 4}, {17, 1}};
  CheckTwin(c, "D 80");
  c.head_dim = 5;
  c.dtype = ScalarType::BF16;
  CheckTwin(c, "D 5 bf16");
  c.head_dim = 13;
  c.dtype = ScalarType::F16;
  CheckTwin(c, "D 13 f16");
  c.head_dim = 64;
  c.kv_heads = 1;
  c.q_heads = 16;
  c.dtype = ScalarType::F32;
  CheckTwin(c, "GQA 16");
  c.q_heads = 4;
  c.dtype = ScalarType::F8E4M3FN;
  c.cache_scale = 0.01f;
  CheckTwin(c, "fp8");
  c.head_dim = 256;
  c.dtype = ScalarType::F32;
  CheckTwin(c, "D 256");
}

// A sequence alone (with or without padding tokens) gives bit for bit its rows of a batch.
// Issue 17: the sliding window and soft-capping options against the reference (1 and 2 threads).
TEST_P(PagedAttentionTest, SlidingWindowAndSoftcap) {
  CaseSpec c;
  c.q_heads = 8;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.block_size = 16;
  c.seqs = {{0, 20}, {40, 1}, {100, 5}, {3, 1}};
  c.pad_tokens = 1;
  const Step st = MakeStep(c);
  const float scale = ScaleFor(c);
  for (int64_t window : {0, 1, 5, 16, 17, 4096}) {
    for (float softcap : {0.0f, 1.0f, 50.0f}) {
      const AttentionOptions options{window, softcap};
      const Result want = RunStep(st, ReferenceWith(options), scale);
      std::vector<float> outs[2];
      for (int threads : {1, 2}) {
        const Result got = RunStep(st, [&](const Step& s, uint8_t* kc, uint8_t* vc, float* out, float sc, ErrorContext* e) {
          KernelContext context;
          context.pool = threads == 2 ? Pool2() : nullptr;
          return cpu::paged_attention(context, s.q.data(), s.k.data(), s.v.data(), s.T, s.S, s.spec.q_heads,
                                      s.spec.kv_heads, s.spec.head_dim, s.spec.dtype, kc, vc, s.block_count,
                                      s.spec.block_size, s.spec.cache_scale, s.slots.data(), s.tables.data(),
                                      s.max_blocks, s.lens.data(), s.starts.data(), sc, out, e, options);
        }, scale);
        ASSERT_TRUE(got.status.is_ok());
        EXPECT_LE(MaxRowRelL2(got.out, want.out, c.head_dim), 1e-5) << "window " << window << " softcap " << softcap;
        outs[threads - 1] = got.out;
      }
      EXPECT_EQ(outs[0], outs[1]) << "window " << window << " softcap " << softcap;
    }
  }
}

TEST_P(PagedAttentionTest, BatchInvariant) {
  for (ScalarType dt : {ScalarType::F32, ScalarType::BF16}) {
    CaseSpec c;
    c.dtype = dt;
    c.q_heads = 8;
    c.kv_heads = 2;
    c.head_dim = 64;
    c.seqs = {{30, 1}, {0, 12}, {100, 5}, {7, 1}};
    c.pad_seqs = 1;
    c.pad_tokens = 2;
    const Step batch = MakeStep(c);
    const float scale = ScaleFor(c);
    const Result all = RunStep(batch, CpuRunner(2), scale);
    const int64_t row = c.q_heads * c.head_dim;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      for (int64_t pad : {0, 5}) {
        const Step alone = Single(batch, s, pad);
        const Result r = RunStep(alone, CpuRunner(1), scale);
        const std::vector<float> rows(all.out.begin() + batch.starts[s] * row,
                                      all.out.begin() + batch.starts[s + 1] * row);
        const std::vector<float> mine(r.out.begin(), r.out.begin() + alone.starts[1] * row);
        EXPECT_EQ(mine, rows) << "sequence " << s << " pad " << pad;
      }
    }
  }
}

// A prefill in two chunks (the second on the cache the first left) equals the one-shot prefill
// bit for bit, and the reference within tolerance.
TEST_P(PagedAttentionTest, ChunkedPrefill) {
  CaseSpec c;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.block_size = 16;
  c.dtype = ScalarType::BF16;
  c.seqs = {{0, 50}};
  const Step full = MakeStep(c);
  const float scale = ScaleFor(c);
  const Result one = RunStep(full, CpuRunner(1), scale);
  const Result ref = RunStep(full, RunRef, scale);
  EXPECT_LE(MaxRowRelL2(one.out, ref.out, c.head_dim), 1e-5);
  const int64_t split = 21, hq = c.q_heads, D = c.head_dim, row = c.kv_heads * D;
  Step a = full;
  a.T = split;
  a.q.resize(size_t(split * hq * D));
  a.k.resize(size_t(split * row));
  a.v.resize(size_t(split * row));
  a.slots.resize(size_t(split));
  a.lens = {int32_t(split)};
  a.starts = {0, int32_t(split)};
  const Result ra = RunStep(a, CpuRunner(2), scale);
  Step b = full;
  b.T = 50 - split;
  b.q.erase(b.q.begin(), b.q.begin() + split * hq * D);
  b.k.erase(b.k.begin(), b.k.begin() + split * row);
  b.v.erase(b.v.begin(), b.v.begin() + split * row);
  b.slots.erase(b.slots.begin(), b.slots.begin() + split);
  b.starts = {0, int32_t(b.T)};
  b.k_cache = ra.k_cache;
  b.v_cache = ra.v_cache;
  const Result rb = RunStep(b, CpuRunner(1), scale);
  std::vector<float> both = ra.out;
  both.insert(both.end(), rb.out.begin(), rb.out.end());
  EXPECT_EQ(both, one.out);
  EXPECT_EQ(rb.k_cache, one.k_cache);
  EXPECT_EQ(rb.v_cache, one.v_cache);
}

// The same checks as the reference's, through the cpu entry point, plus head_dim > the limit.
void ExpectRejected(const Step& st, Error code, const char* what) {
  std::vector<uint8_t> kc = st.k_cache, vc = st.v_cache;
  std::vector<float> out(size_t(st.T * st.spec.q_heads * std::max<int64_t>(st.spec.head_dim, 0)) + 1,
                         7.0f);
  ErrorContext e;
  const Status s = CpuRunner(2)(st, kc.data(), vc.data(), out.data(), 0.125f, &e);
  EXPECT_EQ(s.code(), code) << what;
  EXPECT_NE(e.message[0], '\0') << what;
  EXPECT_EQ(kc, st.k_cache) << what;
  EXPECT_EQ(vc, st.v_cache) << what;
  for (float x : out) ASSERT_EQ(x, 7.0f) << what;
}

TEST_P(PagedAttentionTest, RejectsBadArguments) {
  CaseSpec c;
  c.seqs = {{3, 2}, {0, 1}};
  c.pad_tokens = 1;
  c.pad_seqs = 1;
  const Step good = MakeStep(c);
  const Error bad = Error::InvalidArgument;
  { Step st = good; st.spec.kv_heads = 3; ExpectRejected(st, bad, "Hq % Hkv"); }
  { Step st = good; st.spec.q_heads = 0; ExpectRejected(st, bad, "Hq 0"); }
  { Step st = good; st.S = -1; ExpectRejected(st, bad, "negative S"); }
  { Step st = good; st.block_count = int64_t(1) << 61; ExpectRejected(st, bad, "too large"); }
  { Step st = good; st.spec.dtype = ScalarType::I8; ExpectRejected(st, bad, "dtype"); }
  {
    Step st = good;
    st.spec.dtype = ScalarType::F8E4M3FN;
    st.spec.cache_scale = NAN;
    ExpectRejected(st, bad, "fp8 scale NaN");
  }
  { Step st = good; st.slots.clear(); st.slots.shrink_to_fit(); ExpectRejected(st, bad, "null slots"); }
  { Step st = good; st.starts[0] = -1; ExpectRejected(st, bad, "query_start[0]"); }
  { Step st = good; st.starts[2] = 1; ExpectRejected(st, bad, "query_start decreasing"); }
  { Step st = good; st.starts[3] = int32_t(st.T + 1); ExpectRejected(st, bad, "query_start[S] > T"); }
  { Step st = good; st.lens[0] = 1; ExpectRejected(st, bad, "context_len < q_len"); }
  {
    Step st = good;
    st.lens[0] = int32_t(st.max_blocks * c.block_size + 1);
    ExpectRejected(st, bad, "context_len beyond the table");
  }
  { Step st = good; st.tables[0] = int32_t(st.block_count); ExpectRejected(st, bad, "block id"); }
  { Step st = good; st.tables[0] = -2; ExpectRejected(st, bad, "negative block id"); }
  { Step st = good; st.slots[1] = -1; ExpectRejected(st, bad, "live token without slot"); }
  { Step st = good; st.slots[2] += 1; ExpectRejected(st, bad, "wrong slot"); }
  { Step st = good; st.slots[size_t(st.T - 1)] = 3; ExpectRejected(st, bad, "padding slot"); }
  {
    CaseSpec wide = c;
    wide.head_dim = cpu::kPagedAttentionMaxHeadDim + 1;
    ExpectRejected(MakeStep(wide), Error::NotSupported, "head_dim beyond the limit");
  }
}

}  // namespace
}  // namespace ember::kernels::paged_test
