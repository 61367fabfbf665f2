// Backend interface (docs/DESIGN.md §3, §7; the guide for authors is runtime/backend/README.md). A backend
// runs delegated subgraphs. It holds no per-method state itself: everything a delegate needs lives
// behind its DelegateHandle (init() .. destroy(), exactly once per successful init; a failed init
// cleans up after itself), and every program state it owns behind a StateBuffer (create_state() ..
// destroy_state(), once per Program).
//
// Lifecycle, as the executor drives it:
//   Program::load   for every delegate: the backend chosen for it (LoadOptions::backends, supports())
//                   then, for each program state a chosen backend owns: create_state()
//   MethodMeta      plan_memory() per delegate: the bytes init() will take, before anything is taken
//   load_method     init() with the graph, specs, load-time symbols, tracer and the states it names
//   execute         execute() per delegate call (may only enqueue), synchronize() before the host
//                   reads what it wrote, and at the end of Method::execute
//   ~Method         destroy();  ~Program: destroy_state()
//
// Backends see only this folder, runtime/kernel (kernel keys), runtime/interpreter (GraphRunner, for
// host backends), runtime/program's read-only views and runtime/core; never the executor, never
// another backend.
// A Backend object is immutable after registration and must be safe to call from several threads
// for different handles.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/core/device_allocator.h"
#include "runtime/core/event_tracer.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/kernel/kernel.h"
#include "runtime/program/graph_view.h"

namespace ember {

class BackendRegistry;
class KernelRegistry;
class ThreadPool;

// What an app hands to Program::load. Everything is borrowed and must outlive the Program and its
// Methods. Null kernels/backends means "none registered"; null device_allocator means "defaults"
// (runtime/core/device_allocator.h).
struct RuntimeContext {
  ThreadPool* pool = nullptr;
  const KernelRegistry* kernels = nullptr;
  const BackendRegistry* backends = nullptr;
  DeviceAllocator* device_allocator = nullptr;
};

// A program symbol fixed at load (LoadOptions::symbols), e.g. the KV pool's num_blocks. `name` is
// borrowed for the duration of Program::load only (the Program copies the values it keeps).
struct SymbolValue {
  const char* name = "";
  int64_t value = 0;
};

class DelegateHandle;  // opaque to the executor; defined by each backend
class StateBuffer;     // opaque to the executor; a program state in a backend's own memory

struct CompileSpec {
  const char* key = "";  // NUL-terminated, points into the program
  Span<const uint8_t> value;
};

// One purpose's bytes in one memory domain: "weights" in device memory, "io staging" in pinned memory.
struct MemoryPart {
  const char* purpose = "";  // static storage (a string literal): kept and compared, never copied or freed
  MemoryDomain domain = MemoryDomain::Host;
  uint64_t bytes = 0;
};

// Bytes per memory domain, and the same bytes by purpose. Planned before init (plan_memory), reported
// after (memory_requirements), sized for owned state (state_requirements): plan and report must be
// equal, parts and graph count included, so an app can size device memory before it loads anything
// and runner --info can say where it goes.
//
// A backend fills it with add_part() (the one way to list parts), which also adds to the domain's
// total, so every total is the sum of its parts. Setting a total directly still works (a backend
// that gives totals only); those bytes are then unlisted(), and so are the bytes of purposes beyond
// kMaxMemoryParts after merging. Fixed capacity: no heap, trivially copyable.
struct MemoryRequirements {
  static constexpr uint32_t kMaxMemoryParts = 16;

  uint64_t host_bytes = 0;
  uint64_t pinned_bytes = 0;
  uint64_t device_bytes = 0;
  // Launch graphs init() builds (CUDA graphs, one per shape bucket). A count, not bytes: the driver
  // allocates their memory when it instantiates them and says how much only afterwards, so no total
  // includes it. A zero-byte part would read as "free"; a count says what is known.
  uint32_t graph_count = 0;

  // Adds `bytes` to `domain`'s total and to the part named `purpose` there (merged by name and
  // domain; a new part when absent). Zero bytes list nothing. Past kMaxMemoryParts purposes the
  // bytes count in the total only (unlisted()).
  void add_part(const char* purpose, MemoryDomain domain, uint64_t bytes);
  Span<const MemoryPart> parts() const { return Span<const MemoryPart>(parts_, part_count_); }
  uint64_t total(MemoryDomain domain) const;
  // The bytes of `domain`'s total that no part lists (0 when the backend lists every byte).
  uint64_t unlisted(MemoryDomain domain) const;

  // Sums totals and graph counts, and merges the parts by purpose and domain (what an app or runner
  // does across the delegates of a method or a backend).
  MemoryRequirements& operator+=(const MemoryRequirements& o);
  // Totals, graph counts and every (purpose, domain)'s bytes equal; the parts' order does not count.
  bool operator==(const MemoryRequirements& o) const;
  bool operator!=(const MemoryRequirements& o) const { return !(*this == o); }

 private:
  void merge_part(const char* purpose, MemoryDomain domain, uint64_t bytes);
  uint64_t part_bytes(const char* purpose, MemoryDomain domain) const;

  MemoryPart parts_[kMaxMemoryParts];
  uint32_t part_count_ = 0;
};

// For logs and tools, into the caller's buffer (NUL-terminated, cut to `capacity`; returns `out`):
// format_bytes: "15.2 GiB", "120.0 MiB", "1.5 KiB", "256 B".
// format_memory: one domain, its total then its parts in listing order and any unlisted bytes:
// "device 15.2 GiB: weights 14.2 GiB, values 120.0 MiB, other 1.0 KiB"; "device 15.2 GiB" when it
// lists no part.
const char* format_bytes(uint64_t bytes, char* out, size_t capacity);
const char* format_memory(const MemoryRequirements& m, MemoryDomain domain, char* out, size_t capacity);

struct OpaquePayload {
  Span<const uint8_t> data;  // starts with the backend's own magic and version
  uint32_t format_version = 0;
};

// A program state (docs/DESIGN.md §2: "declared on the Program, bound by name, shared by every method that
// names it"), its dims resolved with the load-time symbol values.
struct StateSpec {
  const char* name = "";  // points into the program
  ScalarType dtype = ScalarType::Invalid;
  uint8_t rank = 0;
  int64_t dims[kMaxRank] = {0};
  uint64_t nbytes = 0;
};

// A state a delegate graph names, as init() receives it. Exactly one of the two is set: `buffer`
// when this backend owns the state (owns_state(); it made the buffer with create_state()), else
// `host_data`, zero-initialized host memory the Program owns. Both keep their address for the
// Program's lifetime, and every Method of the Program sees the same one.
struct BoundState {
  StateSpec spec;
  StateBuffer* buffer = nullptr;
  void* host_data = nullptr;
};

// What plan_memory(), create_state() and init() may consult; borrowed for the call only.
struct BackendLoadContext {
  const RuntimeContext* runtime = nullptr;
  // The values the app chose at load (LoadOptions::symbols); a symbol not listed takes its max.
  Span<const SymbolValue> symbols;
  ErrorContext* error = nullptr;   // fill with EMBER_FAIL on failure
  const char* backend_id = "";     // the name this backend was registered under
  const char* method_name = "";    // "" in create_state()
  uint32_t delegate_index = 0;     // kWholeMethod when the delegate is a method's whole body
  static constexpr uint32_t kWholeMethod = UINT32_MAX;
};

struct BackendInitContext : BackendLoadContext {
  EventTracer* tracer = nullptr;   // LoadOptions::tracer (may be null): a backend may report phases
  Span<const BoundState> states;   // every program state the graph names, in the graph's value order
};

struct BackendExecuteContext {
  ThreadPool* pool = nullptr;
  Span<uint8_t> scratch;              // host memory, valid for this call only
  ErrorContext* error = nullptr;
  const std::atomic<bool>* abort = nullptr;  // may be checked between internal steps
  EventTracer* tracer = nullptr;      // the Method's tracer (may be null)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool is_available(const RuntimeContext& runtime) const = 0;
  // Why is_available() is false, for load errors and --info ("no CUDA device (...)"); "" = no detail.
  virtual const char* unavailable_reason(const RuntimeContext& runtime) const { return ""; }

  // Capabilities. Can this backend run one instruction with this signature: the op, the dtype of
  // each argument, the dim order and the weight's quant layout? The capabilities tool writes the
  // exporter's manifest from these answers and Program::load retargets delegates with them, so
  // they must be exact for what the key says; init() may still refuse a graph for what a key does
  // not say (shapes, attributes) with NotSupported, naming the instruction.
  virtual bool supports(const RuntimeContext& runtime, const KernelKey& key) const = 0;
  // Load time, after supports() said yes to every instruction: does this backend take the graph as a
  // whole, with what a key does not say (attributes, shapes)? false, with `why` filled ("xnnpack:
  // instruction 3 (avg_pool2d): dilated average pool"), makes Program::load choose the next listed
  // backend or the portable kernels, as for an unsupported key, also for a delegate exported for this
  // backend; MethodMeta plans with the same choice. No allocation. Default: every graph.
  virtual bool accepts(const RuntimeContext& runtime, const GraphView& graph, char* why, size_t why_size) const {
    return true;
  }
  // Signatures this backend runs that no portable kernel has (the capabilities tool asks
  // supports() about every portable signature, and lists these as well). Default: none.
  virtual Span<const KernelKey> extra_signatures() const { return Span<const KernelKey>(); }

  // Program state. A backend that owns state keeps every state its delegates name in its own
  // memory (device memory for a GPU); the host never holds a copy. One that does not gets host
  // state the Program allocated (BoundState::host_data). Default: does not own state.
  virtual bool owns_state() const { return false; }
  // Load time, owners only: the bytes create_state() takes for `spec` (no allocation), its device
  // bytes listed as the part "state".
  virtual MemoryRequirements state_requirements(const StateSpec& spec) const;
  // Once per state per Program, before any init(): zero-initialized, fixed address until
  // destroy_state(). Default: NotSupported.
  virtual Result<StateBuffer*> create_state(BackendLoadContext& ctx, const StateSpec& spec) const;
  virtual void destroy_state(StateBuffer* state) const noexcept;

  // Load time, before init: the memory init() takes for this graph with these specs and load-time
  // symbols (program state excluded: state_requirements). Must not allocate. init() must take
  // exactly this: memory_requirements(handle) == plan_memory(...) (tests assert it). List the bytes
  // by purpose (add_part: "weights", "values", "io staging", "scratch", ...) so apps and runner
  // --info see where they go; the README names the common purposes.
  virtual Result<MemoryRequirements> plan_memory(BackendLoadContext& ctx, const GraphView& graph,
                                                 Span<const CompileSpec> specs) const = 0;

  // Load time. The graph was verified and validated by the executor; constants are zero-copy views
  // of the program's segments. Its inputs and outputs are bound per call (execute()); a graph
  // that is a Method's whole body (ctx.delegate_index == kWholeMethod) has planned storage on them,
  // which the backend ignores. May allocate (host, pinned, device; RuntimeContext::device_allocator
  // first where it serves the request). Errors: NotSupported, OutOfMemory, BackendFailed, ...
  virtual Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                                       Span<const CompileSpec> specs) const = 0;
  // Load time, OPAQUE payloads. Default: NotSupported.
  virtual Result<DelegateHandle*> init_opaque(BackendInitContext& ctx, const OpaquePayload& payload,
                                              Span<const CompileSpec> specs) const;

  // Run time: uses only what init() reserved plus ctx.scratch; no heap. Inputs and outputs are
  // views in the domain they say (TensorView::domain; the executor's are host or pinned). Output
  // views arrive with their planned (max) dims; a backend whose outputs are symbolic writes the
  // actual dims before returning (dims are host metadata even when the bytes come later).
  // An asynchronous backend may return once the work is enqueued (one submission per call): the
  // output bytes are then valid only after synchronize().
  virtual Status execute(BackendExecuteContext& ctx, DelegateHandle* handle, Span<const TensorView> inputs,
                         Span<TensorView> outputs) const = 0;
  // Waits until every execute() of this handle so far has finished and its outputs are in place
  // (one wait per step). The executor calls it before host code reads a delegate's outputs and at
  // the end of Method::execute. Errors of the enqueued work are reported here. Default: no-op.
  virtual Status synchronize(BackendExecuteContext& ctx, DelegateHandle* handle) const;

  virtual MemoryRequirements memory_requirements(const DelegateHandle* handle) const = 0;
  virtual void destroy(DelegateHandle* handle) const noexcept = 0;
};

// A fixed-capacity name → Backend table; no heap. Filled at start-up (register_builtin_backends()
// or each backend's register_backend()), read-only afterwards. The registration order is the
// default priority order.
class BackendRegistry {
 public:
  static constexpr size_t kCapacity = 16;
  // `name` and `backend` must outlive the registry. InvalidArgument on a duplicate or reserved
  // name ("portable" names the portable kernels), OutOfMemory when full.
  Status add(const char* name, const Backend& backend);
  const Backend* find(const char* name) const;  // nullptr when absent
  size_t size() const { return size_; }
  const char* name(size_t i) const { return names_[i]; }
  const Backend& backend(size_t i) const { return *backends_[i]; }

 private:
  const char* names_[kCapacity] = {};
  const Backend* backends_[kCapacity] = {};
  size_t size_ = 0;
};

}  // namespace ember
