// The reference block quantizers against numpy golden data (tests/data/quant/manifest.txt, made by
// make_quant_golden.py): codes, scales and the NVFP4 global scale bit for bit, dequantized values to
// 0 ULP; and every documented error.
#include "kernels/reference/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/core/float_codecs.h"
#include "tests/common/test_util.h"
#include "tools/common/npy.h"

namespace ember::kernels::reference {
namespace {

using tools::NpyArray;

std::string quant_dir() {
  const char* root = std::getenv("EMBER_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/data/quant/";
}

struct QuantCase {
  std::string name;
  std::map<std::string, std::string> fields;
  int64_t get(const char* key) const {
    auto it = fields.find(key);
    return it == fields.end() ? -1 : std::strtoll(it->second.c_str(), nullptr, 10);
  }
};

// The manifest's cases; one case named "manifest_missing" when it cannot be read, so the failure
// shows up as a failing test instead of an empty suite.
std::vector<QuantCase> load_manifest() {
  std::vector<QuantCase> cases;
  std::ifstream in(quant_dir() + "manifest.txt");
  if (!in) return {QuantCase{"manifest_missing", {}}};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    QuantCase c;
    std::istringstream tokens(line);
    std::string token;
    while (tokens >> token) {
      const size_t eq = token.find('=');
      if (eq != std::string::npos) c.fields[token.substr(0, eq)] = token.substr(eq + 1);
    }
    c.name = c.fields["name"];
    cases.push_back(c);
  }
  return cases;
}

void PrintTo(const QuantCase& c, std::ostream* os) { *os << c.name; }

template <typename T>
std::vector<T> load(const std::string& name, ScalarType dtype, std::vector<int64_t> dims) {
  NpyArray array;
  std::string error;
  if (!tools::read_npy(quant_dir() + name, &array, &error)) {
    ADD_FAILURE() << "cannot read " << name << ": " << error;
    return {};
  }
  EXPECT_EQ(array.dtype, dtype) << name;
  EXPECT_EQ(array.dims, dims) << name;
  std::vector<T> out(array.data.size() / sizeof(T));
  if (array.dtype != dtype || array.dims != dims) return {};
  if (!out.empty()) std::memcpy(out.data(), array.data.data(), out.size() * sizeof(T));
  return out;
}

// The first differing element of two arrays (bytes of each element compared), or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

class QuantGoldenTest : public ::testing::TestWithParam<QuantCase> {};

std::string case_name(const ::testing::TestParamInfo<QuantCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Golden, QuantGoldenTest, ::testing::ValuesIn(load_manifest()), case_name);

TEST_P(QuantGoldenTest, MatchesNumpyBitForBit) {
  const QuantCase& c = GetParam();
  ASSERT_NE(c.name, "manifest_missing") << "tests/data/quant/manifest.txt not found";
  const std::string scheme = c.fields.at("scheme");
  const int64_t n = c.get("n"), k = c.get("k");
  const std::vector<float> w = load<float>(c.name + ".w.npy", ScalarType::F32, {n, k});
  const std::vector<float> dq_golden = load<float>(c.name + ".dq.npy", ScalarType::F32, {n, k});
  ASSERT_EQ(w.size(), static_cast<size_t>(n * k));
  ASSERT_EQ(dq_golden.size(), w.size());
  std::vector<float> dq(w.size(), -1.0f), dq_of_golden(w.size(), -1.0f);
  ErrorContext ctx;

  if (scheme == "fp8") {
    const int64_t bn = c.get("block_n"), bk = c.get("block_k");
    const int64_t sn = (n + bn - 1) / bn, sk = (k + bk - 1) / bk;
    const auto codes_golden = load<uint8_t>(c.name + ".codes.npy", ScalarType::U8, {n, k});
    const auto scales_golden = load<float>(c.name + ".scales.npy", ScalarType::F32, {sn, sk});
    ASSERT_EQ(codes_golden.size(), w.size());
    ASSERT_EQ(scales_golden.size(), static_cast<size_t>(sn * sk));
    std::vector<uint8_t> codes(w.size(), 0xAA);
    std::vector<float> scales(scales_golden.size(), -1.0f);
    ASSERT_TRUE(quantize_fp8_e4m3(w.data(), n, k, bn, bk, codes.data(), scales.data(), &ctx).is_ok())
        << ctx.message;
    EXPECT_EQ(first_difference(scales, scales_golden), -1) << "scales";
    EXPECT_EQ(first_difference(codes, codes_golden), -1) << "codes";
    ASSERT_TRUE(dequantize_fp8_e4m3(codes_golden.data(), n, k, bn, bk, scales_golden.data(),
                                    dq_of_golden.data(), &ctx).is_ok());
    ASSERT_TRUE(dequantize_fp8_e4m3(codes.data(), n, k, bn, bk, scales.data(), dq.data(), &ctx).is_ok());
  } else if (scheme == "mxfp8") {
    const auto codes_golden = load<uint8_t>(c.name + ".codes.npy", ScalarType::U8, {n, k});
    const auto scales_golden = load<uint8_t>(c.name + ".scales.npy", ScalarType::U8, {n, k / 32});
    ASSERT_EQ(codes_golden.size(), w.size());
    std::vector<uint8_t> codes(w.size(), 0xAA), scales(scales_golden.size(), 0xAA);
    ASSERT_TRUE(quantize_mxfp8(w.data(), n, k, codes.data(), scales.data(), &ctx).is_ok()) << ctx.message;
    EXPECT_EQ(first_difference(scales, scales_golden), -1) << "scales";
    EXPECT_EQ(first_difference(codes, codes_golden), -1) << "codes";
    ASSERT_TRUE(dequantize_mxfp8(codes_golden.data(), n, k, scales_golden.data(), dq_of_golden.data(),
                                 &ctx).is_ok());
    ASSERT_TRUE(dequantize_mxfp8(codes.data(), n, k, scales.data(), dq.data(), &ctx).is_ok());
  } else if (scheme == "nvfp4") {
    const auto packed_golden = load<uint8_t>(c.name + ".codes.npy", ScalarType::U8, {n, k / 2});
    const auto scales_golden = load<uint8_t>(c.name + ".scales.npy", ScalarType::U8, {n, k / 16});
    const auto global_golden = load<float>(c.name + ".global.npy", ScalarType::F32, {1});
    ASSERT_EQ(packed_golden.size(), w.size() / 2);
    ASSERT_EQ(global_golden.size(), 1u);
    std::vector<uint8_t> packed(packed_golden.size(), 0xAA), scales(scales_golden.size(), 0xAA);
    float global = -1.0f;
    ASSERT_TRUE(quantize_nvfp4(w.data(), n, k, packed.data(), scales.data(), &global, &ctx).is_ok())
        << ctx.message;
    EXPECT_EQ(f32_bits(global), f32_bits(global_golden[0])) << global << " vs " << global_golden[0];
    EXPECT_EQ(first_difference(scales, scales_golden), -1) << "scales";
    EXPECT_EQ(first_difference(packed, packed_golden), -1) << "packed codes";
    ASSERT_TRUE(dequantize_nvfp4(packed_golden.data(), n, k, scales_golden.data(), global_golden[0],
                                 dq_of_golden.data(), &ctx).is_ok());
    ASSERT_TRUE(dequantize_nvfp4(packed.data(), n, k, scales.data(), global, dq.data(), &ctx).is_ok());
  } else {
    FAIL() << "unknown scheme " << scheme;
  }
  const int64_t at = first_difference(dq_of_golden, dq_golden);
  EXPECT_EQ(at, -1) << "dequantized golden codes differ at " << at << ": "
                    << (at >= 0 ? dq_of_golden[at] : 0.0f) << " vs " << (at >= 0 ? dq_golden[at] : 0.0f);
  EXPECT_EQ(first_difference(dq, dq_golden), -1) << "dequantized own codes";
}

// ---- Errors ---------------------------------------------------------------------------------------

class QuantErrorTest : public ::testing::Test {
 protected:
  testing::QuietLogs quiet_;
  ErrorContext ctx_;

  void expect_invalid(const Status& status, const char* text) {
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_EQ(ctx_.code, Error::InvalidArgument);
    EXPECT_NE(std::strstr(ctx_.message, text), nullptr) << ctx_.message;
    ctx_.clear();
  }
};

TEST_F(QuantErrorTest, KNotAMultipleOfTheBlock) {
  std::vector<float> w(2 * 48, 1.0f);
  std::vector<uint8_t> codes(w.size(), 0xAA), scales(8, 0xAA);
  float out[96];
  float g = 0;
  expect_invalid(quantize_mxfp8(w.data(), 2, 48, codes.data(), scales.data(), &ctx_),
                 "MXFP8 needs k to be a multiple of 32");
  expect_invalid(dequantize_mxfp8(codes.data(), 2, 48, scales.data(), out, &ctx_),
                 "multiple of 32");
  expect_invalid(quantize_nvfp4(w.data(), 4, 24, codes.data(), scales.data(), &g, &ctx_),
                 "NVFP4 needs k to be a multiple of 16");
  expect_invalid(dequantize_nvfp4(codes.data(), 4, 24, scales.data(), 1.0f, out, &ctx_),
                 "got k = 24");
  // Nothing was written.
  for (uint8_t b : codes) ASSERT_EQ(b, 0xAA);
  for (uint8_t b : scales) ASSERT_EQ(b, 0xAA);
  EXPECT_EQ(g, 0.0f);
}

TEST_F(QuantErrorTest, BadShapesAndBlocks) {
  float w[4] = {1, 2, 3, 4}, scales[4], out[4];
  uint8_t codes[4];
  expect_invalid(quantize_fp8_e4m3(w, -1, 4, 1, 4, codes, scales, &ctx_), "negative");
  expect_invalid(quantize_fp8_e4m3(w, 1, 4, 0, 4, codes, scales, &ctx_), "block [0, 4]");
  expect_invalid(quantize_fp8_e4m3(w, 1, 4, 1, -3, codes, scales, &ctx_), "must be at least");
  expect_invalid(dequantize_fp8_e4m3(codes, 1, 4, 1, 0, scales, out, &ctx_), "must be at least");
  expect_invalid(quantize_mxfp8(w, 3, -32, codes, codes, &ctx_), "negative");
  const int64_t big = int64_t{1} << 40;
  expect_invalid(quantize_fp8_e4m3(w, big, big, 1, 1, codes, scales, &ctx_), "too large");
  expect_invalid(dequantize_nvfp4(codes, big, big, codes, 1.0f, out, &ctx_), "too large");
}

TEST_F(QuantErrorTest, NonFiniteWeights) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> w(2 * 32, 0.5f);
    w[37] = bad;  // row 1, column 5
    std::vector<uint8_t> codes(w.size(), 0xAA), scales(4, 0xAA);
    std::vector<float> fscales(4, -1.0f);
    float g = 0;
    expect_invalid(quantize_fp8_e4m3(w.data(), 2, 32, 1, 32, codes.data(), fscales.data(), &ctx_),
                   "weight element [1, 5] is NaN or infinite");
    expect_invalid(quantize_mxfp8(w.data(), 2, 32, codes.data(), scales.data(), &ctx_), "[1, 5]");
    expect_invalid(quantize_nvfp4(w.data(), 2, 32, codes.data(), scales.data(), &g, &ctx_), "[1, 5]");
    for (uint8_t b : codes) ASSERT_EQ(b, 0xAA);
    for (float s : fscales) ASSERT_EQ(s, -1.0f);
  }
}

TEST_F(QuantErrorTest, InvalidNvfp4Scales) {
  const uint8_t packed[8] = {0x21, 0x43, 0x65, 0x07, 0, 0, 0, 0};
  float out[16];
  for (uint8_t bad : {uint8_t{0x7F}, uint8_t{0x80}, uint8_t{0xB8}, uint8_t{0xFF}}) {
    const uint8_t scales[1] = {bad};
    expect_invalid(dequantize_nvfp4(packed, 1, 16, scales, 1.0f, out, &ctx_),
                   "not a valid ue4m3 code");
  }
  const uint8_t scale_one[1] = {0x38};
  for (float g : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    expect_invalid(dequantize_nvfp4(packed, 1, 16, scale_one, g, out, &ctx_), "global scale");
  }
  ASSERT_TRUE(dequantize_nvfp4(packed, 1, 16, scale_one, 2.0f, out, &ctx_).is_ok());
  EXPECT_EQ(out[0], 1.0f);   // code 1 (0.5) * 1 * 2
  EXPECT_EQ(out[1], 2.0f);   // code 2 (1.0)
  EXPECT_EQ(out[7], 0.0f);   // code 0
  EXPECT_EQ(out[6], 12.0f);  // code 7 (6.0)
}

TEST(QuantizeTest, EmptyWeightsWriteNothing) {
  float scales[1] = {-1.0f}, g = -1.0f;
  uint8_t bytes[1] = {0xAA};
  EXPECT_TRUE(quantize_fp8_e4m3(nullptr, 0, 0, 128, 128, bytes, scales, nullptr).is_ok());
  EXPECT_TRUE(quantize_mxfp8(nullptr, 0, 64, bytes, bytes, nullptr).is_ok());
  EXPECT_TRUE(quantize_nvfp4(nullptr, 3, 0, bytes, bytes, &g, nullptr).is_ok());
  EXPECT_EQ(bytes[0], 0xAA);
  EXPECT_EQ(scales[0], -1.0f);
  EXPECT_EQ(g, 1.0f);  // amax of nothing is 0: g = 1
}

// Scales are decode multipliers, and the three FP8 granularities are one function.
TEST(QuantizeTest, Fp8GranularitiesShareOneRule) {
  const float w[2][4] = {{448.0f, -1.0f, 2.0f, 0.0f}, {0.0f, 0.5f, -0.25f, 0.0f}};
  uint8_t codes[8];
  float per_tensor[1], per_channel[2];
  ASSERT_TRUE(quantize_fp8_e4m3(&w[0][0], 2, 4, 2, 4, codes, per_tensor).is_ok());
  EXPECT_EQ(per_tensor[0], 1.0f);
  EXPECT_EQ(codes[0], 0x7E);
  ASSERT_TRUE(quantize_fp8_e4m3(&w[0][0], 2, 4, 1, 4, codes, per_channel).is_ok());
  EXPECT_EQ(per_channel[1], 0.5f / 448.0f);
  EXPECT_EQ(codes[5], 0x7E);  // the row's max maps to 448
}

}  // namespace
}  // namespace ember::kernels::reference
