#include "runtime/program/program_file.h"

#include <cstring>

#include "runtime/core/hash.h"

namespace ember {
namespace {

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v); p[1] = uint8_t(v >> 8); }
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

const char* feature_name(uint64_t bit) {
  switch (bit) {
    case kFeatureFp8: return "fp8";
    case kFeatureNvfp4: return "nvfp4";
    case kFeatureMxfp8: return "mxfp8";
    case kFeaturePagedKv: return "paged_kv";
    case kFeatureState: return "state";
    case kFeatureControlFlow: return "control_flow";
    case kFeatureConvClamp: return "conv_clamp";
    default: return "unknown";
  }
}

void encode_header(const FileHeader& h, uint8_t out[kHeaderSize]) {
  std::memset(out, 0, kHeaderSize);
  std::memcpy(out, kFileMagic, 4);
  put16(out + 4, h.major);
  put16(out + 6, h.minor);
  put32(out + 8, h.header_size);
  put32(out + 12, h.min_runtime_version);
  put32(out + 16, h.flatbuffer_offset);
  put32(out + 20, h.flatbuffer_size);
  put64(out + 24, h.segment_base);
  put64(out + 32, h.segment_size);
  put64(out + 40, h.required_features);
  put32(out + 48, h.flatbuffer_crc32c);
  put32(out + 52, h.flags);
  put32(out + 56, 0);
  put32(out + 60, crc32c(out, 60));
}

Status decode_header(const uint8_t* bytes, size_t available, uint64_t file_size, bool check_crc,
                     FileHeader* out, ErrorContext* ctx) {
  if (ctx) ctx->phase = ErrorContext::Phase::Header;
  if (file_size < kHeaderSize || available < kHeaderSize) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "file is %llu bytes, shorter than the %u-byte header (truncated?)",
                      static_cast<unsigned long long>(file_size), kHeaderSize);
  }
  if (std::memcmp(bytes, kFileMagic, 4) != 0) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "bad magic %02x %02x %02x %02x: not an Ember program (expected 'EMBR')",
                      bytes[0], bytes[1], bytes[2], bytes[3]);
  }
  const uint32_t stored_crc = get32(bytes + 60);
  if (check_crc && crc32c(bytes, 60) != stored_crc) {
    return EMBER_FAIL(ctx, Error::IntegrityError, "header checksum mismatch (stored %08x, computed %08x)",
                      stored_crc, crc32c(bytes, 60));
  }
  FileHeader h;
  h.major = get16(bytes + 4);
  h.minor = get16(bytes + 6);
  h.header_size = get32(bytes + 8);
  h.min_runtime_version = get32(bytes + 12);
  h.flatbuffer_offset = get32(bytes + 16);
  h.flatbuffer_size = get32(bytes + 20);
  h.segment_base = get64(bytes + 24);
  h.segment_size = get64(bytes + 32);
  h.required_features = get64(bytes + 40);
  h.flatbuffer_crc32c = get32(bytes + 48);
  h.flags = get32(bytes + 52);
  if (h.major != kFormatMajor) {
    return EMBER_FAIL(ctx, Error::VersionMismatch, "format version %u.%u, this runtime reads %u.x",
                      h.major, h.minor, kFormatMajor);
  }
  if (h.min_runtime_version > kRuntimeVersion) {
    return EMBER_FAIL(ctx, Error::VersionMismatch,
                      "file needs runtime format %u.%u or newer, this runtime is %u.%u",
                      h.min_runtime_version >> 16, h.min_runtime_version & 0xFFFF, kFormatMajor,
                      kFormatMinor);
  }
  if (h.header_size != kHeaderSize || h.flags != 0 || get32(bytes + 56) != 0) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "header size %u / flags %u / reserved: unexpected values",
                      h.header_size, h.flags);
  }
  if (h.flatbuffer_offset < kHeaderSize || h.flatbuffer_offset % kFlatBufferAlignment != 0 ||
      h.flatbuffer_size < 8 || h.flatbuffer_size > kMaxFlatBufferSize ||
      uint64_t{h.flatbuffer_offset} + h.flatbuffer_size > file_size) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "FlatBuffer at offset %u size %u does not fit a %llu-byte file (truncated?)",
                      h.flatbuffer_offset, h.flatbuffer_size, static_cast<unsigned long long>(file_size));
  }
  if (h.segment_size != 0 &&
      (h.segment_base % kConstantSegmentAlignment != 0 ||
       h.segment_base < uint64_t{h.flatbuffer_offset} + h.flatbuffer_size ||
       h.segment_base > file_size || h.segment_size > file_size - h.segment_base)) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "segments at %llu size %llu do not fit a %llu-byte file (truncated?)",
                      static_cast<unsigned long long>(h.segment_base),
                      static_cast<unsigned long long>(h.segment_size),
                      static_cast<unsigned long long>(file_size));
  }
  const uint64_t unknown = h.required_features & ~kSupportedFeatures;
  if (unknown != 0) {
    uint64_t bit = unknown & (~unknown + 1);
    return EMBER_FAIL(ctx, Error::FeatureMissing,
                      "program requires feature '%s' (bit %d) that this runtime build does not support",
                      feature_name(bit), __builtin_ctzll(bit));
  }
  *out = h;
  return Status::ok();
}

}  // namespace ember
