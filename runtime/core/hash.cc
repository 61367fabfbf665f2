#include "runtime/core/hash.h"

#include <xxhash.h>

namespace ember {
namespace {

// Table-driven, reflected polynomial 0x82F63B78. Built at compile time: no static initializer.
struct Crc32cTable {
  uint32_t entries[256];
  constexpr Crc32cTable() : entries() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      entries[i] = c;
    }
  }
};
constexpr Crc32cTable kCrcTable;

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrcTable.entries[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint64_t xxh64(const void* data, size_t size) { return XXH64(data, size, 0); }

}  // namespace ember
