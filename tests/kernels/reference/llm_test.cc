// The LLM ops' reference kernels (rms_norm, rope, silu_mul, embedding, sample) against oracles
// written here in double, their shape functions and run-time input checks, and Philox4x32-10
// against the Random123 known-answer vectors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/reference/ops.h"
#include "runtime/core/float_codecs.h"
#include "runtime/core/philox.h"
#include "runtime/kernel/op_info.h"
#include "runtime/platform/platform.h"

namespace ember {
namespace {

namespace ref = kernels::reference;
constexpr ScalarType F = ScalarType::F32;
constexpr ScalarType I = ScalarType::I32;

void quiet_log(LogLevel, const char*, int, const char*) {}

class LlmReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PlatformHooks hooks;
    hooks.log = quiet_log;
    set_platform_hooks(hooks);
  }
  void TearDown() override { set_platform_hooks(PlatformHooks{}); }
};

// A tensor owning its bytes.
struct T {
  std::vector<uint64_t> storage;
  TensorView view;
  T() = default;
  T(ScalarType dtype, std::vector<int64_t> dims) {
    view.dtype = dtype;
    view.rank = static_cast<uint8_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) view.dims[i] = dims[i];
    storage.assign(static_cast<size_t>(view.nbytes()) / 8 + 2, 0);
    view.data = storage.data();
  }
  template <typename E>
  E* as() const { return view.data_as<E>(); }
  size_t numel() const { return static_cast<size_t>(view.numel()); }
};

T random_f32(std::vector<int64_t> dims, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  T t(F, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = dist(rng);
  return t;
}

T i32(std::vector<int64_t> dims, std::vector<int32_t> values) {
  T t(I, std::move(dims));
  std::copy(values.begin(), values.end(), t.as<int32_t>());
  return t;
}

T f32(std::vector<int64_t> dims, std::vector<float> values) {
  T t(F, std::move(dims));
  std::copy(values.begin(), values.end(), t.as<float>());
  return t;
}

// Shape function + kernel; outputs get their dims from the shape function.
Status shape(OpCode op, const OpAttrs& attrs, const std::vector<TensorView>& in, std::vector<TensorView>* out,
             ErrorContext* ctx) {
  const OpInfo* info = find_op_info(op);
  out->assign(info->outputs, TensorView());
  return info->shape(attrs, in.data(), in.size(), out->data(), out->size(), Span<const int64_t>(), ctx);
}

std::vector<T> run(OpCode op, KernelFn fn, const OpAttrs& attrs, const std::vector<TensorView>& in) {
  std::vector<TensorView> views;
  ErrorContext ctx;
  const Status s = shape(op, attrs, in, &views, &ctx);
  EXPECT_TRUE(s.is_ok()) << ctx.message;
  std::vector<T> outs;
  for (const TensorView& v : views) outs.emplace_back(v.dtype, std::vector<int64_t>(v.dims, v.dims + v.rank));
  std::vector<TensorView> out_views;
  for (T& t : outs) out_views.push_back(t.view);
  std::vector<uint8_t> scratch;
  KernelContext kctx;
  if (op == OpCode::Sample) {
    scratch.resize(ref::sample_scratch(attrs, in.data(), in.size(), out_views.data(), out_views.size(), 1));
    kctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  }
  fn(kctx, attrs, in.data(), in.size(), out_views.data(), out_views.size());
  return outs;
}

Status check(OpCode op, const std::vector<TensorView>& in, ErrorContext* ctx) {
  return find_op_info(op)->check_inputs(OpAttrs{}, in.data(), in.size(), ctx);
}

OpAttrs norm_attrs(float eps, int axis = -1) {
  OpAttrs a;
  a.kind = AttrKind::Norm;
  a.axis = axis;
  a.epsilon = eps;
  return a;
}

// ---- Philox ---------------------------------------------------------------------------------------

TEST_F(LlmReferenceTest, PhiloxKnownAnswers) {  // Random123 kat_vectors, philox4x32 10 rounds
  const uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  const Philox4x32 a = philox4x32_10(c0, k0);
  EXPECT_EQ(a.v[0], 0x6627e8d5u);
  EXPECT_EQ(a.v[1], 0xe169c58du);
  EXPECT_EQ(a.v[2], 0xbc57ac4cu);
  EXPECT_EQ(a.v[3], 0x9b00dbd8u);
  const uint32_t c1[4] = {~0u, ~0u, ~0u, ~0u}, k1[2] = {~0u, ~0u};
  const Philox4x32 b = philox4x32_10(c1, k1);
  EXPECT_EQ(b.v[0], 0x408f276du);
  EXPECT_EQ(b.v[3], 0x6d5451fdu);
  const uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, k2[2] = {0xa4093822u, 0x299f31d0u};
  const Philox4x32 c = philox4x32_10(c2, k2);
  EXPECT_EQ(c.v[0], 0xd16cfe09u);
  EXPECT_EQ(c.v[1], 0x94fdccebu);
  EXPECT_EQ(c.v[2], 0x5001e420u);
  EXPECT_EQ(c.v[3], 0x24126ea1u);
  for (uint32_t s = 0; s < 100; ++s) {
    const double u = sample_uniform(s, s * 7);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

// ---- rms_norm -------------------------------------------------------------------------------------

TEST_F(LlmReferenceTest, RmsNormMatchesDoubleOracle) {
  for (auto dims : std::vector<std::vector<int64_t>>{{1, 1}, {3, 64}, {5, 4, 16}, {2, 1000}, {7}}) {
    T x = random_f32(dims, 1), w = random_f32({dims.back()}, 2, 0.5f, 1.5f);
    const float eps = 1e-6f;
    auto out = run(OpCode::RmsNorm, ref::rms_norm, norm_attrs(eps), {x.view, w.view});
    const int64_t h = dims.back(), rows = static_cast<int64_t>(x.numel()) / h;
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0.0;
      for (int64_t i = 0; i < h; ++i) ss += double(x.as<float>()[r * h + i]) * x.as<float>()[r * h + i];
      const double inv = 1.0 / std::sqrt(ss / double(h) + eps);
      for (int64_t i = 0; i < h; ++i) {
        const double e = double(w.as<float>()[i]) * x.as<float>()[r * h + i] * inv;
        EXPECT_NEAR(out[0].as<float>()[r * h + i], e, 1e-6 + 1e-6 * std::fabs(e)) << r << " " << i;
      }
    }
  }
}

TEST_F(LlmReferenceTest, RmsNormShapeErrors) {
  ErrorContext ctx;
  std::vector<TensorView> out;
  T x(F, {2, 8}), w(F, {8}), w7(F, {7}), xi(I, {2, 8}), empty(F, {2, 0}), w0(F, {0});
  EXPECT_TRUE(shape(OpCode::RmsNorm, norm_attrs(1e-5f), {x.view, w.view}, &out, &ctx).is_ok());
  EXPECT_TRUE(shape(OpCode::RmsNorm, norm_attrs(1e-5f, 1), {x.view, w.view}, &out, &ctx).is_ok());
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(1e-5f, 0), {x.view, w.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(1e-5f), {x.view, w7.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(-1.0f), {x.view, w.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(NAN), {x.view, w.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(1e-5f), {xi.view, w.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(1e-5f), {empty.view, w0.view}, &out, &ctx).code(),
            Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::RmsNorm, norm_attrs(1e-5f), {x.view}, &out, &ctx).code(), Error::InvalidArgument);
}

// ---- rope -----------------------------------------------------------------------------------------

TEST_F(LlmReferenceTest, RopeMatchesRotationOracle) {
  const int64_t t = 5, heads = 3, d = 8;
  T x = random_f32({t, heads, d}, 3);
  T pos = i32({t}, {0, 1, 7, 100, 4095});
  T inv = f32({d / 2}, {1.0f, 0.1f, 0.01f, 0.001f});
  auto out = run(OpCode::Rope, ref::rope, OpAttrs{}, {x.view, pos.view, inv.view});
  for (int64_t a = 0; a < t; ++a) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = double(float(pos.as<int32_t>()[a]) * inv.as<float>()[i]);
        const float* xr = x.as<float>() + (a * heads + h) * d;
        const double y1 = xr[i] * std::cos(angle) - xr[i + d / 2] * std::sin(angle);
        const double y2 = xr[i + d / 2] * std::cos(angle) + xr[i] * std::sin(angle);
        const float* yr = out[0].as<float>() + (a * heads + h) * d;
        EXPECT_NEAR(yr[i], y1, 2e-6);
        EXPECT_NEAR(yr[i + d / 2], y2, 2e-6);
      }
    }
  }
  // Position 0 is the identity.
  for (int64_t i = 0; i < heads * d; ++i) EXPECT_EQ(out[0].as<float>()[i], x.as<float>()[i]);
}

TEST_F(LlmReferenceTest, RopeShapeAndInputErrors) {
  ErrorContext ctx;
  std::vector<TensorView> out;
  T x(F, {2, 3, 8}), pos = i32({2}, {0, 5}), inv = f32({4}, {1, 1, 1, 1});
  EXPECT_TRUE(shape(OpCode::Rope, OpAttrs{}, {x.view, pos.view, inv.view}, &out, &ctx).is_ok());
  T odd(F, {2, 3, 7}), inv3(F, {3}), pos64(ScalarType::I64, {2}), pos3(I, {3}), x2(F, {2, 8});
  EXPECT_EQ(shape(OpCode::Rope, OpAttrs{}, {odd.view, pos.view, inv3.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Rope, OpAttrs{}, {x.view, pos64.view, inv.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Rope, OpAttrs{}, {x.view, pos3.view, inv.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Rope, OpAttrs{}, {x.view, pos.view, inv3.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Rope, OpAttrs{}, {x2.view, pos.view, inv.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_TRUE(check(OpCode::Rope, {x.view, pos.view, inv.view}, &ctx).is_ok());
  T neg = i32({2}, {3, -1});
  ErrorContext c1;
  EXPECT_EQ(check(OpCode::Rope, {x.view, neg.view, inv.view}, &c1).code(), Error::InvalidArgument);
  EXPECT_NE(std::string(c1.message).find("position -1 at index 1"), std::string::npos) << c1.message;
  T big = f32({4}, {1, 1, 3e38f, 1});
  ErrorContext c2;
  EXPECT_EQ(check(OpCode::Rope, {x.view, pos.view, big.view}, &c2).code(), Error::InvalidArgument);
  EXPECT_NE(std::string(c2.message).find("not finite"), std::string::npos) << c2.message;
}

// ---- silu_mul -------------------------------------------------------------------------------------

TEST_F(LlmReferenceTest, SiluMulMatchesOracle) {
  T g = random_f32({4, 37}, 4, -10.0f, 10.0f), u = random_f32({4, 37}, 5);
  g.as<float>()[0] = 100.0f, g.as<float>()[1] = -100.0f, g.as<float>()[2] = 0.0f;
  auto out = run(OpCode::SiluMul, ref::silu_mul, OpAttrs{}, {g.view, u.view});
  for (size_t i = 0; i < g.numel(); ++i) {
    const double x = g.as<float>()[i];
    const double e = x / (1.0 + std::exp(-x)) * u.as<float>()[i];
    EXPECT_NEAR(out[0].as<float>()[i], e, 1e-6 + 2e-7 * std::fabs(e));
  }
  ErrorContext ctx;
  std::vector<TensorView> o;
  T a(F, {4, 37}), b(F, {4, 36}), bi(I, {4, 37});
  EXPECT_EQ(shape(OpCode::SiluMul, OpAttrs{}, {a.view, b.view}, &o, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::SiluMul, OpAttrs{}, {a.view, bi.view}, &o, &ctx).code(), Error::InvalidArgument);
}

// ---- embedding ------------------------------------------------------------------------------------

TEST_F(LlmReferenceTest, EmbeddingConvertsRowsExactly) {
  const int64_t v = 4, h = 3;
  T wf = random_f32({v, h}, 6);
  T wb(ScalarType::BF16, {v, h}), wh(ScalarType::F16, {v, h});
  const uint16_t bf[] = {0x3F80, 0xC000, 0x0001, 0x7F80, 0xFF80, 0x7FC1, 0x8000, 0x4049, 0x3EAA, 0x0080, 0x1234, 0xABCD};
  const uint16_t hf[] = {0x3C00, 0xC000, 0x0001, 0x7C00, 0xFC00, 0x7E01, 0x8000, 0x4248, 0x3555, 0x0400, 0x1234, 0xABCD};
  std::memcpy(wb.as<uint16_t>(), bf, sizeof(bf));
  std::memcpy(wh.as<uint16_t>(), hf, sizeof(hf));
  T ids = i32({5}, {3, 0, 2, 2, 1});
  for (const T* w : {&wf, &wb, &wh}) {
    auto out = run(OpCode::Embedding, ref::embedding, OpAttrs{}, {w->view, ids.view});
    ASSERT_EQ(out[0].view.dtype, F);
    ASSERT_EQ(out[0].view.dims[0], 5);
    ASSERT_EQ(out[0].view.dims[1], h);
    for (int64_t t = 0; t < 5; ++t) {
      for (int64_t i = 0; i < h; ++i) {
        const int64_t k = ids.as<int32_t>()[t] * h + i;
        float e;
        if (w == &wf) e = wf.as<float>()[k];
        else if (w == &wb) { const uint32_t bits = uint32_t(bf[k]) << 16; std::memcpy(&e, &bits, 4); }
        else e = f16_to_f32(hf[k]);
        const float a = out[0].as<float>()[t * h + i];
        uint32_t ab, eb;
        std::memcpy(&ab, &a, 4), std::memcpy(&eb, &e, 4);
        EXPECT_EQ(ab, eb) << to_string(w->view.dtype) << " t=" << t << " i=" << i;
      }
    }
  }
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // the oracle's subnormal, independently
}

TEST_F(LlmReferenceTest, EmbeddingErrors) {
  ErrorContext ctx;
  std::vector<TensorView> out;
  T w(F, {10, 4}), wi(I, {10, 4}), w3(F, {10, 4, 1}), ids = i32({3}, {0, 9, 5}), ids64(ScalarType::I64, {3}),
      ids2(I, {1, 3});
  EXPECT_TRUE(shape(OpCode::Embedding, OpAttrs{}, {w.view, ids.view}, &out, &ctx).is_ok());
  EXPECT_EQ(shape(OpCode::Embedding, OpAttrs{}, {wi.view, ids.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Embedding, OpAttrs{}, {w3.view, ids.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Embedding, OpAttrs{}, {w.view, ids64.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(shape(OpCode::Embedding, OpAttrs{}, {w.view, ids2.view}, &out, &ctx).code(), Error::InvalidArgument);
  EXPECT_TRUE(check(OpCode::Embedding, {w.view, ids.view}, &ctx).is_ok());
  for (int32_t bad : {10, -1, 1 << 30}) {
    T b = i32({3}, {0, 1, bad});
    ErrorContext c;
    EXPECT_EQ(check(OpCode::Embedding, {w.view, b.view}, &c).code(), Error::InvalidArgument);
    const std::string want = "id " + std::to_string(bad) + " at index 2";
    EXPECT_NE(std::string(c.message).find(want), std::string::npos) << c.message;
    // Unchecked, the kernel stays in bounds and writes a zero row.
    auto o = run(OpCode::Embedding, ref::embedding, OpAttrs{}, {w.view, b.view});
    for (int i = 0; i < 4; ++i) EXPECT_EQ(o[0].as<float>()[2 * 4 + i], 0.0f);
  }
}

// ---- sample ---------------------------------------------------------------------------------------

// The sample op's inputs for S rows of V logits, each parameter the same for every row.
struct SampleInputs {
  T logits, temperature, top_k, top_p, penalty, seed, position, history, history_len;
  SampleInputs(int64_t s, int64_t v, int64_t hmax) :
      logits(F, {s, v}), temperature(F, {s}), top_k(I, {s}), top_p(F, {s}), penalty(F, {s}), seed(I, {s}),
      position(I, {s}), history(I, {s, hmax}), history_len(I, {s}) {
    for (int64_t r = 0; r < s; ++r) {
      temperature.as<float>()[r] = 1.0f;
      top_p.as<float>()[r] = 1.0f;
      penalty.as<float>()[r] = 1.0f;
    }
  }
  std::vector<TensorView> views() const {
    return {logits.view, temperature.view, top_k.view, top_p.view, penalty.view, seed.view, position.view,
            history.view, history_len.view};
  }
};

// Oracle: the processed distribution of one row (double), after penalty, temperature, top-k, top-p.
std::vector<double> processed(std::vector<float> l, float temp, int k, float p, float penalty,
                              const std::vector<int>& history) {
  std::set<int> seen(history.begin(), history.end());
  for (int id : seen) {
    if (id >= 0) l[id] = l[id] < 0 ? l[id] * penalty : l[id] / penalty;
  }
  const size_t v = l.size();
  std::vector<double> z(v);
  for (size_t i = 0; i < v; ++i) z[i] = double(l[i] / temp);
  std::vector<bool> keep(v, true);
  if (k > 0 && size_t(k) < v) {
    std::vector<double> sorted = z;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    for (size_t i = 0; i < v; ++i) keep[i] = z[i] >= sorted[k - 1];
  }
  double m = -INFINITY;
  for (size_t i = 0; i < v; ++i) if (keep[i]) m = std::max(m, z[i]);
  std::vector<double> w(v, 0.0);
  double total = 0;
  for (size_t i = 0; i < v; ++i) if (keep[i]) total += (w[i] = std::exp(z[i] - m));
  if (p < 1.0f) {
    std::vector<size_t> order;
    for (size_t i = 0; i < v; ++i) if (keep[i]) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] > z[b]; });
    double cum = 0;
    size_t n = 0;
    while (n < order.size()) {
      cum += w[order[n]] / total;
      ++n;
      if (cum >= p) break;
    }
    for (size_t j = n; j < order.size(); ++j) w[order[j]] = 0.0;
  }
  const double s = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= s;
  return w;
}

struct Draws {
  std::vector<int> counts;
  std::vector<float> logprob;  // of the last draw of each id
};

// n draws of one row (seeds 0..n-1, position 3) through the reference kernel, 64 rows per call.
Draws draw(const std::vector<float>& l, float temp, int k, float p, float penalty, const std::vector<int>& hist,
           int n) {
  const int64_t v = static_cast<int64_t>(l.size()), hmax = static_cast<int64_t>(hist.size());
  Draws d{std::vector<int>(v, 0), std::vector<float>(v, NAN)};
  for (int first = 0; first < n; first += 64) {
    const int64_t s = std::min(64, n - first);
    SampleInputs in(s, v, hmax);
    for (int64_t r = 0; r < s; ++r) {
      std::copy(l.begin(), l.end(), in.logits.as<float>() + r * v);
      in.temperature.as<float>()[r] = temp;
      in.top_k.as<int32_t>()[r] = k;
      in.top_p.as<float>()[r] = p;
      in.penalty.as<float>()[r] = penalty;
      in.seed.as<int32_t>()[r] = first + static_cast<int32_t>(r);
      in.position.as<int32_t>()[r] = 3;
      std::copy(hist.begin(), hist.end(), in.history.as<int32_t>() + r * hmax);
      in.history_len.as<int32_t>()[r] = static_cast<int32_t>(hmax);
    }
    auto out = run(OpCode::Sample, ref::sample, OpAttrs{}, in.views());
    for (int64_t r = 0; r < s; ++r) {
      const int32_t id = out[0].as<int32_t>()[r];
      EXPECT_GE(id, 0);
      EXPECT_LT(id, v);
      if (id < 0 || id >= v) continue;
      ++d.counts[id];
      d.logprob[id] = out[1].as<float>()[r];
    }
  }
  return d;
}

// Pearson chi-square of the counts against the probabilities; ids of probability 0 must not occur.
double chi_square(const Draws& d, const std::vector<double>& probs, int n) {
  double chi = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) {
      EXPECT_EQ(d.counts[i], 0) << "id " << i << " is outside the processed distribution";
      continue;
    }
    const double e = probs[i] * n;
    chi += (d.counts[i] - e) * (d.counts[i] - e) / e;
    if (d.counts[i] > 0) {
      EXPECT_NEAR(d.logprob[i], std::log(probs[i]), 1e-5) << "id " << i;
    }
  }
  return chi;
}

const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f};

TEST_F(LlmReferenceTest, SampleGreedyIsArgmaxWithLowestTie) {
  SampleInputs in(3, 8, 2);
  for (int r = 0; r < 3; ++r) {
    std::copy(kLogits.begin(), kLogits.end(), in.logits.as<float>() + r * 8);
    in.temperature.as<float>()[r] = 0.0f;
    in.seed.as<int32_t>()[r] = r * 11;
    in.top_k.as<int32_t>()[r] = 1;
  }
  in.logits.as<float>()[2 * 8 + 6] = 9.0f;  // row 2: a unique max at 6
  in.logits.as<float>()[2 * 8 + 0] = NAN;   // NaN never wins
  auto out = run(OpCode::Sample, ref::sample, OpAttrs{}, in.views());
  EXPECT_EQ(out[0].as<int32_t>()[0], 1);  // 2.0 at ids 1 and 4: the lower
  EXPECT_EQ(out[0].as<int32_t>()[1], 1);
  EXPECT_EQ(out[0].as<int32_t>()[2], 6);
  const std::vector<double> p = processed(kLogits, 1.0f, 0, 1.0f, 1.0f, {});
  EXPECT_NEAR(out[1].as<float>()[0], std::log(p[1]), 1e-6);
}

TEST_F(LlmReferenceTest, SampleFrequenciesMatchTheProcessedDistribution) {
  const int n = 20000;
  struct Case { float temp; int k; float p; float penalty; std::vector<int> hist; } cases[] = {
      {1.0f, 0, 1.0f, 1.0f, {}},
      {0.7f, 0, 1.0f, 1.0f, {}},
      {1.3f, 3, 1.0f, 1.0f, {}},           // top-k 3: ids 1 and 4 tie at 2.0, then 6
      {1.0f, 2, 1.0f, 1.0f, {}},           // top-k 2 with the tie at the 2nd value
      {1.0f, 4, 1.0f, 1.0f, {}},           // 4th value 1.0 (id 0)
      {1.0f, 0, 0.6f, 1.0f, {}},           // nucleus
      {0.8f, 5, 0.9f, 1.0f, {}},           // both
      {1.0f, 0, 1.0f, 1.8f, {1, 3, 1, -1, 7}},  // penalty, a duplicate and padding
      {2.0f, 0, 0.0f, 1.0f, {}},           // top_p 0 keeps one: greedy-like
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "temp " << c.temp << " k " << c.k << " p " << c.p << " pen " << c.penalty);
    const std::vector<double> probs = processed(kLogits, c.temp, c.k, c.p, c.penalty, c.hist);
    const Draws d = draw(kLogits, c.temp, c.k, c.p, c.penalty, c.hist, n);
    int support = 0;
    for (double q : probs) support += q > 0;
    // 99.99% quantile of chi-square with up to 7 degrees of freedom is < 30.
    EXPECT_LT(chi_square(d, probs, n), 30.0);
    for (size_t i = 0; i < probs.size(); ++i) {
      if (probs[i] > 0.01) {
        EXPECT_GT(d.counts[i], 0) << i;
      }
    }
    EXPECT_GE(support, 1);
  }
}

TEST_F(LlmReferenceTest, SampleTopKTopPMasksMatchOracle) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> l(40);
    for (float& x : l) x = std::round(dist(rng) * 4.0f) / 4.0f;  // quarter steps: many ties
    const int k = trial % 7;
    const float p = trial % 3 == 0 ? 1.0f : 0.5f + 0.02f * trial;
    const std::vector<double> probs = processed(l, 1.0f, k, p, 1.0f, {});
    const Draws d = draw(l, 1.0f, k, p, 1.0f, {}, 4000);
    for (size_t i = 0; i < l.size(); ++i) {
      if (probs[i] == 0.0) {
        EXPECT_EQ(d.counts[i], 0) << "trial " << trial << " id " << i;
      }
      if (probs[i] > 0.01) {
        EXPECT_GT(d.counts[i], 0) << "trial " << trial << " id " << i;
      }
    }
  }
}

TEST_F(LlmReferenceTest, SampleIsDeterministicAndBatchInvariant) {
  const int64_t v = 1000, s = 9, hmax = 6;
  SampleInputs batch(s, v, hmax);
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t i = 0; i < s * v; ++i) batch.logits.as<float>()[i] = dist(rng);
  for (int64_t r = 0; r < s; ++r) {
    batch.temperature.as<float>()[r] = r % 3 == 0 ? 0.0f : 0.5f + 0.2f * r;
    batch.top_k.as<int32_t>()[r] = static_cast<int32_t>(r % 4 * 10);
    batch.top_p.as<float>()[r] = r % 2 ? 0.9f : 1.0f;
    batch.penalty.as<float>()[r] = r % 5 == 1 ? 1.3f : 1.0f;
    batch.seed.as<int32_t>()[r] = static_cast<int32_t>(12345 * r - 7);
    batch.position.as<int32_t>()[r] = static_cast<int32_t>(r * 100);
    for (int64_t j = 0; j < hmax; ++j) batch.history.as<int32_t>()[r * hmax + j] = static_cast<int32_t>((r * 37 + j * 101) % v);
    batch.history_len.as<int32_t>()[r] = static_cast<int32_t>(r % (hmax + 1));
  }
  auto all = run(OpCode::Sample, ref::sample, OpAttrs{}, batch.views());
  auto again = run(OpCode::Sample, ref::sample, OpAttrs{}, batch.views());
  for (int64_t r = 0; r < s; ++r) {
    EXPECT_EQ(all[0].as<int32_t>()[r], again[0].as<int32_t>()[r]);
    SampleInputs one(1, v, hmax);
    std::copy(batch.logits.as<float>() + r * v, batch.logits.as<float>() + (r + 1) * v, one.logits.as<float>());
    one.temperature.as<float>()[0] = batch.temperature.as<float>()[r];
    one.top_k.as<int32_t>()[0] = batch.top_k.as<int32_t>()[r];
    one.top_p.as<float>()[0] = batch.top_p.as<float>()[r];
    one.penalty.as<float>()[0] = batch.penalty.as<float>()[r];
    one.seed.as<int32_t>()[0] = batch.seed.as<int32_t>()[r];
    one.position.as<int32_t>()[0] = batch.position.as<int32_t>()[r];
    std::copy(batch.history.as<int32_t>() + r * hmax, batch.history.as<int32_t>() + (r + 1) * hmax,
              one.history.as<int32_t>());
    one.history_len.as<int32_t>()[0] = batch.history_len.as<int32_t>()[r];
    auto alone = run(OpCode::Sample, ref::sample, OpAttrs{}, one.views());
    EXPECT_EQ(alone[0].as<int32_t>()[0], all[0].as<int32_t>()[r]) << r;
    EXPECT_EQ(std::memcmp(alone[1].as<float>(), all[1].as<float>() + r, 4), 0) << r;
  }
  // A different position (the RNG counter) changes the draw for some rows.
  int changed = 0;
  for (int step = 1; step <= 20; ++step) {
    for (int64_t r = 0; r < s; ++r) batch.position.as<int32_t>()[r] += 1;
    auto next = run(OpCode::Sample, ref::sample, OpAttrs{}, batch.views());
    for (int64_t r = 0; r < s; ++r) changed += next[0].as<int32_t>()[r] != all[0].as<int32_t>()[r];
  }
  EXPECT_GT(changed, 0);
}

TEST_F(LlmReferenceTest, SampleShapeAndInputErrors) {
  ErrorContext ctx;
  std::vector<TensorView> out;
  SampleInputs in(2, 5, 3);
  EXPECT_TRUE(shape(OpCode::Sample, OpAttrs{}, in.views(), &out, &ctx).is_ok());
  EXPECT_EQ(out[0].dtype, I);
  EXPECT_EQ(out[1].dtype, F);
  EXPECT_EQ(out[0].dims[0], 2);
  EXPECT_TRUE(check(OpCode::Sample, in.views(), &ctx).is_ok());
  {
    std::vector<TensorView> v = in.views();
    v[2].dtype = F;  // top_k must be i32
    EXPECT_EQ(shape(OpCode::Sample, OpAttrs{}, v, &out, &ctx).code(), Error::InvalidArgument);
    v = in.views();
    v[7].dims[0] = 3;  // history rows
    EXPECT_EQ(shape(OpCode::Sample, OpAttrs{}, v, &out, &ctx).code(), Error::InvalidArgument);
    v = in.views();
    v[0].dims[1] = 0;  // empty vocabulary
    EXPECT_EQ(shape(OpCode::Sample, OpAttrs{}, v, &out, &ctx).code(), Error::InvalidArgument);
    v = in.views();
    v.pop_back();
    EXPECT_EQ(shape(OpCode::Sample, OpAttrs{}, v, &out, &ctx).code(), Error::InvalidArgument);
    TensorView one_out;
    EXPECT_EQ(find_op_info(OpCode::Sample)
                  ->shape(OpAttrs{}, in.views().data(), 9, &one_out, 1, Span<const int64_t>(), &ctx)
                  .code(),
              Error::InvalidArgument);
  }
  auto expect_bad = [&](auto mutate, const char* what) {
    SampleInputs b(2, 5, 3);
    mutate(b);
    ErrorContext c;
    EXPECT_EQ(check(OpCode::Sample, b.views(), &c).code(), Error::InvalidArgument) << what;
    EXPECT_NE(std::string(c.message).find(what), std::string::npos) << c.message;
  };
  expect_bad([](SampleInputs& b) { b.temperature.as<float>()[1] = -1.0f; }, "temperature");
  expect_bad([](SampleInputs& b) { b.temperature.as<float>()[1] = NAN; }, "temperature");
  expect_bad([](SampleInputs& b) { b.top_p.as<float>()[0] = 1.5f; }, "top_p");
  expect_bad([](SampleInputs& b) { b.penalty.as<float>()[0] = 0.0f; }, "repetition_penalty");
  expect_bad([](SampleInputs& b) { b.position.as<int32_t>()[1] = -3; }, "position -3");
  expect_bad([](SampleInputs& b) { b.history_len.as<int32_t>()[0] = 4; }, "history_len");
  expect_bad([](SampleInputs& b) { b.history_len.as<int32_t>()[0] = 2, b.history.as<int32_t>()[1] = 5; },
             "history id 5");
  SampleInputs pad(2, 5, 3);  // -1 padding (and ids beyond history_len) are fine
  pad.history.as<int32_t>()[0] = -1;
  pad.history.as<int32_t>()[2] = 99;
  pad.history_len.as<int32_t>()[0] = 2;
  EXPECT_TRUE(check(OpCode::Sample, pad.views(), &ctx).is_ok());
}

}  // namespace
}  // namespace ember
