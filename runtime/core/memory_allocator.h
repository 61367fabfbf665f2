// BumpAllocator: hands out aligned pieces of a caller-owned buffer; reset() frees everything at
// once. Never touches the heap. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/span.h"

namespace ember {

class BumpAllocator {
 public:
  BumpAllocator() = default;
  // `buffer` must outlive the allocator and every pointer it returns.
  explicit BumpAllocator(Span<uint8_t> buffer) : buffer_(buffer) {}
  template <size_t N>
  explicit BumpAllocator(uint8_t (&buffer)[N]) : buffer_(buffer, N) {}

  // nullptr when the buffer is exhausted (alignment: a power of two).
  void* allocate(size_t size, size_t alignment = 16);
  template <typename T>
  T* allocate_array(size_t count) {
    if (count > SIZE_MAX / sizeof(T)) return nullptr;
    return static_cast<T*>(allocate(count * sizeof(T), alignof(T) < 16 ? 16 : alignof(T)));
  }
  void reset() { used_ = 0; }

  size_t used() const { return used_; }
  size_t capacity() const { return buffer_.size(); }
  // The largest `used()` seen since construction (for sizing pools).
  size_t peak() const { return peak_; }
  Span<uint8_t> remaining() const { return Span<uint8_t>(buffer_.data() + used_, buffer_.size() - used_); }

 private:
  Span<uint8_t> buffer_;
  size_t used_ = 0;
  size_t peak_ = 0;
};

}  // namespace ember
