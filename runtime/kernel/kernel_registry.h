// KernelRegistry: a fixed-capacity table from KernelKey to KernelFn. Filled explicitly at start-up
// (register_builtin() or a kernel library's register_*); no static initializers. Not thread-safe
// while being filled; read-only lookups afterwards are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

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

// The kernel keys of lstm (3..8 inputs, 3 outputs) or gru (3..6 inputs, 2 outputs): every arity and
// every subset of absent optional inputs (ScalarType::Invalid); sequence_lens (input 4) is i32, the
// rest f32. fn(key) returns a Status; the first error stops the walk.
template <typename Fn>
Status for_each_rnn_key(OpCode op, Fn&& fn) {
  const bool lstm = op == OpCode::Lstm;
  const int max_inputs = lstm ? 8 : 6, outs = lstm ? 3 : 2;
  for (int n = 3; n <= max_inputs; ++n) {
    for (uint32_t mask = 0; mask < (1u << (n - 3)); ++mask) {
      KernelKey key;
      key.op = op;
      key.arg_count = static_cast<uint8_t>(n + outs);
      for (int i = 0; i < n + outs; ++i) key.dtypes[i] = ScalarType::F32;
      for (int i = 3; i < n; ++i) {
        if ((mask >> (i - 3)) & 1u) key.dtypes[i] = ScalarType::Invalid;
        else if (i == 4) key.dtypes[i] = ScalarType::I32;
      }
      EMBER_RETURN_IF_ERROR(fn(key));
    }
  }
  return Status::ok();
}

}  // namespace ember
