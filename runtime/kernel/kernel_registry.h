// KernelRegistry: a fixed-capacity table from KernelKey to KernelFn. Filled explicitly at start-up
// (register_builtin() or a kernel library's register_*); no static initializers. Not thread-safe
// while being filled; read-only lookups afterwards are thread-safe.
#pragma once

#include <cstddef>

#include "runtime/core/status.h"
#include "runtime/kernel/kernel.h"

namespace ember {

class KernelRegistry {
 public:
  static constexpr size_t kCapacity = 1024;
  struct Entry {
    KernelKey key;
    KernelFn fn;
    const char* library;  // "cpu", "reference", ...: shown by runner --info
    ScratchFn scratch;    // null: the kernel uses no KernelContext::scratch
  };

  // InvalidArgument if the key is already present; OutOfMemory when full.
  Status add(const KernelKey& key, KernelFn fn, const char* library, ScratchFn scratch = nullptr);
  // Adds unless the key is present (for a fallback library registered after a faster one).
  Status add_if_absent(const KernelKey& key, KernelFn fn, const char* library, ScratchFn scratch = nullptr);
  const Entry* find(const KernelKey& key) const;
  size_t size() const { return size_; }
  const Entry& entry(size_t i) const { return entries_[i]; }

 private:
  Entry entries_[kCapacity];
  size_t size_ = 0;
};

}  // namespace ember
