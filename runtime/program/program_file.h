// The .pte container (docs/DESIGN.md §2): a 64-byte little-endian header, the FlatBuffer (64-aligned) and
// the segments. Shared by the runtime (parse + check) and the exporter (write).
//
// Header layout (byte offsets):
//   0 magic "EMBR"            4 major u16    6 minor u16       8 header_size u32 (= 64)
//  12 min_runtime_version u32 (major << 16 | minor)           16 flatbuffer_offset u32
//  20 flatbuffer_size u32    24 segment_base u64             32 segment_size u64
//  40 required_features u64  48 flatbuffer_crc32c u32        52 flags u32 (0)
//  56 reserved u32 (0)       60 header_crc32c u32 (CRC32C of bytes [0, 60))
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/status.h"

namespace ember {

constexpr char kFileMagic[4] = {'E', 'M', 'B', 'R'};
constexpr uint16_t kFormatMajor = 1;
constexpr uint16_t kFormatMinor = 0;
constexpr uint32_t kHeaderSize = 64;
constexpr uint32_t kRuntimeVersion = (uint32_t{kFormatMajor} << 16) | kFormatMinor;
constexpr size_t kFlatBufferAlignment = 64;
constexpr size_t kTensorAlignment = 64;          // every constant and planned tensor
constexpr size_t kConstantSegmentAlignment = 65536;  // mmap-able with 4K, 16K and 64K pages
constexpr size_t kMaxFlatBufferSize = size_t{1} << 31;

// required_features bits. A file with a bit this build does not support fails with FeatureMissing.
enum Feature : uint64_t {
  kFeatureFp8 = uint64_t{1} << 0,
  kFeatureNvfp4 = uint64_t{1} << 1,
  kFeatureMxfp8 = uint64_t{1} << 2,
  kFeaturePagedKv = uint64_t{1} << 3,
  kFeatureState = uint64_t{1} << 4,
  kFeatureControlFlow = uint64_t{1} << 5,
  kFeatureConvClamp = uint64_t{1} << 6,  // a conv2d with an output clamp (Conv2dAttrs.out_min/out_max)
};
constexpr uint64_t kSupportedFeatures =
    kFeatureFp8 | kFeatureNvfp4 | kFeatureMxfp8 | kFeaturePagedKv | kFeatureState | kFeatureControlFlow |
    kFeatureConvClamp;
// "fp8", ... for one bit; "unknown" otherwise.
const char* feature_name(uint64_t bit);

struct FileHeader {
  uint16_t major = kFormatMajor;
  uint16_t minor = kFormatMinor;
  uint32_t header_size = kHeaderSize;
  uint32_t min_runtime_version = kRuntimeVersion;
  uint32_t flatbuffer_offset = 0;
  uint32_t flatbuffer_size = 0;
  uint64_t segment_base = 0;
  uint64_t segment_size = 0;
  uint64_t required_features = 0;
  uint32_t flatbuffer_crc32c = 0;
  uint32_t flags = 0;
};

// Writes the 64 header bytes (with the header CRC) into out.
void encode_header(const FileHeader& header, uint8_t out[kHeaderSize]);

// Parses and checks the header of a file of `file_size` bytes: magic (InvalidProgram), header CRC
// (IntegrityError, when check_crc), version (VersionMismatch), sizes and offsets inside the file
// (InvalidProgram), feature bits (FeatureMissing). `bytes` holds at least min(file_size, 64) bytes.
Status decode_header(const uint8_t* bytes, size_t available, uint64_t file_size, bool check_crc,
                     FileHeader* out, ErrorContext* ctx);

}  // namespace ember
