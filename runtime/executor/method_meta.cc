#include "runtime/executor/method_meta.h"

#include "runtime/executor/method_internal.h"
#include "runtime/executor/program.h"

namespace ember {
namespace {

template <typename T>
uint32_t size_of(const flatbuffers::Vector<T>* v) { return v ? v->size() : 0; }

Result<TensorMeta> tensor_meta(const fb::Graph& graph, const flatbuffers::Vector<flatbuffers::Offset<fb::NamedValue>>* list,
                               size_t i) {
  if (i >= size_of(list)) return EMBER_ERROR(Error::InvalidArgument, "I/O index out of range");
  const fb::NamedValue* named = list->Get(static_cast<uint32_t>(i));
  const fb::Tensor& t = *graph.values()->Get(named->value());
  TensorMeta meta;
  meta.name = named->name()->c_str();
  meta.dtype = static_cast<ScalarType>(t.dtype());
  meta.rank = static_cast<uint8_t>(size_of(t.dims()));
  for (int d = 0; d < meta.rank; ++d) {
    const fb::Dim* dim = t.dims()->Get(d);
    meta.max_dims[d] = dim->max();
    meta.dim_symbols[d] = dim->sym() ? graph.symbols()->Get(dim->sym() - 1u)->name()->c_str() : nullptr;
  }
  meta.max_nbytes = t.nbytes();
  return meta;
}

}  // namespace

const char* MethodMeta::name() const { return method_->name()->c_str(); }
size_t MethodMeta::input_count() const { return size_of(method_->graph()->inputs()); }
size_t MethodMeta::output_count() const { return size_of(method_->graph()->outputs()); }
Result<TensorMeta> MethodMeta::input(size_t i) const { return tensor_meta(*method_->graph(), method_->graph()->inputs(), i); }
Result<TensorMeta> MethodMeta::output(size_t i) const { return tensor_meta(*method_->graph(), method_->graph()->outputs(), i); }
size_t MethodMeta::arena_count() const { return size_of(method_->arenas()); }
Result<ArenaMeta> MethodMeta::arena(size_t i) const {
  if (i >= arena_count()) return EMBER_ERROR(Error::InvalidArgument, "arena index out of range");
  const fb::Arena* a = method_->arenas()->Get(static_cast<uint32_t>(i));
  ArenaMeta meta;
  meta.kind = static_cast<ArenaMeta::Kind>(a->kind());
  meta.alignment = a->alignment();
  meta.size = a->size();
  return meta;
}
size_t MethodMeta::instruction_count() const { return size_of(method_->graph()->instructions()); }
size_t MethodMeta::delegate_count() const { return size_of(method_->delegates()); }
const char* MethodMeta::delegate_backend(size_t i) const {
  return i < delegate_count() ? method_->delegates()->Get(static_cast<uint32_t>(i))->backend_id()->c_str() : "";
}

Result<DelegateMeta> MethodMeta::delegate(uint32_t i, ErrorContext* ctx) const {
  const bool whole = i == DelegateMeta::kWholeMethod;
  if (!whole && i >= delegate_count()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "delegate %u of %zu", i, delegate_count());
  }
  const Program::BackendChoice* choice = program_->backend_choice(*method_, i);
  DelegateMeta meta;
  meta.index = i;
  meta.runs_on = choice->name;
  meta.reason = choice->reason;
  const fb::Delegate* del = whole ? nullptr : method_->delegates()->Get(i);
  meta.exported_for = whole ? "" : del->backend_id()->c_str();
  const fb::Graph* graph = whole ? method_->graph()
                                 : (del->format() == fb::DelegateFormat::Graph ? del->payload_nested_root() : nullptr);
  meta.instruction_count = graph != nullptr ? size_of(graph->instructions()) : 0;
  if (choice->backend == nullptr || graph == nullptr) return meta;  // portable, or OPAQUE (sized by init)
  BackendLoadContext load;
  load.runtime = &program_->runtime();
  load.symbols = program_->load_symbols();
  load.error = ctx;
  load.backend_id = choice->name;
  load.method_name = name();
  load.delegate_index = i;
  CompileSpec specs[internal::kMaxCompileSpecs];
  const uint32_t spec_count = del != nullptr ? size_of(del->compile_specs()) : 0;
  if (spec_count > internal::kMaxCompileSpecs) {
    return EMBER_FAIL(ctx, Error::NotSupported, "delegate %u has %u compile specs (at most %u)", i, spec_count,
                      internal::kMaxCompileSpecs);
  }
  if (del != nullptr) internal::read_compile_specs(*del, specs);
  Result<MemoryRequirements> planned = choice->backend->plan_memory(load, GraphView(graph, program_->segments()),
                                                                    Span<const CompileSpec>(specs, spec_count));
  if (!planned.is_ok()) return planned.status();
  meta.memory = planned.value();
  return meta;
}

Result<MemoryRequirements> MethodMeta::backend_memory(ErrorContext* ctx) const {
  MemoryRequirements total;
  EMBER_ASSIGN_OR_RETURN(DelegateMeta body, delegate(DelegateMeta::kWholeMethod, ctx));
  total += body.memory;
  for (uint32_t d = 0; d < delegate_count(); ++d) {
    EMBER_ASSIGN_OR_RETURN(DelegateMeta meta, delegate(d, ctx));
    total += meta.memory;
  }
  return total;
}

}  // namespace ember
