// MethodMeta: what an app needs to size memory and bind I/O before loading a Method. Cheap to
// copy; borrows the Program (valid while it lives).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/program/graph_view.h"

namespace ember {

struct TensorMeta {
  const char* name = "";
  ScalarType dtype = ScalarType::Invalid;
  uint8_t rank = 0;
  int64_t max_dims[kMaxRank] = {0};
  const char* dim_symbols[kMaxRank] = {};  // symbol name per dim, or null when static
  uint64_t max_nbytes = 0;
};

struct ArenaMeta {
  enum class Kind : uint8_t { Activation = 1, IO = 2, Scratch = 3 };
  Kind kind = Kind::Activation;
  uint32_t alignment = 64;
  uint64_t size = 0;
};

class MethodMeta {
 public:
  MethodMeta() = default;
  MethodMeta(const fb::Method* method, size_t method_allocator_bytes, size_t scratch_bytes)
      : method_(method), method_allocator_bytes_(method_allocator_bytes), scratch_bytes_(scratch_bytes) {}

  const char* name() const;
  size_t input_count() const;
  size_t output_count() const;
  // InvalidArgument for an index out of range.
  Result<TensorMeta> input(size_t i) const;
  Result<TensorMeta> output(size_t i) const;
  size_t arena_count() const;
  Result<ArenaMeta> arena(size_t i) const;
  // Exact bytes Program::load_method takes from the method allocator in this build.
  size_t method_allocator_bytes() const { return method_allocator_bytes_; }
  // Bytes of MemoryPlan::scratch the method needs in this build with this RuntimeContext's pool:
  // the file's figure or what the bound kernels ask for at the upper-bound shapes, the larger.
  size_t scratch_bytes() const { return scratch_bytes_; }
  size_t instruction_count() const;
  size_t delegate_count() const;
  const char* delegate_backend(size_t i) const;  // "" when out of range

 private:
  const fb::Method* method_ = nullptr;
  size_t method_allocator_bytes_ = 0;
  size_t scratch_bytes_ = 0;
};

}  // namespace ember
