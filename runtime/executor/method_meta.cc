#include "runtime/executor/method_meta.h"

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

}  // namespace ember
