#include "runtime/kernel/kernel_registry.h"

#include <cstdio>

namespace ember {

bool KernelKey::operator==(const KernelKey& other) const {
  if (op != other.op || variant != other.variant || arg_count != other.arg_count ||
      dim_order != other.dim_order || quant != other.quant) {
    return false;
  }
  for (int i = 0; i < arg_count; ++i) {
    if (dtypes[i] != other.dtypes[i]) return false;
  }
  return true;
}

const char* format_key(const KernelKey& key, char* out, size_t out_size) {
  if (out_size == 0) return out;
  size_t used = 0;
  auto append = [&](const char* text) {
    if (used + 1 >= out_size) return;
    int n = std::snprintf(out + used, out_size - used, "%s", text);
    if (n > 0) used += static_cast<size_t>(n) < out_size - used ? static_cast<size_t>(n) : out_size - used - 1;
  };
  out[0] = '\0';
  append(to_string(key.op));
  append("(");
  for (int i = 0; i < key.arg_count && i < kMaxKernelArgs; ++i) {
    if (i) append(", ");
    append(key.dtypes[i] == ScalarType::Invalid ? "-" : to_string(key.dtypes[i]));
    if (i == 1 && key.quant != QuantLayout::None) {
      append(" ");
      append(to_string(key.quant));
    }
  }
  append(")");
  if (key.dim_order == DimOrder::ChannelsLast) append(" channels-last");
  return out;
}

Status KernelRegistry::add(const KernelKey& key, KernelFn fn, const char* library, ScratchFn scratch) {
  if (fn == nullptr) return EMBER_ERROR(Error::InvalidArgument, "null kernel function");
  if (find(key) != nullptr) return EMBER_ERROR(Error::InvalidArgument, "kernel key already registered");
  if (size_ == kCapacity) return EMBER_ERROR(Error::OutOfMemory, "kernel registry full");
  entries_[size_++] = Entry{key, fn, library, scratch};
  return Status::ok();
}

Status KernelRegistry::add_if_absent(const KernelKey& key, KernelFn fn, const char* library, ScratchFn scratch) {
  if (find(key) != nullptr) return Status::ok();
  return add(key, fn, library, scratch);
}

const KernelRegistry::Entry* KernelRegistry::find(const KernelKey& key) const {
  for (size_t i = 0; i < size_; ++i) {
    if (entries_[i].key == key) return &entries_[i];
  }
  return nullptr;
}

}  // namespace ember
