// The narrow float codecs against golden data made with ml_dtypes (tests/data/quant/, written by
// tests/kernels/reference/make_quant_golden.py): every code decodes to its golden value, every f16
// and bf16 value and every f32 tie point encodes to its golden code; plus the special cases the
// header documents, round trips and the bulk helpers. All comparisons are exact (bits).
#include "runtime/core/float_codecs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "tools/common/npy.h"

namespace ember {
namespace {

using tools::NpyArray;

std::string quant_dir() {
  const char* root = std::getenv("EMBER_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/data/quant/";
}

// Reads tests/data/quant/<name>; fails the test (and returns an empty array) when it cannot.
NpyArray load(const std::string& name, ScalarType dtype) {
  NpyArray array;
  std::string error;
  if (!tools::read_npy(quant_dir() + name, &array, &error)) {
    ADD_FAILURE() << "cannot read " << name << ": " << error;
    return NpyArray();
  }
  EXPECT_EQ(array.dtype, dtype) << name;
  if (array.dtype != dtype) return NpyArray();
  return array;
}

template <typename T>
std::vector<T> values_of(const NpyArray& array) {
  std::vector<T> out(array.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), array.data.data(), out.size() * sizeof(T));
  return out;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%X", v);
  return buf;
}

// One format's codec, as a table the tests loop over.
struct Format {
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
  void (*encode_f32)(const float*, uint8_t*, size_t);       // bulk; null for e2m1 (packed)
  void (*encode_f16)(const uint16_t*, uint8_t*, size_t);
  void (*encode_bf16)(const uint16_t*, uint8_t*, size_t);
  void (*decode_bulk)(const uint8_t*, float*, size_t);
  int code_count;
};

const Format kFormats[] = {
    {"e4m3fn", e4m3fn_to_f32, f32_to_e4m3fn, encode_e4m3fn, encode_e4m3fn_from_f16,
     encode_e4m3fn_from_bf16, decode_e4m3fn, 256},
    {"e5m2", e5m2_to_f32, f32_to_e5m2, encode_e5m2, encode_e5m2_from_f16, encode_e5m2_from_bf16,
     decode_e5m2, 256},
    {"e2m1", e2m1_to_f32, f32_to_e2m1, nullptr, nullptr, nullptr, nullptr, 16},
    {"e8m0", e8m0_to_f32, f32_to_e8m0, encode_e8m0, encode_e8m0_from_f16, encode_e8m0_from_bf16,
     decode_e8m0, 256},
    {"ue4m3", ue4m3_to_f32, f32_to_ue4m3, encode_ue4m3, encode_ue4m3_from_f16,
     encode_ue4m3_from_bf16, decode_ue4m3, 256},
};

void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

class FormatTest : public ::testing::TestWithParam<Format> {};

std::string format_name(const ::testing::TestParamInfo<Format>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(FloatCodecs, FormatTest, ::testing::ValuesIn(kFormats), format_name);

TEST_P(FormatTest, EveryCodeDecodesToGolden) {
  const Format& f = GetParam();
  const std::vector<float> golden =
      values_of<float>(load(std::string("decode_") + f.name + ".npy", ScalarType::F32));
  ASSERT_EQ(golden.size(), static_cast<size_t>(f.code_count));
  std::vector<uint8_t> codes(f.code_count);
  for (int c = 0; c < f.code_count; ++c) {
    codes[c] = static_cast<uint8_t>(c);
    EXPECT_EQ(f32_bits(f.decode(static_cast<uint8_t>(c))), f32_bits(golden[c]))
        << f.name << " code " << hex(c) << ": got " << f.decode(static_cast<uint8_t>(c))
        << ", golden " << golden[c];
  }
  std::vector<float> bulk(f.code_count);
  if (f.decode_bulk != nullptr) {
    f.decode_bulk(codes.data(), bulk.data(), codes.size());
  } else {  // e2m1: two codes per byte
    std::vector<uint8_t> packed(f.code_count / 2);
    for (int c = 0; c < f.code_count; c += 2) packed[c / 2] = static_cast<uint8_t>(c | (c + 1) << 4);
    decode_e2m1_packed(packed.data(), bulk.data(), bulk.size());
  }
  EXPECT_EQ(std::memcmp(bulk.data(), golden.data(), golden.size() * sizeof(float)), 0) << f.name;
}

// The 65,536 expected codes of a source type, from the golden run-length table.
std::vector<uint8_t> expand_runs(const std::string& name) {
  const NpyArray runs = load(name, ScalarType::I32);
  const std::vector<int32_t> pairs = values_of<int32_t>(runs);
  std::vector<uint8_t> expected(65536, 0);
  EXPECT_TRUE(runs.dims.size() == 2 && runs.dims[1] == 2 && !pairs.empty() && pairs[0] == 0) << name;
  for (size_t r = 0; r + 1 < pairs.size(); r += 2) {
    const size_t end = r + 2 < pairs.size() ? static_cast<size_t>(pairs[r + 2]) : expected.size();
    for (size_t i = static_cast<size_t>(pairs[r]); i < end && i < expected.size(); ++i) {
      expected[i] = static_cast<uint8_t>(pairs[r + 1]);
    }
  }
  return expected;
}

void check_every_16_bit_source(const Format& f, const char* src, float (*widen)(uint16_t),
                               void (*bulk)(const uint16_t*, uint8_t*, size_t),
                               void (*packed)(const uint16_t*, uint8_t*, size_t)) {
  const std::vector<uint8_t> expected =
      expand_runs(std::string("encode_") + src + "_" + f.name + ".runs.npy");
  std::vector<uint16_t> all(65536);
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    all[h] = static_cast<uint16_t>(h);
    const uint8_t got = f.encode(widen(static_cast<uint16_t>(h)));
    if (got != expected[h] && ++mismatches <= 10) {
      ADD_FAILURE() << f.name << " from " << src << " " << hex(h) << " (" << widen(h)
                    << "): got " << hex(got) << ", golden " << hex(expected[h]);
    }
  }
  EXPECT_EQ(mismatches, 0) << f.name << " from " << src;
  std::vector<uint8_t> out(65536);
  if (bulk != nullptr) {
    bulk(all.data(), out.data(), all.size());
    EXPECT_EQ(out, expected) << "bulk " << f.name << " from " << src;
  } else {
    packed(all.data(), out.data(), all.size());  // 32,768 bytes, two codes each
    for (size_t i = 0; i < all.size(); ++i) {
      const uint8_t code = static_cast<uint8_t>((out[i / 2] >> ((i & 1) * 4)) & 0xF);
      if (code != expected[i]) {
        ADD_FAILURE() << "packed " << f.name << " from " << src << " element " << i;
        break;
      }
    }
  }
}

TEST_P(FormatTest, EveryF16EncodesToGolden) {
  const Format& f = GetParam();
  check_every_16_bit_source(f, "f16", f16_to_f32, f.encode_f16, encode_e2m1_packed_from_f16);
}

TEST_P(FormatTest, EveryBf16EncodesToGolden) {
  const Format& f = GetParam();
  check_every_16_bit_source(f, "bf16", bf16_to_f32, f.encode_bf16, encode_e2m1_packed_from_bf16);
}

TEST_P(FormatTest, TiePointsAndSpecialsEncodeToGolden) {
  const Format& f = GetParam();
  const std::vector<float> in =
      values_of<float>(load(std::string("ties_") + f.name + ".in.npy", ScalarType::F32));
  const std::vector<uint8_t> expected =
      values_of<uint8_t>(load(std::string("ties_") + f.name + ".out.npy", ScalarType::U8));
  ASSERT_EQ(in.size(), expected.size());
  ASSERT_GT(in.size(), 0u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(f.encode(in[i]), expected[i])
        << f.name << " of " << in[i] << " (bits " << hex(f32_bits(in[i])) << ")";
  }
  std::vector<uint8_t> out(in.size());
  if (f.encode_f32 != nullptr) {
    f.encode_f32(in.data(), out.data(), in.size());
    EXPECT_EQ(out, expected) << "bulk " << f.name;
  } else {
    encode_e2m1_packed(in.data(), out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ((out[i / 2] >> ((i & 1) * 4)) & 0xF, expected[i]) << "packed e2m1 element " << i;
    }
  }
}

TEST_P(FormatTest, DecodeThenEncodeIsTheIdentityOnEveryNonNanCode) {
  const Format& f = GetParam();
  int checked = 0;
  for (int c = 0; c < f.code_count; ++c) {
    const float v = f.decode(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    EXPECT_EQ(f.encode(v), c) << f.name << " code " << hex(c) << " = " << v;
    ++checked;
  }
  // NaN-free codes: e4m3fn 254, e5m2 250 (±Inf included), e2m1 16, e8m0 255, ue4m3 127.
  const int expected = std::string(f.name) == "e4m3fn"  ? 254
                       : std::string(f.name) == "e5m2"  ? 250
                       : std::string(f.name) == "e2m1"  ? 16
                       : std::string(f.name) == "e8m0"  ? 255
                                                        : 127;
  EXPECT_EQ(checked, expected) << f.name;
}

// ---- Special values, spelled out -----------------------------------------------------------------

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kMax = std::numeric_limits<float>::max();
const float kDenormMin = std::numeric_limits<float>::denorm_min();

TEST(FloatCodecsTest, E4m3fnSpecials) {
  EXPECT_EQ(f32_to_e4m3fn(kNan), 0x7F);
  EXPECT_EQ(f32_to_e4m3fn(-kNan), 0xFF);
  EXPECT_EQ(f32_to_e4m3fn(kInf), 0x7E);  // no Inf: saturates
  EXPECT_EQ(f32_to_e4m3fn(-kInf), 0xFE);
  EXPECT_EQ(f32_to_e4m3fn(464.0f), 0x7E);  // would round to 480, the NaN slot, without the clamp
  EXPECT_EQ(f32_to_e4m3fn(1e30f), 0x7E);
  EXPECT_EQ(f32_to_e4m3fn(-kMax), 0xFE);
  EXPECT_EQ(f32_to_e4m3fn(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3fn(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3fn(-kDenormMin), 0x80);         // rounds to -0
  EXPECT_EQ(f32_to_e4m3fn(0x1p-10f), 0x00);            // tie between 0 and 2^-9: even (0)
  EXPECT_EQ(f32_to_e4m3fn(3 * 0x1p-10f), 0x02);        // tie between 2^-9 and 2^-8: even (2^-8)
  EXPECT_EQ(f32_to_e4m3fn(1.0625f), 0x38);             // tie between 1 and 1.125: even (1)
  EXPECT_EQ(f32_to_e4m3fn(1.1875f), 0x3A);             // tie between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(f32_to_e4m3fn(0x1p-6f * 0.875f), 0x07);    // largest subnormal
  EXPECT_TRUE(std::isnan(e4m3fn_to_f32(0x7F)));
  EXPECT_EQ(f32_bits(e4m3fn_to_f32(0xFF)), 0xFFC00000u);
  EXPECT_EQ(e4m3fn_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3fn_to_f32(0x01), 0x1p-9f);
}

TEST(FloatCodecsTest, E5m2Specials) {
  EXPECT_EQ(f32_to_e5m2(kNan), 0x7E);
  EXPECT_EQ(f32_to_e5m2(-kNan), 0xFE);
  EXPECT_EQ(f32_to_e5m2(kInf), 0x7C);  // keeps Inf
  EXPECT_EQ(f32_to_e5m2(-kInf), 0xFC);
  EXPECT_EQ(f32_to_e5m2(61440.0f), 0x7B);  // IEEE would give Inf; finite values clamp to the max
  EXPECT_EQ(f32_to_e5m2(kMax), 0x7B);
  EXPECT_EQ(f32_to_e5m2(-1e30f), 0xFB);
  EXPECT_EQ(f32_to_e5m2(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e5m2(0x1p-17f), 0x00);  // tie between 0 and 2^-16: even (0)
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_f32(0x7C), kInf);
  EXPECT_EQ(e5m2_to_f32(0xFC), -kInf);
  EXPECT_TRUE(std::isnan(e5m2_to_f32(0x7D)));
  EXPECT_EQ(e5m2_to_f32(0x01), 0x1p-16f);
}

TEST(FloatCodecsTest, E2m1Specials) {
  EXPECT_EQ(f32_to_e2m1(kNan), 0x0);  // no NaN: +0, whatever the sign
  EXPECT_EQ(f32_to_e2m1(-kNan), 0x0);
  EXPECT_EQ(f32_to_e2m1(kInf), 0x7);  // saturates
  EXPECT_EQ(f32_to_e2m1(-kInf), 0xF);
  EXPECT_EQ(f32_to_e2m1(7.0f), 0x7);  // the tie 6 | 8 clamps to 6 first
  EXPECT_EQ(f32_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(f32_to_e2m1(-0.25f), 0x8);  // rounds to -0
  // torchao's decision points (notes §2.6): 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
  // 2.5 -> 2, 3.5 -> 4, 5 -> 4.
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);
  EXPECT_EQ(f32_to_e2m1(0.75f), 0x2);
  EXPECT_EQ(f32_to_e2m1(1.25f), 0x2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 0x4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 0x4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 0x6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 0x6);
  EXPECT_EQ(e2m1_to_f32(0xF7), 6.0f);  // the high nibble is ignored
  EXPECT_EQ(f32_bits(e2m1_to_f32(0x8)), 0x80000000u);
}

TEST(FloatCodecsTest, Ue4m3Specials) {
  EXPECT_EQ(f32_to_ue4m3(kNan), 0x7F);  // the invalid code
  EXPECT_EQ(f32_to_ue4m3(-kNan), 0x7F);
  EXPECT_EQ(f32_to_ue4m3(kInf), 0x7E);
  EXPECT_EQ(f32_to_ue4m3(1e30f), 0x7E);
  EXPECT_EQ(f32_to_ue4m3(-kInf), 0x00);  // no sign: negatives clamp to 0
  EXPECT_EQ(f32_to_ue4m3(-1.0f), 0x00);
  EXPECT_EQ(f32_to_ue4m3(-0.0f), 0x00);
  EXPECT_EQ(f32_to_ue4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_ue4m3(1.0f), 0x38);
  EXPECT_TRUE(std::isnan(ue4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(ue4m3_to_f32(0x80)));  // sign bit set: invalid
  EXPECT_TRUE(std::isnan(ue4m3_to_f32(0xB8)));
  EXPECT_EQ(ue4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(ue4m3_to_f32(0x08), 0x1p-6f);
}

TEST(FloatCodecsTest, E8m0Specials) {
  EXPECT_EQ(f32_to_e8m0(kNan), 0xFF);
  EXPECT_EQ(f32_to_e8m0(-kNan), 0xFF);
  EXPECT_EQ(f32_to_e8m0(kInf), 0xFE);  // no Inf: clamps to 2^127
  EXPECT_EQ(f32_to_e8m0(kMax), 0xFE);
  EXPECT_EQ(f32_to_e8m0(0x1.8p127f), 0xFE);
  EXPECT_EQ(f32_to_e8m0(0.0f), 0x00);   // no zero: clamps to 2^-127
  EXPECT_EQ(f32_to_e8m0(-0.0f), 0x00);
  EXPECT_EQ(f32_to_e8m0(-4.0f), 0x00);  // no sign: clamps to 2^-127
  EXPECT_EQ(f32_to_e8m0(-kInf), 0x00);
  EXPECT_EQ(f32_to_e8m0(kDenormMin), 0x00);
  EXPECT_EQ(f32_to_e8m0(1.0f), 127);
  EXPECT_EQ(f32_to_e8m0(1.5f), 128);  // ties round up
  EXPECT_EQ(f32_to_e8m0(3.0f), 129);
  EXPECT_EQ(f32_to_e8m0(0.75f), 127);
  EXPECT_EQ(f32_to_e8m0(std::nextafter(1.5f, 0.0f)), 127);
  EXPECT_EQ(f32_to_e8m0(f32_from_bits(0x00599999u)), 0x00);  // 1.4 * 2^-127: nearer 2^-127
  EXPECT_EQ(f32_to_e8m0(f32_from_bits(0x00600000u)), 0x01);  // 1.5 * 2^-127: tie, up
  EXPECT_EQ(f32_bits(e8m0_to_f32(0x00)), 0x00400000u);       // 2^-127, an f32 subnormal
  EXPECT_EQ(e8m0_to_f32(0xFE), 0x1p127f);
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(f32_bits(e8m0_to_f32(0xFF)), 0x7FC00000u);
}

TEST(FloatCodecsTest, E8m0RceilSpecials) {
  EXPECT_EQ(e8m0_rceil(1.0f), 127);
  EXPECT_EQ(e8m0_rceil(std::nextafter(1.0f, 2.0f)), 128);
  EXPECT_EQ(e8m0_rceil(0.75f), 127);
  EXPECT_EQ(e8m0_rceil(0x1p-126f), 1);
  EXPECT_EQ(e8m0_rceil(0x1p127f), 0xFE);
  EXPECT_EQ(e8m0_rceil(std::nextafter(0x1p127f, kInf)), 0xFE);  // clamped: the one result < |f|
  EXPECT_EQ(e8m0_rceil(kMax), 0xFE);
  EXPECT_EQ(e8m0_rceil(0.0f), 0x00);
  EXPECT_EQ(e8m0_rceil(-0.0f), 0x00);
  EXPECT_EQ(e8m0_rceil(kDenormMin), 0x00);
  EXPECT_EQ(e8m0_rceil(f32_from_bits(0x00400000u)), 0x00);  // exactly 2^-127
  EXPECT_EQ(e8m0_rceil(f32_from_bits(0x00400001u)), 0x01);
  EXPECT_EQ(e8m0_rceil(-2.0f), 128);  // the sign bit is ignored
  EXPECT_EQ(e8m0_rceil(-3.0f), 129);
  EXPECT_EQ(e8m0_rceil(kInf), 0xFF);
  EXPECT_EQ(e8m0_rceil(-kInf), 0xFF);
  EXPECT_EQ(e8m0_rceil(kNan), 0xFF);
}

// Over a sweep of 17 million positive f32 (every 127th bit pattern, all binades and subnormals):
// e8m0_rceil(v) is the smallest code whose value is >= v, inside [2^-127, 2^127].
TEST(FloatCodecsTest, E8m0RceilIsTheSmallestPowerOfTwoAtOrAbove) {
  int failures = 0;
  for (uint32_t bits = 1; bits < 0x7F800000u && failures < 10; bits += 127) {
    const float v = f32_from_bits(bits);
    const uint8_t code = e8m0_rceil(v);
    const bool ok = v > 0x1p127f ? code == 0xFE
                                 : e8m0_to_f32(code) >= v &&
                                       (code == 0 || e8m0_to_f32(static_cast<uint8_t>(code - 1)) < v);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "e8m0_rceil(" << v << ", bits " << hex(bits) << ") = " << int(code);
    }
  }
}

TEST(FloatCodecsTest, F16AndBf16RoundTripEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t code = static_cast<uint16_t>(h);
    const float f = f16_to_f32(code);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << hex(h);
    } else {
      EXPECT_EQ(f32_to_f16(f), code) << "f16 " << hex(h);
    }
    const float b = bf16_to_f32(code);
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(b)))) << hex(h);
    } else {
      EXPECT_EQ(f32_to_bf16(b), code) << "bf16 " << hex(h);
    }
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // IEEE overflow to Inf (f16 is not a clamped codec)
  EXPECT_EQ(f32_to_bf16(kMax), 0x7F80);
}

TEST(FloatCodecsTest, E2m1PackingPutsEvenElementsInTheLowNibble) {
  const float in[5] = {0.5f, -6.0f, 1.0f, 3.0f, -0.0f};
  uint8_t packed[3] = {0xAA, 0xAA, 0xAA};
  encode_e2m1_packed(in, packed, 5);
  EXPECT_EQ(packed[0], 0xF1);  // 0.5 = 0x1 low, -6 = 0xF high
  EXPECT_EQ(packed[1], 0x52);  // 1.0 = 0x2 low, 3.0 = 0x5 high
  EXPECT_EQ(packed[2], 0x08);  // -0 = 0x8 low; odd count: high nibble 0
  float out[5];
  decode_e2m1_packed(packed, out, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(f32_bits(out[i]), f32_bits(in[i])) << i;

  const uint16_t f16_in[2] = {0x3C00, 0xC600};  // 1.0, -6.0
  const uint16_t bf16_in[2] = {0x3F80, 0xC0C0};
  uint8_t byte = 0;
  encode_e2m1_packed_from_f16(f16_in, &byte, 2);
  EXPECT_EQ(byte, 0xF2);
  encode_e2m1_packed_from_bf16(bf16_in, &byte, 2);
  EXPECT_EQ(byte, 0xF2);
}

TEST(FloatCodecsTest, BulkHelpersMatchTheScalarCodecs) {
  const float in[6] = {1.0f, -2.5f, 0x1p-12f, 500.0f, -kInf, kNan};
  uint8_t out[6];
  encode_e4m3fn(in, out, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], f32_to_e4m3fn(in[i])) << i;
  encode_e5m2(in, out, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], f32_to_e5m2(in[i])) << i;
  encode_e8m0(in, out, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], f32_to_e8m0(in[i])) << i;
  encode_ue4m3(in, out, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], f32_to_ue4m3(in[i])) << i;
  encode_e4m3fn(in, out, 0);  // count 0 writes nothing
}

}  // namespace
}  // namespace ember
