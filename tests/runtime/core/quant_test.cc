// runtime/core/quant.h: e4m3_any_nan_code against a byte-by-byte definition, for every code value,
// every position of one NaN code in buffers of 0..80 bytes (the 32- and 8-byte word loops and the
// tail), and unaligned starts.
#include "runtime/core/quant.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

}  // namespace
}  // namespace ember
