// DeviceAllocator: where load-time memory comes from when the app wants a say (docs/DESIGN.md §3, §7): the
// host memory of program state (the KV cache of a portable LLM), the pinned host memory of IO
// arenas, and the device memory of backends. TFLite Micro takes an arena, ggml-backend a buffer
// type, IREE a HAL allocator; this is the one hook Ember has for all three domains.
//
// An app passes one in RuntimeContext::device_allocator, or none. For each request the runtime or
// backend asks serves(); when it says yes the memory must come from it (null from allocate() is
// then OutOfMemory), when it says no (or there is no allocator) the default is used: host and
// pinned memory from platform_aligned_alloc, device memory from the backend's own API. So an app
// can budget only the KV cache, say, by serving the requests whose purpose is State.
//
// Only load-time code calls it (Program::load, Method load, Backend::init/create_state); never
// execute(). An implementation must be safe to call from every thread that loads programs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/tensor_view.h"

namespace ember {

struct AllocationRequest {
  enum class Purpose : uint8_t { State = 1, Constants = 2, Activations = 3, IO = 4, Other = 5 };
  MemoryDomain domain = MemoryDomain::Host;
  Purpose purpose = Purpose::Other;
  uint64_t bytes = 0;
  uint32_t alignment = 64;  // a power of two
  const char* owner = "";   // "program" (host state), or the backend id
  const char* name = "";    // the state's name, or "" (a label for logs and budgets)
};

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // Whether this allocator provides memory like `request` (same domain, owner and purpose; the
  // size may differ). Must give the same answer for the same request every time.
  virtual bool serves(const AllocationRequest& request) const = 0;
  // Memory for a served request, aligned as asked, or null when there is not enough. Device
  // pointers are whatever the owning backend's API expects (a CUdeviceptr, a VkDeviceMemory
  // offset, ...): the contract between the app and that backend.
  virtual void* allocate(const AllocationRequest& request) = 0;
  // Returns memory from allocate() with the same request.
  virtual void deallocate(const AllocationRequest& request, void* ptr) noexcept = 0;
};

// Host (and pinned) memory for a request: from `allocator` when it serves the request, else from
// platform_aligned_alloc (PinnedHost then falls back to ordinary host memory, which is correct,
// only slower to copy). Null when out of memory. Device requests are not served here (null).
void* allocate_host_memory(DeviceAllocator* allocator, const AllocationRequest& request);
void free_host_memory(DeviceAllocator* allocator, const AllocationRequest& request, void* ptr) noexcept;

}  // namespace ember
