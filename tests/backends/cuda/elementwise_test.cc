// The elementwise CUDA kernels (backends/cuda/ops/elementwise.cu) against kernels/reference on
// random inputs at awkward sizes: embedding (f32 / bf16 / f16 rows, bit-exact; bad ids), rms_norm
// (rel 1e-6), rope (rel 1e-6; a negative position's NaN row), silu_mul (rel 1e-6), add (same shape
// and broadcast, bit-exact), reshape (bytes), logits_gather (bytes, NaN payloads; bad indices).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "kernels/reference/ops.h"
#include "runtime/core/float_codecs.h"
#include "tests/backends/cuda/cuda_op_harness.h"

namespace ember {
namespace {

namespace cuda = backends::cuda;
namespace ref = kernels::reference;
using testing::CudaOpHarness;
using testing::random_floats;

TensorView view(const void* data, ScalarType dtype, std::initializer_list<int64_t> dims) {
  TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) v.dims[i++] = d;
  return v;
}

TensorView view_dims(const void* data, ScalarType dtype, const std::vector<int64_t>& dims) {
  TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) v.dims[i] = dims[i];
  return v;
}

uint32_t error_word(OpCode op, cuda::DeviceError e) {
  return (static_cast<uint32_t>(op) << 8) | static_cast<uint32_t>(e);
}

// Runs the reference kernel on host views.
void run_reference(KernelFn fn, const OpAttrs& attrs, std::vector<TensorView> inputs, std::vector<TensorView> outputs) {
  KernelContext ctx;
  fn(ctx, attrs, inputs.data(), inputs.size(), outputs.data(), outputs.size());
}

// Elements that differ by more than rel * |ref| (+ abs_floor), or NaN on one side only.
size_t count_bad(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs_floor = 0.0) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool gn = std::isnan(got[i]), wn = std::isnan(want[i]);
    if (gn || wn) {
      bad += gn != wn ? 1 : 0;
      continue;
    }
    if (std::isinf(want[i])) {
      bad += got[i] != want[i] ? 1 : 0;
      continue;
    }
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > rel * std::fabs(static_cast<double>(want[i])) + abs_floor) ++bad;
  }
  return bad;
}

bool same_bytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

std::vector<int32_t> random_ids(size_t n, int32_t lo, int32_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// ---- embedding ---------------------------------------------------------------------------------

void check_embedding(ScalarType dtype, int64_t vocab, int64_t h, int64_t tokens, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "dtype " << static_cast<int>(dtype) << " V " << vocab << " H " << h << " T "
                                    << tokens);
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  const std::vector<float> wf = random_floats(static_cast<size_t>(vocab * h), seed, -3.0f, 3.0f);
  std::vector<uint16_t> w16(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) w16[i] = dtype == ScalarType::BF16 ? f32_to_bf16(wf[i]) : f32_to_f16(wf[i]);
  const void* w = dtype == ScalarType::F32 ? static_cast<const void*>(wf.data()) : w16.data();
  std::vector<int32_t> ids = random_ids(static_cast<size_t>(tokens), 0, static_cast<int32_t>(vocab - 1), seed + 1);
  if (tokens > 2) ids[1] = static_cast<int32_t>(vocab - 1), ids[2] = 0;
  std::vector<float> got(static_cast<size_t>(tokens * h)), want(got.size(), 7.0f);
  OpAttrs attrs;
  const auto r = harness.run(cuda::embedding, nullptr, attrs,
                             {view(w, dtype, {vocab, h}), view(ids.data(), ScalarType::I32, {tokens})},
                             {view(got.data(), ScalarType::F32, {tokens, h})});
  ASSERT_FALSE(r.failed) << r.message;
  EXPECT_EQ(r.error_word, 0u);
  run_reference(ref::embedding, attrs, {view(w, dtype, {vocab, h}), view(ids.data(), ScalarType::I32, {tokens})},
                {view(want.data(), ScalarType::F32, {tokens, h})});
  EXPECT_TRUE(same_bytes(got.data(), want.data(), got.size() * sizeof(float)));
}

TEST(CudaElementwise, EmbeddingF32) {
  check_embedding(ScalarType::F32, 1001, 64, 37, 1);    // float4 path
  check_embedding(ScalarType::F32, 17, 333, 5, 2);      // scalar path
  check_embedding(ScalarType::F32, 50, 4096, 1, 3);
  check_embedding(ScalarType::F32, 5, 12, 0, 4);        // T = 0
}

TEST(CudaElementwise, EmbeddingBf16F16) {
  for (ScalarType t : {ScalarType::BF16, ScalarType::F16}) {
    check_embedding(t, 1001, 333, 37, 5);
    check_embedding(t, 3, 1, 1, 6);
    check_embedding(t, 129, 2048, 9, 7);
  }
}

TEST(CudaElementwise, EmbeddingIdOutOfRange) {
  for (ScalarType dtype : {ScalarType::F32, ScalarType::BF16}) {
    CudaOpHarness harness;
    ASSERT_TRUE(harness.ok());
    const int64_t vocab = 11, h = 20, tokens = 6;
    const std::vector<float> wf = random_floats(static_cast<size_t>(vocab * h), 9);
    std::vector<uint16_t> w16(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) w16[i] = f32_to_bf16(wf[i]);
    const void* w = dtype == ScalarType::F32 ? static_cast<const void*>(wf.data()) : w16.data();
    std::vector<int32_t> ids = {3, -1, 11, 10, 2147483647, -2147483647 - 1};
    std::vector<float> got(static_cast<size_t>(tokens * h)), want(got.size(), 7.0f);
    OpAttrs attrs;
    const auto r = harness.run(cuda::embedding, nullptr, attrs,
                               {view(w, dtype, {vocab, h}), view(ids.data(), ScalarType::I32, {tokens})},
                               {view(got.data(), ScalarType::F32, {tokens, h})});
    ASSERT_FALSE(r.failed) << r.message;
    EXPECT_EQ(r.error_word, error_word(OpCode::Embedding, cuda::DeviceError::IdOutOfRange));
    run_reference(ref::embedding, attrs, {view(w, dtype, {vocab, h}), view(ids.data(), ScalarType::I32, {tokens})},
                  {view(want.data(), ScalarType::F32, {tokens, h})});
    EXPECT_TRUE(same_bytes(got.data(), want.data(), got.size() * sizeof(float)));
    for (int64_t i = h; i < 3 * h; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 0.0f);
  }
}

// ---- rms_norm ----------------------------------------------------------------------------------

void check_rms_norm(const std::vector<int64_t>& dims, float eps, uint64_t seed, float scale = 1.0f) {
  SCOPED_TRACE(::testing::Message() << "rms_norm H " << dims.back() << " rank " << dims.size());
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const int64_t h = dims.back();
  const std::vector<float> x = random_floats(static_cast<size_t>(n), seed, -scale, scale);
  const std::vector<float> w = random_floats(static_cast<size_t>(h), seed + 1, 0.5f, 1.5f);
  std::vector<float> got(static_cast<size_t>(n)), want(got.size());
  OpAttrs attrs;
  attrs.epsilon = eps;
  const auto r = harness.run(cuda::rms_norm, nullptr, attrs,
                             {view_dims(x.data(), ScalarType::F32, dims), view(w.data(), ScalarType::F32, {h})},
                             {view_dims(got.data(), ScalarType::F32, dims)});
  ASSERT_FALSE(r.failed) << r.message;
  run_reference(ref::rms_norm, attrs,
                {view_dims(x.data(), ScalarType::F32, dims), view(w.data(), ScalarType::F32, {h})},
                {view_dims(want.data(), ScalarType::F32, dims)});
  EXPECT_EQ(count_bad(got, want, 1e-6, 1e-30), 0u);
}

TEST(CudaElementwise, RmsNorm) {
  check_rms_norm({1, 1}, 1e-6f, 10);
  check_rms_norm({37, 7}, 1e-5f, 11);
  check_rms_norm({5, 333}, 1e-6f, 12);
  check_rms_norm({3, 4, 128}, 1e-6f, 13);  // rank 3 (q/k norm over heads)
  check_rms_norm({2, 4096}, 1e-6f, 14, 40.0f);
  check_rms_norm({3, 16384}, 1e-6f, 15);
  check_rms_norm({1, 5000}, 0.0f, 16, 1e-3f);
  check_rms_norm({0, 64}, 1e-6f, 17);  // no rows
}

// ---- rope --------------------------------------------------------------------------------------

void check_rope(int64_t tokens, int64_t heads, int64_t d, uint64_t seed, bool negative) {
  SCOPED_TRACE(::testing::Message() << "rope T " << tokens << " heads " << heads << " D " << d);
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  const int64_t half = d / 2;
  const std::vector<float> x = random_floats(static_cast<size_t>(tokens * heads * d), seed, -2.0f, 2.0f);
  std::vector<int32_t> pos = random_ids(static_cast<size_t>(tokens), 0, 131071, seed + 1);
  if (tokens > 1) pos[0] = 0;
  if (negative && tokens > 2) pos[2] = -5;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(1.0 / std::pow(1000000.0, 2.0 * i / static_cast<double>(d)));
  }
  std::vector<float> got(x.size()), want(x.size());
  OpAttrs attrs;
  auto ins = [&] {
    return std::vector<TensorView>{view(x.data(), ScalarType::F32, {tokens, heads, d}),
                                   view(pos.data(), ScalarType::I32, {tokens}),
                                   view(inv_freq.data(), ScalarType::F32, {half})};
  };
  const auto r = harness.run(cuda::rope, nullptr, attrs, ins(), {view(got.data(), ScalarType::F32, {tokens, heads, d})});
  ASSERT_FALSE(r.failed) << r.message;
  run_reference(ref::rope, attrs, ins(), {view(want.data(), ScalarType::F32, {tokens, heads, d})});
  EXPECT_EQ(count_bad(got, want, 1e-6, 1e-6), 0u);
  if (negative && tokens > 2) {
    EXPECT_TRUE(std::isnan(got[static_cast<size_t>(2 * heads * d)]));
  }
}

TEST(CudaElementwise, Rope) {
  check_rope(1, 1, 2, 20, false);
  check_rope(13, 7, 64, 21, true);
  check_rope(5, 3, 130, 22, true);
  check_rope(33, 32, 128, 23, false);
  check_rope(0, 4, 64, 24, false);
}

// ---- silu_mul ----------------------------------------------------------------------------------

void check_silu_mul(const std::vector<int64_t>& dims, uint64_t seed) {
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> g = random_floats(static_cast<size_t>(n), seed, -30.0f, 30.0f);
  const std::vector<float> u = random_floats(static_cast<size_t>(n), seed + 1, -3.0f, 3.0f);
  if (n > 4) g[1] = -100.0f, g[2] = 100.0f, g[3] = 0.0f, g[4] = -1e-30f;
  std::vector<float> got(static_cast<size_t>(n)), want(got.size());
  OpAttrs attrs;
  const auto r = harness.run(cuda::silu_mul, nullptr, attrs,
                             {view_dims(g.data(), ScalarType::F32, dims), view_dims(u.data(), ScalarType::F32, dims)},
                             {view_dims(got.data(), ScalarType::F32, dims)});
  ASSERT_FALSE(r.failed) << r.message;
  run_reference(ref::silu_mul, attrs,
                {view_dims(g.data(), ScalarType::F32, dims), view_dims(u.data(), ScalarType::F32, dims)},
                {view_dims(want.data(), ScalarType::F32, dims)});
  EXPECT_EQ(count_bad(got, want, 1e-6, 1e-37), 0u) << "n " << n;
}

TEST(CudaElementwise, SiluMul) {
  check_silu_mul({1}, 30);
  check_silu_mul({3, 1001}, 31);
  check_silu_mul({7, 4096}, 32);
  check_silu_mul({2, 3, 5}, 33);
  check_silu_mul({0, 8}, 34);
}

// ---- add ---------------------------------------------------------------------------------------

void check_add(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
               const std::vector<int64_t>& out_dims, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "add ranks " << a_dims.size() << " " << b_dims.size());
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  auto count = [](const std::vector<int64_t>& d) {
    int64_t n = 1;
    for (int64_t x : d) n *= x;
    return n;
  };
  const std::vector<float> a = random_floats(static_cast<size_t>(count(a_dims)), seed, -1e3f, 1e3f);
  const std::vector<float> b = random_floats(static_cast<size_t>(count(b_dims)), seed + 1, -1.0f, 1.0f);
  std::vector<float> got(static_cast<size_t>(count(out_dims))), want(got.size());
  OpAttrs attrs;
  const auto r = harness.run(cuda::add, nullptr, attrs,
                             {view_dims(a.data(), ScalarType::F32, a_dims), view_dims(b.data(), ScalarType::F32, b_dims)},
                             {view_dims(got.data(), ScalarType::F32, out_dims)});
  ASSERT_FALSE(r.failed) << r.message;
  run_reference(ref::add, attrs,
                {view_dims(a.data(), ScalarType::F32, a_dims), view_dims(b.data(), ScalarType::F32, b_dims)},
                {view_dims(want.data(), ScalarType::F32, out_dims)});
  EXPECT_TRUE(same_bytes(got.data(), want.data(), got.size() * sizeof(float)));
}

TEST(CudaElementwise, AddSameShape) {
  check_add({37, 1001}, {37, 1001}, {37, 1001}, 40);
  check_add({1}, {1}, {1}, 41);
  check_add({3}, {3}, {3}, 42);
  check_add({2, 4096}, {2, 4096}, {2, 4096}, 43);
  check_add({0, 5}, {0, 5}, {0, 5}, 44);
}

TEST(CudaElementwise, AddBroadcast) {
  check_add({5, 1, 7}, {3, 1}, {5, 3, 7}, 50);
  check_add({2, 3, 333}, {333}, {2, 3, 333}, 51);
  check_add({}, {5, 9}, {5, 9}, 52);
  check_add({4, 1}, {1, 6}, {4, 6}, 53);
  check_add({2, 1, 3, 1, 2, 1, 2, 3}, {3, 1, 2, 5, 2, 1}, {2, 1, 3, 1, 2, 5, 2, 3}, 54);  // rank 8
}

// ---- reshape -----------------------------------------------------------------------------------

TEST(CudaElementwise, Reshape) {
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  std::vector<int32_t> x = random_ids(3 * 5 * 7, -1000000, 1000000, 60);
  std::vector<int32_t> got(x.size());
  OpAttrs attrs;
  auto r = harness.run(cuda::reshape, nullptr, attrs, {view(x.data(), ScalarType::I32, {3, 5, 7})},
                       {view(got.data(), ScalarType::I32, {15, 7})});
  ASSERT_FALSE(r.failed) << r.message;
  EXPECT_EQ(got, x);
  std::vector<uint8_t> b(13, 0x5a), gb(13);
  r = harness.run(cuda::reshape, nullptr, attrs, {view(b.data(), ScalarType::U8, {13})},
                  {view(gb.data(), ScalarType::U8, {1, 13})});
  ASSERT_FALSE(r.failed) << r.message;
  EXPECT_EQ(gb, b);
  r = harness.run(cuda::reshape, nullptr, attrs, {view(b.data(), ScalarType::U8, {0, 3})},
                  {view(gb.data(), ScalarType::U8, {0})});
  EXPECT_FALSE(r.failed) << r.message;
}

// ---- logits_gather -----------------------------------------------------------------------------

void check_logits_gather(int64_t rows, int64_t h, std::vector<int32_t> idx, uint32_t expect_error) {
  SCOPED_TRACE(::testing::Message() << "logits_gather T " << rows << " H " << h);
  CudaOpHarness harness;
  ASSERT_TRUE(harness.ok());
  std::vector<float> hidden = random_floats(static_cast<size_t>(rows * h), 70 + h);
  if (!hidden.empty()) {
    const uint32_t payload = 0x7fc01234u;
    std::memcpy(&hidden[0], &payload, sizeof(payload));  // a NaN with a payload: copied as bytes
  }
  const int64_t count = static_cast<int64_t>(idx.size());
  std::vector<float> got(static_cast<size_t>(count * h)), want(got.size());
  OpAttrs attrs;
  const auto r = harness.run(cuda::logits_gather, nullptr, attrs,
                             {view(hidden.data(), ScalarType::F32, {rows, h}), view(idx.data(), ScalarType::I32, {count})},
                             {view(got.data(), ScalarType::F32, {count, h})});
  ASSERT_FALSE(r.failed) << r.message;
  EXPECT_EQ(r.error_word, expect_error);
  run_reference(ref::logits_gather, attrs,
                {view(hidden.data(), ScalarType::F32, {rows, h}), view(idx.data(), ScalarType::I32, {count})},
                {view(want.data(), ScalarType::F32, {count, h})});
  EXPECT_TRUE(same_bytes(got.data(), want.data(), got.size() * sizeof(float)));
}

TEST(CudaElementwise, LogitsGather) {
  check_logits_gather(9, 333, {3, -1, 0, 8, 0}, 0u);
  check_logits_gather(9, 64, {8, 7, -1}, 0u);
  check_logits_gather(1, 1, {0}, 0u);
  check_logits_gather(5, 12, {}, 0u);
  const uint32_t bad = error_word(OpCode::LogitsGather, cuda::DeviceError::IndexOutOfRange);
  check_logits_gather(9, 333, {3, 9, -1}, bad);
  check_logits_gather(9, 64, {-2, 1}, bad);
}

}  // namespace
}  // namespace ember
