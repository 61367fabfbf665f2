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
      if (p->arena() < rc.memory->arena_domains.size()) view->domain = rc.memory->arena_domains[p->arena()];
      return Status::ok();
    }
    case fb::Storage::StateStorage: {
      const Program::State* state = rc.program->find_state(tensor.storage_as_StateStorage()->name()->c_str());
      if (state == nullptr) return EMBER_FAIL(ctx, Error::Internal, "state for value %u not allocated", value);
      // Null for state a backend owns: only a graph bound for its values alone sees it (the claim
      // check at load keeps it away from host kernels).
      *data = state->data;
      view->domain = state->domain;
      for (int d = 0; d < view->rank; ++d) view->dims[d] = state->dims[d];  // load-time symbol values
      return Status::ok();
    }
    default:
      *data = nullptr;  // delegate I/O: bound per call
      return Status::ok();
  }
}

uint32_t state_values(const fb::Graph& graph) {
  uint32_t n = 0;
  for (uint32_t v = 0; v < size_of(graph.values()); ++v) {
    n += graph.values()->Get(v)->storage_type() == fb::Storage::StateStorage;
  }
  return n;
}

// What a backend's init() needs beside the method allocator's records, in bytes: the compile specs
// and the program states its graph names.
size_t init_bytes(const fb::Delegate* del, const fb::Graph* graph) {
  return align16((del ? size_of(del->compile_specs()) : 0) * sizeof(CompileSpec)) +
         align16((graph ? state_values(*graph) : 0) * sizeof(BoundState));
}

}  // namespace

const size_t Method::kDelegateSlotBytes = sizeof(Method::DelegateSlot) + sizeof(Method::DelegateLabel);

namespace internal {

const fb::Method* find_method(const fb::Program& program, const char* name) {
  for (uint32_t m = 0; m < size_of(program.methods()); ++m) {
    const fb::Method* method = program.methods()->Get(m);
    if (std::strcmp(method->name()->c_str(), name) == 0) return method;
  }
  return nullptr;
}

void read_compile_specs(const fb::Delegate& delegate, CompileSpec* out) {
  for (uint32_t c = 0; c < size_of(delegate.compile_specs()); ++c) {
    const fb::CompileSpec* s = delegate.compile_specs()->Get(c);
    out[c].key = s->key()->c_str();
    out[c].value = s->value() ? Span<const uint8_t>(s->value()->data(), s->value()->size()) : Span<const uint8_t>();
  }
}

size_t method_allocator_bytes(const Program& program, const fb::Method& method) {
  // A binding and a label per delegate (both multiples of 16 bytes: load_method checks it).
  size_t bytes = size_of(method.delegates()) * Method::kDelegateSlotBytes + GraphRunner::memory_bytes(*method.graph());
  if (program.backend_choice(method, Program::kWholeMethod)->backend != nullptr) {
    bytes += Method::kDelegateSlotBytes + init_bytes(nullptr, method.graph());
  }
  for (uint32_t d = 0; d < size_of(method.delegates()); ++d) {
    const fb::Delegate& del = *method.delegates()->Get(d);
    if (program.backend_choice(method, d)->backend != nullptr) {
      bytes += init_bytes(&del, del.format() == fb::DelegateFormat::Graph ? del.payload_nested_root() : nullptr);
    } else if (del.format() == fb::DelegateFormat::Graph) {
      bytes += align16(sizeof(GraphRunner)) + GraphRunner::memory_bytes(*del.payload_nested_root());
    }
  }
  return bytes;
}

size_t method_scratch_bytes(const Program& program, const fb::Method& method) {
  const RuntimeContext& rt = program.runtime();
  const size_t threads = rt.pool != nullptr ? rt.pool->thread_count() : 1;
  size_t kernels = 0;
  if (program.backend_choice(method, Program::kWholeMethod)->backend == nullptr) {
    kernels = GraphRunner::scratch_bytes(*method.graph(), rt.kernels, threads);
  }
  // Delegates on the portable kernels and host backends run in the same scratch.
  for (uint32_t d = 0; d < size_of(method.delegates()); ++d) {
    const fb::Delegate& del = *method.delegates()->Get(d);
    if (del.format() != fb::DelegateFormat::Graph) continue;
    kernels = std::max(kernels, GraphRunner::scratch_bytes(*del.payload_nested_root(), rt.kernels, threads));
  }
  return std::max(static_cast<size_t>(method.scratch_bytes()), kernels);
}

MethodMeta method_meta(const Program& program, const fb::Method& method) {
  return MethodMeta(&program, &method, method_allocator_bytes(program, method), method_scratch_bytes(program, method));
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
  if (!memory.arena_domains.empty() && memory.arena_domains.size() != arena_count) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "method '%s' has %u arenas, the memory plan gives %zu domains",
                      name, arena_count, memory.arena_domains.size());
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
    if (a < memory.arena_domains.size() && memory.arena_domains[a] == MemoryDomain::Device) {
      return EMBER_FAIL(ctx, Error::InvalidArgument,
                        "method '%s' arena %u: the executor's arenas are host memory (host or pinned), not device",
                        name, a);
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
  static_assert(sizeof(Method::DelegateSlot) % 16 == 0 && sizeof(Method::DelegateLabel) % 16 == 0,
                "method_allocator_bytes counts both without padding");
  const uint32_t delegate_count = size_of(fm->delegates());
  method.delegates_ = static_cast<Method::DelegateSlot*>(
      alloc.allocate(align16(delegate_count * sizeof(Method::DelegateSlot)), 16));
  method.labels_ = static_cast<Method::DelegateLabel*>(
      alloc.allocate(align16(delegate_count * sizeof(Method::DelegateLabel)), 16));
  if (delegate_count > 0 && (method.delegates_ == nullptr || method.labels_ == nullptr)) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator too small for delegate records");
  }
  for (uint32_t d = 0; d < delegate_count; ++d) {
    new (&method.delegates_[d]) Method::DelegateSlot();
    new (&method.labels_[d]) Method::DelegateLabel();
  }
  method.delegate_count_ = delegate_count;

  // A backend that runs the whole body: the runner keeps only the method's I/O views.
  const BackendChoice& body = *backend_choice(*fm, kWholeMethod);
  method.runner_.set_values_only(body.backend != nullptr);
  ResolveContext rc{this, &memory};
  EMBER_RETURN_IF_ERROR(method.runner_.bind(GraphView(fm->graph(), segments()), runtime_.kernels, debug_, alloc,
                                            resolve_storage, &rc, ctx));
  if (body.backend != nullptr) {
    void* slot = alloc.allocate(align16(sizeof(Method::DelegateSlot)), 16);
    void* label = alloc.allocate(align16(sizeof(Method::DelegateLabel)), 16);
    if (slot == nullptr || label == nullptr) {
      return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator too small for a delegate record");
    }
    method.whole_ = new (slot) Method::DelegateSlot();
    method.whole_label_ = new (label) Method::DelegateLabel();
    EMBER_RETURN_IF_ERROR(Method::init_backend(*this, name, kWholeMethod, nullptr, *fm->graph(), body.backend,
                                               body.name, alloc, *method.whole_, *method.whole_label_, ctx));
  }

  for (uint32_t d = 0; d < delegate_count; ++d) {
    const fb::Delegate& del = *fm->delegates()->Get(d);
    Method::DelegateSlot& slot = method.delegates_[d];
    const char* exported = del.backend_id()->c_str();
    const BackendChoice& choice = *backend_choice(*fm, d);
    if (choice.backend != nullptr) {
      EMBER_RETURN_IF_ERROR(Method::init_backend(*this, name, d, &del,
                                                 del.format() == fb::DelegateFormat::Graph ? *del.payload_nested_root()
                                                                                           : *fm->graph(),
                                                 choice.backend, choice.name, alloc, slot, method.labels_[d], ctx));
      continue;
    }
    if (options_.fallback == Fallback::Fail || del.format() != fb::DelegateFormat::Graph) {
      return EMBER_FAIL(ctx, Error::BackendUnavailable, "method '%s' delegate %u (exported for '%s') has no backend: %s%s",
                        name, d, exported, choice.reason,
                        del.format() != fb::DelegateFormat::Graph ? " (OPAQUE payloads cannot fall back)" : "");
    }
    void* storage = alloc.allocate(align16(sizeof(GraphRunner)), 16);
    if (storage == nullptr) return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator too small for a fallback runner");
    slot.fallback = new (storage) GraphRunner();
    EMBER_RETURN_IF_ERROR(slot.fallback->bind(GraphView(del.payload_nested_root(), segments()), runtime_.kernels,
                                              debug_, alloc, resolve_storage, &rc, ctx));
    slot.name = "portable";
    std::snprintf(method.labels_[d].text, sizeof(method.labels_[d].text), "portable (fallback for %s)", exported);
    EMBER_LOG(Info, "method '%s' delegate %u: %s", name, d, choice.reason);
  }
  method.runner_.set_delegates(Span<const Method::DelegateSlot>(method.delegates_, delegate_count));
  return Result<Method>(std::move(method));
}

Status Method::init_backend(const Program& program, const char* method_name, uint32_t index, const fb::Delegate* del,
                            const fb::Graph& graph, const Backend* backend, const char* backend_name,
                            BumpAllocator& alloc, DelegateSlot& slot, DelegateLabel& label, ErrorContext* ctx) {
  const bool opaque = del != nullptr && del->format() != fb::DelegateFormat::Graph;
  const uint32_t spec_count = del != nullptr ? size_of(del->compile_specs()) : 0;
  if (spec_count > internal::kMaxCompileSpecs) {
    return EMBER_FAIL(ctx, Error::NotSupported, "method '%s' delegate %u has %u compile specs (at most %u)", method_name,
                      index, spec_count, internal::kMaxCompileSpecs);
  }
  CompileSpec* specs = static_cast<CompileSpec*>(alloc.allocate(align16(spec_count * sizeof(CompileSpec)), 16));
  if (spec_count > 0 && specs == nullptr) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method '%s': method allocator too small for %u compile specs",
                      method_name, spec_count);
  }
  if (del != nullptr) internal::read_compile_specs(*del, specs);
  // The program states the graph names, in its value order.
  const uint32_t state_count = opaque ? 0 : state_values(graph);
  BoundState* states = static_cast<BoundState*>(alloc.allocate(align16(state_count * sizeof(BoundState)), 16));
  if (state_count > 0 && states == nullptr) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method '%s': method allocator too small for %u state bindings",
                      method_name, state_count);
  }
  uint32_t next = 0;
  for (uint32_t v = 0; !opaque && v < size_of(graph.values()); ++v) {
    const fb::Tensor& t = *graph.values()->Get(v);
    if (t.storage_type() != fb::Storage::StateStorage) continue;
    const Program::State* state = program.find_state(t.storage_as_StateStorage()->name()->c_str());
    BoundState& bound = *new (&states[next++]) BoundState();
    bound.spec.name = state->name;
    bound.spec.dtype = state->dtype;
    bound.spec.rank = state->rank;
    for (int d = 0; d < state->rank; ++d) bound.spec.dims[d] = state->dims[d];
    bound.spec.nbytes = state->nbytes;
    bound.buffer = state->buffer;
    bound.host_data = state->data;
  }
  BackendInitContext init_ctx;
  init_ctx.runtime = &program.runtime();
  init_ctx.symbols = program.load_symbols();
  init_ctx.error = ctx;
  init_ctx.backend_id = backend_name;
  init_ctx.method_name = method_name;
  init_ctx.delegate_index = index;
  init_ctx.tracer = program.options().tracer;
  init_ctx.states = Span<const BoundState>(states, state_count);
  const Span<const CompileSpec> spec_span(specs, spec_count);
  Result<DelegateHandle*> handle =
      !opaque ? backend->init(init_ctx, GraphView(&graph, program.segments()), spec_span)
              : backend->init_opaque(
                    init_ctx,
                    OpaquePayload{Span<const uint8_t>(program.segments()[del->segment()].data,
                                                      static_cast<size_t>(program.segments()[del->segment()].size)),
                                  del->format_version()},
                    spec_span);
  if (!handle.is_ok()) {
    if (index == Program::kWholeMethod) {
      return EMBER_FAIL(ctx, handle.error() == Error::Ok ? Error::BackendFailed : handle.error(),
                        "method '%s': backend '%s' failed to initialize for the whole method", method_name, backend_name);
    }
    return EMBER_FAIL(ctx, handle.error() == Error::Ok ? Error::BackendFailed : handle.error(),
                      "method '%s' delegate %u: backend '%s' failed to initialize", method_name, index, backend_name);
  }
  slot.backend = backend;
  slot.handle = handle.value();
  slot.name = backend_name;
  std::snprintf(label.text, sizeof(label.text), index == Program::kWholeMethod ? "%s (whole method)" : "%s",
                backend_name);
  return Status::ok();
}

Method::Method(Method&& other) noexcept
    : program_(other.program_),
      method_(other.method_),
      meta_(other.meta_),
      runner_(other.runner_),
      delegates_(other.delegates_),
      labels_(other.labels_),
      delegate_count_(other.delegate_count_),
      whole_(other.whole_),
      whole_label_(other.whole_label_),
      scratch_(other.scratch_),
      pool_(other.pool_) {
  abort_.store(other.abort_.load());
  other.delegates_ = nullptr;
  other.delegate_count_ = 0;
  other.whole_ = nullptr;
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
  if (whole_ != nullptr && whole_->handle != nullptr) whole_->backend->destroy(whole_->handle);
  whole_ = nullptr;
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
  if (src.domain == MemoryDomain::Device) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "input '%s': a device view given; inputs are copied on the host",
                      named->name()->c_str());
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
  const Status status = whole_ != nullptr ? runner_.run_on_backend(*whole_, kernel_ctx, &abort_, ctx)
                                          : runner_.run(kernel_ctx, &abort_, ctx);
  // Only a request that stopped this run is consumed; one that arrives after the last check stops
  // the next run ("a running or the next execute()").
  if (status.code() == Error::Cancelled) abort_.store(false);
  return status;
}

const char* Method::instruction_backend(size_t i) const {
  if (i >= instruction_count()) return "";
  if (whole_ != nullptr) return whole_label_->text;
  const fb::Instruction* ins = method_->graph()->instructions()->Get(static_cast<uint32_t>(i));
  if (ins->args_type() == fb::InstructionArgs::DelegateCall) {
    return labels_[ins->args_as_DelegateCall()->index()].text;
  }
  return runner_.instruction_library(static_cast<uint32_t>(i));
}

MemoryRequirements Method::delegate_memory(uint32_t i) const {
  const DelegateSlot* slot = i == DelegateMeta::kWholeMethod ? whole_ : (i < delegate_count_ ? &delegates_[i] : nullptr);
  if (slot == nullptr || slot->backend == nullptr) return MemoryRequirements();
  return slot->backend->memory_requirements(slot->handle);
}

}  // namespace ember
