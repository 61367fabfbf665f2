// Program: a loaded, verified, immutable .pte. Shareable across threads; each thread loads its own
// Method. A Program must outlive its Methods and must not be moved while Methods exist.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/core/data_loader.h"
#include "runtime/core/freeable_buffer.h"
#include "runtime/core/status.h"
#include "runtime/executor/load_options.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/executor/method_meta.h"
#include "runtime/program/graph_view.h"
#include "runtime/program/program_file.h"

namespace ember {

class Method;

class Program {
 public:
  // Loads and checks a program (DESIGN §2: "untrusted by default"). Errors: InvalidProgram,
  // IntegrityError, VersionMismatch, FeatureMissing, OutOfMemory, NotImplemented; details in ctx.
  // `runtime` and the registries it points to must outlive the Program.
  static Result<Program> load(DataLoader& loader, const RuntimeContext& runtime,
                              const LoadOptions& options = LoadOptions(), ErrorContext* ctx = nullptr);

  Program(Program&& other) noexcept;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program();

  size_t method_count() const;
  const char* method_name(size_t i) const;  // "" when out of range
  // NotFound for an unknown name.
  Result<MethodMeta> method_meta(const char* name, ErrorContext* ctx = nullptr) const;
  // Binds a method into `memory`. Errors: NotFound, InvalidArgument / OutOfMemory (memory plan),
  // KernelMissing, BackendUnavailable, BackendFailed, InvalidProgram (shape checks).
  Result<Method> load_method(const char* name, MemoryPlan& memory, ErrorContext* ctx = nullptr) const;

  const FileHeader& header() const { return header_; }
  const fb::Program& flatbuffer() const { return *program_; }
  Span<const SegmentData> segments() const { return Span<const SegmentData>(segment_data_, segment_count_); }
  const fb::DebugInfo* debug_info() const { return debug_; }
  const RuntimeContext& runtime() const { return runtime_; }
  const LoadOptions& options() const { return options_; }
  // Program-level state: one zero-initialized buffer per StateDecl, its dims resolved with the
  // load-time symbol values (LoadOptions::symbols; others at their max).
  struct State {
    const char* name = "";
    uint8_t* data = nullptr;
    uint64_t nbytes = 0;
    int64_t dims[kMaxRank] = {0};
  };
  const State* find_state(const char* name) const;  // null when absent
  uint8_t* state_data(const char* name) const;      // null when absent

 private:
  Program() = default;
  void release();

  FileHeader header_;
  FreeableBuffer flatbuffer_bytes_;
  const fb::Program* program_ = nullptr;
  const fb::DebugInfo* debug_ = nullptr;
  FreeableBuffer* segment_buffers_ = nullptr;  // load-time allocations (platform_aligned_alloc)
  SegmentData* segment_data_ = nullptr;
  size_t segment_count_ = 0;
  State* states_ = nullptr;
  size_t state_count_ = 0;
  RuntimeContext runtime_;
  LoadOptions options_;
};

}  // namespace ember
