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

KernelKey make_kernel_key(OpCode op, const TensorView* inputs, size_t input_count, const TensorView* outputs,
                          size_t output_count) {
  KernelKey key;
  key.op = op;
  key.arg_count = static_cast<uint8_t>(input_count + output_count);
  for (size_t k = 0; k < input_count; ++k) {
    key.dtypes[k] = inputs[k].dtype;
    if (key.quant == QuantLayout::None && inputs[k].quant != nullptr) key.quant = inputs[k].quant->layout;
  }
  for (size_t k = 0; k < output_count; ++k) key.dtypes[input_count + k] = outputs[k].dtype;
  if (input_count > 0) key.dim_order = inputs[0].dim_order;
  return key;
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
