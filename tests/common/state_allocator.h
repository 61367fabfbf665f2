// An app's DeviceAllocator for tests (runtime/core/device_allocator.h) that serves host memory for
// program state only, and remembers every request. Shared by
// tests/runtime/executor/backend_contract_test.cc and tests/runtime/llm/sim_backend_llm_test.cc.
//
// Header-only on purpose: the runtime is built without RTTI, so a class derived from its
// DeviceAllocator must be compiled with -fno-rtti too (its typeinfo would reference a base typeinfo
// that does not exist); every file that includes this one is built that way.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/device_allocator.h"

namespace ember::testing {

// Serves host memory for program state only (MemoryDomain::Host, Purpose::State) from aligned_alloc,
// and records every request. Not thread-safe: loads that use it run one at a time.
class StateAllocator final : public DeviceAllocator {
 public:
  bool serves(const AllocationRequest& r) const override {
    asked.push_back(r.name);
    return r.domain == MemoryDomain::Host && r.purpose == AllocationRequest::Purpose::State;
  }
  void* allocate(const AllocationRequest& r) override {
    void* p = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
    if (p != nullptr) {
      live[p] = r.bytes;
      allocated[r.name] += r.bytes;
      names.push_back(r.name);
      owners.push_back(r.owner);
      alignments.push_back(r.alignment);
    }
    return p;
  }
  void deallocate(const AllocationRequest& r, void* p) noexcept override {
    auto it = live.find(p);
    if (it == live.end() || it->second != r.bytes) {
      ++bad_frees;
    } else {
      live.erase(it);
      freed_bytes += r.bytes;
    }
    std::free(p);
  }
  // The bytes of every allocation so far (freed or not).
  uint64_t allocated_bytes() const {
    uint64_t n = 0;
    for (const auto& [name, bytes] : allocated) n += bytes;
    return n;
  }

  mutable std::vector<std::string> asked;     // the name of every request serves() was asked about
  std::map<void*, uint64_t> live;             // allocated, not yet freed: address -> bytes
  std::map<std::string, uint64_t> allocated;  // bytes allocated per name
  std::vector<std::string> names;             // per allocation, in order: the request's name
  std::vector<std::string> owners;            // ... its owner
  std::vector<uint32_t> alignments;           // ... its alignment
  uint64_t freed_bytes = 0;
  int bad_frees = 0;  // frees of an address not live, or with other bytes than it was allocated with
};

}  // namespace ember::testing
