// Checksums used by the program file: CRC32C (Castagnoli) for the header and FlatBuffer, xxh64 for
// segments.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

// CRC32C of data[0, size), continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// XXH64 with seed 0.
uint64_t xxh64(const void* data, size_t size);

}  // namespace ember
