// kernels/cpu quantized linears (FP8 any block, MXFP8, NVFP4, bf16, FP8 W8A8) on every compiled
// Highway target: within 1e-5 relative L2 of kernels/reference/quantized_linear.h, bitwise equal
// across 1 and 2 threads and for a row of x alone or inside a batch of any size (batch
// invariance); NaN codes, scales that do not fold, x of extreme magnitudes, every documented
// error; and the vectorized e4m3fn encoder against the scalar codec on all 2^32 f32s.
#include "kernels/cpu/quantized_linear.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/e4m3_encode.h"
#include "kernels/cpu/ops.h"
#include "kernels/reference/quantize.h"
#include "kernels/reference/quantized_linear.h"
#include "runtime/core/float_codecs.h"
#include "runtime/core/quant.h"
#include "tests/common/test_util.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

enum class Fmt { Fp8, Mxfp8, Nvfp4, Bf16, W8a8 };

const char* FmtName(Fmt f) {
  switch (f) {
    case Fmt::Fp8: return "fp8";
    case Fmt::Mxfp8: return "mxfp8";
    case Fmt::Nvfp4: return "nvfp4";
    case Fmt::Bf16: return "bf16";
    case Fmt::W8a8: return "w8a8";
  }
  return "?";
}

// A weight [n, k] in one format, with the reference dequantization (weight-only formats).
struct QWeight {
  Fmt fmt = Fmt::Fp8;
  int64_t n = 0, k = 0, bn = 1, bk = 1;
  std::vector<uint8_t> data;  // codes, packed nibbles or bf16 bytes
  std::vector<float> fscales;
  std::vector<uint8_t> uscales;
  float g = 1.0f;
  std::vector<float> dequant;
};

std::vector<float> RandomVec(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

// Random weights with row magnitudes 2^-3..2^1 and, with zero_block, the first block all zero.
QWeight MakeWeight(Fmt fmt, int64_t n, int64_t k, int64_t bn, int64_t bk, uint32_t seed,
                   bool zero_block = true) {
  QWeight q;
  q.fmt = fmt;
  q.n = n;
  q.k = k;
  q.bn = bn;
  q.bk = bk;
  std::vector<float> w = RandomVec(size_t(n * k), seed);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p) w[size_t(j * k + p)] *= std::ldexp(1.0f, int(j % 5) - 3);
  if (zero_block) {
    const int64_t rows = fmt == Fmt::Fp8 || fmt == Fmt::W8a8 ? std::min(bn, n) : 1;
    const int64_t cols = fmt == Fmt::Mxfp8 ? 32 : (fmt == Fmt::Nvfp4 ? 16 : std::min(bk, k));
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t p = 0; p < std::min(cols, k); ++p) w[size_t(j * k + p)] = 0.0f;
  }
  q.dequant.resize(size_t(n * k));
  Status s;
  switch (fmt) {
    case Fmt::Fp8:
    case Fmt::W8a8:
      q.data.resize(size_t(n * k));
      q.fscales.resize(size_t(((n + bn - 1) / bn) * ((k + bk - 1) / bk)));
      s = ref::quantize_fp8_e4m3(w.data(), n, k, bn, bk, q.data.data(), q.fscales.data());
      EXPECT_TRUE(s.is_ok());
      s = ref::dequantize_fp8_e4m3(q.data.data(), n, k, bn, bk, q.fscales.data(), q.dequant.data());
      break;
    case Fmt::Mxfp8:
      q.data.resize(size_t(n * k));
      q.uscales.resize(size_t(n * k / 32));
      s = ref::quantize_mxfp8(w.data(), n, k, q.data.data(), q.uscales.data());
      EXPECT_TRUE(s.is_ok());
      s = ref::dequantize_mxfp8(q.data.data(), n, k, q.uscales.data(), q.dequant.data());
      break;
    case Fmt::Nvfp4:
      q.data.resize(size_t(n * k / 2));
      q.uscales.resize(size_t(n * k / 16));
      s = ref::quantize_nvfp4(w.data(), n, k, q.data.data(), q.uscales.data(), &q.g);
      EXPECT_TRUE(s.is_ok());
      s = ref::dequantize_nvfp4(q.data.data(), n, k, q.uscales.data(), q.g, q.dequant.data());
      break;
    case Fmt::Bf16:
      q.data.resize(size_t(n * k * 2));
      for (size_t i = 0; i < w.size(); ++i) {
        const uint16_t b = f32_to_bf16(w[i]);
        std::memcpy(q.data.data() + 2 * i, &b, 2);
        q.dequant[i] = bf16_to_f32(b);
      }
      break;
  }
  EXPECT_TRUE(s.is_ok());
  return q;
}

ThreadPool* Pool2() {
  static FixedThreadPool pool(2);
  return &pool;
}

// The cpu kernel with `threads` (1: no pool, 2: a FixedThreadPool(2)) and a scratch of exactly the
// documented size, placed at an odd address and filled with NaN bytes.
Status RunCpu(const QWeight& w, const float* x, int64_t m, const float* bias, float* y,
              int threads, ErrorContext* error = nullptr, size_t scratch_bytes = SIZE_MAX,
              bool nan_free = false) {
  const bool w8a8 = w.fmt == Fmt::W8a8;
  if (scratch_bytes == SIZE_MAX) {
    scratch_bytes = cpu::quantized_linear_scratch_bytes(m, w.k, size_t(threads), w8a8);
  }
  std::vector<uint8_t> scratch(scratch_bytes + 1, 0xFF);  // NaN bytes: the kernel must not read them
  KernelContext ctx;
  ctx.pool = threads > 1 ? Pool2() : nullptr;
  ctx.scratch = Span<uint8_t>(scratch.data() + 1, scratch_bytes);
  const auto* u16 = reinterpret_cast<const uint16_t*>(w.data.data());
  switch (w.fmt) {
    case Fmt::Fp8:
      return cpu::linear_fp8_e4m3(ctx, x, m, w.data.data(), w.n, w.k, w.bn, w.bk, w.fscales.data(),
                                  bias, y, error, nan_free);
    case Fmt::Mxfp8:
      return cpu::linear_mxfp8(ctx, x, m, w.data.data(), w.n, w.k, w.uscales.data(), bias, y, error,
                               nan_free);
    case Fmt::Nvfp4:
      return cpu::linear_nvfp4(ctx, x, m, w.data.data(), w.n, w.k, w.uscales.data(), w.g, bias, y,
                               error);
    case Fmt::Bf16: return cpu::linear_bf16(ctx, x, m, u16, w.n, w.k, bias, y, error);
    case Fmt::W8a8:
      return cpu::linear_fp8_e4m3_w8a8(ctx, x, m, w.data.data(), w.n, w.k, w.bn, w.bk,
                                       w.fscales.data(), bias, y, error, nan_free);
  }
  return Status::ok();
}

Status RunRef(const QWeight& w, const float* x, int64_t m, const float* bias, float* y) {
  const auto* u16 = reinterpret_cast<const uint16_t*>(w.data.data());
  switch (w.fmt) {
    case Fmt::Fp8:
      return ref::linear_fp8_e4m3(x, m, w.data.data(), w.n, w.k, w.bn, w.bk, w.fscales.data(),
                                  bias, y);
    case Fmt::Mxfp8: return ref::linear_mxfp8(x, m, w.data.data(), w.n, w.k, w.uscales.data(), bias, y);
    case Fmt::Nvfp4:
      return ref::linear_nvfp4(x, m, w.data.data(), w.n, w.k, w.uscales.data(), w.g, bias, y);
    case Fmt::Bf16: return ref::linear_bf16(x, m, u16, w.n, w.k, bias, y);
    case Fmt::W8a8:
      return ref::linear_fp8_e4m3_w8a8(x, m, w.data.data(), w.n, w.k, w.bn, w.bk,
                                       w.fscales.data(), bias, y);
  }
  return Status::ok();
}


// sqrt(Σ (a - e)^2 / Σ e^2) over the finite expected values; a NaN or ±Inf must be matched exactly.
::testing::AssertionResult RelL2Close(const std::vector<float>& a, const std::vector<float>& e,
                                      double tol) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!std::isfinite(e[i]) || !std::isfinite(a[i])) {
      if (!(a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i])))) {
        return ::testing::AssertionFailure() << "non-finite mismatch at " << i << ": " << a[i] << " vs " << e[i];
      }
      continue;
    }
    num += (double(a[i]) - e[i]) * (double(a[i]) - e[i]);
    den += double(e[i]) * e[i];
  }
  const double rel = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
  if (rel <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative L2 " << rel << " > " << tol;
}

::testing::AssertionResult BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) {
      return ::testing::AssertionFailure() << "first difference at " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// x [m, k] in [-1, 1], row 1 all zero (W8A8: amax 0 gives s_x = 1).
std::vector<float> MakeX(int64_t m, int64_t k, uint32_t seed) {
  std::vector<float> x = RandomVec(size_t(m * k), seed);
  if (m > 1)
    for (int64_t p = 0; p < k; ++p) x[size_t(k + p)] = 0.0f;
  return x;
}

// Runs one weight against x [m, k] with and without bias: reference, cpu with 1 and 2 threads.
void CheckCase(const QWeight& w, int64_t m, uint32_t seed) {
  const std::vector<float> x = MakeX(m, w.k, seed);
  const std::vector<float> bias = RandomVec(size_t(w.n), seed + 1);
  for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
    SCOPED_TRACE(::testing::Message() << FmtName(w.fmt) << " m=" << m << " n=" << w.n << " k=" << w.k
                                    << " block=" << w.bn << "x" << w.bk << (b ? " bias" : " no bias"));
    std::vector<float> expected(size_t(m * w.n)), y1(expected.size(), -1.0f), y2(expected.size(), -2.0f);
    ASSERT_TRUE(RunRef(w, x.data(), m, b, expected.data()).is_ok());
    ASSERT_TRUE(RunCpu(w, x.data(), m, b, y1.data(), 1).is_ok());
    ASSERT_TRUE(RunCpu(w, x.data(), m, b, y2.data(), 2).is_ok());
    EXPECT_TRUE(RelL2Close(y1, expected, 1e-5));
    EXPECT_TRUE(BitEqual(y1, y2)) << "1 vs 2 threads";
  }
}

const int64_t kRowsSet[] = {1, 2, 3, 4, 5, 17, 64};

using QuantLinearTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(QuantLinearTest);

TEST_P(QuantLinearTest, Fp8Blocks) {
  for (int64_t k : {16, 32, 48, 4096 + 32}) {
    const int64_t n = k > 64 ? 19 : 37;
    const int64_t blocks[][2] = {{n, k}, {1, k}, {128, 128}, {3, 7}, {5, 40}, {2, 24}};
    for (const auto& b : blocks) {
      const QWeight w = MakeWeight(Fmt::Fp8, n, k, b[0], b[1], uint32_t(k + b[0] * 7 + b[1]));
      for (int64_t m : kRowsSet) CheckCase(w, m, uint32_t(m * 31 + k));
    }
  }
}

TEST_P(QuantLinearTest, MxNvBf16) {
  // 896 (a whole number of 128-element groups, at most 2048): NVFP4's one-call-per-unit walker.
  for (int64_t k : {16, 32, 48, 896, 4096 + 32}) {
    const int64_t n = k > 64 ? 19 : 37;
    for (Fmt f : {Fmt::Mxfp8, Fmt::Nvfp4, Fmt::Bf16}) {
      if (f == Fmt::Mxfp8 && k % 32 != 0) continue;
      const QWeight w = MakeWeight(f, n, k, 1, f == Fmt::Nvfp4 ? 16 : 32, uint32_t(k * 3 + int(f)));
      for (int64_t m : kRowsSet) CheckCase(w, m, uint32_t(m * 17 + k));
    }
  }
}

TEST_P(QuantLinearTest, W8a8PerTensorAndPerChannel) {
  for (int64_t k : {16, 32, 48, 4096 + 32}) {
    const int64_t n = k > 64 ? 19 : 37;
    for (int64_t bn : {int64_t(1), n}) {
      const QWeight w = MakeWeight(Fmt::W8a8, n, k, bn, k, uint32_t(k * 5 + bn));
      for (int64_t m : kRowsSet) CheckCase(w, m, uint32_t(m * 13 + k));
    }
  }
}

// Enough rows that the GEMV splits over both threads (n * k >= 2^18).
TEST_P(QuantLinearTest, LargeGemvSplitsOverThreads) {
  const int64_t n = 301, k = 4096 + 32;
  for (Fmt f : {Fmt::Fp8, Fmt::Mxfp8, Fmt::Nvfp4, Fmt::Bf16, Fmt::W8a8}) {
    const int64_t bk = f == Fmt::Fp8 ? 128 : (f == Fmt::Nvfp4 ? 16 : (f == Fmt::W8a8 ? k : 32));
    const QWeight w = MakeWeight(f, n, k, f == Fmt::Fp8 ? 128 : 1, bk, 77);
    for (int64_t m : {1, 4, 6}) CheckCase(w, m, 78);
  }
}

// Row i of an m-row call equals the same row alone (GEMV) bit for bit, for every format.
TEST_P(QuantLinearTest, GemvAndGemmAgreeBitwise) {
  const int64_t n = 45, k = 333 + 3;  // k % 48 == 0 for NVFP4 / MXFP8 below
  for (Fmt f : {Fmt::Fp8, Fmt::Mxfp8, Fmt::Nvfp4, Fmt::Bf16, Fmt::W8a8}) {
    const int64_t kk = f == Fmt::Mxfp8 || f == Fmt::Nvfp4 ? 352 : k;
    const QWeight w = MakeWeight(f, n, kk, f == Fmt::W8a8 ? 1 : 4, f == Fmt::Fp8 ? 40 : kk, 91);
    const std::vector<float> x = MakeX(21, kk, 92), bias = RandomVec(size_t(n), 93);
    std::vector<float> full(size_t(21 * n));
    ASSERT_TRUE(RunCpu(w, x.data(), 21, bias.data(), full.data(), 2).is_ok());
    for (int64_t row : {0, 1, 3, 4, 20}) {
      std::vector<float> one(static_cast<size_t>(n));
      ASSERT_TRUE(RunCpu(w, x.data() + row * kk, 1, bias.data(), one.data(), 1).is_ok());
      EXPECT_TRUE(BitEqual(one, std::vector<float>(full.begin() + row * n, full.begin() + (row + 1) * n)))
          << FmtName(f) << " row " << row;
    }
  }
}

// The same with scales that do not fold (the pre-scaled path) on some weight rows: which rows take
// it must not depend on how many x rows the call has.
TEST_P(QuantLinearTest, GemvAndGemmAgreeBitwiseWithScalesThatDoNotFold) {
  const int64_t n = 23, k = 4096 + 64;
  QWeight fp8 = MakeWeight(Fmt::Fp8, n, k, 8, 128, 6);
  fp8.fscales[1] = 300.0f;   // block row 0 (weight rows 0..7), block column 1
  fp8.fscales[40] = 1e30f;   // block row 1
  QWeight fp8_rows = MakeWeight(Fmt::Fp8, n, k, 1, 128, 12);
  fp8_rows.fscales[size_t(5 * (k / 128) + 3)] = 1e30f;  // weight row 5 only
  QWeight mx = MakeWeight(Fmt::Mxfp8, n, k, 1, 32, 8);
  mx.uscales[3] = 200;
  mx.uscales[size_t(6 * (k / 32) + 9)] = 254;
  for (const QWeight* w : {&fp8, &fp8_rows, &mx}) {
    const std::vector<float> x = MakeX(21, k, 94);
    std::vector<float> full(size_t(21 * n));
    ASSERT_TRUE(RunCpu(*w, x.data(), 21, nullptr, full.data(), 2).is_ok());
    for (int64_t m : {1, 2, 3, 4}) {
      std::vector<float> part(size_t(m * n));
      ASSERT_TRUE(RunCpu(*w, x.data(), m, nullptr, part.data(), 1).is_ok());
      EXPECT_TRUE(BitEqual(part, std::vector<float>(full.begin(), full.begin() + m * n)))
          << FmtName(w->fmt) << " m " << m;
    }
  }
}

// Codes outside what the quantizers make take the exact slow decode and must still match the
// reference (NaN where it is NaN): e4m3 NaN codes
// (0x7F / 0xFF) among normal scales, scales whose fold overflows (FP8 >= 2^8, Inf; MXFP8 e8m0
// >= 2^8, the NaN code 0xFF) and NVFP4 scale products in the subnormal range.
TEST_P(QuantLinearTest, NanCodes) {
  const int64_t n = 23;
  for (int64_t k : {int64_t(4096 + 44), int64_t(4096 + 64), int64_t(48)}) {
    QWeight w = MakeWeight(Fmt::Fp8, n, k, 8, 128, uint32_t(k));
    // First, middle and last columns of rows 0, 6, 13 and 22, and one code per 4-vector group.
    for (int64_t j : {0, 6, 13, 22})
      for (int64_t p : {int64_t(0), k / 2 + 1, k - 1}) w.data[size_t(j * k + p)] = (p & 1) ? 0x7F : 0xFF;
    for (int64_t p = 3; p < k; p += 64) w.data[size_t(9 * k + p)] = 0x7F;
    ASSERT_TRUE(ref::dequantize_fp8_e4m3(w.data.data(), n, k, 8, 128, w.fscales.data(), w.dequant.data()).is_ok());
    for (int64_t m : {1, 3, 9}) CheckCase(w, m, 7);
    if (k % 32 != 0) continue;
    QWeight mx = MakeWeight(Fmt::Mxfp8, n, k, 1, 32, uint32_t(k + 1));
    mx.data[size_t(2 * k + 1)] = 0x7F;
    mx.data[size_t(17 * k + k - 5)] = 0xFF;
    ASSERT_TRUE(ref::dequantize_mxfp8(mx.data.data(), n, k, mx.uscales.data(), mx.dequant.data()).is_ok());
    for (int64_t m : {1, 2, 5}) CheckCase(mx, m, 9);
  }
}

// nan_free (what bind passes for a constant without NaN codes) only skips the scan: on NaN-free
// codes the bits are those of the scanning call, for GEMV and GEMM, folded and pre-scaled chunks.
TEST_P(QuantLinearTest, NanFreeHintGivesTheSameBits) {
  const int64_t n = 37, k = 4096 + 64;
  std::vector<QWeight> weights;
  weights.push_back(MakeWeight(Fmt::Fp8, n, k, 1, k, 21));
  weights.push_back(MakeWeight(Fmt::Fp8, n, k, 8, 128, 22));
  weights.push_back(MakeWeight(Fmt::Fp8, n, k, 5, 40, 23));
  weights.back().fscales[3] = 1e30f;  // a chunk that does not fold
  weights.push_back(MakeWeight(Fmt::Mxfp8, n, k, 1, 32, 24));
  weights.push_back(MakeWeight(Fmt::W8a8, n, k, 1, k, 25));
  for (const QWeight& w : weights) {
    ASSERT_FALSE(e4m3_any_nan_code(w.data.data(), w.data.size()));
    for (int64_t m : {1, 3, 6}) {
      const std::vector<float> x = MakeX(m, k, uint32_t(m + 40));
      std::vector<float> scanned(size_t(m * n)), hinted(scanned.size(), -1.0f);
      ASSERT_TRUE(RunCpu(w, x.data(), m, nullptr, scanned.data(), 1).is_ok());
      ASSERT_TRUE(RunCpu(w, x.data(), m, nullptr, hinted.data(), 2, nullptr, SIZE_MAX, true).is_ok());
      EXPECT_TRUE(BitEqual(scanned, hinted)) << FmtName(w.fmt) << " block " << w.bn << "x" << w.bk << " m=" << m;
    }
  }
}

// NVFP4 chunks decode their scales inline when every code is valid and g * 448 is finite, and from
// the exact per-chunk table otherwise: a huge global scale (g * 448 overflows, the products used do
// not) must still match the reference, and an invalid ue4m3 code (0x7F, or the sign bit) must make
// its row NaN and leave every other row's bits alone.
TEST_P(QuantLinearTest, Nvfp4ScaleEdgeCases) {
  // k = 896: rows are walked by the one-call-per-unit walker, which hands invalid rows back.
  for (const int64_t k : {int64_t(4096 + 64), int64_t(896)}) {
    SCOPED_TRACE(::testing::Message() << "k=" << k);
    const int64_t n = 19;
    QWeight big = MakeWeight(Fmt::Nvfp4, n, k, 1, 16, 31);
    big.g = 1e36f;
    // Codes below 0x30: values <= 0.875 * 2^-2, so the products used are finite.
    for (uint8_t& c : big.uscales) c = uint8_t(c % 0x30);
    ASSERT_TRUE(ref::dequantize_nvfp4(big.data.data(), n, k, big.uscales.data(), big.g,
                                      big.dequant.data()).is_ok());
    for (int64_t m : {1, 3}) CheckCase(big, m, 32);

    const QWeight clean = MakeWeight(Fmt::Nvfp4, n, k, 1, 16, 33);
    QWeight bad = clean;
    bad.uscales[size_t(5 * (k / 16) + 7)] = 0x7F;
    bad.uscales[size_t(9 * (k / 16) + k / 16 - 1)] = 0x80;
    for (int64_t m : {1, 2, 5}) {
      const std::vector<float> x = MakeX(m, k, 34);
      std::vector<float> yc(size_t(m * n)), yb(yc.size());
      ASSERT_TRUE(RunCpu(clean, x.data(), m, nullptr, yc.data(), 1).is_ok());
      ASSERT_TRUE(RunCpu(bad, x.data(), m, nullptr, yb.data(), 2).is_ok());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const float a = yb[size_t(i * n + j)], e = yc[size_t(i * n + j)];
          if (j == 5 || j == 9) {
            EXPECT_TRUE(std::isnan(a)) << "m=" << m << " row " << i << " col " << j << ": " << a;
          } else {
            EXPECT_EQ(std::memcmp(&a, &e, 4), 0)
                << "m=" << m << " row " << i << " col " << j << ": " << a << " vs " << e;
          }
        }
      }
    }
  }
}

TEST_P(QuantLinearTest, ScalesThatDoNotFold) {
  const int64_t n = 23, k = 4096 + 64;
  {  // FP8 [8, 128] blocks: 300 and 1e30 overflow scale * 2^120; Inf makes its rows NaN.
    QWeight w = MakeWeight(Fmt::Fp8, n, k, 8, 128, 6);
    w.fscales[1] = 300.0f;
    w.fscales[40] = 1e30f;
    w.fscales[70] = INFINITY;
    ASSERT_TRUE(ref::dequantize_fp8_e4m3(w.data.data(), n, k, 8, 128, w.fscales.data(), w.dequant.data()).is_ok());
    for (int64_t m : {1, 3, 9}) CheckCase(w, m, 7);
  }
  {  // MXFP8: 2^73 and 2^127 overflow the fold; 0xFF is NaN.
    QWeight w = MakeWeight(Fmt::Mxfp8, n, k, 1, 32, 8);
    w.uscales[3] = 200;
    w.uscales[500] = 254;
    w.uscales[777] = 0xFF;
    ASSERT_TRUE(ref::dequantize_mxfp8(w.data.data(), n, k, w.uscales.data(), w.dequant.data()).is_ok());
    for (int64_t m : {1, 2, 5}) CheckCase(w, m, 9);
  }
  {  // NVFP4: a global scale near 2^-121 with mantissa bits times subnormal ue4m3 codes gives
     // scale products in the f32 subnormal range, where halving them (the fold) would round. Row 0
     // has only such blocks and x row 0 is all ones, so a weight one unit off shows in y[0, 0].
    QWeight w = MakeWeight(Fmt::Nvfp4, n, k, 1, 16, 10);
    w.g = 0x1.234568p-121f;
    for (int64_t b = 0; b < k / 16; ++b) w.uscales[size_t(b)] = uint8_t(1 + 2 * (b % 4));
    for (size_t s = 0; s < w.uscales.size(); s += 7) w.uscales[s] = uint8_t(1 + s % 7);
    ASSERT_TRUE(ref::dequantize_nvfp4(w.data.data(), n, k, w.uscales.data(), w.g, w.dequant.data()).is_ok());
    for (int64_t m : {1, 2, 6}) {
      std::vector<float> x = MakeX(m, k, 11);
      for (int64_t p = 0; p < k; ++p) x[size_t(p)] = 1.0f;
      std::vector<float> expected(size_t(m * n)), y(expected.size());
      ASSERT_TRUE(RunRef(w, x.data(), m, nullptr, expected.data()).is_ok());
      ASSERT_TRUE(RunCpu(w, x.data(), m, nullptr, y.data(), 1).is_ok());
      // Sums of f32 subnormal products elsewhere: a looser bound than the other tests.
      EXPECT_TRUE(RelL2Close(y, expected, 1e-4)) << "m=" << m;
    }
  }
}

// The e2m1 decoders (vpermps / vpermw on AVX-512, byte shuffles from two 16-entry tables on AVX2,
// SSE4, SSSE3 and NEON, a gather elsewhere) give every code at every nibble position its exact
// value: with x = the identity, y[p, j] is the one product w[j, p] · (g · ue4m3), rounded once as
// the reference's dequantization rounds it. Row j holds code (j + p) mod 16 at element p, so
// every position of a group (lane, plane, low / high nibble) sees all 16 codes. k = 256: whole
// groups (the unit walker); 336: a partial last group on every target. m = k: the GEMM path; a few
// single rows: the GEMV path.
TEST_P(QuantLinearTest, Nvfp4OneHotRowsGiveTheDequantizedWeights) {
  const int64_t n = 19;
  for (int64_t k : {256, 336}) {
    QWeight w = MakeWeight(Fmt::Nvfp4, n, k, 1, 16, uint32_t(40 + k));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; p += 2) {
        const auto code = [&](int64_t e) { return uint8_t((j + e) % 16); };
        w.data[size_t((j * k + p) / 2)] = uint8_t(code(p) | code(p + 1) << 4);
      }
    }
    for (size_t b = 0; b < w.uscales.size(); ++b) w.uscales[b] = uint8_t(0x30 + b % 0x40);  // valid codes
    w.g = 0.37f;
    ASSERT_TRUE(ref::dequantize_nvfp4(w.data.data(), n, k, w.uscales.data(), w.g, w.dequant.data()).is_ok());
    std::vector<float> x(size_t(k * k), 0.0f);
    for (int64_t p = 0; p < k; ++p) x[size_t(p * k + p)] = 1.0f;
    std::vector<float> y(size_t(k * n));
    ASSERT_TRUE(RunCpu(w, x.data(), k, nullptr, y.data(), 1).is_ok());
    int64_t mismatches = 0;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) {
        const float expected = w.dequant[size_t(j * k + p)];
        if (y[size_t(p * n + j)] != expected && ++mismatches <= 3) {
          ADD_FAILURE() << "k=" << k << " element " << p << " of row " << j << " (code " << (j + p) % 16
                        << "): " << y[size_t(p * n + j)] << " vs " << expected;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "k=" << k;
    for (int64_t p : {int64_t{0}, int64_t{7}, int64_t{8}, k - 1}) {  // GEMV: one row of x
      std::vector<float> y1(static_cast<size_t>(n));
      ASSERT_TRUE(RunCpu(w, x.data() + p * k, 1, nullptr, y1.data(), 1).is_ok());
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(y1[size_t(j)], w.dequant[size_t(j * k + p)]) << k << " " << p << " " << j;
    }
  }
}

// x is normalized by a power of two per row for the e4m3 formats: rows of tiny, huge, mixed and
// subnormal magnitudes, and rows holding Inf or NaN, must still match the reference.
TEST_P(QuantLinearTest, ExtremeActivations) {
  const int64_t n = 19, k = 4096 + 32;
  const float factors[] = {1e-30f, 1e30f, 1e-38f, 1e34f, 1.0f};
  for (Fmt f : {Fmt::Fp8, Fmt::Mxfp8, Fmt::Nvfp4, Fmt::Bf16, Fmt::W8a8}) {
    const int64_t bk = f == Fmt::Fp8 ? 128 : (f == Fmt::Nvfp4 ? 16 : (f == Fmt::W8a8 ? k : 32));
    const QWeight w = MakeWeight(f, n, k, f == Fmt::Fp8 ? 8 : 1, bk, 55);
    const int64_t m = 7;
    std::vector<float> x = MakeX(m, k, 56);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t p = 0; p < k; ++p) x[size_t(i * k + p)] *= factors[i] / 1024.0f * (p % 3 == 0 ? 1024.0f : 1.0f);
    x[size_t(5 * k + 17)] = INFINITY;
    x[size_t(6 * k + 3)] = NAN;
    std::vector<float> expected(size_t(m * n)), y(expected.size());
    ASSERT_TRUE(RunRef(w, x.data(), m, nullptr, expected.data()).is_ok());
    ASSERT_TRUE(RunCpu(w, x.data(), m, nullptr, y.data(), 1).is_ok());
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> e(expected.begin() + i * n, expected.begin() + (i + 1) * n);
      const std::vector<float> a(y.begin() + i * n, y.begin() + (i + 1) * n);
      // Row 2 (1e-38 / 1024: f32 subnormals) loses bits in the reference's own f32 inputs.
      EXPECT_TRUE(RelL2Close(a, e, i == 2 ? 1e-3 : 1e-5)) << FmtName(f) << " row " << i;
    }
  }
}

TEST_P(QuantLinearTest, EmptyAndZeroK) {
  const QWeight w = MakeWeight(Fmt::Fp8, 5, 0, 1, 1, 12, false);
  const std::vector<float> bias = RandomVec(5, 13);
  for (int64_t m : {1, 7}) {
    std::vector<float> y(size_t(m * 5), -1.0f), y0(size_t(m * 5), -1.0f);
    ASSERT_TRUE(RunCpu(w, nullptr, m, bias.data(), y.data(), 2).is_ok());
    ASSERT_TRUE(RunCpu(w, nullptr, m, nullptr, y0.data(), 1).is_ok());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        EXPECT_EQ(y[size_t(i * 5 + j)], bias[size_t(j)]);
        EXPECT_EQ(y0[size_t(i * 5 + j)], 0.0f);
      }
    }
  }
  const QWeight w2 = MakeWeight(Fmt::Nvfp4, 3, 32, 1, 16, 14);
  float untouched = 42.0f;
  EXPECT_TRUE(RunCpu(w2, nullptr, 0, nullptr, &untouched, 1).is_ok());
  EXPECT_EQ(untouched, 42.0f);
}

// Every error quantized_linear.h documents.
TEST(QuantLinearErrorTest, RefusesBadArguments) {
  ::ember::testing::QuietLogs quiet;
  const QWeight fp8 = MakeWeight(Fmt::Fp8, 8, 64, 1, 64, 20);
  const std::vector<float> x = RandomVec(6 * 64, 21);
  std::vector<float> y(6 * 8);
  KernelContext ctx;
  ErrorContext error;
  auto invalid = [&](Status s) {
    const bool ok = s.code() == Error::InvalidArgument && error.has_error();
    error.clear();
    return ok;
  };
  const uint8_t* c = fp8.data.data();
  const float* s = fp8.fscales.data();
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3(ctx, x.data(), -1, c, 8, 64, 1, 64, s, nullptr, y.data(), &error)));
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3(ctx, x.data(), 1, c, 8, 64, 0, 64, s, nullptr, y.data(), &error)));
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3(ctx, x.data(), 1, c, 8, 64, 1, 64, nullptr, nullptr, y.data(), &error)));
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3(ctx, nullptr, 1, c, 8, 64, 1, 64, s, nullptr, y.data(), &error)));
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3(ctx, x.data(), 1, c, 8, 64, 1, 64, s, nullptr, nullptr, &error)));
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3(ctx, x.data(), INT64_MAX / 4, c, 8, 64, 1, 64, s, nullptr,
                                           y.data(), &error)));
  EXPECT_TRUE(invalid(cpu::linear_mxfp8(ctx, x.data(), 1, c, 8, 48, fp8.data.data(), nullptr, y.data(), &error)));
  EXPECT_TRUE(invalid(cpu::linear_nvfp4(ctx, x.data(), 1, c, 8, 40, c, 1.0f, nullptr, y.data(), &error)));
  for (float g : {0.0f, -1.0f, INFINITY, NAN}) {
    EXPECT_TRUE(invalid(cpu::linear_nvfp4(ctx, x.data(), 1, c, 8, 64, c, g, nullptr, y.data(), &error))) << g;
  }
  // W8A8 takes per-tensor and per-channel scales only.
  const QWeight blocked = MakeWeight(Fmt::Fp8, 8, 64, 2, 64, 22);
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3_w8a8(ctx, x.data(), 1, c, 8, 64, 2, 64, blocked.fscales.data(),
                                                nullptr, y.data(), &error)));
  const QWeight k_blocked = MakeWeight(Fmt::Fp8, 8, 64, 1, 32, 23);
  EXPECT_TRUE(invalid(cpu::linear_fp8_e4m3_w8a8(ctx, x.data(), 1, c, 8, 64, 1, 32, k_blocked.fscales.data(),
                                                nullptr, y.data(), &error)));
  // A scratch short of the minimum (GEMM: one panel slot; W8A8 adds the activations).
  for (Fmt f : {Fmt::Fp8, Fmt::W8a8}) {
    QWeight w = fp8;
    w.fmt = f;
    for (int64_t m : {1, 6}) {
      const size_t need = cpu::quantized_linear_scratch_bytes(m, 64, 1, f == Fmt::W8a8);
      if (need == 0) continue;
      // need includes 64 bytes of alignment slack: 65 short is short whatever the address.
      EXPECT_TRUE(invalid(RunCpu(w, x.data(), m, nullptr, y.data(), 2, &error, need - 65)))
          << FmtName(f) << " m=" << m;
      EXPECT_TRUE(RunCpu(w, x.data(), m, nullptr, y.data(), 2, &error, need).is_ok());
    }
  }
  EXPECT_EQ(cpu::quantized_linear_scratch_bytes(0, 64, 8, false), 0u);
}

using QuantizeRowsTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(QuantizeRowsTest);

// quantize_rows_e4m3fn against its definition with the scalar codecs, bit for bit: random rows of
// several magnitudes (x / s_x lands on ties and in the e4m3 subnormals), a zero row (s_x = 1), a row
// whose amax / 448 underflows, and every k around the vector widths.
TEST_P(QuantizeRowsTest, MatchesScalarDefinition) {
  for (int64_t k : {1, 3, 4, 15, 16, 17, 33, 4096 + 32}) {
    const int64_t m = 5;
    std::vector<float> x = RandomVec(size_t(m * k), uint32_t(k));
    for (int64_t p = 0; p < k; ++p) {
      x[size_t(p)] *= 1e-3f;
      x[size_t(k + p)] = 0.0f;
      x[size_t(2 * k + p)] *= 1e-43f;  // subnormal inputs; amax / 448 may underflow to 0
      x[size_t(3 * k + p)] = std::ldexp(std::round(x[size_t(3 * k + p)] * 64.0f), -6) * 448.0f;
    }
    std::vector<float> values(x.size(), -1.0f), scales(size_t(m), -1.0f);
    cpu::quantize_rows_e4m3fn(x.data(), k, 0, size_t(m), values.data(), scales.data());
    for (int64_t i = 0; i < m; ++i) {
      float amax = 0.0f;
      for (int64_t p = 0; p < k; ++p) amax = std::fmax(amax, std::fabs(x[size_t(i * k + p)]));
      float sx = amax / 448.0f;
      if (sx == 0.0f) sx = 1.0f;
      EXPECT_EQ(f32_bits(scales[size_t(i)]), f32_bits(sx)) << "k=" << k << " row " << i;
      for (int64_t p = 0; p < k; ++p) {
        const float want = e4m3fn_to_f32(f32_to_e4m3fn(x[size_t(i * k + p)] / sx));
        ASSERT_EQ(f32_bits(values[size_t(i * k + p)]), f32_bits(want)) << "k=" << k << " [" << i << ", " << p << "]";
      }
    }
  }
}

// The vectorized encoder against f32_to_e4m3fn for every f32 bit pattern, on every target.
TEST(QuantEncodeTest, E4m3fnMatchesScalarCodecForEveryF32OnEveryTarget) {
  const std::vector<int64_t> targets = Targets();
  constexpr size_t kChunk = size_t(1) << 22;
  std::vector<float> in(kChunk);
  std::vector<uint8_t> expected(kChunk), actual(kChunk);
  size_t mismatches = 0;
  for (uint64_t base = 0; base < (uint64_t(1) << 32) && mismatches == 0; base += kChunk) {
    for (size_t i = 0; i < kChunk; ++i) {
      in[i] = f32_from_bits(uint32_t(base + i));
      expected[i] = f32_to_e4m3fn(in[i]);
    }
    for (int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      // An odd count leaves a partial vector at the end of every chunk.
      cpu::encode_e4m3fn(in.data(), actual.data(), kChunk - 3);
      cpu::encode_e4m3fn(in.data() + kChunk - 3, actual.data() + kChunk - 3, 3);
      if (std::memcmp(actual.data(), expected.data(), kChunk) != 0) {
        for (size_t i = 0; i < kChunk && mismatches < 5; ++i) {
          if (actual[i] != expected[i]) {
            ADD_FAILURE() << hwy::TargetName(target) << ": bits 0x" << std::hex << f32_bits(in[i])
                          << " -> 0x" << int(actual[i]) << ", expected 0x" << int(expected[i]);
            ++mismatches;
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace ember::kernels::cpu_test
