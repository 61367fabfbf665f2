// kernels/cpu rms_norm, rope, silu_mul, embedding and sample against their reference twins on every
// target: sizes 0, 1, lanes +- 1 and large, 1 / 2 / 3 threads bitwise equal, and batch invariance
// (a row alone gives the same bits as inside a larger call).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "runtime/core/float_codecs.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;
constexpr ScalarType I = ScalarType::I32;

ThreadPool* Pool2() {
  static FixedThreadPool pool2(2);
  return &pool2;
}

// Runs fn on `in` with 1, 2 and 3 threads and a scratch sized by `scratch` (may be null); all
// outputs must agree bit for bit; returns the single-threaded outputs.
std::vector<Tensor> RunAll(OpCode op, KernelFn fn, ScratchFn scratch, const OpAttrs& attrs,
                           const std::vector<TensorView>& in) {
  const OpInfo* info = find_op_info(op);
  std::vector<TensorView> shapes(info->outputs);
  ErrorContext ectx;
  EXPECT_TRUE(info->shape(attrs, in.data(), in.size(), shapes.data(), shapes.size(), Span<const int64_t>(), &ectx)
                  .is_ok())
      << ectx.message;
  std::vector<Tensor> first;
  for (int threads : {1, 2, 3}) {
    std::vector<Tensor> outs;
    for (const TensorView& v : shapes) outs.emplace_back(v.dtype, std::vector<int64_t>(v.dims, v.dims + v.rank));
    std::vector<TensorView> views;
    for (Tensor& t : outs) views.push_back(t.view);
    KernelContext ctx;
    ctx.pool = threads == 1 ? nullptr : threads == 2 ? Pool2() : Pool(3);
    std::vector<uint8_t> buf;
    if (scratch != nullptr) {
      buf.assign(scratch(attrs, in.data(), in.size(), views.data(), views.size(), threads) + 1, 0xFF);
      ctx.scratch = Span<uint8_t>(buf.data() + 1, buf.size() - 1);  // deliberately misaligned
    }
    fn(ctx, attrs, in.data(), in.size(), views.data(), views.size());
    if (threads == 1) {
      first = std::move(outs);
    } else {
      for (size_t o = 0; o < first.size(); ++o) {
        EXPECT_TRUE(BytesEqual(outs[o], first[o])) << to_string(op) << " output " << o << ": " << threads
                                                   << " threads differ from 1";
      }
    }
  }
  return first;
}

Tensor Ids(std::vector<int64_t> dims, int32_t vocab, uint32_t seed) {
  Tensor t(I, std::move(dims));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < t.numel(); ++i) t.view.data_as<int32_t>()[i] = static_cast<int32_t>(rng() % vocab);
  return t;
}

OpAttrs NormAttrs(float eps) {
  OpAttrs a;
  a.kind = AttrKind::Norm;
  a.axis = -1;
  a.epsilon = eps;
  return a;
}

// Rows [r0, r0 + n) of a [rows, ..] tensor as its own tensor.
Tensor Rows(const Tensor& t, int64_t r0, int64_t n) {
  std::vector<int64_t> dims(t.view.dims, t.view.dims + t.view.rank);
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(dims[0]);
  dims[0] = n;
  Tensor out(t.view.dtype, dims);
  std::memcpy(out.view.data, static_cast<const uint8_t*>(t.view.data) + r0 * row_bytes, n * row_bytes);
  return out;
}

bool RowBytesEqual(const Tensor& part, const Tensor& whole, int64_t r0) {
  const size_t bytes = part.nbytes();
  return std::memcmp(part.view.data, static_cast<const uint8_t*>(whole.view.data) + r0 * bytes / std::max<int64_t>(part.view.dims[0], 1), bytes) == 0;
}

using LlmTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(LlmTest);

TEST_P(LlmTest, RmsNormTwinAllSizes) {
  for (int64_t h : EdgeSizes()) {
    if (h == 0) continue;  // an empty normalized dim is rejected by the shape function
    for (int64_t rows : {0, 1, 3}) {
      if (h > 2000 && rows > 1) continue;
      Tensor x = Random({rows, h}, 1, -3.0f, 3.0f), w = Random({h}, 2, 0.5f, 1.5f);
      SCOPED_TRACE(testing::Message() << "rows " << rows << " h " << h);
      auto cpu_out = RunAll(OpCode::RmsNorm, cpu::rms_norm, nullptr, NormAttrs(1e-6f), {x.view, w.view});
      Tensor expected;
      Shape(OpCode::RmsNorm, NormAttrs(1e-6f), std::vector<TensorView>{x.view, w.view}.data(), 2, &expected);
      TensorView in[] = {x.view, w.view};
      RunKernel(ref::rms_norm, NormAttrs(1e-6f), in, 2, &expected);
      // Only the f64 sum's order differs: at most one f32 rounding of the variance.
      EXPECT_TRUE(AllClose(cpu_out[0], expected, Tolerance{0.0f, 1e-6f}));
    }
  }
  // Per head ([T, heads, head_dim], Qwen3 q_norm) and batch invariance.
  Tensor x = Random({37, 4, 128}, 3), w = Random({128}, 4);
  auto all = RunAll(OpCode::RmsNorm, cpu::rms_norm, nullptr, NormAttrs(1e-6f), {x.view, w.view});
  for (int64_t r : {0, 17, 36}) {
    Tensor one = Rows(x, r, 1);
    auto alone = RunAll(OpCode::RmsNorm, cpu::rms_norm, nullptr, NormAttrs(1e-6f), {one.view, w.view});
    EXPECT_TRUE(RowBytesEqual(alone[0], all[0], r)) << r;
  }
}

TEST_P(LlmTest, RopeTwinExactAllSizes) {
  for (int64_t d : {2, 4, 8, 16, 30, 32, 34, 64, 128, 130, 256}) {
    for (int64_t tokens : {0, 1, 5, 40}) {
      const int64_t heads = 3;
      Tensor x = Random({tokens, heads, d}, 5);
      Tensor pos = Ids({tokens}, 40000, 6);
      Tensor inv(ScalarType::F32, {d / 2});
      for (int64_t i = 0; i < d / 2; ++i) inv.f()[i] = std::pow(500000.0f, -2.0f * float(i) / float(d));
      SCOPED_TRACE(testing::Message() << "tokens " << tokens << " d " << d);
      auto cpu_out = RunAll(OpCode::Rope, cpu::rope, nullptr, OpAttrs{}, {x.view, pos.view, inv.view});
      Tensor expected;
      TensorView in[] = {x.view, pos.view, inv.view};
      Shape(OpCode::Rope, OpAttrs{}, in, 3, &expected);
      RunKernel(ref::rope, OpAttrs{}, in, 3, &expected);
      EXPECT_TRUE(BytesEqual(cpu_out[0], expected));
    }
  }
  // Batch invariance: token 9 alone.
  Tensor x = Random({20, 2, 64}, 7), pos = Ids({20}, 1000, 8), inv = Random({32}, 9, 0.0f, 1.0f);
  auto all = RunAll(OpCode::Rope, cpu::rope, nullptr, OpAttrs{}, {x.view, pos.view, inv.view});
  Tensor x1 = Rows(x, 9, 1), p1 = Rows(pos, 9, 1);
  auto alone = RunAll(OpCode::Rope, cpu::rope, nullptr, OpAttrs{}, {x1.view, p1.view, inv.view});
  EXPECT_TRUE(RowBytesEqual(alone[0], all[0], 9));
}

TEST_P(LlmTest, SiluMulTwinAllSizes) {
  for (int64_t n : EdgeSizes()) {
    Tensor g = Random({n}, 10, -12.0f, 12.0f), u = Random({n}, 11);
    if (n > 3) g.f()[0] = 100.0f, g.f()[1] = -100.0f, g.f()[2] = 0.0f;
    SCOPED_TRACE(testing::Message() << "n " << n);
    auto cpu_out = RunAll(OpCode::SiluMul, cpu::silu_mul, nullptr, OpAttrs{}, {g.view, u.view});
    Tensor expected;
    TensorView in[] = {g.view, u.view};
    Shape(OpCode::SiluMul, OpAttrs{}, in, 2, &expected);
    RunKernel(ref::silu_mul, OpAttrs{}, in, 2, &expected);
    EXPECT_TRUE(AllClose(cpu_out[0], expected, kTranscendental));
    // Same numerics as the silu kernel, times up.
    Tensor s(ScalarType::F32, {n});
    TensorView gin[] = {g.view};
    RunKernel(cpu::silu, OpAttrs{}, gin, 1, &s);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(cpu_out[0].f()[i], s.f()[i] * u.f()[i]) << i;
  }
  Tensor g = Random({3, 5000}, 12), u = Random({3, 5000}, 13);  // row 1 alone
  auto all = RunAll(OpCode::SiluMul, cpu::silu_mul, nullptr, OpAttrs{}, {g.view, u.view});
  Tensor g1 = Rows(g, 1, 1), u1 = Rows(u, 1, 1);
  auto alone = RunAll(OpCode::SiluMul, cpu::silu_mul, nullptr, OpAttrs{}, {g1.view, u1.view});
  EXPECT_TRUE(RowBytesEqual(alone[0], all[0], 1));
}

TEST_P(LlmTest, EmbeddingTwinExactEveryDtype) {
  for (ScalarType wt : {ScalarType::F32, ScalarType::BF16, ScalarType::F16}) {
    for (int64_t h : EdgeSizes()) {
      if (h > 2000) continue;
      for (int64_t tokens : {0, 1, 7, 300}) {
        Tensor w = RandomBytes(wt, {50, h}, 14);  // every bit pattern: NaN, inf, subnormals
        Tensor ids = Ids({tokens}, 50, 15);
        SCOPED_TRACE(testing::Message() << to_string(wt) << " h " << h << " tokens " << tokens);
        auto cpu_out = RunAll(OpCode::Embedding, cpu::embedding, nullptr, OpAttrs{}, {w.view, ids.view});
        Tensor expected;
        TensorView in[] = {w.view, ids.view};
        Shape(OpCode::Embedding, OpAttrs{}, in, 2, &expected);
        RunKernel(ref::embedding, OpAttrs{}, in, 2, &expected);
        EXPECT_TRUE(BytesEqual(cpu_out[0], expected));
      }
    }
  }
  // An unchecked bad id gives a zero row, in bounds.
  Tensor w = Random({4, 9}, 16), ids(I, {2});
  ids.view.data_as<int32_t>()[0] = 4, ids.view.data_as<int32_t>()[1] = -7;
  auto out = RunAll(OpCode::Embedding, cpu::embedding, nullptr, OpAttrs{}, {w.view, ids.view});
  for (int i = 0; i < 18; ++i) EXPECT_EQ(out[0].f()[i], 0.0f);
}

TEST_P(LlmTest, LinearWithBf16WeightTwinAndBatchInvariance) {
  for (int64_t k : {1, 31, 64, 300}) {
    for (int64_t n : {1, 17, 96}) {
      for (int64_t m : {1, 3, 9}) {
        const Tensor wf = Random({n, k}, 20);
        Tensor w(ScalarType::BF16, {n, k});
        for (size_t i = 0; i < w.numel(); ++i) w.view.data_as<uint16_t>()[i] = ::ember::f32_to_bf16(wf.f()[i]);
        const Tensor x = Random({m, k}, 21, -2.0f, 2.0f), b = Random({n}, 22);
        SCOPED_TRACE(testing::Message() << "m " << m << " n " << n << " k " << k);
        for (bool bias : {false, true}) {
          std::vector<TensorView> in = {x.view, w.view};
          if (bias) in.push_back(b.view);
          OpAttrs attrs;
          attrs.kind = AttrKind::Linear;
          const auto cpu_out = RunAll(OpCode::Linear, cpu::linear_bf16_weight, cpu::linear_quantized_scratch, attrs, in);
          Tensor expected;
          Shape(OpCode::Linear, attrs, in.data(), in.size(), &expected);
          RunKernel(ref::linear_bf16_weight, attrs, in.data(), in.size(), &expected);
          EXPECT_TRUE(AllClose(cpu_out[0], expected, {1e-5f, 1e-5f}));
          // Row m - 1 alone is bitwise the same row of the batch.
          std::vector<TensorView> one = in;
          const Tensor last = Rows(x, m - 1, 1);
          one[0] = last.view;
          const auto alone = RunAll(OpCode::Linear, cpu::linear_bf16_weight, cpu::linear_quantized_scratch, attrs, one);
          EXPECT_TRUE(RowBytesEqual(alone[0], cpu_out[0], m - 1));
        }
      }
    }
  }
}

struct SampleBatch {
  Tensor logits, temperature, top_k, top_p, penalty, seed, position, history, history_len;
  std::vector<TensorView> views() const {
    return {logits.view, temperature.view, top_k.view, top_p.view, penalty.view,
            seed.view,   position.view,    history.view, history_len.view};
  }
};

SampleBatch MakeSampleBatch(int64_t s, int64_t v, int64_t hmax, uint32_t seed) {
  SampleBatch b{Random({s, v}, seed, -6.0f, 6.0f), Tensor(ScalarType::F32, {s}), Tensor(I, {s}),
                Tensor(ScalarType::F32, {s}), Tensor(ScalarType::F32, {s}), Tensor(I, {s}), Tensor(I, {s}),
                Ids({s, hmax}, static_cast<int32_t>(v), seed + 1), Tensor(I, {s})};
  for (int64_t r = 0; r < s; ++r) {
    b.temperature.f()[r] = r % 4 == 0 ? 0.0f : 0.3f + 0.25f * float(r % 5);
    b.top_k.view.data_as<int32_t>()[r] = static_cast<int32_t>((r % 3) * (v / 3 + 1)) - (r % 7 == 6 ? 5 : 0);
    b.top_p.f()[r] = r % 2 == 0 ? 1.0f : 0.5f + 0.05f * float(r % 9);
    b.penalty.f()[r] = r % 3 == 1 ? 1.2f : 1.0f;
    b.seed.view.data_as<int32_t>()[r] = static_cast<int32_t>(r * 2654435761u);
    b.position.view.data_as<int32_t>()[r] = static_cast<int32_t>(r * 13 + 1);
    b.history_len.view.data_as<int32_t>()[r] = static_cast<int32_t>(r % (hmax + 1));
    if (hmax > 0) b.history.view.data_as<int32_t>()[r * hmax] = -1;  // padding
  }
  return b;
}

TEST_P(LlmTest, SampleTwinExactThreadsAndBatchInvariance) {
  for (int64_t v : {1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 1000, 40000}) {
    for (int64_t s : {0, 1, 5, 16}) {
      if (v >= 40000 && s > 5) continue;
      SampleBatch b = MakeSampleBatch(s, v, 4, static_cast<uint32_t>(v * 31 + s));
      SCOPED_TRACE(testing::Message() << "S " << s << " V " << v);
      auto cpu_out = RunAll(OpCode::Sample, cpu::sample, cpu::sample_scratch, OpAttrs{}, b.views());
      std::vector<TensorView> in = b.views();
      std::vector<TensorView> shapes(2);
      ErrorContext ectx;
      ASSERT_TRUE(find_op_info(OpCode::Sample)->shape(OpAttrs{}, in.data(), 9, shapes.data(), 2, {}, &ectx).is_ok());
      Tensor ids(I, {s}), lp(ScalarType::F32, {s});
      TensorView outs[] = {ids.view, lp.view};
      std::vector<uint8_t> scratch(ref::sample_scratch(OpAttrs{}, in.data(), 9, outs, 2, 1));
      KernelContext ctx;
      ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
      ref::sample(ctx, OpAttrs{}, in.data(), 9, outs, 2);
      EXPECT_TRUE(BytesEqual(cpu_out[0], ids));
      EXPECT_TRUE(BytesEqual(cpu_out[1], lp));
      for (int64_t r = 0; r < s; r += 3) {  // each row alone
        SampleBatch one{Rows(b.logits, r, 1),  Rows(b.temperature, r, 1), Rows(b.top_k, r, 1),
                        Rows(b.top_p, r, 1),   Rows(b.penalty, r, 1),     Rows(b.seed, r, 1),
                        Rows(b.position, r, 1), Rows(b.history, r, 1),    Rows(b.history_len, r, 1)};
        auto alone = RunAll(OpCode::Sample, cpu::sample, cpu::sample_scratch, OpAttrs{}, one.views());
        EXPECT_EQ(alone[0].view.data_as<int32_t>()[0], cpu_out[0].view.data_as<int32_t>()[r]) << r;
        EXPECT_TRUE(RowBytesEqual(alone[1], cpu_out[1], r)) << r;
      }
    }
  }
}

// top-p over a few dominant tokens and a long tail more than 16 below the max: the cpu kernel sorts
// only the head when it reaches top_p (rows with top_p 0.5 .. 0.99), else the whole set (top_p
// 0.9999999: the tail's mass matters); both must equal the reference's full sort bit for bit.
TEST_P(LlmTest, SampleTopPHeadAndFallbackEqualTheReference) {
  const int64_t s = 8, v = 30000;
  SampleBatch b = MakeSampleBatch(s, v, 1, 77);
  std::mt19937 rng(78);
  std::uniform_real_distribution<float> head(-3.0f, 0.0f), tail(-30.0f, -16.5f);
  for (int64_t r = 0; r < s; ++r) {
    for (int64_t i = 0; i < v; ++i) b.logits.f()[r * v + i] = (i % 997 == 0) ? head(rng) : tail(rng);
    b.temperature.f()[r] = 1.0f;
    b.top_k.view.data_as<int32_t>()[r] = 0;
    b.top_p.f()[r] = r < 6 ? 0.5f + 0.09f * float(r) : 0.9999999f;
    b.penalty.f()[r] = 1.0f;
    b.history_len.view.data_as<int32_t>()[r] = 0;
  }
  auto cpu_out = RunAll(OpCode::Sample, cpu::sample, cpu::sample_scratch, OpAttrs{}, b.views());
  std::vector<TensorView> in = b.views();
  Tensor ids(I, {s}), lp(ScalarType::F32, {s});
  TensorView outs[] = {ids.view, lp.view};
  std::vector<uint8_t> scratch(ref::sample_scratch(OpAttrs{}, in.data(), 9, outs, 2, 1));
  KernelContext ctx;
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  ref::sample(ctx, OpAttrs{}, in.data(), 9, outs, 2);
  EXPECT_TRUE(BytesEqual(cpu_out[0], ids));
  EXPECT_TRUE(BytesEqual(cpu_out[1], lp));
}

TEST_P(LlmTest, SampleWithoutScratchWritesInvalidIds) {
  SampleBatch b = MakeSampleBatch(2, 10, 1, 3);
  Tensor ids(I, {2}), lp(ScalarType::F32, {2});
  TensorView outs[] = {ids.view, lp.view};
  std::vector<TensorView> in = b.views();
  KernelContext ctx;
  cpu::sample(ctx, OpAttrs{}, in.data(), 9, outs, 2);
  EXPECT_EQ(ids.view.data_as<int32_t>()[0], -1);
  EXPECT_TRUE(std::isnan(lp.f()[1]));
}

}  // namespace
}  // namespace ember::kernels::cpu_test
