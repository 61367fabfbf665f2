// ScalarType: element types of tensors. Numbers equal schema/program.fbs's ScalarType and are fixed
// forever (docs/DESIGN.md §2). Every type is a storage type here; which ones kernels compute on is up to
// the kernel libraries.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

enum class ScalarType : uint8_t {
  Invalid = 0,
  F32 = 1,
  F16 = 2,
  BF16 = 3,
  F64 = 4,  // reserved
  I8 = 5,
  U8 = 6,
  I16 = 7,
  I32 = 8,
  I64 = 9,
  Bool = 10,
  F8E4M3FN = 11,
  F8E5M2 = 12,
  F4E2M1 = 13,  // two per byte, low nibble = even element
  E8M0 = 14,
  UE4M3 = 15,
  I4x2 = 16,
  U4x2 = 17,  // reserved
};
constexpr int kScalarTypeCount = 18;

// Bits per logical element (4 for sub-byte types); 0 for Invalid or unknown values.
constexpr int bits_of(ScalarType type) {
  switch (type) {
    case ScalarType::F64:
    case ScalarType::I64: return 64;
    case ScalarType::F32:
    case ScalarType::I32: return 32;
    case ScalarType::F16:
    case ScalarType::BF16:
    case ScalarType::I16: return 16;
    case ScalarType::I8:
    case ScalarType::U8:
    case ScalarType::Bool:
    case ScalarType::F8E4M3FN:
    case ScalarType::F8E5M2:
    case ScalarType::E8M0:
    case ScalarType::UE4M3: return 8;
    case ScalarType::F4E2M1:
    case ScalarType::I4x2:
    case ScalarType::U4x2: return 4;
    case ScalarType::Invalid: return 0;
  }
  return 0;
}
constexpr bool is_valid(ScalarType type) { return bits_of(type) != 0; }
constexpr bool is_sub_byte(ScalarType type) { return bits_of(type) == 4; }
// Known to this build but without kernels anywhere (F64, U4x2): accepted in files, never executed.
constexpr bool is_reserved(ScalarType type) {
  return type == ScalarType::F64 || type == ScalarType::U4x2;
}

// Bytes for `numel` elements; sub-byte types need an even count (checked by the validator).
constexpr uint64_t nbytes_of(ScalarType type, uint64_t numel) {
  return bits_of(type) == 4 ? numel / 2 : numel * static_cast<uint64_t>(bits_of(type) / 8);
}

// "f32", "f8_e4m3fn", ...; "invalid" for unknown values. Never null.
const char* to_string(ScalarType type);

}  // namespace ember
