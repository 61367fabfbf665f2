// TensorView: a borrowed view of a dense tensor (data pointer, dtype, dims). It owns nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/scalar_type.h"
#include "runtime/core/span.h"

namespace ember {

constexpr int kMaxRank = 8;

enum class DimOrder : uint8_t { Invalid = 0, Contiguous = 1, ChannelsLast = 2 };

// Where a view's bytes live (docs/DESIGN.md §7). Host and PinnedHost memory is readable by host code
// (pinned: page-locked, so a device can copy it asynchronously); Device memory is an address only
// its backend may dereference: host code (kernels, the executor, apps) never reads through it.
enum class MemoryDomain : uint8_t { Host = 0, PinnedHost = 1, Device = 2 };
const char* to_string(MemoryDomain domain);  // "host", "pinned", "device"

struct QuantView;

struct TensorView {
  void* data = nullptr;  // null for an absent optional input
  ScalarType dtype = ScalarType::Invalid;
  DimOrder dim_order = DimOrder::Contiguous;
  uint8_t rank = 0;
  int64_t dims[kMaxRank] = {0};
  const QuantView* quant = nullptr;  // a quantized weight's scales (runtime/core/quant.h); else null
  MemoryDomain domain = MemoryDomain::Host;

  bool is_present() const { return data != nullptr; }
  int64_t dim(int i) const { return dims[i < 0 ? i + rank : i]; }
  uint64_t numel() const {
    uint64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= static_cast<uint64_t>(dims[i]);
    return n;
  }
  uint64_t nbytes() const { return nbytes_of(dtype, numel()); }
  template <typename T>
  T* data_as() const { return static_cast<T*>(data); }
  Span<const int64_t> sizes() const { return Span<const int64_t>(dims, rank); }
};

// True when both have the same rank and dims.
bool same_shape(const TensorView& a, const TensorView& b);

// Writes "[1, 3, 224, 224]" into out (always NUL-terminated); returns out.
const char* format_dims(const int64_t* dims, int rank, char* out, size_t out_size);

}  // namespace ember
