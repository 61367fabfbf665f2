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
  // Loads and checks a program (docs/DESIGN.md §2: "untrusted by default"). Errors: InvalidProgram,
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
  // load-time symbol values (LoadOptions::symbols; others at their max). Host state (read by the
  // portable kernels or a backend that does not own state) is in host memory from
  // RuntimeContext::device_allocator (or platform_aligned_alloc); state that a backend owns is in
  // that backend's memory (`data` is null: the host never holds a copy).
  struct State {
    const char* name = "";
    uint8_t* data = nullptr;             // host state; null when a backend owns it
    uint64_t nbytes = 0;
    int64_t dims[kMaxRank] = {0};
    ScalarType dtype = ScalarType::Invalid;
    uint8_t rank = 0;
    MemoryDomain domain = MemoryDomain::Host;
    const char* owner = "program";       // "program" (host), or the owning backend's registry name
    const Backend* backend = nullptr;    // the owner, or null
    StateBuffer* buffer = nullptr;       // the owner's buffer, or null
    MemoryRequirements memory;           // bytes by domain and purpose (host state: "state", nbytes)
  };
  size_t state_count() const { return state_count_; }
  const State& state(size_t i) const { return states_[i]; }
  const State* find_state(const char* name) const;  // null when absent
  uint8_t* state_data(const char* name) const;      // null when absent or not in host memory

  // Which backend runs each delegate of each method, chosen at load (LoadOptions::backends), and
  // why: runner --info prints it. `delegate` is the delegate index, or kWholeMethod for the
  // Method's whole body. Null when there is no such delegate.
  struct BackendChoice {
    const Backend* backend = nullptr;  // null: the portable kernels
    const char* name = "portable";     // registry name, or "portable"
    char reason[160] = {0};
  };
  static constexpr uint32_t kWholeMethod = BackendLoadContext::kWholeMethod;
  const BackendChoice* backend_choice(const fb::Method& method, uint32_t delegate) const;
  // The symbol values chosen at load (copied from LoadOptions::symbols).
  Span<const SymbolValue> load_symbols() const { return Span<const SymbolValue>(symbols_, symbol_count_); }

 private:
  static constexpr size_t kMaxLoadNames = 16;
  Program() = default;
  void release();
  Status choose_backends(ErrorContext* ctx);
  Status claim_states(ErrorContext* ctx);

  FileHeader header_;
  FreeableBuffer flatbuffer_bytes_;
  const fb::Program* program_ = nullptr;
  const fb::DebugInfo* debug_ = nullptr;
  FreeableBuffer* segment_buffers_ = nullptr;  // load-time allocations (platform_aligned_alloc)
  SegmentData* segment_data_ = nullptr;
  size_t segment_count_ = 0;
  State* states_ = nullptr;
  size_t state_count_ = 0;
  BackendChoice* choices_ = nullptr;  // per method: the whole-body choice, then one per delegate
  uint32_t* choice_begin_ = nullptr;  // per method: index of its whole-body choice in choices_
  size_t choice_count_ = 0;
  RuntimeContext runtime_;
  LoadOptions options_;  // its spans are cleared: the copies below are what the Program keeps
  SymbolValue symbols_[kMaxLoadNames];
  size_t symbol_count_ = 0;
  const char* priority_[kMaxLoadNames] = {};  // registry names (the registry outlives the Program)
  size_t priority_count_ = 0;
  bool has_priority_ = false;  // LoadOptions::backends was not empty (even if none is registered)
};

}  // namespace ember
