// NumPy .npy files (format versions 1.0, 2.0 and 3.0; C order; little-endian) for tests and tools.
// Host code: no exceptions escape; every function returns false with a message in *error on failure
// and never crashes on malformed input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/scalar_type.h"

namespace ember::tools {

// A dense C-order array. `data` holds nbytes_of(dtype, numel) bytes, little-endian.
struct NpyArray {
  ScalarType dtype = ScalarType::Invalid;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;

  uint64_t numel() const;
};

// Supported dtypes and their descr strings: f32 '<f4', f16 '<f2', i8 '|i1', u8 '|u1', i16 '<i2',
// i32 '<i4', i64 '<i8', bool '|b1'. Other Ember dtypes (bf16, fp8, ...) have no NumPy dtype:
// store their raw bytes as u8. Returns nullptr for a dtype without a descr.
const char* npy_descr(ScalarType dtype);

// Parses a whole .npy file image. Rejects: bad magic or version, malformed or truncated header,
// unknown keys, unsupported or big-endian dtypes, fortran_order True, negative or overflowing
// dims, and a payload whose size differs from the shape's.
bool parse_npy(const uint8_t* bytes, size_t size, NpyArray* out, std::string* error);
// Reads a regular file of at most `max_bytes` (a FIFO, device or directory is refused without
// blocking or reading; tools/common/host_io.h) and parses it.
constexpr uint64_t kMaxNpyFileBytes = uint64_t(16) << 30;
bool read_npy(const std::string& path, NpyArray* out, std::string* error, uint64_t max_bytes = kMaxNpyFileBytes);

// Encodes an array as NumPy 1.24 would (version 1.0 unless the header needs 2.0, header padded
// so the data starts at a multiple of 64), byte for byte. Fails for a dtype without a descr or a
// data size that does not match dtype and dims.
bool serialize_npy(const NpyArray& array, std::vector<uint8_t>* out, std::string* error);
// Writes atomically (a temporary file renamed over `path`; never over a file read while a
// tools::ReadLog is active).
bool write_npy(const std::string& path, const NpyArray& array, std::string* error);

// File names ("<name>.npy") for tensors named `names` (a program's outputs), safe to create inside
// one folder: every character outside [A-Za-z0-9._-] becomes '_' ("/encoder/out:0" ->
// "_encoder_out_0.npy"), an empty name or one of dots becomes "output_<i>", and a name that
// repeats an earlier one (case-insensitively: macOS and Windows folders) gets "_<i>" appended.
std::vector<std::string> output_file_names(const std::vector<std::string>& names);

}  // namespace ember::tools
