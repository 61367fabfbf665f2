#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <new>

#include "backends/sim/register.h"
#include "runtime/interpreter/host_graph.h"
#include "runtime/core/thread_pool.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember {
namespace backends::sim {
namespace {

// A piece of simulated device memory: whole pages, PROT_NONE while closed. Opened (read/write) only
// inside the backend's own calls; opens nest (two Methods sharing a state on two threads).
struct Region {
  uint8_t* base = nullptr;
  size_t bytes = 0;  // whole pages
};

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_to_pages(uint64_t bytes) {
  const size_t page = page_bytes();
  return bytes == 0 ? 0 : static_cast<size_t>((bytes + page - 1) / page * page);
}

bool map_region(uint64_t bytes, Region* out) {
  out->bytes = round_to_pages(bytes);
  if (out->bytes == 0) return true;
  void* p = mmap(nullptr, out->bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zero-filled
  if (p == MAP_FAILED) return false;
  out->base = static_cast<uint8_t*>(p);
  return true;
}

void unmap_region(Region& r) {
  if (r.base != nullptr) munmap(r.base, r.bytes);
  r.base = nullptr;
}

struct Layout {
  HostGraphLayout graph;
  size_t scratch_bytes = 0; // the kernels' scratch, in device memory like everything they touch
  size_t host_bytes = 0;    // runner + state table (host), plus the handle itself when reported
  uint64_t device_bytes = 0;
};

bool protect(const Region& r, bool open) {
  return r.bytes == 0 || mprotect(r.base, r.bytes, open ? PROT_READ | PROT_WRITE : PROT_NONE) == 0;
}

}  // namespace
}  // namespace backends::sim

class StateBuffer {
 public:
  DeviceAllocator* allocator = nullptr;  // where this record came from (RuntimeContext's, or null)
  backends::sim::Region region;
  uint64_t nbytes = 0;
  std::mutex mutex;      // guards open_count (Methods of one Program on two threads)
  int open_count = 0;
};

class DelegateHandle {
 public:
  DeviceAllocator* allocator = nullptr;  // where the host memory came from (RuntimeContext's, or null)
  GraphRunner runner;
  backends::sim::Layout layout;     // what init() planned (memory_requirements() reports it by purpose)
  uint8_t* host = nullptr;          // runner structures, then the state pointer table
  size_t host_bytes = 0;
  backends::sim::Region device;     // internal values, uploaded constants, staged I/O
  Span<uint8_t> scratch;            // the kernels' scratch, in the device region
  StateBuffer** states = nullptr;   // the owned states the graph names
  size_t state_count = 0;
  // Outputs whose bytes synchronize() copies to the host (the simulated asynchronous copy).
  static constexpr size_t kMaxIo = 64;
  TensorView pending[kMaxIo];
  size_t pending_count = 0;
};

namespace backends::sim {
namespace {

constexpr size_t kMaxStates = 256;

// Host memory of the backend: from the app's DeviceAllocator when it serves the request, else the
// platform's. The device regions are always the backend's own mappings (they must be pages it can
// protect), so Device requests are never put to the app.
AllocationRequest host_request(uint64_t bytes) {
  AllocationRequest request;
  request.domain = MemoryDomain::Host;
  request.purpose = AllocationRequest::Purpose::Other;
  request.bytes = bytes;
  request.owner = kBackendId;
  return request;
}

size_t device_layout_bytes(const Layout& l);

Layout plan(const RuntimeContext& runtime, const GraphView& graph) {
  Layout l;
  l.graph = plan_host_graph(graph, /*copy_constants=*/true, /*stage_io=*/true);
  const size_t threads = runtime.pool != nullptr ? runtime.pool->thread_count() : 1;
  l.scratch_bytes = (GraphRunner::scratch_bytes(graph.graph(), runtime.kernels, threads) + 63) / 64 * 64;
  uint32_t states = 0;
  for (uint32_t v = 0; v < graph.value_count(); ++v) {
    states += graph.value(v).storage_type() == fb::Storage::StateStorage;
  }
  l.host_bytes = l.graph.runner_bytes + (states * sizeof(StateBuffer*) + 63) / 64 * 64;
  l.device_bytes = round_to_pages(device_layout_bytes(l));
  return l;
}

size_t device_layout_bytes(const Layout& l) {
  return l.graph.value_bytes + l.graph.constant_bytes + l.graph.io_bytes + l.scratch_bytes;
}

// The layout by purpose. `device_bytes` is the region's size: whole pages, the rest of the last
// one listed as "page rounding" (plan_memory() passes the planned size, memory_requirements() the
// mapped one, so plan == taken also checks the mapping).
MemoryRequirements requirements(const Layout& l, uint64_t device_bytes) {
  MemoryRequirements r;
  r.add_part("handle", MemoryDomain::Host, sizeof(DelegateHandle));
  r.add_part("runner", MemoryDomain::Host, l.host_bytes);
  r.add_part("weights", MemoryDomain::Device, l.graph.constant_bytes);
  r.add_part("values", MemoryDomain::Device, l.graph.value_bytes);
  r.add_part("io staging", MemoryDomain::Device, l.graph.io_bytes);
  r.add_part("scratch", MemoryDomain::Device, l.scratch_bytes);
  const uint64_t laid_out = device_layout_bytes(l);
  r.add_part("page rounding", MemoryDomain::Device, device_bytes > laid_out ? device_bytes - laid_out : 0);
  return r;
}

// Opens the handle's device memory and the states it names for one call; closes them when done.
class Access {
 public:
  explicit Access(DelegateHandle& h) : h_(h) {
    ok_ = protect(h.device, true);
    for (size_t i = 0; i < h.state_count; ++i) {
      std::lock_guard<std::mutex> lock(h.states[i]->mutex);
      if (h.states[i]->open_count++ == 0) ok_ = protect(h.states[i]->region, true) && ok_;
    }
  }
  ~Access() {
    protect(h_.device, false);
    for (size_t i = 0; i < h_.state_count; ++i) {
      std::lock_guard<std::mutex> lock(h_.states[i]->mutex);
      if (--h_.states[i]->open_count == 0) protect(h_.states[i]->region, false);
    }
  }
  bool ok() const { return ok_; }

 private:
  DelegateHandle& h_;
  bool ok_ = true;
};

class SimBackend final : public Backend {
 public:
  bool is_available(const RuntimeContext& runtime) const override { return runtime.kernels != nullptr; }

  // Every signature the portable kernels run: the sim runs them, in its own memory.
  bool supports(const RuntimeContext& runtime, const KernelKey& key) const override {
    return runtime.kernels != nullptr && runtime.kernels->find(key) != nullptr;
  }

  bool owns_state() const override { return true; }

  MemoryRequirements state_requirements(const StateSpec& spec) const override {
    MemoryRequirements req;
    req.add_part("state record", MemoryDomain::Host, sizeof(StateBuffer));
    req.add_part("state", MemoryDomain::Device, round_to_pages(spec.nbytes));
    return req;
  }

  Result<StateBuffer*> create_state(BackendLoadContext& ctx, const StateSpec& spec) const override {
    DeviceAllocator* allocator = ctx.runtime->device_allocator;
    void* storage = allocate_host_memory(allocator, host_request(sizeof(StateBuffer)));
    if (storage == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "sim: state record for '%s'", spec.name);
    StateBuffer* state = new (storage) StateBuffer();
    state->allocator = allocator;
    state->nbytes = spec.nbytes;
    if (!map_region(spec.nbytes, &state->region)) {
      destroy_state(state);
      return EMBER_FAIL(ctx.error, Error::OutOfMemory, "sim: %llu bytes of device memory for state '%s'",
                        static_cast<unsigned long long>(spec.nbytes), spec.name);
    }
    return state;
  }

  void destroy_state(StateBuffer* state) const noexcept override {
    if (state == nullptr) return;
    unmap_region(state->region);
    DeviceAllocator* allocator = state->allocator;
    state->~StateBuffer();
    free_host_memory(allocator, host_request(sizeof(StateBuffer)), state);
  }

  Result<MemoryRequirements> plan_memory(BackendLoadContext& ctx, const GraphView& graph,
                                         Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check(ctx, graph, specs));
    const Layout l = plan(*ctx.runtime, graph);
    return requirements(l, l.device_bytes);
  }

  Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                               Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check(ctx, graph, specs));
    if (ctx.states.size() > kMaxStates) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "sim: %zu states in one graph (at most %zu)", ctx.states.size(),
                        kMaxStates);
    }
    const Layout l = plan(*ctx.runtime, graph);
    DeviceAllocator* allocator = ctx.runtime->device_allocator;
    void* storage = allocate_host_memory(allocator, host_request(sizeof(DelegateHandle)));
    if (storage == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "sim: delegate record");
    DelegateHandle* h = new (storage) DelegateHandle();
    h->allocator = allocator;
    h->layout = l;
    h->host_bytes = l.host_bytes;
    h->host = static_cast<uint8_t*>(allocate_host_memory(allocator, host_request(l.host_bytes)));
    if (h->host == nullptr || !map_region(device_layout_bytes(l), &h->device)) {
      destroy(h);
      return EMBER_FAIL(ctx.error, Error::OutOfMemory, "sim: %zu host and %llu device bytes for delegate %u",
                        l.host_bytes, static_cast<unsigned long long>(l.device_bytes), ctx.delegate_index);
    }
    h->states = reinterpret_cast<StateBuffer**>(h->host + l.graph.runner_bytes);
    void* state_data[kMaxStates];
    for (size_t i = 0; i < ctx.states.size(); ++i) {
      const BoundState& s = ctx.states[i];
      if (s.buffer == nullptr) {  // owns_state(): the executor hands over only our own buffers
        destroy(h);
        return EMBER_FAIL(ctx.error, Error::Internal, "sim: state '%s' is not in sim memory", s.spec.name);
      }
      h->states[h->state_count++] = s.buffer;
      state_data[i] = s.buffer->region.base;
    }
    HostGraphMemory m;
    m.runner = h->host;
    m.values = h->device.base;
    m.constants = h->device.base + l.graph.value_bytes;
    m.io = m.constants + l.graph.constant_bytes;
    h->scratch = Span<uint8_t>(m.io + l.graph.io_bytes, l.scratch_bytes);
    m.states = ctx.states;
    m.state_data = Span<void* const>(state_data, ctx.states.size());
    m.domain = MemoryDomain::Device;
    Status status;
    {
      Access access(*h);  // binding uploads the constants and scans FP8 codes: inside the device
      status = access.ok() ? bind_host_graph(h->runner, graph, *ctx.runtime, m, true, true, ctx.error)
                           : EMBER_FAIL(ctx.error, Error::BackendFailed, "sim: mprotect failed");
    }
    if (!status.is_ok()) {
      destroy(h);
      return status;
    }
    return h;
  }

  // Copies the inputs into the staged slots, runs, and leaves the outputs for synchronize() to copy
  // back (the dims are set here: host metadata).
  Status execute(BackendExecuteContext& ctx, DelegateHandle* h, Span<const TensorView> inputs,
                 Span<TensorView> outputs) const override {
    GraphRunner& r = h->runner;
    const fb::Graph& g = r.graph().graph();
    if (inputs.size() > DelegateHandle::kMaxIo || outputs.size() > DelegateHandle::kMaxIo) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "sim: more than %zu inputs or outputs", DelegateHandle::kMaxIo);
    }
    if (h->pending_count != 0) {
      return EMBER_FAIL(ctx.error, Error::InvalidState, "sim: execute() again before synchronize()");
    }
    Access access(*h);
    if (!access.ok()) return EMBER_FAIL(ctx.error, Error::BackendFailed, "sim: mprotect failed");
    for (size_t k = 0; k < inputs.size(); ++k) {
      const uint32_t v = g.inputs()->Get(static_cast<uint32_t>(k))->value();
      if (inputs[k].domain == MemoryDomain::Device) {
        return EMBER_FAIL(ctx.error, Error::InvalidArgument, "sim: input %zu is another device's memory", k);
      }
      TensorView staged = inputs[k];
      staged.data = r.value(v).data;  // the fixed slot
      staged.domain = MemoryDomain::Device;
      r.bind_value(v, staged);
      if (inputs[k].data != nullptr) std::memcpy(staged.data, inputs[k].data, static_cast<size_t>(inputs[k].nbytes()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      const uint32_t v = g.outputs()->Get(static_cast<uint32_t>(k))->value();
      TensorView staged = outputs[k];
      staged.data = r.value(v).data;
      staged.domain = MemoryDomain::Device;
      r.bind_value(v, staged);
    }
    KernelContext kernel_ctx;
    kernel_ctx.pool = ctx.pool;
    kernel_ctx.scratch = h->scratch;
    EMBER_RETURN_IF_ERROR(r.run(kernel_ctx, ctx.abort, ctx.error));
    for (size_t k = 0; k < outputs.size(); ++k) {
      const TensorView& done = r.value(g.outputs()->Get(static_cast<uint32_t>(k))->value());
      outputs[k].rank = done.rank;
      for (int d = 0; d < done.rank; ++d) outputs[k].dims[d] = done.dims[d];
      h->pending[k] = outputs[k];  // host destination, actual dims
    }
    h->pending_count = outputs.size();
    return Status::ok();
  }

  Status synchronize(BackendExecuteContext& ctx, DelegateHandle* h) const override {
    if (h->pending_count == 0) return Status::ok();
    Access access(*h);
    if (!access.ok()) return EMBER_FAIL(ctx.error, Error::BackendFailed, "sim: mprotect failed");
    const fb::Graph& g = h->runner.graph().graph();
    for (size_t k = 0; k < h->pending_count; ++k) {
      const TensorView& src = h->runner.value(g.outputs()->Get(static_cast<uint32_t>(k))->value());
      std::memcpy(h->pending[k].data, src.data, static_cast<size_t>(h->pending[k].nbytes()));
    }
    h->pending_count = 0;
    return Status::ok();
  }

  MemoryRequirements memory_requirements(const DelegateHandle* h) const override {
    return requirements(h->layout, h->device.bytes);
  }

  void destroy(DelegateHandle* h) const noexcept override {
    if (h == nullptr) return;
    unmap_region(h->device);
    DeviceAllocator* allocator = h->allocator;
    free_host_memory(allocator, host_request(h->host_bytes), h->host);
    h->~DelegateHandle();
    free_host_memory(allocator, host_request(sizeof(DelegateHandle)), h);
  }

 private:
  static Status check(BackendLoadContext& ctx, const GraphView& graph, Span<const CompileSpec> specs) {
    for (const CompileSpec& spec : specs) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "sim: unknown compile spec '%s'", spec.key);
    }
    if (graph.input_count() > DelegateHandle::kMaxIo || graph.output_count() > DelegateHandle::kMaxIo) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "sim: more than %zu inputs or outputs",
                        DelegateHandle::kMaxIo);
    }
    return Status::ok();
  }
};

}  // namespace

Status register_backend(BackendRegistry& registry) {
  static const SimBackend backend;
  return registry.add(kBackendId, backend);
}

const void* device_address(const StateBuffer* state) { return state->region.base; }

}  // namespace backends::sim
}  // namespace ember
