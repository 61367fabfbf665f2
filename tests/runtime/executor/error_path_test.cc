// Bad input is a test subject (docs/DESIGN.md §8): corrupted, truncated, hostile and wrong-version files,
// wrong memory plans, wrong inputs, missing kernels and backends. Each gives its documented Error
// with a non-empty message, never a crash.
// This file: damaged files (byte flips, truncation, versions and feature bits); hostile FlatBuffers
// are in error_path_hostile_test.cc, memory plans and run-time errors in error_path_run_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/runtime/executor/error_path_util.h"

namespace ember {
namespace {

using testing::ErrorPathTest;
using testing::Example;
using testing::LoadAndRun;
using testing::Outcome;
using testing::WithVerification;

// Collects mismatches of a long loop into one failure with the first few cases.
class Mismatches {
 public:
  void add(const std::string& what) {
    if (count_++ < 8) text_ += "\n  " + what;
  }
  void check(const char* label) const { EXPECT_EQ(count_, 0u) << label << ": " << count_ << " mismatches" << text_; }

 private:
  size_t count_ = 0;
  std::string text_;
};

std::string Describe(size_t at, const Outcome& o) {
  return "offset " + std::to_string(at) + ": " + to_string(o.code) + " '" + o.message + "'";
}

// ---- Sanity: the unmodified examples and an object-API round trip load and run. -----------------

TEST_F(ErrorPathTest, ExamplesLoadAndRunUnderEveryVerificationLevel) {
  for (const char* name : {"mlp", "cnn", "cnn_null"}) {
    for (Verification v : {Verification::Full, Verification::Structural, Verification::Trusted}) {
      const Outcome o = LoadAndRun(Example(name), rt_.context, WithVerification(v));
      EXPECT_EQ(o.code, Error::Ok) << name << " verification " << int(v) << ": " << o.message;
    }
  }
}

TEST_F(ErrorPathTest, ObjectApiRoundTripStillLoads) {
  for (const char* name : {"mlp", "cnn", "cnn_null"}) {
    const std::vector<uint8_t> file = testing::mutate_program(Example(name), [](fb::ProgramT&) {});
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::Ok) << name << ": " << o.message;
  }
  std::vector<uint8_t> file = testing::mutate_program(Example("cnn_null"), [](fb::ProgramT& p) {
    testing::mutate_payload(*p.methods[0]->delegates[0], [](fb::GraphT&) {});
  });
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::Ok) << o.message;
}

// ---- Corruption: byte flips. ---------------------------------------------------------------------

TEST_F(ErrorPathTest, EveryHeaderByteFlipIsDetected) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    for (Verification v : {Verification::Full, Verification::Structural}) {
      Mismatches bad;
      for (size_t i = 0; i < kHeaderSize; ++i) {
        bytes.data()[i] ^= 0xFF;
        const Outcome o = LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(v), false);
        bytes.data()[i] ^= 0xFF;
        const Error expected = i < 4 ? Error::InvalidProgram : Error::IntegrityError;
        if (o.code != expected || o.message.empty()) bad.add(Describe(i, o));
      }
      bad.check(name);
    }
  }
}

TEST_F(ErrorPathTest, EveryFlatBufferByteFlipIsIntegrityError) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    const FileHeader h = testing::header_of(file);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    for (Verification v : {Verification::Full, Verification::Structural}) {
      Mismatches bad;
      for (size_t i = h.flatbuffer_offset; i < h.flatbuffer_offset + h.flatbuffer_size; ++i) {
        bytes.data()[i] ^= 0x5A;
        const Outcome o = LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(v), false);
        bytes.data()[i] ^= 0x5A;
        if (o.code != Error::IntegrityError || o.message.empty()) bad.add(Describe(i, o));
      }
      bad.check(name);
    }
  }
}

TEST_F(ErrorPathTest, SegmentFlipsAreIntegrityErrorsUnderFullVerification) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    const FileHeader h = testing::header_of(file);
    const fb::Program* p = testing::program_of(file);
    ASSERT_NE(p->segments(), nullptr);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    Mismatches bad;
    size_t flips = 0;
    for (const fb::Segment* seg : *p->segments()) {
      const uint64_t begin = h.segment_base + seg->offset();
      std::vector<uint64_t> points;
      for (uint64_t at = begin; at < begin + seg->size(); at += 4096) points.push_back(at);
      if (seg->size() > 0) points.push_back(begin + seg->size() - 1);
      for (uint64_t at : points) {
        bytes.data()[at] ^= 0x01;
        const Outcome full = LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(Verification::Full));
        // Structural skips segment hashes: the load may succeed and then runs on changed weights,
        // which must not crash.
        const Outcome structural =
            LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(Verification::Structural));
        bytes.data()[at] ^= 0x01;
        ++flips;
        if (full.code != Error::IntegrityError || full.message.empty()) bad.add(Describe(at, full));
        if (structural.code != Error::Ok && structural.message.empty()) bad.add("structural " + Describe(at, structural));
      }
    }
    EXPECT_GT(flips, 2u) << name;
    bad.check(name);
  }
}

// ---- Truncation. -----------------------------------------------------------------------------------

TEST_F(ErrorPathTest, TruncationAtAnyOffsetFailsCleanly) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    std::vector<size_t> points;
    for (size_t at = 0; at < std::min<size_t>(file.size(), 65536); ++at) points.push_back(at);
    for (size_t at = 65536; at < file.size(); at += 509) points.push_back(at);
    points.push_back(file.size() - 1);
    Mismatches bad;
    for (Verification v : {Verification::Full, Verification::Structural}) {
      for (size_t at : points) {
        const Outcome o = LoadAndRun(bytes.data(), at, rt_.context, WithVerification(v), false);
        if (o.code == Error::Ok || o.message.empty()) bad.add(Describe(at, o));
      }
    }
    bad.check(name);
  }
}

// ---- Versions and features. -------------------------------------------------------------------------

TEST_F(ErrorPathTest, WrongMagicIsInvalidProgram) {
  std::vector<uint8_t> file = Example("mlp");
  std::memcpy(file.data(), "EMBQ", 4);  // the magic is checked before the header CRC
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram);
  EXPECT_NE(o.message.find("magic"), std::string::npos) << o.message;
  EXPECT_EQ(o.phase, ErrorContext::Phase::Header);
}

TEST_F(ErrorPathTest, WrongMajorVersionIsVersionMismatch) {
  for (uint16_t major : {uint16_t{0}, uint16_t{2}}) {
    std::vector<uint8_t> file = Example("mlp");
    FileHeader h = testing::header_of(file);
    h.major = major;
    testing::write_header(file, h);
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::VersionMismatch) << o.message;
    EXPECT_FALSE(o.message.empty());
  }
}

TEST_F(ErrorPathTest, NewerMinRuntimeVersionIsVersionMismatch) {
  std::vector<uint8_t> file = Example("mlp");
  FileHeader h = testing::header_of(file);
  h.min_runtime_version = kRuntimeVersion + 1;
  testing::write_header(file, h);
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::VersionMismatch) << o.message;
  // A later minor of the same major with an old min_runtime_version loads.
  h.minor = kFormatMinor + 1;
  h.min_runtime_version = kRuntimeVersion;
  testing::write_header(file, h);
  EXPECT_EQ(LoadAndRun(file, rt_.context).code, Error::Ok);
}

TEST_F(ErrorPathTest, NextMajorFlatBufferIdentifierIsVersionMismatch) {
  std::vector<uint8_t> file = Example("mlp");
  const FileHeader h = testing::header_of(file);
  std::memcpy(file.data() + h.flatbuffer_offset + 4, "EM02", 4);
  testing::recompute_crcs(file);
  Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::VersionMismatch) << o.message;
  EXPECT_NE(o.message.find("EM02"), std::string::npos) << o.message;
  std::memcpy(file.data() + h.flatbuffer_offset + 4, "ABCD", 4);
  testing::recompute_crcs(file);
  o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
}

TEST_F(ErrorPathTest, UnknownFeatureBitIsFeatureMissing) {
  for (uint64_t bit : {uint64_t{1} << 40, uint64_t{1} << 7}) {
    std::vector<uint8_t> file = Example("mlp");
    FileHeader h = testing::header_of(file);
    h.required_features |= bit;
    testing::write_header(file, h);
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::FeatureMissing) << o.message;
    EXPECT_NE(o.message.find("bit " + std::to_string(__builtin_ctzll(bit))), std::string::npos) << o.message;
  }
}

TEST_F(ErrorPathTest, HeaderAndFlatBufferFeatureBitsMustAgree) {
  std::vector<uint8_t> file = Example("mlp");
  FileHeader h = testing::header_of(file);
  h.required_features |= kFeatureState;  // supported, but the FlatBuffer says otherwise
  testing::write_header(file, h);
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
}

TEST_F(ErrorPathTest, FlatBufferSizeTooSmallFailsVerification) {
  std::vector<uint8_t> file = Example("mlp");
  FileHeader h = testing::header_of(file);
  h.flatbuffer_size /= 2;
  testing::write_header(file, h);
  testing::recompute_crcs(file);
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
  EXPECT_FALSE(o.message.empty());
}

}  // namespace
}  // namespace ember
