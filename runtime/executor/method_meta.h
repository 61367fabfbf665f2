// MethodMeta: what an app needs to size memory and bind I/O before loading a Method. Cheap to
// copy; borrows the Program (valid while it lives).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/backend/backend.h"
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

// A delegate of a method as this load runs it: which backend, why, and the memory its init takes.
struct DelegateMeta {
  static constexpr uint32_t kWholeMethod = BackendLoadContext::kWholeMethod;
  uint32_t index = 0;             // the delegate's index, or kWholeMethod (a backend runs the body)
  const char* exported_for = "";  // the backend id in the file ("" for a whole body)
  const char* runs_on = "";       // a registry name, "portable", or "" (none can: load_method fails)
  const char* reason = "";        // why (runner --info prints it)
  uint32_t instruction_count = 0;
  MemoryRequirements memory;      // what init() takes by domain and purpose (Backend::plan_memory); zero on portable kernels
};

class Program;

class MethodMeta {
 public:
  MethodMeta() = default;
  MethodMeta(const Program* program, const fb::Method* method, size_t method_allocator_bytes, size_t scratch_bytes)
      : program_(program), method_(method), method_allocator_bytes_(method_allocator_bytes),
        scratch_bytes_(scratch_bytes) {}

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
  const char* delegate_backend(size_t i) const;  // the id in the file; "" when out of range
  // Delegate i as this load runs it (i < delegate_count(), or DelegateMeta::kWholeMethod: the body,
  // which is on the portable kernels unless a backend takes it whole). Asks the backend's
  // plan_memory(): nothing is allocated. Errors: InvalidArgument (index), what plan_memory returns.
  Result<DelegateMeta> delegate(uint32_t i, ErrorContext* ctx = nullptr) const;
  // The bytes the backends' init() take for this method, by domain and purpose (parts merged by
  // purpose), summed over its delegates (program state excluded: Program::state()).
  Result<MemoryRequirements> backend_memory(ErrorContext* ctx = nullptr) const;

 private:
  const Program* program_ = nullptr;
  const fb::Method* method_ = nullptr;
  size_t method_allocator_bytes_ = 0;
  size_t scratch_bytes_ = 0;
};

}  // namespace ember
