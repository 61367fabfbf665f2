// The reference quantized linears: weight-only equals dequantize (quantize.h) then a double-sum
// linear, bit for bit; W8A8 equals its definition written out with the bulk codecs, and a case
// worked by hand; k = 0 gives the bias; every documented error, with nothing written.
#include "kernels/reference/quantized_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/reference/quantize.h"
#include "runtime/core/float_codecs.h"
#include "tests/common/test_util.h"

namespace ember::kernels::reference {
namespace {

std::vector<float> random_vec(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

// y = x · wᵀ + bias with the sums in double: the weight-only definition on a dequantized weight.
std::vector<float> linear_of(const std::vector<float>& x, int64_t m, const std::vector<float>& w,
                             int64_t n, int64_t k, const float* bias) {
  std::vector<float> y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) acc += double(x[size_t(i * k + p)]) * double(w[size_t(j * k + p)]);
      if (bias != nullptr) acc += double(bias[j]);
      y[size_t(i * n + j)] = float(acc);
    }
  }
  return y;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(QuantizedLinearReferenceTest, WeightOnlyIsDequantizeThenLinear) {
  const int64_t m = 3, n = 11, k = 96;
  const std::vector<float> w = random_vec(size_t(n * k), 1), x = random_vec(size_t(m * k), 2);
  const std::vector<float> bias = random_vec(size_t(n), 3);
  std::vector<float> deq(size_t(n * k)), y(size_t(m * n));
  for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
    for (const auto& blk : std::vector<std::pair<int64_t, int64_t>>{{n, k}, {1, k}, {128, 128}, {3, 7}}) {
      std::vector<uint8_t> codes(size_t(n * k));
      std::vector<float> scales(size_t(((n + blk.first - 1) / blk.first) * ((k + blk.second - 1) / blk.second)));
      ASSERT_TRUE(quantize_fp8_e4m3(w.data(), n, k, blk.first, blk.second, codes.data(), scales.data()).is_ok());
      ASSERT_TRUE(dequantize_fp8_e4m3(codes.data(), n, k, blk.first, blk.second, scales.data(), deq.data()).is_ok());
      ASSERT_TRUE(linear_fp8_e4m3(x.data(), m, codes.data(), n, k, blk.first, blk.second, scales.data(), b,
                                  y.data()).is_ok());
      EXPECT_TRUE(bit_equal(y, linear_of(x, m, deq, n, k, b))) << blk.first << "x" << blk.second;
    }
    std::vector<uint8_t> codes(size_t(n * k)), s8(size_t(n * k / 16));
    ASSERT_TRUE(quantize_mxfp8(w.data(), n, k, codes.data(), s8.data()).is_ok());
    ASSERT_TRUE(dequantize_mxfp8(codes.data(), n, k, s8.data(), deq.data()).is_ok());
    ASSERT_TRUE(linear_mxfp8(x.data(), m, codes.data(), n, k, s8.data(), b, y.data()).is_ok());
    EXPECT_TRUE(bit_equal(y, linear_of(x, m, deq, n, k, b))) << "mxfp8";
    float g = 0.0f;
    ASSERT_TRUE(quantize_nvfp4(w.data(), n, k, codes.data(), s8.data(), &g).is_ok());
    ASSERT_TRUE(dequantize_nvfp4(codes.data(), n, k, s8.data(), g, deq.data()).is_ok());
    ASSERT_TRUE(linear_nvfp4(x.data(), m, codes.data(), n, k, s8.data(), g, b, y.data()).is_ok());
    EXPECT_TRUE(bit_equal(y, linear_of(x, m, deq, n, k, b))) << "nvfp4";
    std::vector<uint16_t> bf(size_t(n * k));
    for (size_t i = 0; i < bf.size(); ++i) {
      bf[i] = f32_to_bf16(w[i]);
      deq[i] = bf16_to_f32(bf[i]);
    }
    ASSERT_TRUE(linear_bf16(x.data(), m, bf.data(), n, k, b, y.data()).is_ok());
    EXPECT_TRUE(bit_equal(y, linear_of(x, m, deq, n, k, b))) << "bf16";
  }
}

// The W8A8 definition written out again with the bulk codecs, per tensor and per channel; row 1 of
// x is zero (s_x = 1).
TEST(QuantizedLinearReferenceTest, W8a8MatchesItsDefinition) {
  const int64_t m = 3, n = 9, k = 70;
  const std::vector<float> w = random_vec(size_t(n * k), 4), bias = random_vec(size_t(n), 6);
  std::vector<float> x = random_vec(size_t(m * k), 5);
  for (int64_t p = 0; p < k; ++p) x[size_t(k + p)] = 0.0f;
  for (int64_t bn : {int64_t(1), n}) {
    std::vector<uint8_t> codes(size_t(n * k));
    std::vector<float> scales(size_t(bn == 1 ? n : 1));
    ASSERT_TRUE(quantize_fp8_e4m3(w.data(), n, k, bn, k, codes.data(), scales.data()).is_ok());
    std::vector<float> y(size_t(m * n)), w8(size_t(n * k));
    decode_e4m3fn(codes.data(), w8.data(), w8.size());
    ASSERT_TRUE(linear_fp8_e4m3_w8a8(x.data(), m, codes.data(), n, k, bn, k, scales.data(), bias.data(),
                                     y.data()).is_ok());
    for (int64_t i = 0; i < m; ++i) {
      float amax = 0.0f;
      for (int64_t p = 0; p < k; ++p) amax = std::fmax(amax, std::fabs(x[size_t(i * k + p)]));
      const float sx = amax / 448.0f == 0.0f ? 1.0f : amax / 448.0f;
      std::vector<float> scaled(static_cast<size_t>(k)), x8(static_cast<size_t>(k));
      std::vector<uint8_t> c8(static_cast<size_t>(k));
      for (int64_t p = 0; p < k; ++p) scaled[size_t(p)] = x[size_t(i * k + p)] / sx;
      encode_e4m3fn(scaled.data(), c8.data(), c8.size());
      decode_e4m3fn(c8.data(), x8.data(), x8.size());
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) s += double(x8[size_t(p)]) * double(w8[size_t(j * k + p)]);
        const double sw = scales[size_t(bn == 1 ? j : 0)];
        EXPECT_EQ(y[size_t(i * n + j)], float(s * double(sx) * sw + double(bias[size_t(j)])))
            << "block_n " << bn << " [" << i << ", " << j << "]";
      }
    }
  }
}

// x = [2, -1]: amax 2, s_x = f32(2 / 448), x8 = [448, -224] (exact); w8 = [1, 0.5] with s_w = 0.25:
// S = 448 - 112 = 336 and y = 336 * s_x * 0.25 + 1.
TEST(QuantizedLinearReferenceTest, W8a8WorkedExample) {
  const float x[] = {2.0f, -1.0f}, bias[] = {1.0f}, scale[] = {0.25f};
  const uint8_t codes[] = {f32_to_e4m3fn(1.0f), f32_to_e4m3fn(0.5f)};
  float y = 0.0f;
  ASSERT_TRUE(linear_fp8_e4m3_w8a8(x, 1, codes, 1, 2, 1, 2, scale, bias, &y).is_ok());
  EXPECT_EQ(y, float(336.0 * double(2.0f / 448.0f) * 0.25 + 1.0));
  EXPECT_NEAR(y, 1.375f, 1e-6f);
}

TEST(QuantizedLinearReferenceTest, ZeroKGivesBiasAndEmptyWritesNothing) {
  const float bias[] = {1.5f, -2.0f};
  float y[4] = {9, 9, 9, 9};
  ASSERT_TRUE(linear_fp8_e4m3(nullptr, 2, nullptr, 2, 0, 1, 1, nullptr, bias, y).is_ok());
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[3], -2.0f);
  ASSERT_TRUE(linear_fp8_e4m3_w8a8(nullptr, 2, nullptr, 2, 0, 1, 1, nullptr, nullptr, y).is_ok());
  EXPECT_EQ(y[1], 0.0f);
  const uint8_t packed[24] = {}, scales[3] = {0x38, 0x38, 0x38};
  float untouched = 7.0f;
  ASSERT_TRUE(linear_nvfp4(nullptr, 0, packed, 3, 16, scales, 1.0f, nullptr, &untouched).is_ok());
  EXPECT_EQ(untouched, 7.0f);
}

// Every documented error: InvalidArgument, a message in the context, y untouched.
TEST(QuantizedLinearReferenceTest, RefusesBadArguments) {
  ::ember::testing::QuietLogs quiet;
  const int64_t n = 4, k = 32;
  std::vector<uint8_t> codes(size_t(n * k), 0x38), s8(size_t(n * k / 16), 0x38);
  std::vector<float> scales(size_t(n), 1.0f), x(size_t(2 * k), 1.0f);
  std::vector<uint16_t> bf(size_t(n * k), 0x3F80);
  std::vector<float> y(size_t(2 * n), 42.0f);
  ErrorContext ctx;
  auto refused = [&](Status s) {
    const bool ok = s.code() == Error::InvalidArgument && ctx.has_error() && y[0] == 42.0f;
    ctx.clear();
    return ok;
  };
  const float* xs = x.data();
  const uint8_t* c = codes.data();
  const float* sc = scales.data();
  float* ys = y.data();
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, -1, c, n, k, 1, k, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, 1, c, n, -k, 1, k, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, INT64_MAX / 8, c, n, k, 1, k, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(nullptr, 1, c, n, k, 1, k, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, 1, nullptr, n, k, 1, k, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, 1, c, n, k, 1, k, nullptr, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, 1, c, n, k, 1, k, sc, nullptr, nullptr, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, 1, c, n, k, 0, k, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3(xs, 1, c, n, k, 1, 0, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_mxfp8(xs, 1, c, n, 48, s8.data(), nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_nvfp4(xs, 1, c, n, 24, s8.data(), 1.0f, nullptr, ys, &ctx)));
  for (float g : {0.0f, -1.0f, INFINITY, NAN}) {
    EXPECT_TRUE(refused(linear_nvfp4(xs, 1, c, n, k, s8.data(), g, nullptr, ys, &ctx))) << g;
  }
  for (uint8_t bad : {uint8_t(0x7F), uint8_t(0x80), uint8_t(0xB8)}) {
    std::vector<uint8_t> s = s8;
    s.back() = bad;
    EXPECT_TRUE(refused(linear_nvfp4(xs, 1, c, n, k, s.data(), 1.0f, nullptr, ys, &ctx))) << int(bad);
  }
  EXPECT_TRUE(refused(linear_bf16(xs, 1, nullptr, n, k, nullptr, ys, &ctx)));
  // W8A8: the scale must not vary along k, and be per tensor or per channel along n.
  EXPECT_TRUE(refused(linear_fp8_e4m3_w8a8(xs, 1, c, n, k, 1, 16, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(refused(linear_fp8_e4m3_w8a8(xs, 1, c, n, k, 2, k, sc, nullptr, ys, &ctx)));
  // 128x128 blocks of a weight with k > 128 (refused before any data is read).
  EXPECT_TRUE(refused(linear_fp8_e4m3_w8a8(xs, 1, c, n, 256, 128, 128, sc, nullptr, ys, &ctx)));
  EXPECT_TRUE(linear_fp8_e4m3_w8a8(xs, 1, c, n, k, n, k, sc, nullptr, ys, &ctx).is_ok());
  EXPECT_TRUE(linear_fp8_e4m3_w8a8(xs, 1, c, n, k, 1, 1000, sc, nullptr, ys, &ctx).is_ok());
}

}  // namespace
}  // namespace ember::kernels::reference
