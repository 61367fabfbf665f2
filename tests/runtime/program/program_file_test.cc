#include "runtime/program/program_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/hash.h"
#include "tests/common/test_util.h"

namespace ember {
namespace {

constexpr uint64_t kFileSize = 3 * 65536;

FileHeader ValidHeader() {
  FileHeader h;
  h.flatbuffer_offset = 64;
  h.flatbuffer_size = 1000;
  h.segment_base = 65536;
  h.segment_size = 65536 + 100;
  h.required_features = kFeatureState;
  h.flatbuffer_crc32c = 0xDEADBEEF;
  return h;
}

struct Decoded {
  Status status;
  FileHeader header;
  ErrorContext ctx;
};

Decoded Decode(const uint8_t* bytes, size_t available = kHeaderSize, uint64_t file_size = kFileSize,
               bool check_crc = true) {
  testing::QuietLogs quiet;
  Decoded d;
  d.status = decode_header(bytes, available, file_size, check_crc, &d.header, &d.ctx);
  if (!d.status.is_ok()) {
    EXPECT_EQ(d.ctx.code, d.status.code());
    EXPECT_GT(std::strlen(d.ctx.message), 0u) << "empty message for " << to_string(d.status.code());
    EXPECT_EQ(d.ctx.phase, ErrorContext::Phase::Header);
  }
  return d;
}

Decoded DecodeHeader(const FileHeader& h, uint64_t file_size = kFileSize) {
  uint8_t bytes[kHeaderSize];
  encode_header(h, bytes);
  return Decode(bytes, kHeaderSize, file_size);
}

TEST(ProgramFileTest, EncodeLayoutIsLittleEndianAsDocumented) {
  FileHeader h = ValidHeader();
  h.minor = 3;
  h.min_runtime_version = 0x00010000;
  uint8_t b[kHeaderSize];
  encode_header(h, b);
  EXPECT_EQ(std::memcmp(b, "EMBR", 4), 0);
  EXPECT_EQ(b[4], 1);
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6], 3);
  EXPECT_EQ(b[8], 64);
  EXPECT_EQ(b[14], 1);  // min_runtime_version major in the high half
  EXPECT_EQ(b[16], 64);
  EXPECT_EQ(b[20] | (b[21] << 8), 1000);
  EXPECT_EQ(b[26], 1);  // segment_base 65536
  EXPECT_EQ(b[40], kFeatureState);
  uint32_t stored;
  std::memcpy(&stored, b + 60, 4);
  EXPECT_EQ(stored, crc32c(b, 60));
  for (int i = 52; i < 60; ++i) EXPECT_EQ(b[i], 0) << i;
}

TEST(ProgramFileTest, RoundTrip) {
  FileHeader h = ValidHeader();
  h.minor = 7;  // later minors of the same major load
  h.required_features = kFeatureState | kFeatureControlFlow;
  Decoded d = DecodeHeader(h);
  ASSERT_TRUE(d.status.is_ok()) << d.ctx.message;
  EXPECT_EQ(d.header.major, h.major);
  EXPECT_EQ(d.header.minor, 7);
  EXPECT_EQ(d.header.header_size, kHeaderSize);
  EXPECT_EQ(d.header.min_runtime_version, h.min_runtime_version);
  EXPECT_EQ(d.header.flatbuffer_offset, h.flatbuffer_offset);
  EXPECT_EQ(d.header.flatbuffer_size, h.flatbuffer_size);
  EXPECT_EQ(d.header.segment_base, h.segment_base);
  EXPECT_EQ(d.header.segment_size, h.segment_size);
  EXPECT_EQ(d.header.required_features, h.required_features);
  EXPECT_EQ(d.header.flatbuffer_crc32c, h.flatbuffer_crc32c);
  EXPECT_EQ(d.header.flags, 0u);
}

TEST(ProgramFileTest, RoundTripWithoutSegments) {
  FileHeader h = ValidHeader();
  h.segment_base = 0;
  h.segment_size = 0;
  EXPECT_TRUE(DecodeHeader(h, 64 + 1000).status.is_ok());
}

TEST(ProgramFileTest, BadMagicIsInvalidProgram) {
  uint8_t b[kHeaderSize];
  encode_header(ValidHeader(), b);
  for (int i = 0; i < 4; ++i) {
    uint8_t c[kHeaderSize];
    std::memcpy(c, b, kHeaderSize);
    c[i] ^= 0x20;
    Decoded d = Decode(c);
    EXPECT_EQ(d.status.code(), Error::InvalidProgram) << i;
    EXPECT_NE(std::strstr(d.ctx.message, "magic"), nullptr) << d.ctx.message;
  }
}

TEST(ProgramFileTest, HeaderCrcMismatchIsIntegrityError) {
  uint8_t b[kHeaderSize];
  encode_header(ValidHeader(), b);
  for (int i = 4; i < 64; ++i) {
    uint8_t c[kHeaderSize];
    std::memcpy(c, b, kHeaderSize);
    c[i] ^= 0x01;
    Decoded d = Decode(c);
    EXPECT_EQ(d.status.code(), Error::IntegrityError) << "byte " << i << ": " << d.ctx.message;
  }
}

TEST(ProgramFileTest, CrcIsNotCheckedWhenDisabled) {
  uint8_t b[kHeaderSize];
  encode_header(ValidHeader(), b);
  b[60] ^= 0xFF;
  EXPECT_TRUE(Decode(b, kHeaderSize, kFileSize, /*check_crc=*/false).status.is_ok());
  EXPECT_EQ(Decode(b).status.code(), Error::IntegrityError);
}

TEST(ProgramFileTest, OtherMajorVersionIsVersionMismatch) {
  for (uint16_t major : {uint16_t{0}, uint16_t{2}, uint16_t{0xFFFF}}) {
    FileHeader h = ValidHeader();
    h.major = major;
    Decoded d = DecodeHeader(h);
    EXPECT_EQ(d.status.code(), Error::VersionMismatch) << major;
  }
}

TEST(ProgramFileTest, MinRuntimeVersionTooNewIsVersionMismatch) {
  FileHeader h = ValidHeader();
  h.min_runtime_version = kRuntimeVersion + 1;
  Decoded d = DecodeHeader(h);
  EXPECT_EQ(d.status.code(), Error::VersionMismatch);
  EXPECT_NE(std::strstr(d.ctx.message, "runtime"), nullptr) << d.ctx.message;
  h.min_runtime_version = 2u << 16;
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::VersionMismatch);
  h.min_runtime_version = kRuntimeVersion;
  EXPECT_TRUE(DecodeHeader(h).status.is_ok());
  h.min_runtime_version = 0;
  EXPECT_TRUE(DecodeHeader(h).status.is_ok());
}

TEST(ProgramFileTest, EveryUnsupportedFeatureBitIsFeatureMissingNamingTheBit) {
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t mask = uint64_t{1} << bit;
    FileHeader h = ValidHeader();
    h.required_features = mask;
    Decoded d = DecodeHeader(h);
    if (kSupportedFeatures & mask) {
      EXPECT_TRUE(d.status.is_ok()) << bit;
      continue;
    }
    ASSERT_EQ(d.status.code(), Error::FeatureMissing) << bit;
    const std::string message = d.ctx.message;
    EXPECT_NE(message.find("bit " + std::to_string(bit)), std::string::npos) << message;
    const char* name = feature_name(mask);
    EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  EXPECT_STREQ(feature_name(kFeatureFp8), "fp8");
  EXPECT_STREQ(feature_name(kFeaturePagedKv), "paged_kv");
  EXPECT_STREQ(feature_name(uint64_t{1} << 40), "unknown");
}

TEST(ProgramFileTest, ShortFileIsInvalidProgram) {
  uint8_t b[kHeaderSize];
  encode_header(ValidHeader(), b);
  for (uint64_t size : {0, 1, 4, 63}) {
    EXPECT_EQ(Decode(b, size, size).status.code(), Error::InvalidProgram) << size;
  }
  EXPECT_EQ(Decode(b, 63, kFileSize).status.code(), Error::InvalidProgram);  // fewer bytes available
}

TEST(ProgramFileTest, FlatBufferOutsideFileIsInvalidProgram) {
  FileHeader h = ValidHeader();
  h.segment_base = 0;
  h.segment_size = 0;
  EXPECT_EQ(DecodeHeader(h, 64 + 999).status.code(), Error::InvalidProgram);
  h.flatbuffer_size = 0xFFFFFFFF;
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h = ValidHeader();
  h.flatbuffer_size = 4;  // too small for a FlatBuffer
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h = ValidHeader();
  h.flatbuffer_offset = 0;  // overlaps the header
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h.flatbuffer_offset = 65;  // not 64-aligned
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h.flatbuffer_offset = 0xFFFFFFC0;
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
}

TEST(ProgramFileTest, SegmentsOutsideFileAreInvalidProgram) {
  FileHeader h = ValidHeader();
  EXPECT_TRUE(DecodeHeader(h, 65536 * 2 + 100).status.is_ok());
  EXPECT_EQ(DecodeHeader(h, 65536 * 2 + 99).status.code(), Error::InvalidProgram);
  h.segment_size = UINT64_MAX;
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h = ValidHeader();
  h.segment_base = UINT64_MAX - 65535;  // 64 KiB-aligned, far beyond the file
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h = ValidHeader();
  h.segment_base = 4096;  // not 64 KiB-aligned
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h = ValidHeader();
  h.flatbuffer_size = 70000;  // FlatBuffer runs into the segments
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
}

TEST(ProgramFileTest, HeaderSizeFlagsAndReservedMustBeExact) {
  FileHeader h = ValidHeader();
  h.header_size = 128;
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  h = ValidHeader();
  h.flags = 1;
  EXPECT_EQ(DecodeHeader(h).status.code(), Error::InvalidProgram);
  uint8_t b[kHeaderSize];
  encode_header(ValidHeader(), b);
  b[57] = 1;  // reserved
  const uint32_t crc = crc32c(b, 60);
  std::memcpy(b + 60, &crc, 4);
  EXPECT_EQ(Decode(b).status.code(), Error::InvalidProgram);
}

TEST(ProgramFileTest, FailureLeavesOutputUntouched) {
  FileHeader out;
  out.flatbuffer_size = 12345;
  uint8_t b[kHeaderSize];
  FileHeader h = ValidHeader();
  h.major = 9;
  encode_header(h, b);
  testing::QuietLogs quiet;
  EXPECT_FALSE(decode_header(b, kHeaderSize, kFileSize, true, &out, nullptr).is_ok());
  EXPECT_EQ(out.flatbuffer_size, 12345u);
}

}  // namespace
}  // namespace ember
