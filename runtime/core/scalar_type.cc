#include "runtime/core/scalar_type.h"

#include <cstdio>

#include "runtime/core/tensor_view.h"

namespace ember {

const char* to_string(ScalarType type) {
  switch (type) {
    case ScalarType::Invalid: return "invalid";
    case ScalarType::F32: return "f32";
    case ScalarType::F16: return "f16";
    case ScalarType::BF16: return "bf16";
    case ScalarType::F64: return "f64";
    case ScalarType::I8: return "i8";
    case ScalarType::U8: return "u8";
    case ScalarType::I16: return "i16";
    case ScalarType::I32: return "i32";
    case ScalarType::I64: return "i64";
    case ScalarType::Bool: return "bool";
    case ScalarType::F8E4M3FN: return "f8_e4m3fn";
    case ScalarType::F8E5M2: return "f8_e5m2";
    case ScalarType::F4E2M1: return "f4_e2m1";
    case ScalarType::E8M0: return "e8m0";
    case ScalarType::UE4M3: return "ue4m3";
    case ScalarType::I4x2: return "i4x2";
    case ScalarType::U4x2: return "u4x2";
  }
  return "invalid";
}

const char* to_string(MemoryDomain domain) {
  switch (domain) {
    case MemoryDomain::Host: return "host";
    case MemoryDomain::PinnedHost: return "pinned";
    case MemoryDomain::Device: return "device";
  }
  return "invalid";
}

bool same_shape(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return true;
}

const char* format_dims(const int64_t* dims, int rank, char* out, size_t out_size) {
  if (out_size == 0) return out;
  size_t used = 0;
  out[0] = '\0';
  auto append = [&](const char* fmt, long long v) {
    if (used >= out_size) return;
    int n = std::snprintf(out + used, out_size - used, fmt, v);
    if (n > 0) used += static_cast<size_t>(n);
  };
  append("[", 0);
  for (int i = 0; i < rank; ++i) append(i == 0 ? "%lld" : ", %lld", static_cast<long long>(dims[i]));
  append("]", 0);
  out[out_size - 1] = '\0';
  return out;
}

}  // namespace ember
