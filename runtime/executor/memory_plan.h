// MemoryPlan: the memory a Method runs in, all borrowed from the caller (sizes from MethodMeta).
//   method_allocator: load-time structures (bound instructions, views); MethodMeta gives the exact
//                     byte count for this build.
//   arenas:           one span per arena of the method, in the method's arena order, each at least
//                     the arena's size and aligned to its alignment.
//   scratch:          per-kernel temporary memory, reset after each kernel.
//   arena_domains:    optional, one per arena: Host (the default) or PinnedHost, which the app took
//                     from a DeviceAllocator so device backends can copy the IO arena asynchronously.
//                     The executor's arenas are host-readable: Device is refused.
#pragma once

#include <cstdint>

#include "runtime/core/memory_allocator.h"
#include "runtime/core/span.h"
#include "runtime/core/tensor_view.h"

namespace ember {

struct MemoryPlan {
  MemoryPlan(BumpAllocator& method_allocator, Span<Span<uint8_t>> arenas, Span<uint8_t> scratch = {})
      : method_allocator(&method_allocator), arenas(arenas), scratch(scratch) {}
  BumpAllocator* method_allocator;
  Span<Span<uint8_t>> arenas;
  Span<uint8_t> scratch;
  Span<const MemoryDomain> arena_domains;
};

}  // namespace ember
