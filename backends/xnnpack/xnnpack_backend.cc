#include <pthreadpool.h>
#include <xnnpack.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "backends/xnnpack/register.h"
#include "backends/xnnpack/subgraph.h"
#include "runtime/core/thread_pool.h"

namespace ember {

class DelegateHandle {
 public:
  DeviceAllocator* allocator = nullptr;  // where the host memory came from (RuntimeContext's, or null)
  xnn_runtime_t runtime = nullptr;
  pthreadpool_t pool = nullptr;          // what XNNPACK runs on: the app's (shared) or own_pool
  pthreadpool_t own_pool = nullptr;      // created here when the app's pool is not a PthreadPool
  uint8_t* block = nullptr;              // staging slots, then packed weights
  uint64_t block_bytes = 0;
  backends::xnnpack::Translation t;      // the I/O slots and the sizes the plan found
};

namespace backends::xnnpack {
namespace {

AllocationRequest host_request(uint64_t bytes, AllocationRequest::Purpose purpose) {
  AllocationRequest request;
  request.domain = MemoryDomain::Host;
  request.purpose = purpose;
  request.bytes = bytes;
  request.owner = kBackendId;
  return request;
}

MemoryRequirements requirements(const Translation& t) {
  MemoryRequirements r;
  r.add_part("handle", MemoryDomain::Host, sizeof(DelegateHandle));
  r.add_part("io staging", MemoryDomain::Host, t.staging_bytes);
  r.add_part("weights", MemoryDomain::Host, t.weights_bytes);
  return r;
}

// [N, C, H, W] <-> [N, H, W, C] at the delegate's edges.
void nchw_to_nhwc(const float* src, float* dst, const int64_t* d) {
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  for (int64_t b = 0; b < n; ++b) {
    const float* s = src + b * c * hw;
    float* o = dst + b * c * hw;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < hw; ++i) o[i * c + ch] = s[ch * hw + i];
  }
}

void nhwc_to_nchw(const float* src, float* dst, const int64_t* d) {
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  for (int64_t b = 0; b < n; ++b) {
    const float* s = src + b * c * hw;
    float* o = dst + b * c * hw;
    for (int64_t i = 0; i < hw; ++i)
      for (int64_t ch = 0; ch < c; ++ch) o[ch * hw + i] = s[i * c + ch];
  }
}

bool same_dims(const TensorView& v, const IoSlot& slot) {
  if (v.rank != slot.rank) return false;
  for (int d = 0; d < v.rank; ++d) {
    if (v.dims[d] != slot.dims[d]) return false;
  }
  return true;
}

class XnnpackBackend final : public Backend {
 public:
  bool is_available(const RuntimeContext&) const override { return xnn_initialize(nullptr) == xnn_status_success; }

  const char* unavailable_reason(const RuntimeContext&) const override {
    const xnn_status s = xnn_initialize(nullptr);
    return s == xnn_status_success ? "" : status_name(s);  // unsupported_hardware: a CPU without SSE2 / NEON
  }

  // The graph as a whole: translate()'s checking pass (no subgraph, no allocation) refuses the
  // attributes and shapes a key cannot say (a dilated average pool, a flatten of an image, a symbolic
  // dim); Program::load then gives the delegate to the next listed backend or the portable kernels.
  bool accepts(const RuntimeContext&, const GraphView& graph, char* why, size_t why_size) const override {
    Translation t;
    ErrorContext error;
    if (translate(graph, t, &error).is_ok()) return true;
    std::snprintf(why, why_size, "%s", error.message);
    return false;
  }

  // The ops translate() takes, f32 only, contiguous, unquantized. Attributes and shapes a key cannot
  // say are accepts()'s (and init() refuses them too, with NotSupported, when called directly).
  bool supports(const RuntimeContext&, const KernelKey& key) const override {
    if (key.dim_order != DimOrder::Contiguous || key.quant != QuantLayout::None || key.variant != 0) return false;
    int args = 0, optional = -1;  // the argument count, and the index of an optional input (bias)
    switch (key.op) {
      case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div: args = 3; break;
      case OpCode::Relu: case OpCode::Clip: case OpCode::Sigmoid: case OpCode::HardSwish:
      case OpCode::MaxPool2d: case OpCode::AvgPool2d: case OpCode::GlobalAvgPool2d:
      case OpCode::Softmax: case OpCode::Reshape: args = 2; break;
      case OpCode::Conv2d: case OpCode::Linear:
        args = key.arg_count == 3 ? 3 : 4;  // bias absent from the key, or present / marked absent
        optional = args == 4 ? 2 : -1;
        break;
      default: return false;
    }
    if (key.arg_count != args) return false;
    for (int i = 0; i < args; ++i) {
      if (key.dtypes[i] != ScalarType::F32 && !(i == optional && key.dtypes[i] == ScalarType::Invalid)) return false;
    }
    return true;
  }

  Result<MemoryRequirements> plan_memory(BackendLoadContext& ctx, const GraphView& graph,
                                         Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check_specs(ctx, specs));
    Translation t;
    EMBER_RETURN_IF_ERROR(translate(graph, t, ctx.error));
    return requirements(t);
  }

  Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                               Span<const CompileSpec> specs) const override {
    EMBER_RETURN_IF_ERROR(check_specs(ctx, specs));
    xnn_status s = xnn_initialize(nullptr);
    if (s != xnn_status_success) return xnn_failure(ctx.error, s, "xnn_initialize", "init");
    DeviceAllocator* allocator = ctx.runtime->device_allocator;
    void* storage = allocate_host_memory(allocator, host_request(sizeof(DelegateHandle), AllocationRequest::Purpose::Other));
    if (storage == nullptr) return EMBER_FAIL(ctx.error, Error::OutOfMemory, "xnnpack: delegate record");
    DelegateHandle* h = new (storage) DelegateHandle();
    h->allocator = allocator;
    Status status = build(ctx, graph, *h);
    if (!status.is_ok()) {
      destroy(h);
      return status;
    }
    return h;
  }

  // Synchronous: copies the inputs into the fixed slots (NCHW -> NHWC for images), runs the XNNPACK
  // runtime on the handle's pthreadpool, and copies the outputs back. No allocation.
  Status execute(BackendExecuteContext& ctx, DelegateHandle* h, Span<const TensorView> inputs,
                 Span<TensorView> outputs) const override {
    const Translation& t = h->t;
    if (inputs.size() != t.input_count || outputs.size() != t.output_count) {
      return EMBER_FAIL(ctx.error, Error::InvalidArgument, "xnnpack: %zu inputs and %zu outputs (the graph has %u, %u)",
                        inputs.size(), outputs.size(), t.input_count, t.output_count);
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      const TensorView& in = inputs[k];
      const IoSlot& slot = t.inputs[k];
      if (in.dtype != ScalarType::F32 || !same_dims(in, slot) || in.domain == MemoryDomain::Device) {
        char got[96], want[96];
        return EMBER_FAIL(ctx.error, Error::InvalidArgument,
                          "xnnpack: input %zu is %s %s in %s memory; the delegate was built for f32 %s in host memory", k,
                          to_string(in.dtype), format_dims(in.dims, in.rank, got, sizeof(got)),
                          in.domain == MemoryDomain::Device ? "device" : "host",
                          format_dims(slot.dims, slot.rank, want, sizeof(want)));
      }
      if (slot.nhwc) {
        nchw_to_nhwc(in.data_as<const float>(), slot.staging, slot.dims);
      } else {
        std::memcpy(slot.staging, in.data, static_cast<size_t>(slot.bytes));
      }
    }
    if (ctx.abort != nullptr && ctx.abort->load(std::memory_order_relaxed)) {
      return EMBER_FAIL(ctx.error, Error::Cancelled, "xnnpack: aborted");
    }
    const xnn_status s = xnn_invoke_runtime(h->runtime);
    if (s != xnn_status_success) return xnn_failure(ctx.error, s, "xnn_invoke_runtime", "execute");
    for (size_t k = 0; k < outputs.size(); ++k) {
      TensorView& out = outputs[k];
      const IoSlot& slot = t.outputs[k];
      out.rank = slot.rank;
      for (int d = 0; d < slot.rank; ++d) out.dims[d] = slot.dims[d];
      if (slot.nhwc) {
        nhwc_to_nchw(slot.staging, out.data_as<float>(), slot.dims);
      } else {
        std::memcpy(out.data, slot.staging, static_cast<size_t>(slot.bytes));
      }
    }
    return Status::ok();
  }

  MemoryRequirements memory_requirements(const DelegateHandle* h) const override { return requirements(h->t); }

  void destroy(DelegateHandle* h) const noexcept override {
    if (h == nullptr) return;
    if (h->runtime != nullptr) xnn_delete_runtime(h->runtime);
    if (h->own_pool != nullptr) pthreadpool_destroy(h->own_pool);
    DeviceAllocator* allocator = h->allocator;
    if (h->block != nullptr) {
      free_host_memory(allocator, host_request(h->block_bytes, AllocationRequest::Purpose::Constants), h->block);
    }
    h->~DelegateHandle();
    free_host_memory(allocator, host_request(sizeof(DelegateHandle), AllocationRequest::Purpose::Other), h);
  }

 private:
  static Status check_specs(BackendLoadContext& ctx, Span<const CompileSpec> specs) {
    for (const CompileSpec& spec : specs) {
      return EMBER_FAIL(ctx.error, Error::NotSupported, "xnnpack: unknown compile spec '%s' (this backend takes none)",
                        spec.key);
    }
    return Status::ok();
  }

  // Sizes, allocates, defines the subgraph, creates the runtime and binds the fixed slots once.
  static Status build(BackendInitContext& ctx, const GraphView& graph, DelegateHandle& h) {
    EMBER_RETURN_IF_ERROR(translate(graph, h.t, ctx.error));  // checking pass: sizes only
    h.block_bytes = h.t.staging_bytes + h.t.weights_bytes;
    if (h.block_bytes != 0) {
      h.block = static_cast<uint8_t*>(
          allocate_host_memory(h.allocator, host_request(h.block_bytes, AllocationRequest::Purpose::Constants)));
      if (h.block == nullptr) {
        return EMBER_FAIL(ctx.error, Error::OutOfMemory, "xnnpack: %llu bytes of staging and packed weights",
                          static_cast<unsigned long long>(h.block_bytes));
      }
    }
    // The app's pool when it is a PthreadPool (make_builtin_thread_pool()): XNNPACK and the cpu
    // kernels then share its threads. Another pool of N threads: a pthreadpool of N of our own.
    ThreadPool* app_pool = ctx.runtime->pool;
    const size_t threads = app_pool != nullptr ? app_pool->thread_count() : 1;
    if (app_pool != nullptr && app_pool->native_handle() != nullptr) {
      h.pool = static_cast<pthreadpool_t>(app_pool->native_handle());
    } else if (threads > 1) {
      h.own_pool = pthreadpool_create(threads);
      if (h.own_pool == nullptr) {
        return EMBER_FAIL(ctx.error, Error::OutOfMemory, "xnnpack: pthreadpool of %zu threads", threads);
      }
      h.pool = h.own_pool;
    }
    xnn_subgraph_t subgraph = nullptr;
    xnn_status s = xnn_create_subgraph(graph.input_count() + graph.output_count(), 0, &subgraph);
    if (s != xnn_status_success) return xnn_failure(ctx.error, s, "xnn_create_subgraph", "init");
    const uint64_t planned = h.block_bytes;
    const uint64_t transient_bytes = h.t.transient_bytes;
    const AllocationRequest transient_request = host_request(transient_bytes, AllocationRequest::Purpose::Other);
    uint8_t* transient = transient_bytes == 0
                             ? nullptr
                             : static_cast<uint8_t*>(allocate_host_memory(h.allocator, transient_request));
    if (transient_bytes != 0 && transient == nullptr) {
      xnn_delete_subgraph(subgraph);
      return EMBER_FAIL(ctx.error, Error::OutOfMemory, "xnnpack: %llu bytes of conv weights in OHWI (load time only)",
                        static_cast<unsigned long long>(transient_bytes));
    }
    h.t.subgraph = subgraph;
    h.t.block = h.block;
    h.t.transient = transient;
    Status status = translate(graph, h.t, ctx.error);  // defining pass
    h.t.subgraph = nullptr;
    if (status.is_ok() && h.t.staging_bytes + h.t.weights_bytes != planned) {
      status = EMBER_FAIL(ctx.error, Error::Internal, "xnnpack: the defining pass took %llu bytes, the plan %llu",
                          static_cast<unsigned long long>(h.t.staging_bytes + h.t.weights_bytes),
                          static_cast<unsigned long long>(planned));
    }
    if (status.is_ok()) {
      s = xnn_create_runtime_v2(subgraph, h.pool, 0, &h.runtime);
      if (s != xnn_status_success) status = xnn_failure(ctx.error, s, "xnn_create_runtime_v2", "init");
    }
    xnn_delete_subgraph(subgraph);  // the runtime keeps what it needs: it packed the conv weights
    h.t.transient = nullptr;
    if (transient != nullptr) free_host_memory(h.allocator, transient_request, transient);
    EMBER_RETURN_IF_ERROR(status);
    // The slots never move, so the runtime is set up once; execute() only copies and invokes.
    xnn_external_value external[2 * kMaxIo];
    uint32_t n = 0;
    for (uint32_t k = 0; k < h.t.input_count; ++k) external[n++] = xnn_external_value{k, h.t.inputs[k].staging};
    for (uint32_t k = 0; k < h.t.output_count; ++k) {
      external[n++] = xnn_external_value{h.t.input_count + k, h.t.outputs[k].staging};
    }
    s = xnn_setup_runtime(h.runtime, n, external);
    if (s != xnn_status_success) return xnn_failure(ctx.error, s, "xnn_setup_runtime", "init");
    return Status::ok();
  }
};

}  // namespace

Status register_backend(BackendRegistry& registry) {
  static const XnnpackBackend backend;
  return registry.add(kBackendId, backend);
}

}  // namespace backends::xnnpack
}  // namespace ember
