#include "runtime/executor/method.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/core/thread_pool.h"
#include "runtime/executor/method_internal.h"
#include "runtime/executor/program.h"
#include "runtime/platform/platform.h"

namespace ember {
namespace {

constexpr size_t kMaxDelegateArgs = 64;  // also enforced by the validator

template <typename T>
uint32_t size_of(const flatbuffers::Vector<T>* v) { return v ? v->size() : 0; }
size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

struct ResolveContext {
  const Program* program;
  const MemoryPlan* memory;
};

Status resolve_storage(void* user, uint32_t value, const fb::Tensor& tensor, TensorView* view, ErrorContext* ctx) {
  const ResolveContext& rc = *static_cast<const ResolveContext*>(user);
  void** data = &view->data;
  switch (tensor.storage_type()) {
    case fb::Storage::ConstantStorage: {
      const fb::ConstantStorage* c = tensor.storage_as_ConstantStorage();
      *data = const_cast<uint8_t*>(rc.program->segments()[c->segment()].data + c->offset());
      return Status::ok();
    }
    case fb::Storage::PlannedStorage: {
      const fb::PlannedStorage* p = tensor.storage_as_PlannedStorage();
      *data = rc.memory->arenas[p->arena()].data() + p->offset();
      return Status::ok();
    }
    case fb::Storage::StateStorage: {
      const Program::State* state = rc.program->find_state(tensor.storage_as_StateStorage()->name()->c_str());
      if (state == nullptr) return EMBER_FAIL(ctx, Error::Internal, "state for value %u not allocated", value);
      *data = state->data;
      for (int d = 0; d < view->rank; ++d) view->dims[d] = state->dims[d];  // load-time symbol values
      return Status::ok();
    }
    default:
      *data = nullptr;  // delegate I/O: bound per call
      return Status::ok();
  }
}

}  // namespace

const size_t Method::kDelegateSlotBytes = sizeof(Method::DelegateSlot);

namespace internal {

const fb::Method* find_method(const fb::Program& program, const char* name) {
  for (uint32_t m = 0; m < size_of(program.methods()); ++m) {
    const fb::Method* method = program.methods()->Get(m);
    if (std::strcmp(method->name()->c_str(), name) == 0) return method;
  }
  return nullptr;
}

const Backend* choose_backend(const Program& program, const fb::Delegate& delegate) {
  const RuntimeContext& rt = program.runtime();
  if (rt.backends == nullptr) return nullptr;
  const char* id = delegate.backend_id()->c_str();
  const Span<const char* const> allowed = program.options().backends;
  if (!allowed.empty()) {
    bool listed = false;
    for (const char* name : allowed) listed = listed || std::strcmp(name, id) == 0;
    if (!listed) return nullptr;
  }
  const Backend* backend = rt.backends->find(id);
  if (backend == nullptr || !backend->is_available(rt)) return nullptr;
  return backend;
}

size_t method_allocator_bytes(const Program& program, const fb::Method& method) {
  size_t bytes = align16(size_of(method.delegates()) * Method::kDelegateSlotBytes) +
                 GraphRunner::memory_bytes(*method.graph());
  for (uint32_t d = 0; d < size_of(method.delegates()); ++d) {
    const fb::Delegate& del = *method.delegates()->Get(d);
    if (choose_backend(program, del) != nullptr) {
      bytes += align16(size_of(del.compile_specs()) * sizeof(CompileSpec));
    } else if (del.format() == fb::DelegateFormat::Graph) {
      bytes += align16(sizeof(GraphRunner)) + GraphRunner::memory_bytes(*del.payload_nested_root());
    }
  }
  return bytes;
}

size_t method_scratch_bytes(const Program& program, const fb::Method& method) {
  const RuntimeContext& rt = program.runtime();
  const size_t threads = rt.pool != nullptr ? rt.pool->thread_count() : 1;
  const size_t kernels = GraphRunner::scratch_bytes(*method.graph(), rt.kernels, threads);
  return std::max(static_cast<size_t>(method.scratch_bytes()), kernels);
}

MethodMeta method_meta(const Program& program, const fb::Method& method) {
  return MethodMeta(&method, method_allocator_bytes(program, method), method_scratch_bytes(program, method));
}

}  // namespace internal

Result<Method> Program::load_method(const char* name, MemoryPlan& memory, ErrorContext* ctx) const {
  if (ctx) ctx->phase = ErrorContext::Phase::Load;
  const fb::Method* fm = internal::find_method(*program_, name);
  if (fm == nullptr) return EMBER_FAIL(ctx, Error::NotFound, "no method named '%s' in the program", name);
  const uint32_t arena_count = size_of(fm->arenas());
  if (memory.arenas.size() != arena_count) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "method '%s' has %u arenas, the memory plan gives %zu", name,
                      arena_count, memory.arenas.size());
  }
  for (uint32_t a = 0; a < arena_count; ++a) {
    const fb::Arena* arena = fm->arenas()->Get(a);
    const Span<uint8_t> span = memory.arenas[a];
    if (span.size() < arena->size()) {
      return EMBER_FAIL(ctx, Error::OutOfMemory, "method '%s' arena %u is %zu bytes, the method needs %llu", name, a,
                        span.size(), static_cast<unsigned long long>(arena->size()));
    }
    if (reinterpret_cast<uintptr_t>(span.data()) % arena->alignment() != 0) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "method '%s' arena %u is not %u-byte aligned", name, a,
                        arena->alignment());
    }
  }
  const MethodMeta meta = internal::method_meta(*this, *fm);
  if (memory.scratch.size() < meta.scratch_bytes()) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method '%s' needs %zu scratch bytes, the memory plan gives %zu", name,
                      meta.scratch_bytes(), memory.scratch.size());
  }
  Method method;
  method.program_ = this;
  method.method_ = fm;
  method.meta_ = meta;
  method.scratch_ = memory.scratch;
  method.pool_ = runtime_.pool;
  method.runner_.set_step_limit(options_.max_steps_per_execute != 0
                                    ? options_.max_steps_per_execute
                                    : uint64_t{65536} * (size_of(fm->graph()->instructions()) + 1));
  BumpAllocator& alloc = *memory.method_allocator;
  if (alloc.remaining().size() < method.meta_.method_allocator_bytes()) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator has %zu bytes left, method '%s' needs %zu",
                      alloc.remaining().size(), name, method.meta_.method_allocator_bytes());
  }
  const uint32_t delegate_count = size_of(fm->delegates());
  method.delegates_ = static_cast<Method::DelegateSlot*>(
      alloc.allocate(align16(delegate_count * sizeof(Method::DelegateSlot)), 16));
  if (delegate_count > 0 && method.delegates_ == nullptr) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator too small for delegate records");
  }
  for (uint32_t d = 0; d < delegate_count; ++d) new (&method.delegates_[d]) Method::DelegateSlot();
  method.delegate_count_ = delegate_count;

  ResolveContext rc{this, &memory};
  EMBER_RETURN_IF_ERROR(method.runner_.bind(GraphView(fm->graph(), segments()), runtime_.kernels, debug_, alloc,
                                            resolve_storage, &rc, ctx));

  for (uint32_t d = 0; d < delegate_count; ++d) {
    const fb::Delegate& del = *fm->delegates()->Get(d);
    Method::DelegateSlot& slot = method.delegates_[d];
    slot.backend_id = del.backend_id()->c_str();
    const Backend* backend = internal::choose_backend(*this, del);
    if (backend != nullptr) {
      const uint32_t spec_count = size_of(del.compile_specs());
      CompileSpec* specs = static_cast<CompileSpec*>(alloc.allocate(align16(spec_count * sizeof(CompileSpec)), 16));
      if (spec_count > 0 && specs == nullptr) {
        return EMBER_FAIL(ctx, Error::OutOfMemory, "method '%s' delegate %u: method allocator too small for %u compile specs",
                          name, d, spec_count);
      }
      for (uint32_t c = 0; c < spec_count; ++c) {
        const fb::CompileSpec* s = del.compile_specs()->Get(c);
        specs[c].key = s->key()->c_str();
        specs[c].value = s->value() ? Span<const uint8_t>(s->value()->data(), s->value()->size()) : Span<const uint8_t>();
      }
      BackendInitContext init_ctx;
      init_ctx.runtime = &runtime_;
      init_ctx.error = ctx;
      init_ctx.method_name = name;
      init_ctx.delegate_index = d;
      Result<DelegateHandle*> handle =
          del.format() == fb::DelegateFormat::Graph
              ? backend->init(init_ctx, GraphView(del.payload_nested_root(), segments()),
                              Span<const CompileSpec>(specs, spec_count))
              : backend->init_opaque(init_ctx,
                                     OpaquePayload{Span<const uint8_t>(segments()[del.segment()].data,
                                                                       static_cast<size_t>(segments()[del.segment()].size)),
                                                   del.format_version()},
                                     Span<const CompileSpec>(specs, spec_count));
      if (!handle.is_ok()) {
        return EMBER_FAIL(ctx, handle.error() == Error::Ok ? Error::BackendFailed : handle.error(),
                          "method '%s' delegate %u: backend '%s' failed to initialize", name, d, slot.backend_id);
      }
      slot.backend = backend;
      slot.handle = handle.value();
      std::snprintf(slot.label, sizeof(slot.label), "%s", slot.backend_id);
      continue;
    }
    if (options_.fallback == Fallback::Fail || del.format() != fb::DelegateFormat::Graph) {
      return EMBER_FAIL(ctx, Error::BackendUnavailable,
                        "method '%s' delegate %u needs backend '%s', which is not registered, allowed or available%s",
                        name, d, slot.backend_id,
                        del.format() != fb::DelegateFormat::Graph ? " (OPAQUE payloads cannot fall back)" : "");
    }
    void* storage = alloc.allocate(align16(sizeof(GraphRunner)), 16);
    if (storage == nullptr) return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator too small for a fallback runner");
    slot.fallback = new (storage) GraphRunner();
    EMBER_RETURN_IF_ERROR(slot.fallback->bind(GraphView(del.payload_nested_root(), segments()), runtime_.kernels,
                                              debug_, alloc, resolve_storage, &rc, ctx));
    std::snprintf(slot.label, sizeof(slot.label), "portable (fallback for %s)", slot.backend_id);
    EMBER_LOG(Info, "method '%s' delegate %u: backend '%s' unavailable, running on portable kernels", name, d,
              slot.backend_id);
  }
  return Result<Method>(std::move(method));
}

Method::Method(Method&& other) noexcept
    : program_(other.program_),
      method_(other.method_),
      meta_(other.meta_),
      runner_(other.runner_),
      delegates_(other.delegates_),
      delegate_count_(other.delegate_count_),
      scratch_(other.scratch_),
      pool_(other.pool_) {
  abort_.store(other.abort_.load());
  other.delegates_ = nullptr;
  other.delegate_count_ = 0;
}

Method::~Method() { destroy_delegates(); }

void Method::destroy_delegates() {
  for (uint32_t d = 0; d < delegate_count_; ++d) {
    DelegateSlot& slot = delegates_[d];
    if (slot.backend != nullptr && slot.handle != nullptr) slot.backend->destroy(slot.handle);
    slot.handle = nullptr;
    if (slot.fallback != nullptr) slot.fallback->~GraphRunner();
    slot.fallback = nullptr;
  }
  delegate_count_ = 0;
}

size_t Method::input_count() const { return size_of(method_->graph()->inputs()); }
size_t Method::output_count() const { return size_of(method_->graph()->outputs()); }
size_t Method::instruction_count() const { return runner_.instruction_count(); }

Result<TensorView> Method::input(size_t i) const {
  if (i >= input_count()) return EMBER_ERROR(Error::InvalidArgument, "input index out of range");
  return runner_.value(method_->graph()->inputs()->Get(static_cast<uint32_t>(i))->value());
}

Status Method::set_input_sizes(size_t i, Span<const int64_t> dims, ErrorContext* ctx) {
  return runner_.set_input_dims(static_cast<uint32_t>(i), dims, ctx);
}

Status Method::set_input(size_t i, const TensorView& src, ErrorContext* ctx) {
  if (i >= input_count()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "input index %zu out of range (%zu inputs)", i, input_count());
  }
  const fb::NamedValue* named = method_->graph()->inputs()->Get(static_cast<uint32_t>(i));
  TensorView& dst = runner_.values()[named->value()];
  if (src.dtype != dst.dtype) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "input '%s': dtype %s given, the method takes %s",
                      named->name()->c_str(), to_string(src.dtype), to_string(dst.dtype));
  }
  EMBER_RETURN_IF_ERROR(set_input_sizes(i, src.sizes(), ctx));
  if (src.data != nullptr && src.data != dst.data) std::memcpy(dst.data, src.data, static_cast<size_t>(dst.nbytes()));
  return Status::ok();
}

const TensorView* Method::output(size_t i) const {
  if (i >= output_count()) return nullptr;
  return &runner_.value(method_->graph()->outputs()->Get(static_cast<uint32_t>(i))->value());
}

Status Method::execute(ErrorContext* ctx) {
  if (ctx) ctx->phase = ErrorContext::Phase::Execute;
  KernelContext kernel_ctx;
  kernel_ctx.pool = pool_;
  kernel_ctx.scratch = scratch_;
  const Status status = runner_.run(kernel_ctx, &abort_, run_delegate, this, ctx);
  // Only a request that stopped this run is consumed; one that arrives after the last check stops
  // the next run ("a running or the next execute()").
  if (status.code() == Error::Cancelled) abort_.store(false);
  return status;
}

Status Method::run_delegate(void* self, uint32_t instruction, const fb::DelegateCall& call, TensorView* values,
                            ErrorContext* ctx) {
  Method& m = *static_cast<Method*>(self);
  DelegateSlot& slot = m.delegates_[call.index()];
  const uint32_t n_in = size_of(call.inputs()), n_out = size_of(call.outputs());
  TensorView in[kMaxDelegateArgs], out[kMaxDelegateArgs];
  for (uint32_t k = 0; k < n_in; ++k) in[k] = values[call.inputs()->Get(k)];
  const fb::Graph& caller = *m.method_->graph();
  for (uint32_t k = 0; k < n_out; ++k) {
    const uint32_t v = call.outputs()->Get(k);
    out[k] = values[v];
    tensor_shape(*caller.values()->Get(v), &out[k]);  // outputs arrive with their planned (max) dims
    out[k].data = values[v].data;
  }
  if (slot.fallback != nullptr) {
    GraphRunner& r = *slot.fallback;
    const fb::Graph& g = r.graph().graph();
    for (uint32_t k = 0; k < n_in; ++k) r.bind_value(g.inputs()->Get(k)->value(), in[k]);
    for (uint32_t k = 0; k < n_out; ++k) r.bind_value(g.outputs()->Get(k)->value(), out[k]);
    KernelContext kernel_ctx;
    kernel_ctx.pool = m.pool_;
    kernel_ctx.scratch = m.scratch_;
    EMBER_RETURN_IF_ERROR(r.run(kernel_ctx, &m.abort_, nullptr, nullptr, ctx));
    for (uint32_t k = 0; k < n_out; ++k) out[k] = r.value(g.outputs()->Get(k)->value());
  } else {
    BackendExecuteContext exec_ctx;
    exec_ctx.pool = m.pool_;
    exec_ctx.scratch = m.scratch_;
    exec_ctx.error = ctx;
    exec_ctx.abort = &m.abort_;
    const Status status = slot.backend->execute(exec_ctx, slot.handle, Span<const TensorView>(in, n_in),
                                                Span<TensorView>(out, n_out));
    if (!status.is_ok()) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(instruction);
      return EMBER_FAIL(ctx, status.code(), "delegate %u (backend '%s') failed at instruction %u", call.index(),
                        slot.backend_id, instruction);
    }
  }
  // A backend is trusted code, but a wrong rank or a dim past the declared max would overflow
  // dst.dims or let the next kernels run past planned memory: check before copying.
  for (uint32_t k = 0; k < n_out; ++k) {
    const fb::Tensor& t = m.runner_.graph().value(call.outputs()->Get(k));
    const uint32_t rank = size_of(t.dims());
    bool ok = out[k].rank == rank;
    for (uint32_t d = 0; ok && d < rank; ++d) ok = out[k].dims[d] >= 0 && out[k].dims[d] <= t.dims()->Get(d)->max();
    if (!ok) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(instruction);
      return EMBER_FAIL(ctx, Error::BackendFailed,
                        "delegate %u (backend '%s') at instruction %u returned output %u with rank %u or dims beyond "
                        "the declared rank %u / max dims", call.index(), slot.backend_id, instruction, k,
                        static_cast<unsigned>(out[k].rank), rank);
    }
  }
  for (uint32_t k = 0; k < n_out; ++k) {  // actual output sizes (symbolic delegates)
    TensorView& dst = values[call.outputs()->Get(k)];
    dst.rank = out[k].rank;
    for (int d = 0; d < out[k].rank; ++d) dst.dims[d] = out[k].dims[d];
  }
  return Status::ok();
}

const char* Method::instruction_backend(size_t i) const {
  if (i >= instruction_count()) return "";
  const fb::Instruction* ins = method_->graph()->instructions()->Get(static_cast<uint32_t>(i));
  if (ins->args_type() == fb::InstructionArgs::DelegateCall) {
    return delegates_[ins->args_as_DelegateCall()->index()].label;
  }
  return runner_.instruction_library(static_cast<uint32_t>(i));
}

}  // namespace ember
