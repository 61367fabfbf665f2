#include "runtime/core/memory_allocator.h"

namespace ember {

void* BumpAllocator::allocate(size_t size, size_t alignment) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(buffer_.data());
  const uintptr_t start = (base + used_ + alignment - 1) & ~(static_cast<uintptr_t>(alignment) - 1);
  const size_t offset = static_cast<size_t>(start - base);
  if (offset > buffer_.size() || size > buffer_.size() - offset) return nullptr;
  used_ = offset + size;
  if (used_ > peak_) peak_ = used_;
  return buffer_.data() + offset;
}

}  // namespace ember
