#include "runtime/core/device_allocator.h"

#include "runtime/platform/platform.h"

namespace ember {

void* allocate_host_memory(DeviceAllocator* allocator, const AllocationRequest& request) {
  if (request.domain == MemoryDomain::Device) return nullptr;
  if (allocator != nullptr && allocator->serves(request)) return allocator->allocate(request);
  if (request.bytes > SIZE_MAX) return nullptr;
  return platform_aligned_alloc(request.alignment < 64 ? 64 : request.alignment,
                                request.bytes == 0 ? 64 : static_cast<size_t>(request.bytes));
}

void free_host_memory(DeviceAllocator* allocator, const AllocationRequest& request, void* ptr) noexcept {
  if (ptr == nullptr) return;
  if (allocator != nullptr && allocator->serves(request)) {
    allocator->deallocate(request, ptr);
  } else {
    platform_aligned_free(ptr);
  }
}

}  // namespace ember
