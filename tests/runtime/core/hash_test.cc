#include "runtime/core/hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace ember {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) B.4 vectors.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec.data(), dec.size()), 0x113FDB5Cu);
}

TEST(Crc32cTest, ContinuationEqualsOneShot) {
  const char* text = "The quick brown fox jumps over the lazy dog";
  const size_t n = std::strlen(text);
  const uint32_t whole = crc32c(text, n);
  for (size_t split = 0; split <= n; ++split) {
    EXPECT_EQ(crc32c(text + split, n - split, crc32c(text, split)), whole) << split;
  }
}

TEST(Crc32cTest, SingleBitFlipChangesCrc) {
  std::vector<uint8_t> data(200);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  const uint32_t base = crc32c(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] ^= 1;
    EXPECT_NE(crc32c(data.data(), data.size()), base) << i;
    data[i] ^= 1;
  }
}

TEST(Xxh64Test, KnownVectors) {
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ull);
}

TEST(Xxh64Test, DependsOnEveryByte) {
  std::vector<uint8_t> data(100, 0x5A);
  const uint64_t base = xxh64(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] ^= 0x80;
    EXPECT_NE(xxh64(data.data(), data.size()), base) << i;
    data[i] ^= 0x80;
  }
  EXPECT_NE(xxh64(data.data(), data.size() - 1), base);
}

}  // namespace
}  // namespace ember
