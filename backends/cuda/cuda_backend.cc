// The CUDA backend (backends/cuda/README.md): a GRAPH payload becomes, at init, a fixed launch
// sequence over device memory the backend plans from the values' lifetimes, captured into one CUDA
// graph per (T, S) bucket of an LLM `step` (or one graph for a graph without symbols) and replayed
// each execute(). The interpreter's GraphRunner does the binding and the shape functions; its kernel
// functions are the CUDA launchers of ops/ (bound by KernelKey from their own registry).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "backends/cuda/ops/cuda_ops.h"
#include "backends/cuda/plan.h"
#include "backends/cuda/register.h"
#include "runtime/interpreter/graph_runner.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/platform/platform.h"

namespace ember {

class StateBuffer {
 public:
  DeviceAllocator* allocator = nullptr;  // the app's, when it served the host record or the device bytes
  AllocationRequest request;             // the device request (for deallocate)
  void* device = nullptr;
  bool from_app = false;                 // device bytes from allocator (else cudaMalloc)
};

namespace backends::cuda {
namespace {

constexpr size_t kMaxIo = 64;

struct DeviceInfo {
  bool present = false;
  int device = 0;
  int sm_count = 0;
  char name[128] = {};
  char why[160] = {};  // why not present
};

const DeviceInfo& device_info() {
  static DeviceInfo info = [] {
    DeviceInfo d;
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      std::snprintf(d.why, sizeof(d.why), "no CUDA device (%s)",
                    err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
      cudaGetLastError();
      return d;
    }
    cudaDeviceProp prop{};
    if (cudaGetDevice(&d.device) != cudaSuccess || cudaGetDeviceProperties(&prop, d.device) != cudaSuccess) {
      std::snprintf(d.why, sizeof(d.why), "cannot query the CUDA device");
      return d;
    }
    if (prop.major < 9) {
      std::snprintf(d.why, sizeof(d.why), "%s is sm_%d%d; this build has sm_90a code and compute_90 PTX (Hopper or newer)",
                    prop.name, prop.major, prop.minor);
      return d;
    }
    d.present = true;
    d.sm_count = prop.multiProcessorCount;
    std::snprintf(d.name, sizeof(d.name), "%s", prop.name);
    return d;
  }();
  return info;
}

Status cuda_fail(ErrorContext* ctx, cudaError_t err, const char* what) {
  const Error code = (err == cudaErrorMemoryAllocation) ? Error::OutOfMemory
                     : (err == cudaErrorDevicesUnavailable || err == cudaErrorNoDevice || err == cudaErrorLaunchFailure ||
                        err == cudaErrorIllegalAddress || err == cudaErrorHardwareStackError ||
                        err == cudaErrorECCUncorrectable)
                         ? Error::DeviceLost
                         : Error::BackendFailed;
  return EMBER_FAIL(ctx, code, "cuda: %s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

// Device memory: from the app's DeviceAllocator when it serves the request, else cudaMalloc.
void* device_alloc(DeviceAllocator* allocator, const AllocationRequest& request, bool* from_app, ErrorContext* ctx,
                   const char* what, Status* status) {
  *from_app = false;
  if (request.bytes == 0) return nullptr;
  if (allocator != nullptr && allocator->serves(request)) {
    *from_app = true;
    void* p = allocator->allocate(request);
    if (p == nullptr) {
      *status = EMBER_FAIL(ctx, Error::OutOfMemory, "cuda: the app's allocator has no %llu bytes of device memory for %s",
                           static_cast<unsigned long long>(request.bytes), what);
    }
    return p;
  }
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, request.bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    *status = EMBER_FAIL(ctx, err == cudaErrorMemoryAllocation ? Error::OutOfMemory : Error::BackendFailed,
                         "cuda: %llu bytes of device memory for %s: %s (%.1f MiB free of %.1f MiB)",
                         static_cast<unsigned long long>(request.bytes), what, cudaGetErrorString(err),
                         free_bytes / 1048576.0, total / 1048576.0);
    return nullptr;
  }
  return p;
}

void device_free(DeviceAllocator* allocator, const AllocationRequest& request, void* p, bool from_app) {
  if (p == nullptr) return;
  if (from_app) {
    allocator->deallocate(request, p);
  } else {
    cudaFree(p);
  }
}

AllocationRequest request_of(MemoryDomain domain, AllocationRequest::Purpose purpose, uint64_t bytes,
                             const char* name) {
  AllocationRequest r;
  r.domain = domain;
  r.purpose = purpose;
  r.bytes = bytes;
  r.alignment = static_cast<uint32_t>(kAlign);
  r.owner = kBackendId;
  r.name = name;
  return r;
}

}  // namespace
}  // namespace backends::cuda

class DelegateHandle {
 public:
  DeviceAllocator* allocator = nullptr;
  backends::cuda::Layout layout;
  GraphRunner runner;
  uint8_t* host = nullptr;         // runner structures, then the per-value offsets
  uint64_t* offsets = nullptr;
  uint8_t* device = nullptr;       // values | constants | io | scratch | workspace | status
  bool device_from_app = false;
  uint8_t* pinned = nullptr;       // io staging | status
  bool pinned_registered = false;  // pinned came from the app's allocator: cudaHostRegister'ed
  bool pinned_from_app = false;
  uint8_t* d_values = nullptr;
  uint8_t* d_constants = nullptr;
  uint8_t* d_io = nullptr;
  uint8_t* d_scratch = nullptr;
  uint32_t* d_status = nullptr;
  uint32_t* h_status = nullptr;
  uint64_t constants_used = 0, io_used = 0;
  GraphView graph;                 // a copy: the caller's view lives only during init()
  Span<const BoundState> states;
  backends::cuda::LaunchContext lc;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaGraphExec_t exec[backends::cuda::kMaxBuckets] = {};
  uint32_t captured = 0;
  // Per graph input / output: its device slot, its pinned twin, its value and its step-input rule.
  struct Io {
    uint32_t value = 0;
    uint8_t* device = nullptr;
    uint8_t* pinned = nullptr;
    backends::cuda::Pad pad = backends::cuda::Pad::None;
  };
  Io inputs[backends::cuda::kMaxIo];
  Io outputs[backends::cuda::kMaxIo];
  uint32_t input_count = 0, output_count = 0;
  // The outputs synchronize() copies from pinned staging to the caller's views.
  TensorView pending[backends::cuda::kMaxIo];
  size_t pending_count = 0;
  bool pending_step = false;
};

namespace backends::cuda {
namespace {

struct Resolver {
  DelegateHandle* h;
  ErrorContext* ctx;
};

Status resolve(void* user, uint32_t v, const fb::Tensor& tensor, TensorView* view, ErrorContext* ctx) {
  Resolver& r = *static_cast<Resolver*>(user);
  DelegateHandle& h = *r.h;
  const GraphView& graph = h.graph;
  const uint64_t bytes = align_up(tensor.nbytes());
  view->domain = MemoryDomain::Device;
  switch (slot_of(graph, v)) {
    case Slot::None:
      view->data = nullptr;
      return Status::ok();
    case Slot::Value:
      view->data = h.d_values + h.offsets[v];
      return Status::ok();
    case Slot::Constant: {
      view->data = h.d_constants + h.constants_used;
      const cudaError_t err = cudaMemcpy(view->data, graph.constant_data(v), static_cast<size_t>(tensor.nbytes()),
                                         cudaMemcpyHostToDevice);
      if (err != cudaSuccess) return cuda_fail(ctx, err, "uploading a constant");
      h.constants_used += bytes;
      return Status::ok();
    }
    case Slot::Io:
      view->data = h.d_io + h.io_used;
      h.io_used += bytes;
      return Status::ok();
    case Slot::State: {
      const char* name = tensor.storage_as_StateStorage()->name()->c_str();
      for (size_t i = 0; i < h.states.size(); ++i) {
        if (std::strcmp(h.states[i].spec.name, name) != 0) continue;
        if (h.states[i].buffer == nullptr) {
          return EMBER_FAIL(ctx, Error::Internal, "cuda: state '%s' is not in device memory", name);
        }
        view->data = h.states[i].buffer->device;
        for (int d = 0; d < view->rank && d < h.states[i].spec.rank; ++d) view->dims[d] = h.states[i].spec.dims[d];
        return Status::ok();
      }
      return EMBER_FAIL(ctx, Error::Internal, "cuda: value %u names state '%s', which init() was not given", v, name);
    }
  }
  return Status::ok();
}

// Dims of graph input i for bucket b (its symbolic dims at the bucket's T, S, S+1; others at max).
void bucket_dims(const DelegateHandle& h, uint32_t i, uint32_t b, TensorView* out) {
  const fb::Graph& g = h.graph.graph();
  const fb::Tensor& t = h.graph.value(h.inputs[i].value);
  tensor_shape(t, out);
  const Buckets& bk = h.layout.buckets;
  for (int d = 0; d < out->rank; ++d) {
    const uint16_t sym = dim_sym(t, static_cast<uint32_t>(d));
    if (sym == 0) continue;
    if (bk.llm && sym == bk.sym_t) out->dims[d] = bk.t[b];
    else if (bk.llm && sym == bk.sym_s) out->dims[d] = bk.s[b];
    else if (bk.llm && sym == bk.sym_s1) out->dims[d] = bk.s[b] + 1;
    else out->dims[d] = symbol_max(g, sym);
  }
}

Status check_lc(DelegateHandle& h, ErrorContext* ctx, const char* when) {
  if (!h.lc.failed) return Status::ok();
  return EMBER_FAIL(ctx, Error::BackendFailed, "cuda: %s: %s", when, h.lc.message);
}

Status set_bucket_dims(DelegateHandle& h, uint32_t b, ErrorContext* ctx) {
  for (uint32_t i = 0; i < h.input_count; ++i) {
    TensorView dims;
    bucket_dims(h, i, b, &dims);
    EMBER_RETURN_IF_ERROR(h.runner.set_input_dims(i, Span<const int64_t>(dims.dims, dims.rank), ctx));
    TensorView bound = h.runner.value(h.inputs[i].value);
    bound.rank = dims.rank;
    for (int d = 0; d < dims.rank; ++d) bound.dims[d] = dims.dims[d];
    h.runner.bind_value(h.inputs[i].value, bound);
  }
  return Status::ok();
}

// Captures bucket b's launch sequence into a CUDA graph.
Status capture(DelegateHandle& h, uint32_t b, ErrorContext* ctx) {
  EMBER_RETURN_IF_ERROR(set_bucket_dims(h, b, ctx));
  cudaError_t err = cudaStreamBeginCapture(h.stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) return cuda_fail(ctx, err, "cudaStreamBeginCapture");
  KernelContext kctx;
  kctx.device = &h.lc;
  kctx.scratch = Span<uint8_t>(h.d_scratch, static_cast<size_t>(h.layout.scratch_bytes));
  const Status run = h.runner.run(kctx, nullptr, ctx);
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(h.stream, &graph);
  if (!run.is_ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return run;
  }
  if (h.lc.failed) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return EMBER_FAIL(ctx, Error::BackendFailed, "cuda: capturing bucket T=%lld S=%lld: %s",
                      static_cast<long long>(h.layout.buckets.t[b]), static_cast<long long>(h.layout.buckets.s[b]),
                      h.lc.message);
  }
  if (err != cudaSuccess) return cuda_fail(ctx, err, "cudaStreamEndCapture");
  err = cudaGraphInstantiate(&h.exec[b], graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) return cuda_fail(ctx, err, "cudaGraphInstantiate");
  h.captured = b + 1;
  return Status::ok();
}

class CudaBackend final : public Backend {
 public:
  bool is_available(const RuntimeContext&) const override { return device_info().present; }
  const char* unavailable_reason(const RuntimeContext&) const override { return device_info().why; }

  bool supports(const RuntimeContext&, const KernelKey& key) const override { return registry().find(key) != nullptr; }

  bool owns_state() const override { return true; }

  MemoryRequirements state_requirements(const StateSpec& spec) const override {
    MemoryRequirements req;
    req.add_part("state record", MemoryDomain::Host, sizeof(StateBuffer));
    req.add_part("state", MemoryDomain::Device, align_up(spec.nbytes));
    return req;
  }

  Result<StateBuffer*> create_state(BackendLoadContext& ctx, const StateSpec& spec) const override {
    EMBER_RETURN_IF_ERROR(check_device(ctx.error));
    DeviceAllocator* allocator = ctx.runtime->device_allocator;
    AllocationRequest host = request_of(MemoryDomain::Host, AllocationRequest::Purpose::Other, sizeof(StateBuffer), spec.name);
    void* storage = allocate_host_memory(allocator, host);
    if (storage == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "cuda: state record for '%s'", spec.name);
    StateBuffer* state = new (storage) StateBuffer();
    state->allocator = allocator;
    state->request = request_of(MemoryDomain::Device, AllocationRequest::Purpose::State, align_up(spec.nbytes), spec.name);
    Status status;
    char what[160];
    std::snprintf(what, sizeof(what), "state '%s'", spec.name);
    state->device = device_alloc(allocator, state->request, &state->from_app, ctx.error, what, &status);
    if (state->device == nullptr && state->request.bytes > 0) {
      destroy_state(state);
      return status;
    }
    if (state->device != nullptr) {
      const cudaError_t err = cudaMemset(state->device, 0, state->request.bytes);
      if (err != cudaSuccess) {
        destroy_state(state);
        return cuda_fail(ctx.error, err, "zeroing a state");
      }
    }
    return state;
  }

  void destroy_state(StateBuffer* state) const noexcept override {
    if (state == nullptr) return;
    device_free(state->allocator, state->request, state->device, state->from_app);
    DeviceAllocator* allocator = state->allocator;
    state->~StateBuffer();
    free_host_memory(allocator, request_of(MemoryDomain::Host, AllocationRequest::Purpose::Other, sizeof(StateBuffer), ""),
                     state);
  }

  Result<MemoryRequirements> plan_memory(BackendLoadContext& ctx, const GraphView& graph,
                                         Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check(ctx, graph));
    Layout l;
    EMBER_RETURN_IF_ERROR(plan(graph, specs, &l, ctx.error));
    return requirements(l, sizeof(DelegateHandle));
  }

  Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                               Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check(ctx, graph));
    Layout l;  // before the device check: a bad compile spec is reported the same with or without a GPU
    EMBER_RETURN_IF_ERROR(plan(graph, specs, &l, ctx.error));
    EMBER_RETURN_IF_ERROR(check_device(ctx.error));
    DeviceAllocator* allocator = ctx.runtime->device_allocator;
    const AllocationRequest handle_request =
        request_of(MemoryDomain::Host, AllocationRequest::Purpose::Other, sizeof(DelegateHandle), "");
    void* storage = allocate_host_memory(allocator, handle_request);
    if (storage == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "cuda: delegate record");
    DelegateHandle* h = new (storage) DelegateHandle();
    h->allocator = allocator;
    h->layout = l;
    h->graph = graph;
    h->states = ctx.states;
    Status status = setup(ctx, *h);
    if (!status.is_ok()) {
      destroy(h);
      return status;
    }
    return h;
  }

  Status execute(BackendExecuteContext& ctx, DelegateHandle* h, Span<const TensorView> inputs,
                 Span<TensorView> outputs) const override {
    if (h->pending_step) return EMBER_FAIL(ctx.error, Error::InvalidState, "cuda: execute() again before synchronize()");
    if (inputs.size() != h->input_count || outputs.size() != h->output_count) {
      return EMBER_FAIL(ctx.error, Error::InvalidArgument, "cuda: %zu inputs / %zu outputs for a graph of %u / %u",
                        inputs.size(), outputs.size(), h->input_count, h->output_count);
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].domain == MemoryDomain::Device) {
        return EMBER_FAIL(ctx.error, Error::InvalidArgument, "cuda: input %zu is device memory of another backend", k);
      }
    }
    const Buckets& bk = h->layout.buckets;
    uint32_t bucket = 0;
    if (bk.llm) {
      EMBER_RETURN_IF_ERROR(pick_bucket(ctx, *h, inputs, &bucket));
      stage_step_inputs(*h, inputs, bucket);
    } else {
      for (size_t k = 0; k < inputs.size(); ++k) {
        if (inputs[k].data != nullptr) std::memcpy(h->inputs[k].pinned, inputs[k].data, static_cast<size_t>(inputs[k].nbytes()));
      }
    }
    cudaError_t err = cudaSuccess;
    for (size_t k = 0; k < inputs.size() && err == cudaSuccess; ++k) {
      uint64_t bytes = inputs[k].nbytes();
      if (bk.llm) {
        TensorView dims;
        bucket_dims(*h, static_cast<uint32_t>(k), bucket, &dims);
        bytes = dims.nbytes();
      }
      if (bytes > 0) {
        err = cudaMemcpyAsync(h->inputs[k].device, h->inputs[k].pinned, bytes, cudaMemcpyHostToDevice, h->stream);
      }
    }
    if (err == cudaSuccess) err = cudaMemsetAsync(h->d_status, 0, sizeof(uint32_t), h->stream);
    if (err != cudaSuccess) return cuda_fail(ctx.error, err, "copying the inputs");
    if (bk.eager) {
      // Symbolic shapes that are not an LLM step: launched now at the actual shapes (not captured).
      for (size_t k = 0; k < inputs.size(); ++k) {
        EMBER_RETURN_IF_ERROR(h->runner.set_input_dims(static_cast<uint32_t>(k), inputs[k].sizes(), ctx.error));
        TensorView bound = h->runner.value(h->inputs[k].value);
        bound.rank = inputs[k].rank;
        for (int d = 0; d < inputs[k].rank; ++d) bound.dims[d] = inputs[k].dims[d];
        h->runner.bind_value(h->inputs[k].value, bound);
      }
      KernelContext kctx;
      kctx.device = &h->lc;
      kctx.scratch = Span<uint8_t>(h->d_scratch, static_cast<size_t>(h->layout.scratch_bytes));
      EMBER_RETURN_IF_ERROR(h->runner.run(kctx, ctx.abort, ctx.error));
      EMBER_RETURN_IF_ERROR(check_lc(*h, ctx.error, "launch"));
    } else {
      err = cudaGraphLaunch(h->exec[bucket], h->stream);
      if (err != cudaSuccess) return cuda_fail(ctx.error, err, "cudaGraphLaunch");
    }
    // Output dims: symbols at their actual values (from the inputs), static dims as declared.
    for (size_t k = 0; k < outputs.size(); ++k) {
      const fb::Tensor& t = h->graph.value(h->outputs[k].value);
      if (bk.eager) {
        const TensorView& done = h->runner.value(h->outputs[k].value);
        outputs[k].rank = done.rank;
        for (int d = 0; d < done.rank; ++d) outputs[k].dims[d] = done.dims[d];
      } else {
        for (int d = 0; d < outputs[k].rank; ++d) {
          const uint16_t sym = dim_sym(t, static_cast<uint32_t>(d));
          if (sym == 0) continue;
          outputs[k].dims[d] = actual_symbol(*h, inputs, sym);
        }
      }
      const uint64_t bytes = outputs[k].nbytes();
      if (bytes > 0 && outputs[k].data != nullptr) {
        // Row-major [S, ...] outputs: the first S rows of the bucket's are the live ones.
        err = cudaMemcpyAsync(h->outputs[k].pinned, h->outputs[k].device, bytes, cudaMemcpyDeviceToHost, h->stream);
        if (err != cudaSuccess) return cuda_fail(ctx.error, err, "copying an output back");
      }
      h->pending[k] = outputs[k];
    }
    err = cudaMemcpyAsync(h->h_status, h->d_status, sizeof(uint32_t), cudaMemcpyDeviceToHost, h->stream);
    if (err != cudaSuccess) return cuda_fail(ctx.error, err, "copying the status word back");
    h->pending_count = outputs.size();
    h->pending_step = true;
    return Status::ok();
  }

  Status synchronize(BackendExecuteContext& ctx, DelegateHandle* h) const override {
    if (!h->pending_step) return Status::ok();
    h->pending_step = false;
    const cudaError_t err = cudaStreamSynchronize(h->stream);
    if (err != cudaSuccess) return cuda_fail(ctx.error, err, "running the step");
    const uint32_t word = *h->h_status;
    if (word != 0) {
      const OpCode op = static_cast<OpCode>(word >> 8);
      return EMBER_FAIL(ctx.error, Error::InvalidArgument, "cuda: %s: %s", to_string(op),
                        to_string(static_cast<DeviceError>(word & 0xFF)));
    }
    for (size_t k = 0; k < h->pending_count; ++k) {
      if (h->pending[k].data != nullptr) {
        std::memcpy(h->pending[k].data, h->outputs[k].pinned, static_cast<size_t>(h->pending[k].nbytes()));
      }
    }
    h->pending_count = 0;
    return Status::ok();
  }

  // The layout init() allocated in one piece each (device, pinned, host), and the graphs it really
  // captured: a plan that promised more buckets than init() captured fails plan == taken.
  MemoryRequirements memory_requirements(const DelegateHandle* h) const override {
    MemoryRequirements req = requirements(h->layout, sizeof(DelegateHandle));
    req.graph_count = h->captured;
    return req;
  }

  void destroy(DelegateHandle* h) const noexcept override {
    if (h == nullptr) return;
    if (h->stream != nullptr) cudaStreamSynchronize(h->stream);
    for (uint32_t b = 0; b < kMaxBuckets; ++b) {
      if (h->exec[b] != nullptr) cudaGraphExecDestroy(h->exec[b]);
    }
    if (h->lc.gemm != nullptr) gemm_cache_destroy(h->lc.gemm);
    if (h->lt != nullptr) cublasLtDestroy(h->lt);
    if (h->stream != nullptr) cudaStreamDestroy(h->stream);
    DeviceAllocator* allocator = h->allocator;
    device_free(allocator, device_request(h->layout), h->device, h->device_from_app);
    if (h->pinned != nullptr) {
      if (h->pinned_from_app) {
        if (h->pinned_registered) cudaHostUnregister(h->pinned);
        allocator->deallocate(pinned_request(h->layout), h->pinned);
      } else {
        cudaFreeHost(h->pinned);
      }
    }
    if (h->host != nullptr) {
      free_host_memory(allocator, request_of(MemoryDomain::Host, AllocationRequest::Purpose::Other, h->layout.host_bytes, ""),
                       h->host);
    }
    h->~DelegateHandle();
    free_host_memory(allocator, request_of(MemoryDomain::Host, AllocationRequest::Purpose::Other, sizeof(DelegateHandle), ""),
                     h);
  }

 private:
  static AllocationRequest device_request(const Layout& l) {
    return request_of(MemoryDomain::Device, AllocationRequest::Purpose::Activations, l.device_bytes, "delegate");
  }
  static AllocationRequest pinned_request(const Layout& l) {
    return request_of(MemoryDomain::PinnedHost, AllocationRequest::Purpose::IO, l.pinned_bytes, "delegate");
  }

  static Status check_device(ErrorContext* ctx) {
    const DeviceInfo& d = device_info();
    if (!d.present) return EMBER_FAIL(ctx, Error::BackendUnavailable, "cuda: %s", d.why);
    return Status::ok();
  }

  // The compile specs are checked by plan() (plan_buckets: the bucket lists).
  static Status check(BackendLoadContext& ctx, const GraphView& graph) {
    if (graph.input_count() > kMaxIo || graph.output_count() > kMaxIo) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "cuda: more than %zu inputs or outputs", kMaxIo);
    }
    for (uint32_t i = 0; i < graph.instruction_count(); ++i) {
      const fb::Instruction& ins = *graph.graph().instructions()->Get(i);
      if (ins.args_type() != fb::InstructionArgs::KernelCall) {
        return EMBER_FAIL(ctx.error, Error::NotSupported,
                          "cuda: instruction %u is a %s; the CUDA backend runs kernel calls only", i,
                          fb::EnumNameInstructionArgs(ins.args_type()));
      }
    }
    return Status::ok();
  }

  // Everything init() allocates and binds; on failure the caller destroys the handle.
  Status setup(BackendInitContext& ctx, DelegateHandle& h) const {
    const Layout& l = h.layout;
    const GraphView& graph = h.graph;
    DeviceAllocator* allocator = h.allocator;
    h.host = static_cast<uint8_t*>(allocate_host_memory(
        allocator, request_of(MemoryDomain::Host, AllocationRequest::Purpose::Other, l.host_bytes, "")));
    if (h.host == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "cuda: %llu bytes of host memory",
                                             static_cast<unsigned long long>(l.host_bytes));
    h.offsets = reinterpret_cast<uint64_t*>(h.host + l.runner_bytes);
    // The fused W8A8 groups (plan.h FusedGroup) and where their buffers are (host_bytes has room).
    uint8_t* fused_mem = h.host + l.runner_bytes + align_up(graph.value_count() * sizeof(uint64_t), 64);
    FusedGroup* groups = reinterpret_cast<FusedGroup*>(fused_mem);
    uint64_t* group_offsets = reinterpret_cast<uint64_t*>(fused_mem + l.fused_count * sizeof(FusedGroup));
    if (l.fused_count > 0 && plan_fused(graph, groups) != l.fused_count) {
      return EMBER_FAIL(ctx.error, Error::Internal, "cuda: the fusion plan changed between plan() and init()");
    }
    plan_values(graph, h.offsets, groups, l.fused_count, group_offsets);
    Status status;
    h.device = static_cast<uint8_t*>(device_alloc(allocator, device_request(l), &h.device_from_app, ctx.error,
                                                  "the delegate (values, constants, I/O, scratch)", &status));
    if (h.device == nullptr) return status;
    // Pinned staging: the app's PinnedHost memory (registered with CUDA) or cudaHostAlloc.
    const AllocationRequest pinned = pinned_request(l);
    if (allocator != nullptr && allocator->serves(pinned)) {
      h.pinned_from_app = true;
      h.pinned = static_cast<uint8_t*>(allocator->allocate(pinned));
      if (h.pinned == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "cuda: pinned staging from the app");
      const cudaError_t err = cudaHostRegister(h.pinned, l.pinned_bytes, cudaHostRegisterDefault);
      if (err != cudaSuccess) return cuda_fail(ctx.error, err, "cudaHostRegister of the app's pinned staging");
      h.pinned_registered = true;
    } else {
      void* p = nullptr;
      const cudaError_t err = cudaHostAlloc(&p, l.pinned_bytes, cudaHostAllocDefault);
      if (err != cudaSuccess) return cuda_fail(ctx.error, err, "cudaHostAlloc of the I/O staging");
      h.pinned = static_cast<uint8_t*>(p);
    }
    h.d_values = h.device;
    h.d_constants = h.d_values + l.value_bytes;
    h.d_io = h.d_constants + l.constant_bytes;
    h.d_scratch = h.d_io + l.io_bytes;
    uint8_t* workspace = h.d_scratch + l.scratch_bytes;
    h.d_status = reinterpret_cast<uint32_t*>(workspace + l.workspace_bytes);
    h.h_status = reinterpret_cast<uint32_t*>(h.pinned + l.io_bytes);
    cudaError_t err = cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) return cuda_fail(ctx.error, err, "cudaStreamCreate");
    if (cublasLtCreate(&h.lt) != CUBLAS_STATUS_SUCCESS) {
      return EMBER_FAIL(ctx.error, Error::BackendFailed, "cuda: cublasLtCreate failed");
    }
    h.lc.stream = h.stream;
    h.lc.lt = h.lt;
    h.lc.lt_workspace = l.workspace_bytes > 0 ? workspace : nullptr;
    h.lc.lt_workspace_bytes = l.workspace_bytes;
    h.lc.error_word = h.d_status;
    h.lc.sm_count = device_info().sm_count;
    // EMBER_CUDA_NUMERICS=exact: every linear in f32 from exactly decoded weights (tests; slower at
    // large batches); fast (default): bf16 tensor cores beyond the GEMV path (README "Numerics").
    if (const char* numerics = std::getenv("EMBER_CUDA_NUMERICS")) {
      if (std::strcmp(numerics, "exact") == 0) {
        h.lc.exact = true;
      } else if (std::strcmp(numerics, "fast") != 0) {
        return EMBER_FAIL(ctx.error, Error::InvalidArgument, "cuda: EMBER_CUDA_NUMERICS='%s': expected exact or fast",
                          numerics);
      }
    }
    h.lc.gemm = gemm_cache_create();
    if (h.lc.gemm == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "cuda: GEMM plan cache");
    if (l.fused_count > 0) {  // one FusedQuant per instruction: the producer's and its linears' buffer
      const uint32_t instructions = graph.instruction_count();
      FusedQuant* table = reinterpret_cast<FusedQuant*>(
          fused_mem + align_up(l.fused_count * (sizeof(FusedGroup) + sizeof(uint64_t)), 64));
      for (uint32_t i = 0; i < instructions; ++i) new (&table[i]) FusedQuant();
      for (uint32_t k = 0; k < l.fused_count; ++k) {
        const FusedGroup& grp = groups[k];
        uint8_t* base = h.d_values + group_offsets[k];
        const FusedQuant produce{FusedRole::Produce, reinterpret_cast<float*>(base), base + grp.scales_bytes};
        table[grp.producer] = produce;
        for (uint32_t i = grp.producer + 1; i <= grp.last_use; ++i) {
          if (reads_fused(graph, i, grp)) table[i] = FusedQuant{FusedRole::Consume, produce.sx, produce.data};
        }
      }
      h.lc.fused = table;
      h.lc.fused_count = instructions;
    }

    // Bind: values to the planned arena, constants uploaded, I/O to fixed staging slots, states.
    BumpAllocator runner_memory(Span<uint8_t>(h.host, l.runner_bytes));
    Resolver resolver{&h, ctx.error};
    h.runner.set_device_memory(true);
    EMBER_RETURN_IF_ERROR(h.runner.bind(graph, &registry(), nullptr, runner_memory, resolve, &resolver, ctx.error));
    const fb::Graph& g = graph.graph();
    h.input_count = graph.input_count();
    h.output_count = graph.output_count();
    for (uint32_t i = 0; i < h.input_count; ++i) {
      DelegateHandle::Io& io = h.inputs[i];
      io.value = graph.input_value(i);
      io.device = static_cast<uint8_t*>(h.runner.value(io.value).data);
      io.pinned = h.pinned + (io.device - h.d_io);
      io.pad = pad_of(g.inputs()->Get(i)->name()->c_str());
    }
    for (uint32_t i = 0; i < h.output_count; ++i) {
      DelegateHandle::Io& io = h.outputs[i];
      io.value = graph.output_value(i);
      io.device = static_cast<uint8_t*>(h.runner.value(io.value).data);
      io.pinned = h.pinned + (io.device - h.d_io);
    }
    // Constants are uploaded (synchronous copies): the program's mapped pages are no longer needed
    // by this delegate.
    if (!l.buckets.eager) {
      for (uint32_t b = 0; b < l.buckets.count; ++b) EMBER_RETURN_IF_ERROR(capture(h, b, ctx.error));
      // A warm-up replay of the smallest bucket with every row padding: every module is loaded and
      // every kernel has run once before the first step.
      if (l.buckets.llm) {
        for (uint32_t i = 0; i < h.input_count; ++i) {
          TensorView dims;
          bucket_dims(h, i, 0, &dims);
          fill_padding(h.inputs[i], dims, 0, 0);
          err = cudaMemcpyAsync(h.inputs[i].device, h.inputs[i].pinned, dims.nbytes(), cudaMemcpyHostToDevice, h.stream);
          if (err != cudaSuccess) return cuda_fail(ctx.error, err, "warm-up copy");
        }
        err = cudaMemsetAsync(h.d_status, 0, sizeof(uint32_t), h.stream);
        if (err == cudaSuccess) err = cudaGraphLaunch(h.exec[0], h.stream);
        if (err == cudaSuccess) err = cudaStreamSynchronize(h.stream);
        if (err != cudaSuccess) return cuda_fail(ctx.error, err, "warm-up step");
      }
    }
    err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return cuda_fail(ctx.error, err, "init");
    // The bytes by purpose (runner --verbose), formatted as runner --info prints them.
    const MemoryRequirements taken = memory_requirements(&h);
    char device_line[512], pinned_line[256];
    EMBER_LOG(Info, "cuda: %s delegate %d on %s: %s; %s; %u CUDA graphs (%s; driver memory not included)",
              ctx.method_name, ctx.delegate_index == BackendLoadContext::kWholeMethod ? -1 : static_cast<int>(ctx.delegate_index),
              device_info().name, format_memory(taken, MemoryDomain::Device, device_line, sizeof(device_line)),
              format_memory(taken, MemoryDomain::PinnedHost, pinned_line, sizeof(pinned_line)), taken.graph_count,
              l.buckets.llm ? "one per (T, S) bucket" : l.buckets.eager ? "none: launched per call" : "static shapes");
    return Status::ok();
  }

  // Live values: rows [0, rows) of the input's first dim and columns [0, cols) of its second (rank 2;
  // cols = 0: all). Everything else of the bucket's shape gets the padding value.
  static void fill_padding(const DelegateHandle::Io& io, const TensorView& bucket, int64_t rows, int64_t cols) {
    if (io.pad == Pad::Unread) return;
    const int64_t inner = bucket.rank >= 2 ? bucket.dims[1] : 1;
    const int64_t total = bucket.rank == 0 ? 1 : bucket.dims[0] * inner;
    const int64_t live_rows = std::min(rows, bucket.rank == 0 ? 1 : bucket.dims[0]);
    if (io.pad == Pad::QueryStart) {
      int32_t* p = reinterpret_cast<int32_t*>(io.pinned);
      const int32_t last = live_rows > 0 ? p[live_rows - 1] : 0;
      for (int64_t r = live_rows; r < total; ++r) p[r] = last;
      return;
    }
    (void)cols;
    for (int64_t e = live_rows * inner; e < total; ++e) {
      if (bucket.dtype == ScalarType::F32) {
        reinterpret_cast<float*>(io.pinned)[e] = io.pad == Pad::One ? 1.0f : 0.0f;
      } else {
        reinterpret_cast<int32_t*>(io.pinned)[e] = io.pad == Pad::MinusOne ? -1 : 0;
      }
    }
  }

  static int64_t actual_symbol(const DelegateHandle& h, Span<const TensorView> inputs, uint16_t sym) {
    const fb::Graph& g = h.graph.graph();
    for (uint32_t i = 0; i < h.input_count; ++i) {
      const fb::Tensor& t = h.graph.value(h.inputs[i].value);
      for (int d = 0; d < inputs[i].rank; ++d) {
        if (dim_sym(t, static_cast<uint32_t>(d)) == sym) return inputs[i].dims[d];
      }
    }
    return symbol_max(g, sym);
  }

  static Status pick_bucket(BackendExecuteContext& ctx, const DelegateHandle& h, Span<const TensorView> inputs,
                            uint32_t* bucket) {
    const Buckets& bk = h.layout.buckets;
    const int64_t t = actual_symbol(h, inputs, bk.sym_t), s = actual_symbol(h, inputs, bk.sym_s);
    const int64_t s1 = actual_symbol(h, inputs, bk.sym_s1);
    if (s1 != s + 1) {
      return EMBER_FAIL(ctx.error, Error::InvalidArgument, "cuda: query_start has %lld entries for %lld sequences",
                        static_cast<long long>(s1), static_cast<long long>(s));
    }
    for (uint32_t b = 0; b < bk.count; ++b) {
      if (bk.t[b] >= t && bk.s[b] >= s) {
        *bucket = b;
        return Status::ok();
      }
    }
    return EMBER_FAIL(ctx.error, Error::InvalidArgument, "cuda: T=%lld S=%lld beyond the largest bucket",
                      static_cast<long long>(t), static_cast<long long>(s));
  }

  // Copies the live inputs into pinned staging laid out at the bucket's shapes, with docs/DESIGN.md §6's
  // padding in the rows beyond the live ones.
  static void stage_step_inputs(DelegateHandle& h, Span<const TensorView> inputs, uint32_t bucket) {
    for (uint32_t i = 0; i < h.input_count; ++i) {
      const TensorView& in = inputs[i];
      TensorView dims;
      bucket_dims(h, i, bucket, &dims);
      const DelegateHandle::Io& io = h.inputs[i];
      if (in.data != nullptr) {
        if (in.rank == 2 && in.dims[1] != dims.dims[1]) {  // history: re-stride the live rows
          const size_t elem = static_cast<size_t>(nbytes_of(in.dtype, 1));
          for (int64_t r = 0; r < in.dims[0]; ++r) {
            std::memcpy(io.pinned + r * dims.dims[1] * elem, static_cast<const uint8_t*>(in.data) + r * in.dims[1] * elem,
                        static_cast<size_t>(in.dims[1]) * elem);
          }
        } else {
          std::memcpy(io.pinned, in.data, static_cast<size_t>(in.nbytes()));
        }
      }
      fill_padding(io, dims, in.rank == 0 ? 1 : in.dims[0], in.rank >= 2 ? in.dims[1] : 0);
    }
  }
};

}  // namespace

Status register_backend(BackendRegistry& registry) {
  static const CudaBackend backend;
  return registry.add(kBackendId, backend);
}

}  // namespace backends::cuda
}  // namespace ember
