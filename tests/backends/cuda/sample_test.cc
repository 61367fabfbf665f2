// The CUDA sample kernel (backends/cuda/ops/sample.cu) against kernels/reference's sample on the
// same inputs: greedy ids exactly (ties, NaN, -inf, +inf rows), sampled ids for many seeds and
// temperature / top-k / top-p / repetition-penalty combinations. A sampled id may differ from the
// reference's only where the draw u * sum (or a top-p cumulative sum vs top_p) lies within 1e-9
// (relative) of a cumulative boundary of the reference's own sequential sums; such rows are
// counted and printed (there should be ~0). logprobs within 1e-5 absolute (NaN where the
// reference gives NaN).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/reference/ops.h"
#include "runtime/core/philox.h"
#include "runtime/kernel/op_info.h"
#include "tests/backends/cuda/cuda_op_harness.h"

namespace ember {
namespace {

namespace cuda = backends::cuda;
namespace ref = kernels::reference;
using testing::CudaOpHarness;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct Batch {
  int64_t s = 0, v = 0, hmax = 0;
  std::vector<float> logits, temperature, top_p, penalty;
  std::vector<int32_t> top_k, seed, position, history, history_len;

  void resize(int64_t rows, int64_t vocab, int64_t hist) {
    s = rows, v = vocab, hmax = hist;
    logits.assign(static_cast<size_t>(rows * vocab), 0.0f);
    temperature.assign(static_cast<size_t>(rows), 1.0f);
    top_p.assign(static_cast<size_t>(rows), 1.0f);
    penalty.assign(static_cast<size_t>(rows), 1.0f);
    top_k.assign(static_cast<size_t>(rows), 0);
    seed.assign(static_cast<size_t>(rows), 0);
    position.assign(static_cast<size_t>(rows), 0);
    history.assign(static_cast<size_t>(rows * hist), -1);
    history_len.assign(static_cast<size_t>(rows), 0);
  }
  float* row(int64_t r) { return logits.data() + r * v; }
};

TensorView view(const void* data, ScalarType dtype, int64_t d0, int64_t d1 = -1) {
  TensorView t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.rank = d1 < 0 ? 1 : 2;
  t.dims[0] = d0;
  if (d1 >= 0) t.dims[1] = d1;
  return t;
}

std::vector<TensorView> inputs_of(const Batch& b) {
  return {view(b.logits.data(), ScalarType::F32, b.s, b.v),   view(b.temperature.data(), ScalarType::F32, b.s),
          view(b.top_k.data(), ScalarType::I32, b.s),         view(b.top_p.data(), ScalarType::F32, b.s),
          view(b.penalty.data(), ScalarType::F32, b.s),       view(b.seed.data(), ScalarType::I32, b.s),
          view(b.position.data(), ScalarType::I32, b.s),      view(b.history.data(), ScalarType::I32, b.s, b.hmax),
          view(b.history_len.data(), ScalarType::I32, b.s)};
}

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
};

Outcome run_reference(const Batch& b) {
  Outcome o;
  o.ids.assign(static_cast<size_t>(b.s), -7);
  o.logprobs.assign(static_cast<size_t>(b.s), -7.0f);
  std::vector<TensorView> in = inputs_of(b);
  std::vector<TensorView> out = {view(o.ids.data(), ScalarType::I32, b.s), view(o.logprobs.data(), ScalarType::F32, b.s)};
  OpAttrs attrs;
  std::vector<uint8_t> scratch(ref::sample_scratch(attrs, in.data(), in.size(), out.data(), out.size(), 1));
  KernelContext ctx;
  ctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  ref::sample(ctx, attrs, in.data(), in.size(), out.data(), out.size());
  return o;
}

bool run_gpu(const Batch& b, Outcome* o) {
  CudaOpHarness harness;
  if (!harness.ok()) return false;
  o->ids.assign(static_cast<size_t>(b.s), -7);
  o->logprobs.assign(static_cast<size_t>(b.s), -7.0f);
  OpAttrs attrs;
  const auto r = harness.run(cuda::sample, cuda::sample_scratch, attrs, inputs_of(b),
                             {view(o->ids.data(), ScalarType::I32, b.s), view(o->logprobs.data(), ScalarType::F32, b.s)});
  EXPECT_FALSE(r.failed) << r.message;
  EXPECT_EQ(r.error_word, 0u);
  return !r.failed;
}

// The reference's processed row (steps 1-4), replayed on the host to measure how close the draw and
// the top-p cut were to a boundary. Returns false for rows answered without a draw.
struct Replay {
  std::vector<float> z;
  double m = 0.0, sum = 0.0, target = 0.0;
  double top_p_margin = std::numeric_limits<double>::infinity();  // min |cum_j - top_p| at the cut
};

bool replay(const Batch& b, int64_t r, Replay* out) {
  const int64_t v = b.v;
  const float* l = b.logits.data() + r * v;
  std::vector<float>& z = out->z;
  z.assign(l, l + v);
  const int32_t hlen = std::min<int32_t>(std::max<int32_t>(b.history_len[r], 0), static_cast<int32_t>(b.hmax));
  for (int32_t j = 0; j < hlen; ++j) {
    const int32_t id = b.history[r * b.hmax + j];
    if (id < 0 || id >= v) continue;
    z[id] = l[id] < 0.0f ? l[id] * b.penalty[r] : l[id] / b.penalty[r];
  }
  const float t = b.temperature[r];
  if (t == 0.0f) return false;
  for (float& x : z) {
    const float q = x / t;
    x = std::isnan(q) ? -kInf : q;
  }
  const int32_t k = b.top_k[r];
  if (k > 0 && k < v) {
    std::vector<float> sorted(z);
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
    const float kth = sorted[k - 1];
    for (float& x : z) {
      if (x < kth) x = -kInf;
    }
  }
  double m = -std::numeric_limits<double>::infinity();
  for (float x : z) m = std::max(m, static_cast<double>(x));
  if (std::isinf(m)) return false;
  out->m = m;
  if (b.top_p[r] < 1.0f) {
    std::vector<int32_t> idx;
    double total = 0.0;
    for (int64_t i = 0; i < v; ++i) {
      if (z[i] == -kInf) continue;
      idx.push_back(static_cast<int32_t>(i));
      total += std::exp(static_cast<double>(z[i]) - m);
    }
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t c) { return z[a] > z[c] || (z[a] == z[c] && a < c); });
    double cum = 0.0;
    size_t keep = idx.size();
    for (size_t j = 0; j < idx.size(); ++j) {
      cum += std::exp(static_cast<double>(z[idx[j]]) - m) / total;
      out->top_p_margin = std::min(out->top_p_margin, std::fabs(cum - static_cast<double>(b.top_p[r])));
      if (cum >= static_cast<double>(b.top_p[r])) {
        keep = j + 1;
        break;
      }
    }
    for (size_t j = keep; j < idx.size(); ++j) z[idx[j]] = -kInf;
  }
  double sum = 0.0;
  for (float x : z) {
    if (x != -kInf) sum += std::exp(static_cast<double>(x) - m);
  }
  out->sum = sum;
  out->target = sample_uniform(static_cast<uint32_t>(b.seed[r]), static_cast<uint32_t>(b.position[r])) * sum;
  return true;
}

// Running sum of the kept weights up to and including id (ascending ids).
double cum_through(const Replay& p, int64_t id) {
  double cum = 0.0;
  for (int64_t i = 0; i <= id; ++i) {
    if (p.z[i] != -kInf) cum += std::exp(static_cast<double>(p.z[i]) - p.m);
  }
  return cum;
}

struct Tally {
  int rows = 0, mismatched = 0, near_boundary = 0;
};

// Compares the GPU's answer with the reference's, row by row.
void compare(const Batch& b, const Outcome& got, const Outcome& want, Tally* tally, const char* what) {
  for (int64_t r = 0; r < b.s; ++r) {
    ++tally->rows;
    const int32_t g = got.ids[r], w = want.ids[r];
    if (g != w) {
      ++tally->mismatched;
      Replay p;
      bool near = false;
      if (replay(b, r, &p)) {
        const double tol = 1e-9 * p.sum;
        const int64_t lo = std::min(g, w), hi = std::max(g, w);
        if (lo >= 0 && hi < b.v) {
          near = std::fabs(p.target - cum_through(p, lo)) <= tol || std::fabs(p.target - cum_through(p, hi - 1)) <= tol;
        }
        near = near || p.top_p_margin <= 1e-9;
      }
      if (near) {
        ++tally->near_boundary;
      } else {
        ADD_FAILURE() << what << " row " << r << ": id " << g << " vs reference " << w << " (temperature "
                      << b.temperature[r] << " top_k " << b.top_k[r] << " top_p " << b.top_p[r] << " penalty "
                      << b.penalty[r] << " seed " << b.seed[r] << " position " << b.position[r] << ")";
      }
      continue;
    }
    const float gl = got.logprobs[r], wl = want.logprobs[r];
    if (std::isnan(wl)) {
      EXPECT_TRUE(std::isnan(gl)) << what << " row " << r << ": logprob " << gl << " vs reference NaN";
    } else {
      EXPECT_NEAR(gl, wl, 1e-5) << what << " row " << r << " id " << g;
    }
  }
}

void check(const Batch& b, Tally* tally, const char* what) {
  Outcome got;
  ASSERT_TRUE(run_gpu(b, &got)) << what;
  const Outcome want = run_reference(b);
  compare(b, got, want, tally, what);
}

void report(const Tally& t, const char* what) {
  std::printf("[ sample ] %s: %d rows, %d ids differ, %d of them within 1e-9 of a boundary\n", what, t.rows,
              t.mismatched, t.near_boundary);
}

void fill_history(Batch& b, int64_t r, std::mt19937_64& rng) {
  // Negative ids are padding; ids >= V and lengths outside [0, Hmax] fail the step (see
  // ParametersOutsideTheirRulesFailTheStep).
  std::uniform_int_distribution<int32_t> id(-2, static_cast<int32_t>(b.v - 1));
  for (int64_t j = 0; j < b.hmax; ++j) b.history[r * b.hmax + j] = id(rng);
  if (b.hmax > 3) b.history[r * b.hmax + 1] = b.history[r * b.hmax];  // a duplicate applies once
  b.history_len[r] = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(b.hmax))(rng);
}

void random_logits(Batch& b, int64_t r, std::mt19937_64& rng, double scale) {
  std::normal_distribution<float> dist(0.0f, static_cast<float>(scale));
  float* row = b.row(r);
  for (int64_t i = 0; i < b.v; ++i) row[i] = dist(rng);
}

// ---- greedy ------------------------------------------------------------------------------------

TEST(CudaSample, GreedyRandomRows) {
  Tally tally;
  for (auto [s, v] : {std::pair<int64_t, int64_t>{37, 1003}, {1, 1}, {5, 32003}, {3, 152064}, {2, 262144}}) {
    Batch b;
    b.resize(s, v, 17);
    std::mt19937_64 rng(100 + v);
    for (int64_t r = 0; r < s; ++r) {
      random_logits(b, r, rng, 4.0);
      b.temperature[r] = 0.0f;
      b.penalty[r] = r % 3 == 0 ? 1.0f : (r % 3 == 1 ? 1.3f : 0.7f);
      b.top_k[r] = static_cast<int32_t>(r % 5);   // ignored by greedy
      b.top_p[r] = 0.5f;                           // ignored by greedy
      fill_history(b, r, rng);
    }
    check(b, &tally, "greedy");
  }
  EXPECT_EQ(tally.mismatched, 0);
  report(tally, "greedy random");
}

TEST(CudaSample, GreedySpecialRows) {
  Batch b;
  const int64_t v = 67;
  b.resize(10, v, 4);
  std::mt19937_64 rng(7);
  for (int64_t r = 0; r < b.s; ++r) {
    random_logits(b, r, rng, 2.0);
    b.temperature[r] = 0.0f;
  }
  float* row = b.row(0);  // ties: the first index of the maximum
  row[10] = row[20] = row[40] = 50.0f;
  row = b.row(1);  // NaN never wins
  row[0] = kNan, row[5] = 40.0f, row[6] = kNan;
  std::fill(b.row(2), b.row(2) + v, kNan);   // all NaN: id 0, NaN
  std::fill(b.row(3), b.row(3) + v, -kInf);  // all -inf: id 0, NaN
  row = b.row(4);  // +inf: its first index, 0
  row[7] = kInf, row[30] = kInf;
  row = b.row(5);  // -inf mixed with finite
  for (int64_t i = 0; i < v; i += 2) row[i] = -kInf;
  row = b.row(6);  // -0 and +0 as the maximum: the first of the two
  for (int64_t i = 0; i < v; ++i) row[i] = -1.0f - static_cast<float>(i);
  row[3] = -0.0f, row[9] = 0.0f;
  row = b.row(7);  // one finite value among NaN
  std::fill(row, row + v, kNan);
  row[44] = -3.0f;
  row = b.row(8);  // the penalty turns the maximum into a tie broken by index
  row[11] = 6.0f, row[12] = 3.0f;
  b.penalty[8] = 2.0f;
  b.history[8 * 4 + 0] = 11, b.history[8 * 4 + 1] = 11, b.history_len[8] = 2;
  std::fill(b.row(9), b.row(9) + v, 1.5f);  // constant row: id 0, log(1/V)
  Tally tally;
  check(b, &tally, "greedy special");
  EXPECT_EQ(tally.mismatched, 0);
  Outcome got;
  ASSERT_TRUE(run_gpu(b, &got));
  EXPECT_EQ(got.ids[0], 10);
  EXPECT_EQ(got.ids[2], 0);
  EXPECT_TRUE(std::isnan(got.logprobs[2]));
  EXPECT_EQ(got.ids[4], 7);
  EXPECT_EQ(got.logprobs[4], 0.0f);
  EXPECT_EQ(got.ids[6], 3);
  EXPECT_EQ(got.ids[7], 44);
}

// ---- sampled -----------------------------------------------------------------------------------

void sampled_batch(Batch& b, int64_t s, int64_t v, uint64_t seed, double scale) {
  b.resize(s, v, 9);
  std::mt19937_64 rng(seed);
  const float temps[] = {0.3f, 0.7f, 1.0f, 1.0f, 1.5f};
  const int32_t ks[] = {0, -1, 1, 2, 5, 40, static_cast<int32_t>(v - 1), static_cast<int32_t>(v), static_cast<int32_t>(v + 5), 0};
  const float ps[] = {1.0f, 0.95f, 0.9f, 0.5f, 0.1f, 0.0f, 0.75f, 1.0f, 0.999f};  // [0, 1]: the rule
  const float pens[] = {1.0f, 1.0f, 1.1f, 0.9f, 1.5f};
  for (int64_t r = 0; r < s; ++r) {
    random_logits(b, r, rng, scale);
    b.temperature[r] = temps[rng() % 5];
    b.top_k[r] = ks[rng() % 10];
    b.top_p[r] = ps[rng() % 9];
    b.penalty[r] = pens[rng() % 5];
    b.seed[r] = static_cast<int32_t>(static_cast<uint32_t>(rng()));
    b.position[r] = static_cast<int32_t>(rng() % 2000000);
    fill_history(b, r, rng);
  }
}

TEST(CudaSample, SampledMatchesReference) {
  Tally tally;
  uint64_t seed = 1000;
  for (auto [s, v, reps] : {std::tuple<int64_t, int64_t, int>{64, 1, 1}, {64, 7, 2}, {128, 1000, 4},
                            {64, 32003, 2}, {16, 152064, 2}, {4, 262144, 1}}) {
    for (int rep = 0; rep < reps; ++rep) {
      Batch b;
      sampled_batch(b, s, v, ++seed, rep % 2 == 0 ? 3.0 : 1.0);
      check(b, &tally, "sampled");
    }
  }
  report(tally, "sampled");
  EXPECT_LE(tally.near_boundary, 2);
}

// Many draws of one distribution: the same row with every seed / position.
TEST(CudaSample, SampledManySeeds) {
  Tally tally;
  for (int config = 0; config < 4; ++config) {
    Batch b;
    const int64_t s = 512, v = 513;
    b.resize(s, v, 1);
    std::mt19937_64 rng(77 + config);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> base(static_cast<size_t>(v));
    for (float& x : base) x = dist(rng);
    for (int64_t r = 0; r < s; ++r) {
      std::copy(base.begin(), base.end(), b.row(r));
      b.temperature[r] = config == 3 ? 0.6f : 1.0f;
      b.top_k[r] = config == 1 ? 20 : 0;
      b.top_p[r] = config == 2 || config == 3 ? 0.8f : 1.0f;
      b.seed[r] = static_cast<int32_t>(r * 2654435761u);
      b.position[r] = static_cast<int32_t>(r + config);
    }
    check(b, &tally, "many seeds");
  }
  report(tally, "many seeds");
  EXPECT_LE(tally.near_boundary, 2);
}

// Quantized logits: many exact ties at the top-k value and in the top-p order.
TEST(CudaSample, SampledTies) {
  Tally tally;
  for (int rep = 0; rep < 3; ++rep) {
    Batch b;
    sampled_batch(b, 128, 1000 + rep * 37, 5000 + rep, 2.0);
    for (float& x : b.logits) x = std::round(x * 2.0f) / 2.0f;
    for (int64_t r = 0; r < b.s; ++r) b.temperature[r] = 1.0f;  // z keeps the ties
    check(b, &tally, "ties");
  }
  Batch b;  // a constant row: every id tied
  b.resize(8, 100, 1);
  for (int64_t r = 0; r < b.s; ++r) {
    b.top_k[r] = static_cast<int32_t>(r * 7);
    b.top_p[r] = r % 2 == 0 ? 0.33f : 1.0f;
    b.seed[r] = static_cast<int32_t>(r + 1);
    b.position[r] = static_cast<int32_t>(r * 31);
  }
  check(b, &tally, "constant");
  report(tally, "ties");
  EXPECT_LE(tally.near_boundary, 2);
}

TEST(CudaSample, SampledNonFinite) {
  Batch b;
  const int64_t v = 301;
  b.resize(12, v, 2);
  std::mt19937_64 rng(9);
  for (int64_t r = 0; r < b.s; ++r) {
    random_logits(b, r, rng, 3.0);
    b.seed[r] = static_cast<int32_t>(rng());
    b.position[r] = static_cast<int32_t>(r);
  }
  float* row = b.row(0);  // -inf entries
  for (int64_t i = 0; i < v; i += 3) row[i] = -kInf;
  row = b.row(1);  // NaN entries (become -inf)
  for (int64_t i = 1; i < v; i += 2) row[i] = kNan;
  row = b.row(2);  // +inf: its first index, logprob 0
  row[100] = kInf, row[50] = kInf;
  std::fill(b.row(3), b.row(3) + v, -kInf);  // all -inf: id 0, NaN
  std::fill(b.row(4), b.row(4) + v, kNan);   // all NaN: id 0, NaN
  row = b.row(5);  // top-k beyond the finite values: the k-th is -inf
  std::fill(row, row + v, -kInf);
  row[7] = 1.0f, row[8] = 2.0f, row[200] = 2.0f;
  b.top_k[5] = 10;
  b.temperature[6] = 1e-37f;  // tiny: tempered logits near the top of the f32 range
  b.temperature[7] = 1e30f;   // huge: tempered logits near 0, every id almost alike
  b.top_k[7] = 3;
  row = b.row(8);  // +inf with top-k and top-p on
  row[33] = kInf;
  b.top_k[8] = 5, b.top_p[8] = 0.5f;
  row = b.row(9);  // one finite value, top-p on
  std::fill(row, row + v, -kInf);
  row[123] = -5.0f;
  b.top_p[9] = 0.3f;
  row = b.row(10);  // huge spread: weights underflow to 0 in double
  for (int64_t i = 0; i < v; ++i) row[i] = static_cast<float>(i % 2 == 0 ? -2000.0 : 1.0) + static_cast<float>(i) * 1e-3f;
  b.top_p[10] = 0.99f;
  b.penalty[11] = 1.2f;  // penalty on a NaN and a -inf logit
  b.row(11)[3] = kNan, b.row(11)[4] = -kInf;
  b.history[11 * 2 + 0] = 3, b.history[11 * 2 + 1] = 4, b.history_len[11] = 2;
  Tally tally;
  check(b, &tally, "non-finite");
  EXPECT_EQ(tally.mismatched, 0);
  Outcome got;
  ASSERT_TRUE(run_gpu(b, &got));
  EXPECT_EQ(got.ids[2], 50);
  EXPECT_EQ(got.logprobs[2], 0.0f);
  EXPECT_EQ(got.ids[3], 0);
  EXPECT_TRUE(std::isnan(got.logprobs[3]));
  EXPECT_EQ(got.ids[9], 123);
  EXPECT_NEAR(got.logprobs[9], 0.0f, 1e-6);
}

// The portable kernel's input check (sample_check) runs on the host; on the device the kernel
// applies the same rules: a bad row gets id 0 and a NaN logprob, the step's error word says
// BadSampling, and the other rows are still the reference's.
TEST(CudaSample, ParametersOutsideTheirRulesFailTheStep) {
  struct Bad {
    const char* what;
    void (*apply)(Batch&, int64_t r);
  };
  const Bad cases[] = {
      {"temperature NaN", [](Batch& b, int64_t r) { b.temperature[r] = kNan; }},
      {"temperature -1", [](Batch& b, int64_t r) { b.temperature[r] = -1.0f; }},
      {"temperature inf", [](Batch& b, int64_t r) { b.temperature[r] = kInf; }},
      {"top_p -0.1", [](Batch& b, int64_t r) { b.top_p[r] = -0.1f; }},
      {"top_p 1.5", [](Batch& b, int64_t r) { b.top_p[r] = 1.5f; }},
      {"top_p NaN", [](Batch& b, int64_t r) { b.top_p[r] = kNan; }},
      {"repetition_penalty 0", [](Batch& b, int64_t r) { b.penalty[r] = 0.0f; }},
      {"repetition_penalty -2", [](Batch& b, int64_t r) { b.penalty[r] = -2.0f; }},
      {"repetition_penalty inf", [](Batch& b, int64_t r) { b.penalty[r] = kInf; }},
      {"repetition_penalty NaN", [](Batch& b, int64_t r) { b.penalty[r] = kNan; }},
      {"position -1", [](Batch& b, int64_t r) { b.position[r] = -1; }},
      {"history_len -1", [](Batch& b, int64_t r) { b.history_len[r] = -1; }},
      {"history_len Hmax + 1", [](Batch& b, int64_t r) { b.history_len[r] = static_cast<int32_t>(b.hmax + 1); }},
      {"history id V", [](Batch& b, int64_t r) {
         b.history_len[r] = static_cast<int32_t>(b.hmax);
         b.history[r * b.hmax + b.hmax - 1] = static_cast<int32_t>(b.v);
       }},
  };
  const OpInfo* info = find_op_info(OpCode::Sample);
  ASSERT_NE(info, nullptr);
  ASSERT_NE(info->check_inputs, nullptr);
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.what);
    Batch b;
    b.resize(3, 257, 4);
    std::mt19937_64 rng(21);
    for (int64_t r = 0; r < b.s; ++r) {
      random_logits(b, r, rng, 2.0);
      b.temperature[r] = r == 2 ? 0.7f : 0.0f;
      b.seed[r] = static_cast<int32_t>(rng());
      b.position[r] = static_cast<int32_t>(r);
    }
    c.apply(b, 1);
    const std::vector<TensorView> in = inputs_of(b);
    ErrorContext ectx;
    EXPECT_FALSE(info->check_inputs(OpAttrs(), in.data(), in.size(), &ectx).is_ok()) << "the host check accepts it";
    const Outcome want = run_reference(b);
    CudaOpHarness harness;
    ASSERT_TRUE(harness.ok());
    Outcome got;
    got.ids.assign(3, -7);
    got.logprobs.assign(3, -7.0f);
    const auto r = harness.run(cuda::sample, cuda::sample_scratch, OpAttrs(), in,
                               {view(got.ids.data(), ScalarType::I32, b.s), view(got.logprobs.data(), ScalarType::F32, b.s)});
    ASSERT_FALSE(r.failed) << r.message;
    EXPECT_EQ(r.error_word, (static_cast<uint32_t>(OpCode::Sample) << 8) | static_cast<uint32_t>(cuda::DeviceError::BadSampling));
    EXPECT_EQ(got.ids[1], 0);
    EXPECT_TRUE(std::isnan(got.logprobs[1]));
    for (int64_t row : {0, 2}) {
      EXPECT_EQ(got.ids[size_t(row)], want.ids[size_t(row)]) << "row " << row;
      EXPECT_NEAR(got.logprobs[size_t(row)], want.logprobs[size_t(row)], 1e-5) << "row " << row;
    }
  }
}

TEST(CudaSample, ScratchAndEmptyBatch) {
  Batch b;
  b.resize(3, 1001, 2);
  const std::vector<TensorView> in = inputs_of(b);
  OpAttrs attrs;
  EXPECT_EQ(cuda::sample_scratch(attrs, in.data(), in.size(), nullptr, 0, 1), 3u * 1001u * sizeof(float));
  Batch empty;
  empty.resize(0, 50, 3);
  Outcome got;
  EXPECT_TRUE(run_gpu(empty, &got));
}

}  // namespace
}  // namespace ember
