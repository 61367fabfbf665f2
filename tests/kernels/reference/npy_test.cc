// tools/common/npy: round trips, byte-exact agreement with numpy's writer, malformed headers.
#include "tools/common/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ember::tools {
namespace {

std::string golden_dir() {
  const char* root = std::getenv("EMBER_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/data/golden/";
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A .npy image with the given version, header text and payload size.
std::vector<uint8_t> make_file(const std::string& header, size_t payload, int major = 1) {
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  const size_t n = header.size();
  bytes.push_back(static_cast<uint8_t>(n));
  bytes.push_back(static_cast<uint8_t>(n >> 8));
  if (major != 1) {
    bytes.push_back(static_cast<uint8_t>(n >> 16));
    bytes.push_back(static_cast<uint8_t>(n >> 24));
  }
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), payload, 0x11);
  return bytes;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  NpyArray array;
  std::string error;
  if (parse_npy(bytes.data(), bytes.size(), &array, &error)) return "";
  EXPECT_FALSE(error.empty());
  return error.empty() ? "(empty message)" : error;
}

TEST(NpyTest, RoundTripEveryDtype) {
  const ScalarType types[] = {ScalarType::F32, ScalarType::F16, ScalarType::I8,  ScalarType::U8,
                              ScalarType::I16, ScalarType::I32, ScalarType::I64, ScalarType::Bool};
  const std::vector<std::vector<int64_t>> shapes = {{},     {0},       {5},
                                                    {2, 3}, {1, 0, 4}, {2, 1, 3, 1, 2}};
  std::mt19937 rng(7);
  for (ScalarType t : types) {
    for (const auto& dims : shapes) {
      NpyArray a;
      a.dtype = t;
      a.dims = dims;
      a.data.resize(nbytes_of(t, a.numel()));
      for (uint8_t& b : a.data) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> bytes;
      std::string error;
      ASSERT_TRUE(serialize_npy(a, &bytes, &error)) << error;
      EXPECT_EQ((bytes.size() - a.data.size()) % 64, 0u) << "data must start 64-aligned";
      NpyArray b;
      ASSERT_TRUE(parse_npy(bytes.data(), bytes.size(), &b, &error)) << error;
      EXPECT_EQ(b.dtype, t);
      EXPECT_EQ(b.dims, dims);
      EXPECT_EQ(b.data, a.data);
    }
  }
}

TEST(NpyTest, FileRoundTrip) {
  NpyArray a;
  a.dtype = ScalarType::I32;
  a.dims = {3};
  a.data = {1, 0, 0, 0, 2, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF};
  const std::string path = ::testing::TempDir() + "ember_npy_test.npy";
  std::string error;
  ASSERT_TRUE(write_npy(path, a, &error)) << error;
  NpyArray b;
  ASSERT_TRUE(read_npy(path, &b, &error)) << error;
  EXPECT_EQ(b.dims, a.dims);
  EXPECT_EQ(b.data, a.data);
  std::remove(path.c_str());
  EXPECT_FALSE(read_npy(path + ".missing", &b, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

// Every golden file was written by numpy.save; parsing and re-serializing gives the same bytes.
TEST(NpyTest, MatchesNumpyBytes) {
  std::ifstream manifest(golden_dir() + "manifest.txt");
  ASSERT_TRUE(manifest) << "cannot read " << golden_dir() << "manifest.txt";
  std::string line;
  int files = 0;
  while (std::getline(manifest, line)) {
    std::istringstream tokens(line);
    std::string token;
    while (tokens >> token) {
      std::string list;
      if (token.rfind("inputs=", 0) == 0) list = token.substr(7);
      if (token.rfind("output=", 0) == 0) list = token.substr(7);
      std::istringstream names(list);
      std::string name;
      while (std::getline(names, name, ',')) {
        if (name.empty() || name == "-") continue;
        const std::vector<uint8_t> bytes = read_bytes(golden_dir() + name);
        NpyArray a;
        std::string error;
        ASSERT_TRUE(parse_npy(bytes.data(), bytes.size(), &a, &error)) << name << ": " << error;
        std::vector<uint8_t> again;
        ASSERT_TRUE(serialize_npy(a, &again, &error)) << name << ": " << error;
        EXPECT_EQ(again, bytes) << name;
        ++files;
      }
    }
  }
  EXPECT_GT(files, 100);
}

TEST(NpyTest, ParsesVariants) {
  NpyArray a;
  std::string error;
  // Version 2.0, double quotes, no trailing comma, extra spaces, keys in another order.
  auto bytes = make_file("{\"shape\": ( 2 , 3 ), 'fortran_order':False,'descr':'<i2'}\n", 12, 2);
  ASSERT_TRUE(parse_npy(bytes.data(), bytes.size(), &a, &error)) << error;
  EXPECT_EQ(a.dtype, ScalarType::I16);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
  // One-byte types with '<' or '=' byte order.
  bytes = make_file("{'descr': '<u1', 'fortran_order': False, 'shape': (4,), }\n", 4);
  ASSERT_TRUE(parse_npy(bytes.data(), bytes.size(), &a, &error)) << error;
  EXPECT_EQ(a.dtype, ScalarType::U8);
  bytes = make_file("{'descr': '=b1', 'fortran_order': False, 'shape': (), }\n", 1);
  ASSERT_TRUE(parse_npy(bytes.data(), bytes.size(), &a, &error)) << error;
  EXPECT_EQ(a.dtype, ScalarType::Bool);
  EXPECT_TRUE(a.dims.empty());
}

TEST(NpyTest, RejectsMalformedFiles) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  EXPECT_EQ(parse_error(make_file(good, 8)), "");
  EXPECT_NE(parse_error({}).find("magic"), std::string::npos);
  EXPECT_NE(parse_error({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}).find("magic"), std::string::npos);
  std::vector<uint8_t> truncated = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 10};
  EXPECT_NE(parse_error(truncated).find("truncated"), std::string::npos);
  auto v4 = make_file(good, 8);
  v4[6] = 4;
  EXPECT_NE(parse_error(v4).find("version 4.0"), std::string::npos);
  auto v11 = make_file(good, 8);
  v11[7] = 1;
  EXPECT_NE(parse_error(v11).find("version 1.1"), std::string::npos);
  auto long_header = make_file(good, 8);
  long_header[8] = 0xFF;
  long_header[9] = 0xFF;
  EXPECT_NE(parse_error(long_header).find("past the end"), std::string::npos);
  auto huge_v2 = make_file(good, 8, 2);
  huge_v2[11] = 0xFF;
  EXPECT_NE(parse_error(huge_v2).find("too big"), std::string::npos);

  struct Bad {
    std::string header;
    size_t payload;
    const char* fragment;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, "fortran_order True"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "unsupported dtype '>f4'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, "unsupported dtype"},
      {"{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4, "unsupported dtype"},
      {"{'descr': '<f4', 'shape': (2,), }", 8, "needs 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, "unknown key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, "duplicate"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0, "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8, "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8, "must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }", 8, "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 8, "expected ','"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
       "overflows int64"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0,
       "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 7, "needs 8 bytes, file has 7"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 9, "needs 8 bytes, file has 9"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8, "True or False"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (2,), }", 8, "must be a string"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", 8, ""},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", 8, "expected ':'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", 8, "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 8, "trailing"},
      {"'descr': '<f4'", 8, "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8, ""},
      {std::string("{'descr': '<f4',\0 'fortran_order': False, 'shape': (2,), }", 58), 8, "NUL"},
      {"{", 0, ""},
      {"", 0, "expected '{'"},
  };
  for (const Bad& bad : cases) {
    const std::string error = parse_error(make_file(bad.header, bad.payload));
    EXPECT_NE(error, "") << bad.header;
    EXPECT_NE(error.find(bad.fragment), std::string::npos)
        << "header " << bad.header << " gave '" << error << "', expected '" << bad.fragment << "'";
  }
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1, ";
  many += "), }";
  EXPECT_NE(parse_error(make_file(many, 4)).find("too many dims"), std::string::npos);
}

TEST(NpyTest, RejectsUnsupportedSerialization) {
  std::vector<uint8_t> out;
  std::string error;
  NpyArray a;
  a.dtype = ScalarType::BF16;
  a.dims = {1};
  a.data = {0, 0};
  EXPECT_EQ(npy_descr(ScalarType::BF16), nullptr);
  EXPECT_FALSE(serialize_npy(a, &out, &error));
  EXPECT_NE(error.find("bf16"), std::string::npos) << error;
  a.dtype = ScalarType::F32;
  EXPECT_FALSE(serialize_npy(a, &out, &error));
  EXPECT_NE(error.find("needs 4 bytes, got 2"), std::string::npos) << error;
  a.dims = {-1};
  EXPECT_FALSE(serialize_npy(a, &out, &error));
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
  EXPECT_FALSE(parse_npy(nullptr, 10, &a, &error));
  EXPECT_FALSE(parse_npy(nullptr, 0, &a, &error));
}

// Random truncations and byte flips of valid files: parse returns true or false, never crashes.
TEST(NpyTest, FuzzedBytesNeverCrash) {
  NpyArray a;
  a.dtype = ScalarType::I64;
  a.dims = {3, 2};
  a.data.assign(48, 7);
  std::vector<uint8_t> seed;
  std::string error;
  ASSERT_TRUE(serialize_npy(a, &seed, &error)) << error;
  std::mt19937 rng(99);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> bytes = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<uint8_t>(rng());
          break;
        case 1:
          bytes.resize(at);
          break;
        case 2:
          bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                       static_cast<uint8_t>(rng()));
          break;
        case 3:
          bytes[at] = "0123456789(),:'{} -TrueFalse<>|fiub"[rng() % 35];
          break;
      }
      if (bytes.empty()) break;
    }
    NpyArray out;
    if (parse_npy(bytes.data(), bytes.size(), &out, &error)) {
      ++accepted;
      EXPECT_EQ(out.data.size(), nbytes_of(out.dtype, out.numel()));
    }
  }
  EXPECT_LT(accepted, 20000);
}

}  // namespace
}  // namespace ember::tools

namespace ember::tools {
namespace {

// Issue 17: runner --output-dir names files after the program's outputs, which may hold '/' (ONNX
// names like "/encoder/out") or collide once made safe.
TEST(NpyTest, OutputFileNamesAreSafeAndDistinct) {
  EXPECT_EQ(output_file_names({"probs", "/encoder/out:0", "logits.v2", "a-b_c"}),
            (std::vector<std::string>{"probs.npy", "_encoder_out_0.npy", "logits.v2.npy", "a-b_c.npy"}));
  EXPECT_EQ(output_file_names({"", ".", "..", "x y"}),
            (std::vector<std::string>{"output_0.npy", "output_1.npy", "output_2.npy", "x_y.npy"}));
  // "a/b" and "a:b" both become "a_b"; "A_B" collides on a case-insensitive folder.
  EXPECT_EQ(output_file_names({"a/b", "a:b", "A_B", "a_b_1"}),
            (std::vector<std::string>{"a_b.npy", "a_b_1.npy", "A_B_2.npy", "a_b_1_3.npy"}));
}

}  // namespace
}  // namespace ember::tools
