// Backend interface (DESIGN §3). A backend runs delegated subgraphs. It holds no per-method state
// itself: everything a delegate needs lives behind its DelegateHandle, created by init() and released
// by destroy() exactly once per successful init (a failed init cleans up after itself).
// Backends see only this folder, runtime/program's read-only views and runtime/core; never the
// executor, never another backend.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/core/memory_allocator.h"
#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/program/graph_view.h"

namespace ember {

class BackendRegistry;
class KernelRegistry;
class ThreadPool;
class DeviceAllocator;  // reserved for device backends

// What an app hands to Program::load. Everything is borrowed and must outlive the Program and its
// Methods. Null kernels/backends means "none registered".
struct RuntimeContext {
  ThreadPool* pool = nullptr;
  const KernelRegistry* kernels = nullptr;
  const BackendRegistry* backends = nullptr;
  DeviceAllocator* device_allocator = nullptr;
};

class DelegateHandle;  // opaque to the executor; defined by each backend

struct CompileSpec {
  const char* key = "";  // NUL-terminated, points into the program
  Span<const uint8_t> value;
};

struct MemoryRequirements {
  uint64_t host_bytes = 0;
  uint64_t device_bytes = 0;
  uint64_t pinned_bytes = 0;
};

struct OpaquePayload {
  Span<const uint8_t> data;  // starts with the backend's own magic and version
  uint32_t format_version = 0;
};

struct BackendInitContext {
  const RuntimeContext* runtime = nullptr;
  ErrorContext* error = nullptr;      // fill with EMBER_FAIL on failure
  const char* method_name = "";
  uint32_t delegate_index = 0;
};

struct BackendExecuteContext {
  ThreadPool* pool = nullptr;
  Span<uint8_t> scratch;              // valid for this call only
  ErrorContext* error = nullptr;
  const std::atomic<bool>* abort = nullptr;  // may be checked between internal steps
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool is_available(const RuntimeContext& runtime) const = 0;
  // Load time. The graph was verified and validated by the executor; constants are zero-copy views.
  // May allocate (host or device). Returns the handle or an error (BackendFailed, NotSupported, ...).
  virtual Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                                       Span<const CompileSpec> specs) const = 0;
  // Load time, OPAQUE payloads. Default: NotSupported.
  virtual Result<DelegateHandle*> init_opaque(BackendInitContext& ctx, const OpaquePayload& payload,
                                              Span<const CompileSpec> specs) const;
  // Run time: uses only what init() reserved plus ctx.scratch. Output views arrive with their
  // planned (max) dims; a backend whose outputs are symbolic writes the actual dims.
  virtual Status execute(BackendExecuteContext& ctx, DelegateHandle* handle,
                         Span<const TensorView> inputs, Span<TensorView> outputs) const = 0;
  virtual MemoryRequirements memory_requirements(const DelegateHandle* handle) const = 0;
  virtual void destroy(DelegateHandle* handle) const noexcept = 0;
};

// A fixed-capacity name → Backend table; no heap. Filled at start-up, read-only afterwards.
class BackendRegistry {
 public:
  static constexpr size_t kCapacity = 16;
  // `name` and `backend` must outlive the registry. InvalidArgument on a duplicate name.
  Status add(const char* name, const Backend& backend);
  const Backend* find(const char* name) const;  // nullptr when absent
  size_t size() const { return size_; }
  const char* name(size_t i) const { return names_[i]; }

 private:
  const char* names_[kCapacity] = {};
  const Backend* backends_[kCapacity] = {};
  size_t size_ = 0;
};

}  // namespace ember
