// runtime/core/quant.h: e4m3_any_nan_code against a byte-by-byte definition, for every code value,
// every position of one NaN code in buffers of 0..80 bytes (the 32- and 8-byte word loops and the
// tail), and unaligned starts; the NVFP4 scale checks and their errors.
#include "runtime/core/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/core/float_codecs.h"

namespace ember {
namespace {

bool IsNanCode(uint8_t c) { return (c & 0x7F) == 0x7F; }

TEST(QuantTest, E4m3AnyNanCodeFindsEveryCodeValue) {
  for (int c = 0; c < 256; ++c) {
    for (size_t len : {size_t(1), size_t(8), size_t(32), size_t(40)}) {
      std::vector<uint8_t> buf(len, 0x7E);  // 448, the largest finite code
      buf[len - 1] = static_cast<uint8_t>(c);
      EXPECT_EQ(e4m3_any_nan_code(buf.data(), buf.size()), IsNanCode(static_cast<uint8_t>(c)))
          << "code " << c << " last of " << len;
    }
  }
}

TEST(QuantTest, E4m3AnyNanCodeFindsOneCodeAtEveryPosition) {
  std::vector<uint8_t> storage(96);
  for (size_t start : {size_t(0), size_t(1), size_t(7)}) {
    for (size_t len = 0; len <= 80; ++len) {
      uint8_t* buf = storage.data() + start;
      // Every other code, with the neighbours of the NaN codes (0x7E, 0xFE, 0x80) included.
      for (size_t i = 0; i < len; ++i) {
        uint8_t c = static_cast<uint8_t>(i * 37 + 5);
        if (IsNanCode(c)) c = static_cast<uint8_t>(c - 1);
        buf[i] = c;
      }
      ASSERT_FALSE(e4m3_any_nan_code(buf, len)) << "start " << start << " len " << len;
      for (size_t p = 0; p < len; ++p) {
        for (uint8_t nan : {uint8_t(0x7F), uint8_t(0xFF)}) {
          const uint8_t keep = buf[p];
          buf[p] = nan;
          EXPECT_TRUE(e4m3_any_nan_code(buf, len)) << "start " << start << " len " << len << " at " << p;
          buf[p] = keep;
        }
      }
    }
  }
  EXPECT_FALSE(e4m3_any_nan_code(nullptr, 0));
}

TEST(QuantTest, Ue4m3ValidityIsWhatTheDecoderDoesNotTurnIntoNan) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    EXPECT_EQ(ue4m3_is_valid(code), c < 0x7F) << "code " << c;
    EXPECT_EQ(ue4m3_is_valid(code), !std::isnan(ue4m3_to_f32(code))) << "code " << c;
  }
  EXPECT_EQ(ue4m3_to_f32(kUe4m3MaxValidCode), 448.0f);
}

TEST(QuantTest, Nvfp4GlobalScaleMustBeFiniteAndPositive) {
  using L = std::numeric_limits<float>;
  for (float g : {L::denorm_min(), L::min(), 1.0f, L::max()}) {
    EXPECT_TRUE(nvfp4_global_scale_is_valid(g)) << g;
    EXPECT_TRUE(check_nvfp4_global_scale(g, nullptr).is_ok()) << g;
  }
  for (float g : {0.0f, -0.0f, -1.0f, L::infinity(), -L::infinity(), L::quiet_NaN(), -L::quiet_NaN()}) {
    EXPECT_FALSE(nvfp4_global_scale_is_valid(g)) << g;
    ErrorContext ctx;
    EXPECT_EQ(check_nvfp4_global_scale(g, &ctx).code(), Error::InvalidArgument) << g;
    EXPECT_EQ(ctx.code, Error::InvalidArgument);
    EXPECT_NE(std::strstr(ctx.message, "NVFP4 global scale"), nullptr) << ctx.message;
  }
}

TEST(QuantTest, Ue4m3ScalesCheckNamesTheFirstInvalidCode) {
  std::vector<uint8_t> scales(3 * 4, 0x38);  // [3, 4] of 1.0
  EXPECT_TRUE(check_ue4m3_scales(scales.data(), 3, 4, nullptr).is_ok());
  EXPECT_TRUE(check_ue4m3_scales(nullptr, 0, 4, nullptr).is_ok());
  scales[2 * 4 + 1] = 0x80;  // sign bit set
  scales[1 * 4 + 2] = 0x7F;  // the first one in row-major order
  ErrorContext ctx;
  EXPECT_EQ(check_ue4m3_scales(scales.data(), 3, 4, &ctx).code(), Error::InvalidArgument);
  EXPECT_NE(std::strstr(ctx.message, "[1, 2] is 0x7f"), nullptr) << ctx.message;
}

}  // namespace
}  // namespace ember
